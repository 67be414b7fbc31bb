package duckdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
		if got := FriendlyType(in); got != want {
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
	// A huge result is not materialised: only the first rows are produced.
	start := time.Now()
	res, err := e.Query(ctx, "", nil, "SELECT range, repeat('x', 100) FROM range(10000000000)")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.RowCount != 1000 {
		t.Errorf("got %d rows truncated %v", res.RowCount, res.Truncated)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("10^10-row result took %v: it was materialised", d)
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
	var qe *QueryError
	if !errors.As(err, &qe) || qe.Kind != KindTimeout {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d < time.Second || d > 2*time.Second {
		t.Errorf("returned after %v, want shortly after 1s", d)
	}
	if datachat.ErrorCode(err) != datachat.EINVALID || !strings.HasPrefix(datachat.ErrorMessage(err), "timeout: ") {
		t.Errorf("code %q message %q", datachat.ErrorCode(err), datachat.ErrorMessage(err))
	}
	t.Logf("timeout after %v: %v", d, err)
}

func TestCancel(t *testing.T) {
	e := mustEngine(t, Options{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Query(ctx, "", nil, "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the caller's context error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancel took %v", d)
	}
	// The worker is free again promptly.
	res, err := e.Query(context.Background(), "", nil, "SELECT 42")
	if err != nil || res.Rows[0][0] != int64(42) {
		t.Errorf("after cancel: %v %v", res, err)
	}
}

func TestBusy(t *testing.T) {
	e := mustEngine(t, Options{Workers: 1, QueueSize: 1, Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	slow := "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7"
	var wg sync.WaitGroup
	start := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.Query(ctx, "", nil, slow)
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	start() // runs
	waitFor("a running query", func() bool {
		e.cacheMu.Lock()
		defer e.cacheMu.Unlock()
		return len(e.running) == 1
	})
	start() // waits
	waitFor("a queued query", func() bool { return len(e.jobs) == 1 })
	t0 := time.Now()
	_, err := e.Query(context.Background(), "", nil, "SELECT 1")
	if datachat.ErrorCode(err) != datachat.EBUSY {
		t.Errorf("got %v, want EBUSY", err)
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Errorf("busy answer took %v", d)
	}
	t.Logf("%v", datachat.ErrorMessage(err))
	cancel()
	wg.Wait()
	waitFor("the queue to drain", func() bool { return len(e.jobs) == 0 })
	if _, err := e.Query(context.Background(), "", nil, "SELECT 1"); err != nil {
		t.Errorf("after the queue drained: %v", err)
	}
}

func TestWatchdog(t *testing.T) {
	// A limit below the process's own size stops any running query at once.
	e := mustEngine(t, Options{ProcessMemoryLimit: 1, Timeout: 10 * time.Second})
	start := time.Now()
	_, err := e.Query(context.Background(), "", nil, "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7")
	var qe *QueryError
	if !errors.As(err, &qe) || qe.Kind != KindMemory {
		t.Fatalf("got %v, want a memory error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
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
		{"SELEC * FROM items", KindSyntax, []string{"syntax error"}},
		{"SELECT prcie FROM items", KindUnknownColumn, []string{`"prcie"`, `Candidate bindings`, `price`}},
		{"SELECT * FROM itemz", KindUnknownTable, []string{"itemz", `items`}},
		{"SELECT name + 1 FROM items", KindTypeMismatch, []string{"name"}},
		{"SELECT CAST(name AS INTEGER) FROM items", KindTypeMismatch, []string{"n0"}},
		{"SELECT nosuchfunc(id) FROM items", KindOther, []string{"nosuchfunc"}},
		{"", KindSyntax, []string{"empty"}},
	} {
		_, err := e.Query(context.Background(), "c", tables, c.sql)
		var qe *QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%s: got %v, want a QueryError", c.sql, err)
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

func TestTablesChange(t *testing.T) {
	dir := t.TempDir()
	a := mustParquet(t, dir, "a.parquet", "SELECT 1 AS x")
	b := mustParquet(t, dir, "b.parquet", "SELECT 2 AS y")
	e := mustEngine(t, Options{})
	ctx := context.Background()
	if _, err := e.Query(ctx, "c", []Table{{"a", a}}, "SELECT * FROM a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Query(ctx, "c", []Table{{"a", a}}, "SELECT * FROM b"); err == nil {
		t.Fatal("b visible before it was added")
	}
	res, err := e.Query(ctx, "c", []Table{{"a", a}, {"b", b}}, "SELECT x + y FROM a, b")
	if err != nil || res.Rows[0][0] != int64(3) {
		t.Fatalf("after adding b: %v %v", res, err)
	}
	if _, err := e.Query(ctx, "c", []Table{{"b", b}}, "SELECT * FROM a"); err == nil {
		t.Fatal("a still visible after it was removed")
	}
	e.Evict("c")
	e.cacheMu.Lock()
	n := len(e.instances)
	e.cacheMu.Unlock()
	if n != 0 {
		t.Errorf("%d instances after Evict", n)
	}
	if _, err := e.Query(ctx, "c", []Table{{"missing", filepath.Join(dir, "nope.parquet")}}, "SELECT 1"); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("missing file: got %v, want EINVALID", err)
	}
}

// TestIdleClose runs on synctest's fake clock: time moves only once every
// goroutine of the engine waits, so when the test's sleep ends the janitor
// has run every tick before it, the instances' closes included, however
// loaded the machine is.
func TestIdleClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tmp := t.TempDir()
		e := mustEngine(t, Options{IdleTimeout: 100 * time.Millisecond, MaxInstances: 2, TempDir: tmp})
		ctx := context.Background()
		for _, c := range []string{"a", "b", "c"} {
			if _, err := e.Query(ctx, c, nil, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
		}
		e.cacheMu.Lock()
		n := len(e.instances)
		e.cacheMu.Unlock()
		if n != 2 {
			t.Errorf("%d instances, want at most MaxInstances=2", n)
		}
		time.Sleep(400 * time.Millisecond) // fake time: four idle timeouts
		synctest.Wait()
		e.cacheMu.Lock()
		n = len(e.instances)
		e.cacheMu.Unlock()
		if n != 0 {
			t.Errorf("%d instances left after the idle timeout", n)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("instance files left: %v", left)
		}
	})
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
				res, err := e.Query(context.Background(), conv, []Table{{"t", p}}, "SELECT sum(v)::BIGINT FROM t")
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
		tables = append(tables, Table{name, mustParquet(t, dir, name+".parquet", "SELECT range AS id, range::VARCHAR AS s FROM range(100000)")})
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
	r.Truncated = true
	if got := Text(r); !strings.HasPrefix(got, "name | n | tags\nab | 1 | [\"x\",\"y\"]\nNULL | 22 | NULL\n") || !strings.Contains(got, "truncated") {
		t.Errorf("text:\n%s", got)
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
