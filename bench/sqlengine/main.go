// Command sqlengine benchmarks datachat's SQL path against bare DuckDB and
// Polars SQL, and its CSV ingest against DuckDB's own read_csv → Parquet COPY.
//
//	go run ./bench/sqlengine            # from the repository root; a few minutes
//	go run ./bench/sqlengine -rows 1000000 -csv-mb 20 -runs 3   # quick check
//
// Data is generated deterministically by DuckDB (hash() of the row number) into a
// temporary directory: a sales table (10 million rows by default) and a
// customers table (10,000 rows), as Parquet. Each query runs once to warm up,
// then -runs times; the median is reported. The Polars peer runs in node
// (bench/sqlengine/node, nodejs-polars 0.24.1, installed with npm ci when
// missing) over the same Parquet files.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"datachat/internal/dataset"
	"datachat/internal/duckdb"
)

type query struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

var queries = []query{
	{"filtered aggregate", "SELECT count(*) AS n, sum(price * quantity) AS revenue FROM sales WHERE category = 'c07' AND quantity > 5"},
	{"group-by", "SELECT category, count(*) AS n, avg(price) AS avg_price, sum(quantity) AS units FROM sales GROUP BY category ORDER BY category"},
	{"join", "SELECT c.region, sum(s.price * s.quantity) AS revenue FROM sales s JOIN customers c ON s.customer_id = c.customer_id GROUP BY c.region ORDER BY revenue DESC"},
	{"top-k", "SELECT id, customer_id, price FROM sales ORDER BY price DESC, id LIMIT 10"},
}

