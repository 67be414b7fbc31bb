package postgres_test

import (
	"context"
	"os"
	"testing"

	"datachat"
	"datachat/internal/postgres"
	"datachat/internal/postgres/pgtest"
	"datachat/internal/storetest"
)

// A copy of a shared conversation of 1,000 questions and answers:
//
//	go test -run '^$' -bench CopyShared ./internal/postgres
func BenchmarkCopyShared(b *testing.B) {
	storetest.BenchCopyShared(b, 1000, benchStore(b))
}

// benchStore skips b unless DATACHAT_TEST_POSTGRES_URL names a server, and
// returns what opens a migrated store in a schema of its own, closed and
// dropped when the benchmark that opened it ends.
func benchStore(b *testing.B) func(*testing.B) datachat.Store {
	u := os.Getenv("DATACHAT_TEST_POSTGRES_URL")
	if u == "" {
		b.Skip("set DATACHAT_TEST_POSTGRES_URL")
	}
	return func(b *testing.B) datachat.Store {
		sch, err := pgtest.NewSchema(b.Context(), u, "datachat_bench_")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sch.Drop(context.Background()) })
		s, err := postgres.Open(b.Context(), sch.URL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		if err := s.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		return s
	}
}
