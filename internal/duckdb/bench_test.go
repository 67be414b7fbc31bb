package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// benchTables writes a 1-million-row table once per benchmark.
func benchTables(b *testing.B) []Table {
	b.Helper()
	dir := b.TempDir()
	return []Table{{"sales", mustParquet(b, dir, "sales.parquet", `SELECT range AS id, 'c' || (hash(range) % 20)::VARCHAR AS category,
		(hash(range * 7) % 100000) / 100.0 AS price, (1 + hash(range * 3) % 10)::INTEGER AS quantity FROM range(1000000)`)}}
}

// BenchmarkQueryGroupBy is a group-by through the whole path: pool, sandbox
// checks, a fresh connection, streaming and result formatting.
func BenchmarkQueryGroupBy(b *testing.B) {
	tables := benchTables(b)
	e := mustEngine(b, Options{})
	ctx := context.Background()
	q := "SELECT category, count(*), avg(price), sum(quantity) FROM sales GROUP BY category ORDER BY category"
	for b.Loop() {
		if _, err := e.Query(ctx, "bench", tables, q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareGroupBy is the same query on DuckDB through database/sql.
func BenchmarkBareGroupBy(b *testing.B) {
	tables := benchTables(b)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(fmt.Sprintf("SET parquet_metadata_cache = true; CREATE VIEW sales AS SELECT * FROM read_parquet(%s)", QuoteLiteral(tables[0].Path))); err != nil {
		b.Fatal(err)
	}
	q := "SELECT category, count(*), avg(price), sum(quantity) FROM sales GROUP BY category ORDER BY category"
	for b.Loop() {
		rows, err := db.Query(q)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
}

// BenchmarkResult1000Rows measures fetching and formatting 1000 rows of mixed
// types (the row cap).
func BenchmarkResult1000Rows(b *testing.B) {
	tables := benchTables(b)
	e := mustEngine(b, Options{})
	ctx := context.Background()
	q := "SELECT id, category, price, quantity, price::DECIMAL(12,2) AS d, TIMESTAMP '2024-01-01' + to_seconds(id) AS ts, [id, quantity] AS l FROM sales"
	for b.Loop() {
		res, err := e.Query(ctx, "bench", tables, q)
		if err != nil || res.RowCount != 1000 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkInstanceOpen measures a new conversation's instance: catalog file,
// read-only open, sandbox settings, and a first query.
func BenchmarkInstanceOpen(b *testing.B) {
	tables := benchTables(b)
	e := mustEngine(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		e.Evict("bench")
		if _, err := e.Query(ctx, "bench", tables, "SELECT count(*) FROM sales"); err != nil {
			b.Fatal(err)
		}
	}
}
