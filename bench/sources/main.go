// Command sources benchmarks a PostgreSQL database source: the four anchor
// queries of bench/sqlengine, in PostgreSQL's SQL, through internal/dbsource
// (its parse-tree check, read-only transaction, row cap and JSON-ready values)
// against psql running them directly, and the time to a first page of a large
// result.
//
//	export DATACHAT_TEST_POSTGRES_URL=$(bash internal/postgres/testdata/start-test-cluster.sh)
//	go run ./bench/sources                    # 10 million rows; a few minutes
//	go run ./bench/sources -rows 1000000 -runs 3
//
// It creates a database (dropped at the end) with a sales table (-rows rows,
// generated from hashes of the row number, as bench/sqlengine does) and a
// customers table (10,000 rows), and a role that may only read them; both
// sides connect as that role. Each query runs once to warm up, then -runs
// times alternating the two sides; the median is reported. psql's time is its
// own \timing (request to last row, rows written to /dev/null).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/internal/dbsource"
)

type query struct {
	name, sql string
}

var anchors = []query{
	{"filtered aggregate", "SELECT count(*) AS n, sum(price * quantity) AS revenue FROM sales WHERE category = 'c07' AND quantity > 5"},
	{"group-by", "SELECT category, count(*) AS n, avg(price) AS avg_price, sum(quantity) AS units FROM sales GROUP BY category ORDER BY category"},
	{"join", "SELECT c.region, sum(s.price * s.quantity) AS revenue FROM sales s JOIN customers c ON s.customer_id = c.customer_id GROUP BY c.region ORDER BY revenue DESC"},
	{"top-k", "SELECT id, customer_id, price FROM sales ORDER BY price DESC, id LIMIT 10"},
}

