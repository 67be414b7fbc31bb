package dbsource_test

import (
	"context"
	"testing"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// BenchmarkMySQLSession measures a small query on a session of its own
// (connect, log in, set up, run, roll back, close: what every query does)
// against the same query on a kept session (what the pool did before).
//
//	go test -run '^$' -bench MySQLSession ./internal/dbsource/
func BenchmarkMySQLSession(b *testing.B) {
	f := myBenchSetup(b)
	ctx := context.Background()
	for _, mode := range []string{"fresh", "reused"} {
		b.Run(mode, func(b *testing.B) {
			db, err := dbsource.Open(dbsource.Source{Name: "bench", URL: f.reader, Tables: f.allowed(b), AllUsers: true}, dbsource.Options{MaxConns: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if mode == "reused" {
				dbsource.MyReuseSessions(db)
			}
			if err := db.Check(ctx); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := db.Query(ctx, "SELECT species, count(*) FROM penguins GROUP BY species"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// myBenchSetup makes a fixture of its own for a benchmark.
func myBenchSetup(b *testing.B) *myFixture {
	f, err := newMyFixture(b, dbsourcetest.MySQLURL(b))
	if err != nil {
		b.Fatal(err)
	}
	return f
}
