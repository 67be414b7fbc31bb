package duckdb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat/internal/duckdb/wire"

	"datachat"
)

func TestResultJSON(t *testing.T) {
	e := mustEngine(t, Options{})
	res, err := e.Query(context.Background(), "", nil, `SELECT 1::TINYINT a, 9007199254740992::BIGINT safe, 9007199254740993::BIGINT big,
		-9007199254740993::BIGINT neg, 2::HUGEINT h, 170141183460469231731687303715884105727::HUGEINT hmax,
		18446744073709551615::UBIGINT umax, 1.5::FLOAT f, 0.1::FLOAT f32, 0.1::DOUBLE f64, 1e21::DOUBLE e21,
		'nan'::DOUBLE n, 'inf'::DOUBLE pinf, '-inf'::FLOAT ninf,
		123.45::DECIMAL(10,2) d, -0.05::DECIMAL(4,2) dneg, 12345678901234567890.123::DECIMAL(38,3) dh,
		DATE '2024-01-02' dt, 'infinity'::DATE dinf, TIMESTAMP '2024-01-02 03:04:05.123' ts,
		TIMESTAMPTZ '2024-01-02 03:04:05+00' tz, TIMESTAMP_NS '2024-01-02 03:04:05.123456789' tns,
		TIMESTAMP_S '2024-01-02 03:04:05' tss, TIME '01:02:03.5' tm, TIMETZ '01:02:03+05:30' ttz,
		INTERVAL '1 year 2 months 3 days 4 hours 5.5 seconds' iv, INTERVAL '0 seconds' iv0,
		'\x00\x01'::BLOB bl, uuid '550e8400-e29b-41d4-a716-446655440000' u,
		[1, 2, NULL] l, {'b': 1, 'a': [1.5::DOUBLE]} s, MAP {'k': 1, 'j': 2} m, MAP {1: true} mi,
		NULL nul, 'x'::ENUM('x','y') en, [1, 2]::INTEGER[2] arr,
		union_value(num := 2)::UNION(num INTEGER, str VARCHAR) un, '101'::BIT bits, true b,
		'{"k": 1}'::JSON j, 'ünïcode ✓'::VARCHAR txt`)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res.Rows[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `[1,9007199254740992,"9007199254740993","-9007199254740993",2,"170141183460469231731687303715884105727",` +
		`"18446744073709551615",1.5,0.1,0.1,1e+21,"NaN","Infinity","-Infinity",` +
		`"123.45","-0.05","12345678901234567890.123",` +
		`"2024-01-02","infinity","2024-01-02T03:04:05.123",` +
		`"2024-01-02T03:04:05Z","2024-01-02T03:04:05.123456789",` +
		`"2024-01-02T03:04:05","01:02:03.5","01:02:03+05:30",` +
		`"P1Y2M3DT4H5.5S","PT0S",` +
		`"AAE=","550e8400-e29b-41d4-a716-446655440000",` +
		`[1,2,null],{"b":1,"a":[1.5]},{"k":1,"j":2},{"1":true},` +
		`null,"x",[1,2],` +
		`{"num":2},"101",true,` +
		`"{\"k\": 1}","ünïcode ✓"]`
	if string(b) != want {
		t.Errorf("rows:\ngot  %s\nwant %s", b, want)
	}
	types := map[string]string{}
	for _, c := range res.Columns {
		types[c.Name] = c.Type + " " + c.SQLType
	}
	for name, want := range map[string]string{
		"a": "integer TINYINT", "h": "integer HUGEINT", "f": "float FLOAT", "d": "decimal DECIMAL(10,2)",
		"dt": "date DATE", "ts": "timestamp TIMESTAMP", "tz": "timestamp TIMESTAMP WITH TIME ZONE",
		"tm": "time TIME", "iv": "interval INTERVAL", "bl": "blob BLOB", "u": "uuid UUID",
		"l": "list INTEGER[]", "s": "struct STRUCT(b INTEGER, a DOUBLE[])", "m": "map MAP(VARCHAR, INTEGER)",
		"en": "text ENUM('x', 'y')", "arr": "list INTEGER[2]", "b": "boolean BOOLEAN", "j": "text JSON",
		"txt": "text VARCHAR", "un": "struct UNION(num INTEGER, str VARCHAR)",
	} {
		if types[name] != want {
			t.Errorf("column %s: got %q, want %q", name, types[name], want)
		}
	}
}

func TestFriendlyType(t *testing.T) {
	for in, want := range map[string]string{
		"INTEGER": "integer", "BIGINT": "integer", "UHUGEINT": "integer", "DOUBLE": "float", "FLOAT": "float",
		"DECIMAL(25,2)": "decimal", "VARCHAR": "text", "BOOLEAN": "boolean", "DATE": "date",
		"TIME": "time", "TIME WITH TIME ZONE": "time", "TIMESTAMP": "timestamp", "TIMESTAMP_NS": "timestamp",
		"TIMESTAMP WITH TIME ZONE": "timestamp", "INTERVAL": "interval", "BLOB": "blob", "UUID": "uuid",
		"VARCHAR[]": "list", "INTEGER[3]": "list", "VARCHAR[][][]": "list", "STRUCT(a INTEGER)": "struct",
		"MAP(VARCHAR, MAP(INTEGER, BOOLEAN))": "map", "ENUM('a', 'b')": "text", "JSON": "text",
		"STRUCT(a INTEGER)[]": "list", "": "text", "GEOMETRY": "text",
	} {
		if got := wire.FriendlyType(in); got != want {
			t.Errorf("FriendlyType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRowCap(t *testing.T) {
	e := mustEngine(t, Options{})
	ctx := context.Background()
	for _, c := range []struct {
		n         int
		truncated bool
	}{{999, false}, {1000, false}, {1001, true}} {
		res, err := e.Query(ctx, "", nil, fmt.Sprintf("SELECT * FROM range(%d)", c.n))
		if err != nil {
			t.Fatal(err)
		}
		if res.RowCount != min(c.n, 1000) || len(res.Rows) != res.RowCount || res.Truncated != c.truncated {
			t.Errorf("range(%d): got %d rows, truncated %v; want %d, %v", c.n, res.RowCount, res.Truncated, min(c.n, 1000), c.truncated)
		}
	}
	// A huge result is not materialised: only the first rows are produced
	// (10^10 rows of 100 bytes would hit the memory limit, or the timeout).
	res, err := e.Query(ctx, "", nil, "SELECT range, repeat('x', 100) FROM range(10000000000)")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.RowCount != 1000 {
		t.Errorf("got %d rows truncated %v", res.RowCount, res.Truncated)
	}
}

func TestCellCap(t *testing.T) {
	e := mustEngine(t, Options{MaxCellBytes: 10})
	res, err := e.Query(context.Background(), "", nil, "SELECT repeat('é', 20) AS s, 'short' AS t")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Rows[0][0]; got != "ééééé…" || !res.Truncated {
		t.Errorf("got %q truncated %v", got, res.Truncated)
	}
}

func TestTimeout(t *testing.T) {
	e := mustEngine(t, Options{Timeout: time.Second})
	start := time.Now()
	_, err := e.Query(context.Background(), "", nil, "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7")
	d := time.Since(start)
	var qe *datachat.QueryError
	if !errors.As(err, &qe) || qe.Kind != datachat.KindTimeout {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d < time.Second {
		t.Errorf("returned after %v, before the 1s timeout", d)
	}
	if datachat.ErrorCode(err) != datachat.EINVALID || !strings.HasPrefix(datachat.ErrorMessage(err), "timeout: ") {
		t.Errorf("code %q message %q", datachat.ErrorCode(err), datachat.ErrorMessage(err))
	}
	t.Logf("timeout after %v: %v", d, err)
}

func TestCancel(t *testing.T) {
	// The caller gives up once the query runs: it gets its context's error,
	// and the conversation's worker, interrupted rather than killed, answers
	// the next query.
	e := mustEngine(t, Options{Timeout: time.Minute, KillGrace: 30 * time.Second})
	if _, err := e.Query(context.Background(), "c", nil, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	pid := workerPid(e, "c")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Query(ctx, "c", nil, "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7")
		done <- err
	}()
	waitFor(t, e, "the query to run", func() bool { _, r := e.Load(); return r == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want the caller's context error", err)
	}
	res, err := e.Query(context.Background(), "c", nil, "SELECT 42")
	if err != nil || res.Rows[0][0] != int64(42) {
		t.Errorf("after cancel: %v %v", res, err)
	}
	if workerPid(e, "c") != pid {
		t.Error("the worker was replaced: the cancel did not reach the query")
	}
}

func TestBusy(t *testing.T) {
	// One user may have PerUserQueued queries waiting; the next is refused at
	// once, and another user is not affected.
	e := mustEngine(t, Options{Workers: 1, PerUserRunning: 1, PerUserQueued: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(datachat.WithUserID(context.Background(), "alice"))
	slow := "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7"
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.Query(ctx, fmt.Sprint("conv", i), nil, slow)
		}()
		waitFor(t, e, "the query to be taken", func() bool { q, r := e.Load(); return q+r == i+1 })
	}
	_, err := e.Query(ctx, "conv3", nil, "SELECT 1")
	if datachat.ErrorCode(err) != datachat.EBUSY {
		t.Errorf("got %v, want EBUSY", err)
	}
	t.Logf("%v", datachat.ErrorMessage(err))
	cancel()
	wg.Wait()
	waitFor(t, e, "the queue to drain", func() bool { q, r := e.Load(); return q+r == 0 })
	if _, err := e.Query(context.Background(), "", nil, "SELECT 1"); err != nil {
		t.Errorf("after the queue drained: %v", err)
	}
}

// waitFor waits until cond holds, checking it at each change of the
// engine's state (a query waits, starts or ends; a worker starts or stops),
// failing after a generous bound.
func waitFor(t *testing.T, e *Engine, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-e.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	dir := t.TempDir()
	p := mustParquet(t, dir, "items.parquet", "SELECT range AS id, range * 1.5 AS price, 'n' || range AS name FROM range(10)")
	e := mustEngine(t, Options{})
	tables := []Table{{Name: "items", Path: p}}
	for _, c := range []struct {
		sql, kind string
		contains  []string
	}{
		{"SELEC * FROM items", datachat.KindSyntax, []string{"syntax error"}},
		{"SELECT prcie FROM items", datachat.KindUnknownColumn, []string{`"prcie"`, `Candidate bindings`, `price`}},
		{"SELECT * FROM itemz", datachat.KindUnknownTable, []string{"itemz", `items`}},
		{"SELECT name + 1 FROM items", datachat.KindTypeMismatch, []string{"name"}},
		{"SELECT CAST(name AS INTEGER) FROM items", datachat.KindTypeMismatch, []string{"n0"}},
		{"SELECT nosuchfunc(id) FROM items", datachat.KindOther, []string{"nosuchfunc"}},
		{"", datachat.KindSyntax, []string{"empty"}},
	} {
		_, err := e.Query(context.Background(), "c", tables, c.sql)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%s: got %v, want a datachat.QueryError", c.sql, err)
			continue
		}
		if qe.Kind != c.kind {
			t.Errorf("%s: got kind %q (%v), want %q", c.sql, qe.Kind, qe, c.kind)
		}
		for _, s := range c.contains {
			if !strings.Contains(qe.Error(), s) {
				t.Errorf("%s: %q does not contain %q", c.sql, qe.Error(), s)
			}
		}
		if !strings.HasPrefix(qe.Error(), c.kind+": ") {
			t.Errorf("%s: %q does not start with its kind", c.sql, qe.Error())
		}
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("%s: code %q", c.sql, datachat.ErrorCode(err))
		}
	}
}

func TestEstimateRows(t *testing.T) {
	dir := t.TempDir()
	p := mustParquet(t, dir, "t.parquet", "SELECT range AS id FROM range(50000)")
	e := mustEngine(t, Options{})
	tables := []Table{{Name: "t", Path: p}}
	n, err := e.EstimateRows(context.Background(), "c", tables, "SELECT * FROM t")
	if err != nil || n != 50000 {
		t.Errorf("got %d, %v; want 50000", n, err)
	}
	n, err = e.EstimateRows(context.Background(), "c", tables, "SELECT * FROM t a, t b")
	if err != nil || n < 1e9 {
		t.Errorf("cross join: got %d, %v", n, err)
	}
	if _, err := e.EstimateRows(context.Background(), "c", tables, "SELECT * FROM read_csv('/etc/passwd')"); err == nil {
		t.Error("the sandbox did not apply to EXPLAIN")
	}
	if _, err := e.EstimateRows(context.Background(), "c", tables, "DROP VIEW t"); err == nil {
		t.Error("DROP was estimated")
	}
}

// mustEngineAB starts an engine whose conversation "c" has queried table a
// (x = 1) in dir; b (y = 2) is written beside it, not added yet.
func mustEngineAB(t *testing.T) (e *Engine, dir, a, b string) {
	t.Helper()
	dir = t.TempDir()
	a = mustParquet(t, dir, "a.parquet", "SELECT 1 AS x")
	b = mustParquet(t, dir, "b.parquet", "SELECT 2 AS y")
	e = mustEngine(t, Options{})
	if _, err := e.Query(context.Background(), "c", []Table{{Name: "a", Path: a}}, "SELECT * FROM a"); err != nil {
		t.Fatal(err)
	}
	return e, dir, a, b
}

func TestTablesChange(t *testing.T) {
	e, dir, a, b := mustEngineAB(t)
	ctx := context.Background()
	if _, err := e.Query(ctx, "c", []Table{{Name: "a", Path: a}}, "SELECT * FROM b"); err == nil {
		t.Fatal("b visible before it was added")
	}
	res, err := e.Query(ctx, "c", []Table{{Name: "a", Path: a}, {Name: "b", Path: b}}, "SELECT x + y FROM a, b")
	if err != nil || res.Rows[0][0] != int64(3) {
		t.Fatalf("after adding b: %v %v", res, err)
	}
	if _, err := e.Query(ctx, "c", []Table{{Name: "b", Path: b}}, "SELECT * FROM a"); err == nil {
		t.Fatal("a still visible after it was removed")
	}
	e.Evict("c")
	if n := e.Processes(); n != 0 {
		t.Errorf("%d workers after Evict", n)
	}
	if _, err := e.Query(ctx, "c", []Table{{Name: "missing", Path: filepath.Join(dir, "nope.parquet")}}, "SELECT 1"); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("missing file: got %v, want EINVALID", err)
	}
}

// TestIdleClose calls the janitor's sweep (closeIdle) itself with the times
// it needs, an hour apart, instead of waiting for its ticks: the sweep stops
// the idle workers before it returns, so the counts hold however loaded the
// machine is.
func TestIdleClose(t *testing.T) {
	tmp := t.TempDir()
	e := mustEngine(t, Options{IdleTimeout: time.Hour, TempDir: tmp})
	ctx := context.Background()
	for _, c := range []string{"a", "b", "c"} {
		if _, err := e.Query(ctx, c, nil, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Processes(); n != 3 {
		t.Errorf("%d workers, want one per conversation", n)
	}
	e.closeIdle(time.Now()) // nothing has been idle an hour
	if n := e.Processes(); n != 3 {
		t.Errorf("%d workers after an early sweep, want 3", n)
	}
	e.closeIdle(time.Now().Add(time.Hour + time.Second))
	if n := e.Processes(); n != 0 {
		t.Errorf("%d workers left after the idle timeout", n)
	}
	entries, _ := os.ReadDir(tmp)
	for _, d := range entries {
		if strings.HasPrefix(d.Name(), "sql-") {
			t.Errorf("worker files left: %s", d.Name())
		}
	}
}

func TestIdleMemory(t *testing.T) {
	// Idle workers are kept within a memory budget, not a count: with a
	// budget below one worker's size, none stays idle.
	e := mustEngine(t, Options{IdleMemory: 1})
	ctx := context.Background()
	for _, c := range []string{"a", "b", "c"} {
		if _, err := e.Query(ctx, c, nil, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Processes(); n > 0 {
		t.Errorf("%d idle workers kept past a 1-byte budget", n)
	}
}

func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	p1 := mustParquet(t, dir, "one.parquet", "SELECT range AS v FROM range(1000)")
	p2 := mustParquet(t, dir, "two.parquet", "SELECT range * 2 AS v FROM range(1000)")
	e := mustEngine(t, Options{Workers: 2, QueueSize: 64})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv, p, want := "one", p1, int64(499500)
			if i%2 == 1 {
				conv, p, want = "two", p2, 999000
			}
			for range 3 {
				res, err := e.Query(context.Background(), conv, []Table{{Name: "t", Path: p}}, "SELECT sum(v)::BIGINT FROM t")
				if err != nil {
					errs <- err
					return
				}
				if res.Rows[0][0] != want {
					errs <- fmt.Errorf("%s: got %v, want %d", conv, res.Rows[0][0], want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestInstanceCost measures what an instance per conversation costs: opening
// it (catalog file, read-only open, sandbox settings) and its first query,
// against a query on an open instance.
func TestInstanceCost(t *testing.T) {
	dir := t.TempDir()
	var tables []Table
	for i := range 5 {
		name := fmt.Sprintf("t%d", i)
		tables = append(tables, Table{Name: name, Path: mustParquet(t, dir, name+".parquet", "SELECT range AS id, range::VARCHAR AS s FROM range(100000)")})
	}
	e := mustEngine(t, Options{})
	ctx := context.Background()
	const n = 10
	var first, warm time.Duration
	for i := range n {
		conv := fmt.Sprint("conv", i)
		start := time.Now()
		if _, err := e.Query(ctx, conv, tables, "SELECT count(*) FROM t0"); err != nil {
			t.Fatal(err)
		}
		first += time.Since(start)
		start = time.Now()
		if _, err := e.Query(ctx, conv, tables, "SELECT count(*) FROM t0"); err != nil {
			t.Fatal(err)
		}
		warm += time.Since(start)
	}
	t.Logf("instance per conversation (5 tables): open + first query %v, warm query %v (mean of %d)", first/n, warm/n, n)
}

func TestRenderers(t *testing.T) {
	r := &Result{
		Columns:  []datachat.Column{{Name: "name", Type: "text", SQLType: "VARCHAR"}, {Name: "n", Type: "integer", SQLType: "BIGINT"}, {Name: "tags", Type: "list", SQLType: "VARCHAR[]"}},
		Rows:     [][]any{{"ab", int64(1), []any{"x", "y"}}, {nil, int64(22), nil}, {"名前", nil, []any{}}},
		RowCount: 3,
	}
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	want := "name  n     tags\n" +
		"----  ----  ---------\n" +
		"ab    1     [\"x\",\"y\"]\n" +
		"NULL  22    NULL\n" +
		"名前  NULL  []\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "name,n,tags\nab,1,\"[\"\"x\"\",\"\"y\"\"]\"\n,22,\n名前,,[]\n"; b.String() != want {
		t.Errorf("csv:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestResultJSONMore(t *testing.T) {
	e := mustEngine(t, Options{})
	res, err := e.Query(context.Background(), "", nil, `SELECT TIMESTAMP_MS '2024-01-02 03:04:05.123' tms,
		'123456789012345678901234567890'::BIGNUM bn, (-5)::BIGNUM bns, [{'a': 1}, NULL] ls, MAP {'x': {'y': [1]}} ms,
		[[1, 2], [3]]::INTEGER[][] ll, '-infinity'::TIMESTAMP tinf, TIME '24:00:00' t24,
		'12:34:56.123456789'::TIME_NS tns, DATE '0044-03-15' - INTERVAL 100 YEAR bc, INTERVAL '-1 month -2 days -3.5 seconds' ineg,
		[]::INTEGER[] empty, {'k': NULL} snull, 1e-7::DOUBLE tiny, (-0.0)::DOUBLE negzero`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Rows[0])
	want := `["2024-01-02T03:04:05.123","123456789012345678901234567890",-5,[{"a":1},null],{"x":{"y":[1]}},` +
		`[[1,2],[3]],"-infinity","24:00:00","12:34:56.123456789","-000056-03-15T00:00:00","P-1M-2DT-3.5S",` +
		`[],{"k":null},1e-7,0]`
	if string(b) != want {
		t.Errorf("rows:\ngot  %s\nwant %s", b, want)
	}
}

// TestPrepare: after a conversation's tables change, its worker is started
// in the background; the next query uses it rather than starting another,
// even when it comes while the worker is still opening.
func TestPrepare(t *testing.T) {
	e, _, a, b := mustEngineAB(t)
	ctx := context.Background()
	old := workerPid(e, "c")
	both := []Table{{Name: "a", Path: a}, {Name: "b", Path: b}}
	e.Prepare("c", both)
	// A query at once waits for the worker being prepared.
	res, err := e.Query(ctx, "c", both, "SELECT x + y FROM a, b")
	if err != nil || res.Rows[0][0] != int64(3) {
		t.Fatalf("query after Prepare: %v %v", res, err)
	}
	prepared := workerPid(e, "c")
	if prepared == old || prepared == 0 {
		t.Errorf("worker %d, was %d: the tables changed, so it should be a new one", prepared, old)
	}
	if n := e.Processes(); n != 1 {
		t.Errorf("%d workers for one conversation", n)
	}
	// Preparing the same tables again changes nothing.
	e.Prepare("c", both)
	if _, err := e.Query(ctx, "c", both, "SELECT 1"); err != nil || workerPid(e, "c") != prepared {
		t.Errorf("after preparing the same tables: %v, worker %d (want %d)", err, workerPid(e, "c"), prepared)
	}
	// Prepared and never queried: the query that comes later finds it ready.
	e.Prepare("d", both)
	waitFor(t, e, "the prepared worker", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		w := e.workers["d"]
		return w != nil && w.p != nil
	})
	pid := workerPid(e, "d")
	if _, err := e.Query(ctx, "d", both, "SELECT count(*) FROM b"); err != nil || workerPid(e, "d") != pid {
		t.Errorf("query on a prepared worker: %v, worker %d (want %d)", err, workerPid(e, "d"), pid)
	}
}

// TestKeywords checks datachat.Ident's keywords against the linked DuckDB: a word it
// reserves or takes as a type or function name is quoted, and a name written
// bare reads back as itself.
func TestKeywords(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category IN ('reserved', 'type_function')")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		want[w] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	keywords := map[string]bool{}
	for _, w := range datachat.IdentKeywords() {
		keywords[w] = true
	}
	for w := range want {
		if !keywords[w] {
			t.Errorf("DuckDB keyword %q missing from keywords", w)
		}
	}
	for w := range keywords {
		if !want[w] {
			t.Errorf("keywords lists %q, which this DuckDB does not reserve", w)
		}
	}
	for _, name := range []string{"order", "species", "Species", "body mass", `a"b`, "2nd", "x2", "select", "join", "year", "value"} {
		var got string
		q := "SELECT * FROM (SELECT 1 AS " + datachat.QuoteIdent(name) + ") t(" + datachat.Ident(name) + ")"
		if err := db.QueryRow("SELECT column_name FROM (DESCRIBE " + q + ")").Scan(&got); err != nil {
			t.Errorf("%q written %s: %v", name, datachat.Ident(name), err)
			continue
		}
		if got != name {
			t.Errorf("%q written %s reads back as %q", name, datachat.Ident(name), got)
		}
	}
}
