package postgres_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/postgres"
	"datachat/internal/postgres/pgtest"
	"datachat/internal/storetest"
	"datachat/internal/testenv"
)

// testURL returns the database the tests may use. Without one they are
// skipped, except in CI, where skipping them would hide a broken setup.
func testURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("DATACHAT_TEST_POSTGRES_URL")
	if u != "" {
		return u
	}
	const how = "set DATACHAT_TEST_POSTGRES_URL=postgres://… (see .ci/run; " +
		"internal/postgres/testdata/start-test-cluster.sh starts a throwaway cluster and prints its URL)"
	testenv.Missing(t, "PostgreSQL tests: "+how)
	return ""
}

// newSchema creates an empty schema with a random name, dropped when the test
// ends, and returns the test URL with search_path set to it: every test gets
// its own tables, so runs never collide.
func newSchema(t *testing.T) string {
	t.Helper()
	sch, err := pgtest.NewSchema(t.Context(), testURL(t), "datachat_test_")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sch.Drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return sch.URL
}

// mustOpen opens and migrates a store on dsn, closed when the test ends.
func mustOpen(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// mustOpenAt opens a store on dsn migrated up to and including the migration
// last, as an older release left it, closed when the test ends.
func mustOpenAt(t *testing.T, dsn, last string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.MigrateTo(t.Context(), last); err != nil {
		t.Fatalf("MigrateTo %s: %v", last, err)
	}
	return s
}

func TestStore(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t *testing.T) datachat.Store {
		return mustOpen(t, newSchema(t))
	})
}

func TestShared(t *testing.T) {
	storetest.RunShared(t, newSchema, func(ctx context.Context, dsn string) (storetest.Migrator, error) {
		return postgres.Open(ctx, dsn)
	})
}

// TestOpenError needs no database: a connection failure is an error that
// does not repeat the password.
func TestOpenError(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, dsn := range []string{
		"postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=2&sslmode=disable",
		"postgres://user:s3cret@[bad",
	} {
		s, err := postgres.Open(ctx, dsn)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q): got nil error, want one", dsn)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open error: got %q, which shows the password", err)
		}
	}
}

func TestAccountsMigration(t *testing.T) {
	s, err := postgres.Open(t.Context(), newSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.AccountsMigration(t, s, "0012_accounts.sql")
}
