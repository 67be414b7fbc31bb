package sqlite_test

import (
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

func TestMigrate(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sub", "dir", "datachat.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	pending, err := s.PendingMigrations(ctx)
	if err != nil {
		t.Fatalf("PendingMigrations: %v", err)
	}
	if len(pending) == 0 || pending[0] != "0001_init.sql" || !slices.IsSorted(pending) {
		t.Fatalf("PendingMigrations of a new database: got %v, want every migration from 0001_init.sql, sorted", pending)
	}
	for range 2 { // the second run finds nothing to do
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		pending, err = s.PendingMigrations(ctx)
		if err != nil {
			t.Fatalf("PendingMigrations: %v", err)
		}
		if len(pending) != 0 {
			t.Fatalf("PendingMigrations after Migrate: got %v, want none", pending)
		}
	}
	if _, err := s.EnsureUser(ctx, "alice"); err != nil {
		t.Fatalf("EnsureUser after Migrate: %v", err)
	}
}

// TestMigrateConcurrent migrates one new file from several stores at once, as
// processes starting together would.
func TestMigrateConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datachat.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := sqlite.Open(t.Context(), path)
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	wg.Wait()
}

// TestTakeRequestAcrossStores races two stores on one file, as two processes
// sharing the database would: the limit holds across both.
func TestTakeRequestAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datachat.db")
	stores := []*sqlite.Store{mustOpen(t, path), mustOpen(t, path)}
	u, err := stores[0].EnsureUser(t.Context(), "alice")
	if err != nil {
		t.Fatalf("EnsureUser: %v", err)
	}
	const n, limit = 50, 10
	now := time.Now()
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ok, _, err := stores[i%2].TakeRequest(t.Context(), u.ID, now, time.Minute, limit)
			if err != nil {
				t.Errorf("TakeRequest: %v", err)
			}
			if ok {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("TakeRequest over two stores: got %d admitted, want exactly %d of %d", got, limit, n)
	}
}

func TestOpenRefusesMemory(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file::memory:?cache=shared"} {
		if s, err := sqlite.Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q): got nil error, want one", path)
		}
	}
}
