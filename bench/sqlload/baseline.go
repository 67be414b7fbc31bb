package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"datachat/bench/internal/serve"
)

// baselineResult is the GROUP BY through bare DuckDB.
type baselineResult struct {
	lat       []time.Duration
	errs      int
	wall      time.Duration
	cpu       time.Duration // this process's, while the baseline ran
	threads   int
	instances int
	version   string
}

// runBaseline runs the GROUP BY through bare DuckDB in this process, with
// each conversation's CSV converted to Parquet and the server's default
// threads (the cores) and memory limit: N goroutines with the same think
// time, for the same duration. By default one instance holds a view per
// conversation; -baseline-per-conversation gives each its own instance, as
// the server does (but in one process).
func runBaseline(o options, work string, convs []*conv) *baselineResult {
	dir := filepath.Join(work, "baseline")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	threads := runtime.NumCPU()
	ctx := context.Background()
	open := func(name string, conns int) *sql.DB {
		connector, err := duckdbdriver.NewConnector("?temp_directory="+filepath.Join(dir, "spill-"+name), nil)
		if err != nil {
			fatalf("baseline: %v", err)
		}
		db := sql.OpenDB(connector)
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		if _, err := db.ExecContext(ctx, fmt.Sprintf("SET threads = %d; SET memory_limit = '1GiB'; SET parquet_metadata_cache = true", threads)); err != nil {
			fatalf("baseline: %v", err)
		}
		return db
	}
	dbs := make([]*sql.DB, len(convs))
	queries := make([]string, len(convs))
	shared := open("shared", len(convs))
	defer shared.Close()
	for i, c := range convs {
		pq := filepath.Join(dir, fmt.Sprintf("sales-%03d.parquet", c.i))
		if _, err := shared.ExecContext(ctx, fmt.Sprintf("COPY (SELECT * FROM read_csv('%s')) TO '%s' (FORMAT parquet)", c.csvPath, pq)); err != nil {
			fatalf("baseline: %v", err)
		}
		view := fmt.Sprintf("sales_%03d", c.i)
		dbs[i] = shared
		if o.baselinePerConv {
			view = "sales"
			dbs[i] = open(fmt.Sprint(c.i), 1)
			defer dbs[i].Close()
		}
		if _, err := dbs[i].ExecContext(ctx, fmt.Sprintf("CREATE VIEW %s AS SELECT * FROM read_parquet('%s')", view, pq)); err != nil {
			fatalf("baseline: %v", err)
		}
		queries[i] = strings.Replace(groupBy, "FROM sales", "FROM "+view, 1)
	}
	r := &baselineResult{threads: threads, instances: 1}
	if o.baselinePerConv {
		r.instances = len(convs)
	}
	shared.QueryRowContext(ctx, "SELECT version()").Scan(&r.version)
	log.Printf("baseline: bare DuckDB (%d instances), %d goroutines for %v", r.instances, len(convs), o.duration)

	lctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs atomic.Int64
	cpu0 := serve.SelfCPU()
	start := time.Now()
	for i, c := range convs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(o.seed, uint64(c.i)+1<<32))
			if !sleep(lctx, time.Duration(c.i)*time.Second/time.Duration(o.n)) {
				return
			}
			var mine []time.Duration
			for ops := 0; ops < o.maxOps; ops++ {
				if o.think > 0 && !sleep(lctx, time.Duration(rng.Int64N(int64(o.think)))) {
					break
				}
				if lctx.Err() != nil {
					break
				}
				t0 := time.Now()
				n, err := countRows(ctx, dbs[i], queries[i])
				if err != nil || n != len(regions) {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			r.lat = append(r.lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	r.cpu = serve.SelfCPU() - cpu0
	r.errs = int(errs.Load())
	slices.Sort(r.lat)
	return r
}

// countRows runs q and reads every row, as the server does.
func countRows(ctx context.Context, db *sql.DB, q string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var region string
	var orders int64
	var revenue float64
	for rows.Next() {
		if err := rows.Scan(&region, &orders, &revenue); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}
