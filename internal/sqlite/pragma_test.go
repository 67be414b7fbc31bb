package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"
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
