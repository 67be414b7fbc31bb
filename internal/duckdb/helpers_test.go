package duckdb

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"datachat"

	_ "github.com/duckdb/duckdb-go/v2"
)

// mustParquet writes the result of query to dir/name with a scratch DuckDB and
// returns the file's absolute path.
func mustParquet(t testing.TB, dir, name, query string) string {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), "COPY ("+query+") TO "+datachat.QuoteLiteral(p)+" (FORMAT parquet)"); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return p
}

// mustEngine starts an engine with test-friendly defaults and closes it at
// the end of the test.
func mustEngine(t testing.TB, o Options) *Engine {
	t.Helper()
	if o.TempDir == "" {
		o.TempDir = t.TempDir()
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 512 << 20
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
