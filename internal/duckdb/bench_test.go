package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"datachat"
)

// benchTables writes a 1-million-row table once per benchmark.
func benchTables(b *testing.B) []Table {
	b.Helper()
	dir := b.TempDir()
	return []Table{{Name: "sales", Path: mustParquet(b, dir, "sales.parquet", `SELECT range AS id, 'c' || (hash(range) % 20)::VARCHAR AS category,
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
	if _, err := db.Exec(fmt.Sprintf("SET parquet_metadata_cache = true; CREATE VIEW sales AS SELECT * FROM read_parquet(%s)", datachat.QuoteLiteral(tables[0].Path))); err != nil {
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

// smallCSV is the upload of bench/sqlload: 2,000 rows of 3 columns.
func smallCSV(rows int) []byte {
	var b strings.Builder
	b.WriteString("id,region,target\n")
	for r := range rows {
		fmt.Fprintf(&b, "%d,region-%d,%.2f\n", r+1, r%8, float64(r*37%100000)/100)
	}
	return []byte(b.String())
}

// BenchmarkIngestSmallCSV converts a 2,000-row CSV, one job after another:
// the wall time of a small upload's conversion, worker included, and the CPU
// time of the workers (cpu-ms/op; workers started ahead between jobs are
// outside the timer but their start-up is counted there too).
func BenchmarkIngestSmallCSV(b *testing.B) {
	e := mustEngine(b, Options{Threads: 2})
	data := smallCSV(2000)
	ctx := context.Background()
	e.WaitSpares(ctx)
	cpu := childCPU()
	for b.Loop() {
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, IngestInput), data, 0o600); err != nil {
			b.Fatal(err)
		}
		res, err := e.Ingest(ctx, IngestJob{Dir: dir, Input: IngestInput, Name: "targets.csv", MaxBytes: 1 << 30})
		if err != nil || res.Tables[0].RowCount != 2000 {
			b.Fatal(res, err)
		}
		b.StopTimer()
		e.WaitSpares(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(childCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// childCPU is the CPU time of this process's children that have exited.
func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
