package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpointsApart: the store's writer never checkpoints the WAL (its
// commits do not copy pages into the database file), and the checkpointer
// does it beside it: after 12 MiB written and checkpointed, 12 MiB more
// reuse the WAL from its start instead of doubling it, and everything
// written is there, whole, once the store is closed and opened again.
func TestCheckpointsApart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	type outcome struct {
		frames, copied int
		err            error
	}
	ran := make(chan outcome, 1024)
	s, err := open(ctx, path, func(frames, copied int, err error) { ran <- outcome{frames, copied, err} })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.write.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("the writer's wal_autocheckpoint is %d (%v), want 0: its commits would checkpoint", auto, err)
	}
	if err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE ballast (b BLOB NOT NULL)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// write writes 200 rows of 64 KiB, in transactions of their own.
	write := func() {
		t.Helper()
		for range 200 {
			if err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO ballast (b) VALUES (randomblob(65536))")
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// background waits for the checkpointer to copy the whole WAL, as it
	// does after writes without being asked.
	background := func(what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case o := <-ran:
				if o.err != nil {
					t.Fatalf("checkpoint: %v", o.err)
				}
				if o.frames > 0 && o.copied == o.frames {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no checkpoint copied the whole WAL within 30 s", what)
			}
		}
	}
	// checkpointed checkpoints the WAL now, all of it (the checkpointer's
	// own may be running: a checkpoint beside it copies nothing).
	checkpointed := func(what string) {
		t.Helper()
		for range 10_000 {
			frames, copied, err := s.ckpt.checkpoint()
			if err != nil {
				t.Fatalf("%s: checkpoint: %v", what, err)
			}
			if frames > 0 && copied == frames {
				return
			}
		}
		t.Fatalf("%s: 10,000 checkpoints and none copied the whole WAL", what)
	}
	walSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}

	write()
	background("after the first 12 MiB")
	checkpointed("after the first 12 MiB")
	first := walSize()
	if first < 12<<20 {
		t.Fatalf("the WAL holds %d bytes after 12 MiB written, want at least that", first)
	}
	// The next write starts the WAL again from its start.
	write()
	checkpointed("after the second 12 MiB")
	if second := walSize(); second > first+first/4 {
		t.Errorf("the WAL grew from %d to %d bytes over the second 12 MiB: not restarted after the checkpoint", first, second)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows, bytes int64
	var check string
	if err := s.read.QueryRowContext(ctx, "SELECT count(*), sum(length(b)) FROM ballast").Scan(&rows, &bytes); err != nil || rows != 400 || bytes != 400*65536 {
		t.Errorf("reopened: %d rows, %d bytes (%v); want 400 of 64 KiB", rows, bytes, err)
	}
	if err := s.read.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q %v", check, err)
	}
}
