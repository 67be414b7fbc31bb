package storetest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

// Migrator is a store as opened, before its schema is brought up to date.
type Migrator interface {
	datachat.Store
	// Migrate applies the migrations the database has yet to apply.
	Migrate(ctx context.Context) error
	// PendingMigrations names the migrations Migrate would apply.
	PendingMigrations(ctx context.Context) ([]string, error)
	Close() error
}

// RunShared runs the tests of several stores on one database, as processes
// sharing it would be: migrating it, and keeping a rate limit across stores.
// newDB returns a new, empty database (a file's path, a DSN); open opens a
// store on it without migrating it.
func RunShared(t *testing.T, newDB func(t *testing.T) string, open func(ctx context.Context, db string) (Migrator, error)) {
	// mustOpen opens a store, closed when the test ends.
	mustOpen := func(t *testing.T, db string) Migrator {
		t.Helper()
		s, err := open(t.Context(), db)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	t.Run("Migrate", func(t *testing.T) {
		ctx := t.Context()
		s := mustOpen(t, newDB(t))
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
	})
	// MigrateConcurrent migrates one new database from several stores at
	// once, as processes starting together would.
	t.Run("MigrateConcurrent", func(t *testing.T) {
		db := newDB(t)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				s, err := open(t.Context(), db)
				if err != nil {
					t.Errorf("Open: %v", err)
					return
				}
				if err := s.Migrate(t.Context()); err != nil {
					t.Errorf("Migrate: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		wg.Wait()
	})
	// TakeRequestAcrossStores races two stores on one database: the limit
	// holds across both.
	t.Run("TakeRequestAcrossStores", func(t *testing.T) {
		db := newDB(t)
		stores := []Migrator{mustOpen(t, db), mustOpen(t, db)}
		for _, s := range stores {
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
		}
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
	})
	// Accounts across stores: one invite used through two stores at once
	// is used once; two admins demoted, disabled or removed through two
	// stores at once leave one.
	twoStores := func(t *testing.T) []datachat.Store {
		db := newDB(t)
		stores := []datachat.Store{}
		for range 2 {
			s := mustOpen(t, db)
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			stores = append(stores, s)
		}
		return stores
	}
	t.Run("UseInviteAcrossStores", func(t *testing.T) {
		UseInviteRace(t, twoStores(t))
	})
	t.Run("LastAdminAcrossStores", func(t *testing.T) {
		stores := twoStores(t)
		LastAdminRace(t, stores[0], stores[1], 6)
	})
	// RevocationAcrossStores: a key one store revokes (`keys revoke`) is
	// reported revoked by another on the same database (serve's check).
	t.Run("RevocationAcrossStores", func(t *testing.T) {
		db := newDB(t)
		serve, keys := mustOpen(t, db), mustOpen(t, db)
		for _, s := range []Migrator{serve, keys} {
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
		}
		alice := mustUser(t, keys, "alice")
		a1, a2 := mustKey(t, keys, alice, "hash-a1"), mustKey(t, keys, alice, "hash-a2")
		creds := []datachat.Credential{a1, a2}
		equal(t, "RevokedCredentials before", revokedIDs(t, serve, creds), []string{})
		if err := keys.RevokeAPIKey(t.Context(), a2.ID); err != nil {
			t.Fatal(err)
		}
		equal(t, "RevokedCredentials after the other store revoked a key", revokedIDs(t, serve, creds), []string{a2.ID})
	})
}
