package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"datachat"
	"datachat/internal/sqlite"
	"datachat/internal/storetest"
)

// mustOpen opens and migrates a store on path, closed when the test ends.
func mustOpen(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) datachat.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "datachat.db"))
	})
}

func TestShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "sub", "dir", "datachat.db")
	}, func(ctx context.Context, path string) (storetest.Migrator, error) {
		return sqlite.Open(ctx, path)
	})
}

func TestOpenRefusesMemory(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file::memory:?cache=shared"} {
		if s, err := sqlite.Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q): got nil error, want one", path)
		}
	}
}

func TestAccountsMigration(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "datachat.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.AccountsMigration(t, s, "0009_accounts.sql")
}
