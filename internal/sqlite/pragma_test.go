package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// TestPragmas checks that every connection of both pools runs with the
// settings of the DSN, and that only the writer may write.
func TestPragmas(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "datachat.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	want := map[string]string{
		"busy_timeout": "10000",
		"journal_mode": "wal",
		"synchronous":  "1", // NORMAL
		"foreign_keys": "1",
		"cache_size":   "-512", // KiB
	}
	for name, db := range map[string]*sql.DB{"writer": s.write, "reader": s.read} {
		for pragma, w := range want {
			var got string
			if err := db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", name, pragma, err)
			}
			if got != w {
				t.Errorf("%s: PRAGMA %s: got %s, want %s", name, pragma, got, w)
			}
		}
	}
	if _, err := s.read.ExecContext(t.Context(), `DELETE FROM users`); err == nil {
		t.Errorf("write through the reader pool: got nil error, want query_only to refuse it")
	}
	if got := s.write.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer pool: got %d connections at most, want 1", got)
	}
}

// TestReadersCloseWhenIdle: a reader left idle for readerIdle is closed, so
// that the connections a burst opened give their page caches and prepared
// statements back (they live outside the Go heap); the writer stays open.
func TestReadersCloseWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		write, read, err := Pools(t.Context(), filepath.Join(t.TempDir(), "datachat.db"))
		if err != nil {
			t.Fatalf("Pools: %v", err)
		}
		defer write.Close()
		defer read.Close()
		conns := make([]*sql.Conn, 3)
		for i := range conns {
			if conns[i], err = read.Conn(t.Context()); err != nil {
				t.Fatalf("reader %d: %v", i, err)
			}
		}
		for _, c := range conns {
			c.Close()
		}
		if got := read.Stats().Idle; got != 3 {
			t.Fatalf("%d readers idle after the burst, want 3", got)
		}
		time.Sleep(readerIdle - time.Second)
		synctest.Wait()
		if got := read.Stats().Idle; got != 3 {
			t.Errorf("%d readers idle %v after the burst, want 3 still open", got, readerIdle-time.Second)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := read.Stats(); st.OpenConnections != 0 || st.MaxIdleTimeClosed != 3 {
			t.Errorf("%v after the burst: %d readers open, %d closed as idle; want 0 and 3", readerIdle+time.Second, st.OpenConnections, st.MaxIdleTimeClosed)
		}
		if got := write.Stats().OpenConnections; got != 1 {
			t.Errorf("writer: %d connections open, want 1", got)
		}
	})
}
