package duckdb

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"datachat/internal/disktest"
	"datachat/internal/duckdb/wire"
)

// workerRoot is the directory of a conversation's worker.
func workerRoot(e *Engine, key string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workers[key]; w != nil {
		return w.root
	}
	return ""
}

// TestInstanceWritesNothing: a conversation's instance is built in memory;
// its directory holds the links to its datasets and nothing else.
func TestInstanceWritesNothing(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 10 * time.Second})
	check(t)
	entries, err := os.ReadDir(workerRoot(e, "conv"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	if !slices.Equal(names, []string{"data"}) {
		t.Errorf("worker directory holds %v, want only data/", names)
	}
	link, err := os.Readlink(filepath.Join(workerRoot(e, "conv"), "data", "t.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(filepath.Join(workerRoot(e, "conv"), "data", "t.parquet")); real != mustReal(t, tables[0].Path) {
		t.Errorf("link %q leads to %q, want %s", link, real, tables[0].Path)
	}
}

func mustReal(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCatalogCannotChange: the in-memory catalog is writable to DuckDB, so
// the statement check alone keeps it as built. No statement, PIVOT forms
// (which DuckDB turns into CREATE TYPE) included, adds or replaces anything.
func TestCatalogCannotChange(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 10 * time.Second})
	for _, sql := range []string{
		"CREATE TABLE x AS SELECT 1",
		"CREATE TEMP TABLE x AS SELECT 1",
		"CREATE VIEW v AS SELECT 1",
		"CREATE OR REPLACE VIEW t AS SELECT 1 AS id",
		"CREATE TYPE mood AS ENUM ('a')",
		"CREATE SEQUENCE s",
		"CREATE MACRO m() AS 1",
		"CREATE SCHEMA s",
		"PIVOT t ON label USING count(*)",
		"PIVOT t ON g",
		"INSERT INTO t SELECT * FROM t",
		"ATTACH ':memory:' AS m",
		"DETACH memory",
		"USE system",
		"SELECT 1; CREATE TABLE x (a INT)",
	} {
		_, err := e.Query(context.Background(), "conv", tables, sql)
		if err == nil {
			t.Errorf("%s: ran", sql)
		}
	}
	res, err := e.Query(context.Background(), "conv", tables, `SELECT
		(SELECT count(*) FROM duckdb_tables()) || '/' ||
		(SELECT count(*) FROM duckdb_views() WHERE NOT internal) || '/' ||
		(SELECT count(*) FROM duckdb_sequences()) || '/' ||
		(SELECT count(*) FROM duckdb_types() WHERE NOT internal AND schema_name <> 'pg_catalog') || '/' ||
		(SELECT count(*) FROM duckdb_functions() WHERE NOT internal) || '/' ||
		(SELECT count(*) FROM duckdb_schemas() WHERE NOT internal)`)
	if err != nil {
		t.Fatal(err)
	}
	if got := wire.CellText(res.Rows[0][0]); got != "0/1/0/0/0/0" {
		t.Errorf("catalog after the attempts: tables/views/sequences/types/functions/schemas = %s, want 0/1/0/0/0/0: the view t alone", got)
	}
	check(t)
}

// TestQueriesOnFullDisk: queries over existing datasets go on when the disk
// holding the worker directories is full, in a worker started before and in
// one started after.
func TestQueriesOnFullDisk(t *testing.T) {
	disk := disktest.Small(t, 16<<20)
	data := filepath.Join(disk, "datasets")
	os.Mkdir(data, 0o700)
	p := mustParquet(t, data, "sales.parquet", "SELECT range AS id, range % 7 AS g FROM range(100000)")
	e := mustEngine(t, Options{Timeout: 20 * time.Second, TempDir: filepath.Join(disk, "tmp")})
	tables := []Table{{Name: "sales", Path: p}}
	q := func(conv string) {
		t.Helper()
		res, err := e.Query(context.Background(), conv, tables, "SELECT count(*), sum(g) FROM sales")
		if err != nil {
			t.Fatalf("query in %s on a full disk: %v", conv, err)
		}
		if got := wire.CellText(res.Rows[0][0]); got != "100000" {
			t.Fatalf("query in %s: got %s rows", conv, got)
		}
	}
	q("before")
	disktest.Fill(t, disk, 0)
	if free := disktest.Free(t, disk); free > 0 {
		t.Logf("%d bytes free after filling", free)
	}
	q("before")
	q("after") // a new worker: its directory, its links
}