func main() {
	base := flag.String("postgres-url", os.Getenv("DATACHAT_TEST_POSTGRES_URL"), "a superuser URL of the cluster (default $DATACHAT_TEST_POSTGRES_URL)")
	rows := flag.Int("rows", 10_000_000, "rows of the sales table")
	runs := flag.Int("runs", 7, "timed runs per measurement (median reported)")
	flag.Parse()
	log.SetFlags(0)
	if *base == "" {
		log.Fatal("set DATACHAT_TEST_POSTGRES_URL or -postgres-url (internal/postgres/testdata/start-test-cluster.sh starts a cluster)")
	}
	psql, err := exec.LookPath("psql")
	if err != nil {
		log.Fatal("psql not found: apt-get install postgresql-client")
	}
	ctx := context.Background()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 10)
	dbName, role, password := "dcbench_"+suffix, "dcbench_reader_"+suffix, "pw-"+suffix

	root, err := pgx.Connect(ctx, *base)
	if err != nil {
		log.Fatal(err)
	}
	must(root.Exec(ctx, "CREATE DATABASE "+dbName))
	must(root.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password)))
	defer func() {
		root.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
		root.Exec(ctx, "DROP ROLE IF EXISTS "+role)
		root.Close(ctx)
	}()
	u, _ := url.Parse(*base)
	u.Path = "/" + dbName
	admin := u.String()
	u.User = url.UserPassword(role, password)
	reader := u.String()

	log.Printf("generating %d rows …", *rows)
	t0 := time.Now()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		log.Fatal(err)
	}
	must(c.Exec(ctx, fmt.Sprintf(`CREATE TABLE sales AS SELECT g AS id,
		(abs(hashint8(g)) %% 10000)::int AS customer_id,
		(abs(hashint8(g * 7)) %% 500)::int AS product_id,
		'c' || lpad((abs(hashint8(g * 13)) %% 20)::text, 2, '0') AS category,
		round((abs(hashint8(g * 17)) %% 100000) / 100.0, 2)::float8 AS price,
		(1 + abs(hashint8(g * 19)) %% 10)::int AS quantity,
		timestamp '2024-01-01' + make_interval(secs => abs(hashint8(g * 23)) %% 31536000) AS ts
		FROM generate_series(1, %d) g`, *rows)))
	must(c.Exec(ctx, `CREATE TABLE customers AS SELECT g::int AS customer_id,
		'r' || (abs(hashint8(g)) % 8)::text AS region,
		CASE WHEN abs(hashint8(g * 3)) % 3 = 0 THEN 'enterprise' ELSE 'retail' END AS segment
		FROM generate_series(0, 9999) g`))
	must(c.Exec(ctx, "VACUUM ANALYZE sales"))
	must(c.Exec(ctx, "VACUUM ANALYZE customers"))
	must(c.Exec(ctx, "GRANT SELECT ON sales, customers TO "+role))
	var version string
	c.QueryRow(ctx, "SHOW server_version").Scan(&version)
	c.Close(ctx)
	log.Printf("generated in %v (PostgreSQL %s)", time.Since(t0).Round(time.Millisecond), version)

	db, err := dbsource.Open(dbsource.Source{Name: "bench", URL: reader, Tables: []string{"public.*"}, AllUsers: true},
		dbsource.Options{Timeout: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(ctx); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "dcbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ours := func(sql string) (float64, int, bool) {
		start := time.Now()
		res, err := db.Query(ctx, sql)
		if err != nil {
			log.Fatalf("%s: %v", sql, err)
		}
		if _, err := json.Marshal(res); err != nil {
			log.Fatal(err)
		}
		return float64(time.Since(start).Microseconds()) / 1000, res.RowCount, res.Truncated
	}
	// psqlTimes runs sql n+1 times in one psql session and returns the \timing
	// of the last n (the first warms the session up).
	psqlTimes := func(sql string, n int) []float64 {
		f := filepath.Join(dir, "q.sql")
		script := "\\timing on\n" + strings.Repeat(sql+";\n", n+1)
		if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
			log.Fatal(err)
		}
		out, err := exec.Command(psql, "-X", "-q", "-At", "-o", "/dev/null", "-f", f, reader).Output()
		if err != nil {
			log.Fatalf("psql %s: %v", sql, err)
		}
		var ts []float64
		for _, line := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(line, "Time: "); ok {
				ms, _, _ := strings.Cut(rest, " ms")
				v, err := strconv.ParseFloat(ms, 64)
				if err == nil {
					ts = append(ts, v)
				}
			}
		}
		if len(ts) != n+1 {
			log.Fatalf("psql printed %d timings, want %d", len(ts), n+1)
		}
		return ts[1:]
	}

	fmt.Printf("\n%d-row sales table, PostgreSQL %s, %d runs each (median)\n\n", *rows, version, *runs)
	fmt.Println("| query | dbsource | psql | ratio | rows |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, q := range anchors {
		ours(q.sql) // warm up
		var mine []float64
		var theirs []float64
		var n int
		for range *runs {
			ms, rows, _ := ours(q.sql)
			mine = append(mine, ms)
			n = rows
			theirs = append(theirs, psqlTimes(q.sql, 1)...)
		}
		m, p := median(mine), median(theirs)
		fmt.Printf("| %s | %.1f ms | %.1f ms | %.3f | %d |\n", q.name, m, p, m/p, n)
	}

	fmt.Println()
	fmt.Println("| large result | dbsource (first 1,000 rows, truncated) | psql |")
	fmt.Println("|---|---:|---:|")
	for _, q := range []struct{ name, ours, psql string }{
		{"SELECT * FROM sales: dbsource vs psql's whole result", "SELECT * FROM sales", "SELECT * FROM sales"},
		{"SELECT * FROM sales: dbsource vs psql LIMIT 1001", "SELECT * FROM sales", "SELECT * FROM sales LIMIT 1001"},
		{"ORDER BY price DESC (a full sort): vs psql LIMIT 1001", "SELECT * FROM sales ORDER BY price DESC", "SELECT * FROM sales ORDER BY price DESC LIMIT 1001"},
	} {
		ours(q.ours)
		var mine []float64
		truncated := true
		for range *runs {
			ms, rows, tr := ours(q.ours)
			truncated = truncated && tr && rows == 1000
			mine = append(mine, ms)
		}
		runsPsql := *runs
		if q.psql == "SELECT * FROM sales" {
			runsPsql = min(3, *runs) // seconds each
		}
		p := median(psqlTimes(q.psql, runsPsql))
		fmt.Printf("| %s | %.1f ms (truncated: %v) | %.1f ms |\n", q.name, median(mine), truncated, p)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func must(_ any, err error) {
	if err != nil {
		log.Fatal(err)
	}
}