func main() {
	rows := flag.Int("rows", 10_000_000, "rows of the sales table")
	csvMB := flag.Int("csv-mb", 200, "approximate size of the generated CSV, in MB")
	runs := flag.Int("runs", 9, "timed runs per measurement (median reported)")
	ingestRuns := flag.Int("ingest-runs", 5, "timed runs of each ingest")
	skipPolars := flag.Bool("skip-polars", false, "do not run the Polars peer")
	flag.Parse()
	log.SetFlags(0)

	dir, err := os.MkdirTemp("", "datachat-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	log.Printf("generating %d rows into %s …", *rows, dir)
	t0 := time.Now()
	gen, err := openDuckDB(dir)
	if err != nil {
		log.Fatal(err)
	}
	sales := filepath.Join(dir, "sales.parquet")
	customers := filepath.Join(dir, "customers.parquet")
	must(gen.Exec(fmt.Sprintf(`COPY (
		SELECT range AS id,
			(hash(range) %% 10000)::INTEGER AS customer_id,
			(hash(range * 7) %% 500)::INTEGER AS product_id,
			'c' || lpad(((hash(range * 13) %% 20))::VARCHAR, 2, '0') AS category,
			round(((hash(range * 17) %% 100000) / 100.0)::DOUBLE, 2) AS price,
			(1 + hash(range * 19) %% 10)::INTEGER AS quantity,
			TIMESTAMP '2024-01-01' + to_seconds((hash(range * 23) %% 31536000)::BIGINT) AS ts
		FROM range(%d)) TO '%s' (FORMAT parquet)`, *rows, sales)))
	must(gen.Exec(fmt.Sprintf(`COPY (
		SELECT range::INTEGER AS customer_id,
			'r' || (hash(range) %% 8)::VARCHAR AS region,
			CASE WHEN hash(range * 3) %% 3 = 0 THEN 'enterprise' ELSE 'retail' END AS segment
		FROM range(10000)) TO '%s' (FORMAT parquet)`, customers)))
	log.Printf("generated in %v", time.Since(t0).Round(time.Millisecond))

	tables := []duckdb.Table{{Name: "sales", Path: sales}, {Name: "customers", Path: customers}}
	eng, err := duckdb.New(duckdb.Options{TempDir: dir, Timeout: 5 * time.Minute, MemoryLimit: 4 << 30})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	o := eng.Options()

	// Bare DuckDB: the same views, threads, memory limit and Parquet metadata
	// cache, without the sandbox, the pool or our result formatting.
	bare, err := openDuckDB(dir)
	if err != nil {
		log.Fatal(err)
	}
	must(bare.Exec(fmt.Sprintf("SET threads = %d; SET memory_limit = '%dMiB'; SET parquet_metadata_cache = true", o.Threads, o.MemoryLimit>>20)))
	must(bare.Exec(fmt.Sprintf("CREATE VIEW sales AS SELECT * FROM read_parquet('%s'); CREATE VIEW customers AS SELECT * FROM read_parquet('%s')", sales, customers)))

	type row struct {
		name             string
		ours, bareMS, pl float64
		rows             int
	}
	var results []row
	for _, q := range queries {
		var n int
		ours, b := medianPair(*runs, func() {
			res, err := eng.Query(ctx, "bench", tables, q.SQL)
			if err != nil {
				log.Fatalf("%s: %v", q.Name, err)
			}
			if _, err := json.Marshal(res); err != nil {
				log.Fatal(err)
			}
			n = res.RowCount
		}, func() {
			rs, err := bare.QueryContext(ctx, q.SQL)
			if err != nil {
				log.Fatalf("%s: %v", q.Name, err)
			}
			cols, _ := rs.Columns()
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			for rs.Next() {
				rs.Scan(ptrs...)
			}
			rs.Close()
		})
		results = append(results, row{name: q.Name, ours: ours, bareMS: b, rows: n})
		log.Printf("%-18s ours %8.1f ms   bare DuckDB %8.1f ms   ratio %.3f", q.Name, ours, b, ours/b)
	}

	// Open + first query of a new conversation's instance: as a user meets it
	// (a spare process is ready: the engine keeps them started ahead), and
	// back to back (the spares have no time to refill, so most opens start a
	// process too).
	openQuery := func() {
		eng.Evict("bench-open")
		if _, err := eng.Query(ctx, "bench-open", tables, "SELECT count(*) FROM customers"); err != nil {
			log.Fatal(err)
		}
	}
	var opens []float64
	for i := range *runs + 1 {
		if err := eng.WaitSpares(ctx); err != nil {
			log.Fatal(err)
		}
		if ms := timeMS(openQuery); i > 0 {
			opens = append(opens, ms)
		}
	}
	slices.Sort(opens)
	openCost := opens[len(opens)/2]
	openBackToBack := median(*runs, openQuery)
	warm := median(*runs, func() {
		if _, err := eng.Query(ctx, "bench-open", tables, "SELECT count(*) FROM customers"); err != nil {
			log.Fatal(err)
		}
	})

	var polarsErr error
	if !*skipPolars {
		var pms map[string]struct {
			MS   float64 `json:"ms"`
			Rows int     `json:"rows"`
		}
		pms, polarsErr = runPolars(dir, *runs)
		for i := range results {
			if p, ok := pms[results[i].name]; ok {
				results[i].pl = p.MS
				log.Printf("%-18s Polars SQL %8.1f ms (%d rows)", results[i].name, p.MS, p.Rows)
			}
		}
		if polarsErr != nil {
			log.Printf("Polars peer: %v", polarsErr)
		}
	}

	// CSV ingest: ours (upload stream → spool → sniff → Parquet → schema)
	// against DuckDB's read_csv → Parquet COPY of the same file.
	csvRows := *csvMB * 1_000_000 / 47 // about 47 bytes a row
	csvPath := filepath.Join(dir, "sales.csv")
	must(gen.Exec(fmt.Sprintf("COPY (SELECT * FROM read_parquet('%s') LIMIT %d) TO '%s' (FORMAT csv, HEADER)", sales, csvRows, csvPath)))
	fi, err := os.Stat(csvPath)
	if err != nil {
		log.Fatal(err)
	}
	mb := float64(fi.Size()) / 1e6
	loader, err := dataset.New(dataset.Options{Dir: filepath.Join(dir, "datasets"), Engine: eng})
	if err != nil {
		log.Fatal(err)
	}
	oursIngest, bareIngest := medianPair(*ingestRuns, func() {
		f, err := os.Open(csvPath)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		sts, err := loader.Ingest(ctx, f, "sales.csv")
		if err != nil {
			log.Fatal(err)
		}
		loader.RemoveAll(sts)
	}, func() {
		// A fresh DuckDB with the loader's threads and memory limit.
		db, err := openDuckDB(dir)
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		must(db.Exec(fmt.Sprintf("SET threads = %d; SET memory_limit = '4GiB'", runtime.NumCPU())))
		out := filepath.Join(dir, "bare.parquet")
		must(db.Exec(fmt.Sprintf("COPY (SELECT * FROM read_csv('%s')) TO '%s' (FORMAT parquet)", csvPath, out)))
		os.Remove(out)
	})
	log.Printf("CSV ingest (%.0f MB): ours %.0f ms (%.1f MB/s), DuckDB COPY %.0f ms (%.1f MB/s), ratio %.3f",
		mb, oursIngest, mb/oursIngest*1000, bareIngest, mb/bareIngest*1000, oursIngest/bareIngest)

	// The report, as Markdown.
	fmt.Printf("Machine: %d cores, %s, %s/%s, DuckDB %s via duckdb-go; %d-row sales table, %d runs, median.\n\n",
		runtime.NumCPU(), memTotal(), runtime.GOOS, runtime.GOARCH, duckdbVersion(bare), *rows, *runs)
	fmt.Println("| query | ours (ms) | bare DuckDB (ms) | ours / bare | Polars SQL (ms) | Polars / ours |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		pl, ratio := "—", "—"
		if r.pl > 0 {
			pl, ratio = fmt.Sprintf("%.1f", r.pl), fmt.Sprintf("%.2f×", r.pl/r.ours)
		}
		fmt.Printf("| %s | %.1f | %.1f | %.3f | %s | %s |\n", r.name, r.ours, r.bareMS, r.ours/r.bareMS, pl, ratio)
	}
	fmt.Printf("\nNew conversation instance, open + first query: %.1f ms with a spare process ready, %.1f ms back to back (warm query %.1f ms).\n", openCost, openBackToBack, warm)
	fmt.Printf("\n| CSV ingest (%.0f MB, %d rows) | ms | MB/s |\n|---|---:|---:|\n", mb, csvRows)
	fmt.Printf("| ours: Loader.Ingest (stream to disk, sniff, Parquet, schema) | %.0f | %.1f |\n", oursIngest, mb/oursIngest*1000)
	fmt.Printf("| DuckDB: COPY (FROM read_csv(…)) TO … (FORMAT parquet) | %.0f | %.1f |\n", bareIngest, mb/bareIngest*1000)
	fmt.Printf("| ratio ours / DuckDB | %.3f | |\n", oursIngest/bareIngest)
	if polarsErr != nil {
		fmt.Printf("\nPolars peer failed: %v\n", polarsErr)
	}
}

func openDuckDB(dir string) (*sql.DB, error) {
	c, err := duckdbdriver.NewConnector("?temp_directory="+filepath.Join(dir, "spill"), nil)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	return db, nil
}

func must(_ sql.Result, err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// medianPair runs a and b once each to warm up, then n times each,
// alternating which goes first so that noise from other processes on the
// machine falls on both alike, and returns the medians in ms.
func medianPair(n int, a, b func()) (float64, float64) {
	a()
	b()
	ta := make([]float64, n)
	tb := make([]float64, n)
	for i := range n {
		if i%2 == 0 {
			ta[i] = timeMS(a)
			tb[i] = timeMS(b)
		} else {
			tb[i] = timeMS(b)
			ta[i] = timeMS(a)
		}
	}
	slices.Sort(ta)
	slices.Sort(tb)
	return ta[n/2], tb[n/2]
}

func timeMS(fn func()) float64 {
	t := time.Now()
	fn()
	return float64(time.Since(t).Microseconds()) / 1000
}

// median runs fn once to warm up, then n times, and returns the median in ms.
func median(n int, fn func()) float64 {
	fn()
	ms := make([]float64, n)
	for i := range n {
		t := time.Now()
		fn()
		ms[i] = float64(time.Since(t).Microseconds()) / 1000
	}
	slices.Sort(ms)
	return ms[n/2]
}

func runPolars(dir string, runs int) (map[string]struct {
	MS   float64 `json:"ms"`
	Rows int     `json:"rows"`
}, error) {
	nodeDir := filepath.Join(repoRoot(), "bench", "sqlengine", "node")
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "nodejs-polars")); err != nil {
		log.Printf("installing nodejs-polars (npm ci) …")
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = nodeDir
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("npm ci: %w", err)
		}
	}
	qs, _ := json.Marshal(queries)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(nodeDir, "polars.js"), dir, fmt.Sprint(runs), string(qs))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node polars.js: %w", err)
	}
	var res map[string]struct {
		MS   float64 `json:"ms"`
		Rows int     `json:"rows"`
	}
	return res, json.Unmarshal(out, &res)
}

// repoRoot walks up from the working directory to go.mod.
func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? GiB"
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb)
		}
	}
	return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
}

func duckdbVersion(db *sql.DB) string {
	var v string
	db.QueryRow("SELECT version()").Scan(&v)
	return v
}
