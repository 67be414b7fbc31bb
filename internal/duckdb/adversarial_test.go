package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sqlworker "datachat/internal/duckdb/worker"

	"datachat/internal/duckdb/wire"

	"datachat"
)

// sandboxEngine starts an engine over one small table, t, in a data directory
// of its own, and returns a follow-up check that the conversation still
// answers correctly.
func sandboxEngine(t *testing.T, o Options) (e *Engine, tables []Table, check func(t *testing.T)) {
	t.Helper()
	data := t.TempDir()
	p := mustParquet(t, data, "t.parquet", "SELECT range AS id, range % 3 AS g, 'row ' || range AS label FROM range(10)")
	e = mustEngine(t, o)
	tables = []Table{{Name: "t", Path: p}}
	check = func(t *testing.T) {
		t.Helper()
		res, err := e.Query(context.Background(), "conv", tables, "SELECT count(*) AS n, min(label) AS first FROM t")
		if err != nil {
			t.Fatalf("follow-up query: %v", err)
		}
		if got := wire.CellText(res.Rows[0][0]) + "/" + wire.CellText(res.Rows[0][1]); got != "10/row 0" {
			t.Fatalf("follow-up query: got %s, want 10/row 0", got)
		}
	}
	return e, tables, check
}

// mustRefuse runs sql and requires the sandbox to refuse it, or DuckDB's
// parser to reject it: not DuckDB to fail it later, which would mean it was
// bound or ran.
func mustRefuse(t *testing.T, e *Engine, tables []Table, sql string) {
	t.Helper()
	_, err := e.Query(context.Background(), "conv", tables, sql)
	var qe *datachat.QueryError
	if !errors.As(err, &qe) || qe.Kind != datachat.KindRefused && qe.Kind != datachat.KindSyntax {
		t.Errorf("%s\n  got %v, want a refusal by the sandbox (or the parser)", sql, err)
	}
}

// mustRefuseAll runs each of sqls as a subtest that requires the sandbox to
// refuse it (see [mustRefuse]) and the conversation to answer after it (check).
func mustRefuseAll(t *testing.T, e *Engine, tables []Table, check func(t *testing.T), sqls []string) {
	t.Helper()
	for _, sql := range sqls {
		t.Run(firstLine(sql), func(t *testing.T) {
			mustRefuse(t, e, tables, sql)
			check(t)
		})
	}
}

// mustRefuseEach requires the sandbox to refuse each call put in each of
// forms (at its %s; see [mustRefuse]), and returns how many it tried.
func mustRefuseEach(t *testing.T, e *Engine, tables []Table, forms []string, calls ...string) int {
	t.Helper()
	for _, c := range calls {
		for _, f := range forms {
			mustRefuse(t, e, tables, fmt.Sprintf(f, c))
		}
	}
	return len(calls) * len(forms)
}

// mustNotShow runs each query and fails t for each of secrets (server
// paths) that its answer or its error shows.
func mustNotShow(t *testing.T, e *Engine, tables []Table, queries, secrets []string) {
	t.Helper()
	for _, q := range queries {
		res, err := e.Query(context.Background(), "conv", tables, q)
		var text string
		if err != nil {
			text = err.Error()
		} else {
			b, _ := json.Marshal(res)
			text = string(b)
		}
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows a server path (%s):\n%.500s", q, s, text)
			}
		}
	}
}

// otherUserQueries has another user (bob, in a conversation of his own) ask
// over tables, again and again, until the returned function is called; it
// then fails t for each wrong answer, and if none answered.
func otherUserQueries(t *testing.T, e *Engine, tables []Table) (stop func()) {
	t.Helper()
	other := datachat.WithUserID(context.Background(), "bob")
	var wg sync.WaitGroup
	done := make(chan struct{})
	var otherErrs []error
	otherOK := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			res, err := e.Query(other, "bob-conv", tables, "SELECT sum(id) FROM t")
			if err != nil || wire.CellText(res.Rows[0][0]) != "45" {
				otherErrs = append(otherErrs, fmt.Errorf("%v %v", res, err))
				continue
			}
			otherOK++
		}
	}()
	return func() {
		t.Helper()
		close(done)
		wg.Wait()
		for _, err := range otherErrs {
			t.Errorf("another user's query failed: %v", err)
		}
		if otherOK == 0 {
			t.Error("another user's queries never answered during the bombs")
		}
		t.Logf("another user's queries answered %d times meanwhile", otherOK)
	}
}

// startWorker has conversation conv answer a query, and returns the pid of
// its worker.
func startWorker(t *testing.T, e *Engine, tables []Table, conv string) int {
	t.Helper()
	if _, err := e.Query(context.Background(), conv, tables, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	return workerPid(e, conv)
}

// checkWorkerKept checks that conversation conv still answers with the
// worker it had, pid.
func checkWorkerKept(t *testing.T, e *Engine, tables []Table, conv string, pid int) {
	t.Helper()
	if _, err := e.Query(context.Background(), conv, tables, "SELECT 1"); err != nil || workerPid(e, conv) != pid {
		t.Errorf("another conversation's worker was disturbed: %v (pid %d, was %d)", err, workerPid(e, conv), pid)
	}
}

// TestExplainForms: only a plain EXPLAIN of a SELECT runs; every option,
// ANALYZE (which runs the query) and every way of hiding a second statement
// or a denied function behind EXPLAIN's options is refused, and the instance
// keeps answering — including after the form that once aborted the process.
func TestExplainForms(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	mustRefuseAll(t, e, tables, check, []string{
		"EXPLAIN ANALYZE SELECT 1",
		"EXPLAIN ANALYSE SELECT 1",
		"explain analyze select count(*) from t",
		"EXPLAIN (ANALYZE) SELECT 1",
		"EXPLAIN (ANALYZE, FORMAT json) SELECT 1",
		"EXPLAIN (FORMAT json) SELECT 1",
		"EXPLAIN (FORMAT 'json') SELECT 1",
		"EXPLAIN (format graphviz) SELECT 1",
		"EXPLAIN VERBOSE SELECT 1",
		"EXPLAIN /* c */ ANALYZE SELECT 1",
		"EXPLAIN -- c\nANALYZE SELECT 1",
		"EXPLAIN /* c */ (ANALYZE) SELECT 1",
		"EXPLAIN\t(ANALYZE)\tSELECT 1",
		"EXPLAIN (ANALYZE ') SELECT 1 --') SELECT * FROM query('SELECT 42')",
		"EXPLAIN (ANALYZE ') SELECT 1 --') SELECT * FROM query_table('t')",
		"EXPLAIN (ANALYZE ') SELECT 1 --') SELECT * FROM json_execute_serialized_sql('{}')",
		"EXPLAIN (ANALYZE ') SELECT 1 --') SELECT * FROM enable_logging(storage='file', storage_path='/tmp/x')",
		"EXPLAIN (ANALYZE \") SELECT 1 --\") SELECT * FROM query('SELECT 42')",
		"EXPLAIN (ANALYZE $$) SELECT 1 --$$) SELECT * FROM query('SELECT 42')",
		"EXPLAIN (ANALYZE /* ) SELECT 1 */) SELECT * FROM query('SELECT 42')",
		"EXPLAIN SELECT * FROM query('SELECT 42')",
		"EXPLAIN SELECT * FROM enable_logging(storage='file', storage_path='/tmp/x')",
		"EXPLAIN SELECT write_log('x')",
		"EXPLAIN EXPLAIN SELECT 1",
		"EXPLAIN COPY t TO '/tmp/x.csv'",
		"EXPLAIN CREATE TABLE x AS SELECT 1",
		"EXPLAIN INSERT INTO t VALUES (1, 1, 'x')",
		"EXPLAIN PRAGMA enable_profiling",
		"EXPLAIN SELECT 1; SELECT 2",
		"EXPLAIN SELECT 1; CALL enable_logging()",
		"-- comment\nEXPLAIN SELECT 1",
		"/* c */ EXPLAIN ANALYZE SELECT 1",
		"EXPLAIN/**/SELECT 1",
		"EXPLAIN (SELECT 1)",
		"EXPLAIN ( SELECT * FROM query('SELECT 42') )",
		"EXPLAIN WITH x AS (SELECT * FROM query('SELECT 42')) SELECT * FROM x",
	})
	// Plain EXPLAIN answers with a plan.
	res, err := e.Query(context.Background(), "conv", tables, "EXPLAIN SELECT g, count(*) FROM t GROUP BY g")
	if err != nil || len(res.Rows) == 0 {
		t.Fatalf("plain EXPLAIN: %v %v", res, err)
	}
	// The confirmation gate's own EXPLAIN (FORMAT json) is not the user's.
	if n, err := e.EstimateRows(context.Background(), "conv", tables, "SELECT * FROM t"); err != nil || n != 10 {
		t.Errorf("EstimateRows: %d, %v", n, err)
	}
	for _, sql := range []string{"EXPLAIN SELECT 1", "SELECT * FROM query('SELECT 1')", "SELECT 1; SELECT 2", "CREATE TABLE x (a INT)"} {
		if _, err := e.EstimateRows(context.Background(), "conv", tables, sql); err == nil {
			t.Errorf("EstimateRows(%q) was estimated", sql)
		}
	}
	if _, err := os.Stat("/tmp/x"); err == nil {
		t.Log("note: /tmp/x exists on this machine (not written by this test?)")
	}
}

// deniedCalls are calls of table functions, table macros and pragmas that
// must never run, with arguments that would make each do its harm.
var deniedCalls = []string{
	"query('SELECT 42')",
	"query_table('t')",
	"query_table(['t', 't'])",
	"json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
	"enable_logging()",
	"enable_logging(storage='file', storage_path='/tmp/datachat-log')",
	"disable_logging()",
	"truncate_duckdb_logs()",
	"enable_profiling()",
	"disable_profiling()",
	"enable_peg_parser()",
	"checkpoint()",
	"force_checkpoint()",
	"arrow_scan(0, 0, 0)",
	"arrow_scan_dumb(0, 0, 0)",
	"read_csv('/etc/passwd')",
	"read_text('/etc/passwd')",
	"read_blob('/etc/passwd')",
	"read_parquet('data/t.parquet')",
	"parquet_scan('data/t.parquet')",
	"parquet_metadata('data/t.parquet')",
	"read_json('/etc/passwd')",
	"read_duckdb('catalog.duckdb')",
	"sniff_csv('/etc/passwd')",
	"glob('*')",
	"duckdb_settings()",
	"duckdb_databases()",
	"duckdb_temporary_files()",
	"duckdb_external_file_cache()",
	"duckdb_extensions()",
	"duckdb_secrets()",
	"which_secret('s3://x', 's3')",
	"duckdb_memory()",
	"duckdb_logs()",
	"duckdb_logs_parsed('QueryLog')",
	"duckdb_log_contexts()",
	"duckdb_prepared_statements()",
	"pragma_database_size()",
	"pragma_metadata_info()",
	"pragma_storage_info('t')",
	"histogram(t, g)",
	"histogram_values(t, g)",
	"duckdb_profiling_settings()",
	"seq_scan('t')",
	"check_peg_parser('SELECT 1')",
	"sql_auto_complete('SEL')",
}

// wrappers put a table-valued call in every position SQL allows.
var wrappers = []string{
	"SELECT * FROM %s",
	"FROM %s",
	"FROM %s SELECT 1",
	"SELECT * FROM main.%s",
	"SELECT * FROM system.main.%s",
	"WITH x AS (SELECT * FROM %s) SELECT * FROM x",
	"WITH x AS MATERIALIZED (SELECT * FROM %s) SELECT 1",
	"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT 1 FROM %s, r WHERE false) SELECT * FROM r",
	"SELECT (SELECT count(*) FROM %s)",
	"SELECT * FROM t WHERE EXISTS (SELECT 1 FROM %s)",
	"SELECT * FROM t WHERE id IN (SELECT 1 FROM %s)",
	"SELECT * FROM t, LATERAL (SELECT * FROM %s)",
	"SELECT * FROM t, %s",
	"SELECT * FROM t JOIN %s ON true",
	"SELECT * FROM t POSITIONAL JOIN %s",
	"SELECT * FROM t ASOF JOIN %s ON true",
	"SELECT 1 UNION ALL SELECT 1 FROM %s",
	"SELECT 1 EXCEPT SELECT 1 FROM %s",
	"(SELECT 1) UNION (SELECT 1 FROM %s)",
	"SELECT * FROM (SELECT * FROM (SELECT * FROM %s))",
	"EXPLAIN SELECT * FROM %s",
	"SUMMARIZE SELECT * FROM %s",
	"DESCRIBE SELECT * FROM %s",
	"SELECT * FROM (DESCRIBE SELECT * FROM %s)",
	"PIVOT (SELECT * FROM %s) ON 1 IN (1) USING count(*)",
	"SELECT * FROM t WHERE g = (SELECT max(1) FROM %s) ORDER BY (SELECT 1 FROM %[1]s)",
	"SELECT list(x) FROM (SELECT 1 AS x FROM %s)",
	"SELECT * FROM t QUALIFY row_number() OVER () = (SELECT 1 FROM %s)",
	"SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM %s)) FROM t",
	"SELECT CASE WHEN true THEN (SELECT 1 FROM %s) END",
	"SELECT * FROM t AS a(x) JOIN (SELECT 1 FROM %s) AS b ON true",
}

// TestDeniedWrapped: every denied table function, table macro and pragma is
// refused in every wrapping, in any letter case and quoted — before DuckDB
// binds it.
func TestDeniedWrapped(t *testing.T) {
	mustRefuseDenied(t, wrappers, func(call, name, args string) []string {
		return []string{call, strings.ToUpper(name) + "(" + args, `"` + name + `"(` + args}
	})
}

// mustRefuseDenied checks, on a new sandboxEngine, that each of deniedCalls
// is refused in every form, in each spelling that spell gives of it (from
// the call and its name and arguments, cut at the first parenthesis).
func mustRefuseDenied(t *testing.T, forms []string, spell func(call, name, args string) []string) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	n := 0
	for _, call := range deniedCalls {
		name, args, _ := strings.Cut(call, "(")
		n += mustRefuseEach(t, e, tables, forms, spell(call, name, args)...)
	}
	t.Logf("%d wrapped calls refused", n)
	check(t)
}

// TestDeniedScalars: functions refused wherever an expression may stand.
func TestDeniedScalars(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	calls := []string{
		"write_log('x')", "write_log('x', level := 'error')", "current_setting('allowed_paths')",
		"current_setting('temp_directory')", "getenv('HOME')", "CURRENT_SETTING('allowed_paths')",
		`"current_setting"('allowed_paths')`, "main.current_setting('allowed_paths')", "system.main.current_setting('allowed_paths')",
		"'allowed_paths'.current_setting()", "('x').write_log()",
	}
	forms := []string{
		"SELECT %s",
		"SELECT * FROM t WHERE %s IS NOT NULL",
		"SELECT * FROM t ORDER BY %s",
		"SELECT g FROM t GROUP BY g HAVING max(%s) IS NOT NULL",
		"SELECT list_transform([1], x -> %s)",
		"SELECT list_reduce([1, 2], (a, b) -> %s)",
		"SELECT [%s FOR x IN [1]]",
		"SELECT CASE WHEN g = 0 THEN %s END FROM t",
		"SELECT first(%s) OVER (PARTITION BY g) FROM t",
		"SELECT {'a': %s}",
		"SELECT COLUMNS(c -> %s IS NOT NULL) FROM t",
		"WITH x AS (SELECT %s) SELECT * FROM x",
		"SELECT * FROM range(3) WHERE range < length(%s)",
		"SELECT * FROM generate_series(1, length(%s))",
		"EXPLAIN SELECT %s",
		"SELECT (SELECT %s)",
		"SELECT coalesce(NULL, %s)",
		"SELECT %s::VARCHAR",
		"SELECT try(%s)",
		"SELECT * FROM t LIMIT length(%s)",
	}
	mustRefuseEach(t, e, tables, forms, calls...)
	check(t)
}

// TestNoServerPaths: nothing a query can read — the catalog's own views, the
// allowed table functions, SHOW forms, errors — shows where the server keeps
// its files.
func TestNoServerPaths(t *testing.T) {
	tmp := t.TempDir()
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second, TempDir: tmp})
	dataDir := filepath.Dir(tables[0].Path)
	secrets := []string{tmp, dataDir, t.Name(), filepath.Dir(tmp)}
	ctx := context.Background()
	queries := []string{
		"SHOW TABLES", "SHOW ALL TABLES", "SHOW DATABASES", "SHOW SCHEMAS", "SHOW VARIABLES", "DESCRIBE t",
		"SUMMARIZE t", "SHOW t", "SELECT * FROM information_schema.schemata", "SELECT * FROM information_schema.tables",
		"SELECT current_database()", "SELECT current_schema()", "SELECT * FROM t LIMIT 1",
		"SELECT * FROM 'data/../nowhere.parquet'", "SELECT * FROM 'nowhere.csv'", "SELECT * FROM missing_table",
		"SELECT * FROM t WHERE label = 1", "SELECT * FROM read_parquet('x')", "SELECT * FROM " + datachat.QuoteLiteral(tables[0].Path+".missing"),
		"SELECT * FROM duckdb_views()", "SELECT sql FROM duckdb_views() WHERE NOT internal", "SELECT * FROM duckdb_tables()",
		"SELECT * FROM pragma_table_info('t')", "SELECT * FROM pragma_show('t')",
		"SELECT * FROM duckdb_functions() WHERE function_name = 'read_parquet'",
	}
	// Every view the catalog has of itself, and every allowed table function
	// that needs no argument.
	res, err := e.Query(ctx, "conv", tables, "SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE internal")
	if err != nil || len(res.Rows) < 20 {
		t.Fatalf("listing the catalog's views: %v %v", res, err)
	}
	for _, row := range res.Rows {
		queries = append(queries, "SELECT * FROM "+row[0].(string))
	}
	for _, f := range sqlworker.AllowedTableFunctions() {
		queries = append(queries, "SELECT * FROM "+f+"()")
	}
	mustNotShow(t, e, tables, queries, secrets)
	check(t)
}

// TestResourceBombs: allocations DuckDB's memory_limit does not track (one
// huge string or list built by an expression) stop at the worker's OS limit
// with a clear message, while another user's queries keep answering.
func TestResourceBombs(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second, MemoryLimit: 256 << 20})
	bombs := []string{
		"SELECT length(repeat('x', 2000000000))",
		"SELECT length(repeat('xyz', 700000000))",
		"SELECT length(lpad('x', 2000000000, 'y'))",
		"SELECT length(rpad('x', 2000000000, 'y'))",
		"SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(3000)",
		"SELECT length(list_aggr(list(repeat('x', 100000)), 'string_agg', '')) FROM range(30000)",
		"SELECT len(range(2000000000))",
		"SELECT len(list(range)) FROM range(1000000000)",
		"SELECT len(array_agg(repeat('x', 1000))) FROM range(3000000)",
		"SELECT length(repeat(repeat('x', 50000), 50000))",
		"SELECT len(list_resize([1], 2000000000))",
		"SELECT length(concat_ws(',', repeat('x', 900000000), repeat('y', 900000000)))",
		"SELECT length(printf('%2000000000d', 1))",
		"SELECT length(repeat('x', 2000000000)) FROM t",
	}
	stopOther := otherUserQueries(t, e, tables)
	alice := datachat.WithUserID(context.Background(), "alice")
	for _, q := range bombs {
		_, err := e.Query(alice, "conv", tables, q)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) || (qe.Kind != datachat.KindMemory && qe.Kind != datachat.KindTimeout && qe.Kind != datachat.KindOther) {
			t.Errorf("%s: got %v, want the query stopped", q, err)
			continue
		}
		t.Logf("%s: %s", q, firstLine(qe.Error()))
		check(t)
	}
	stopOther()
}

// workerPid returns the pid of a conversation's worker.
func workerPid(e *Engine, conv string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := e.workers[conv]; w != nil && w.p != nil {
		return w.p.pid()
	}
	return 0
}

// TestWorkerKilled: a worker killed mid-query (as the OOM killer would) fails
// only its query; the conversation's next query gets a new worker, and
// another user's conversation is untouched.
func TestWorkerKilled(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: time.Minute})
	ctx := context.Background()
	otherPid := startWorker(t, e, tables, "other")
	done := make(chan error, 1)
	go func() {
		_, err := e.Query(ctx, "conv", tables, "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7")
		done <- err
	}()
	waitFor(t, e, "the slow query to run", func() bool { _, r := e.Load(); return r == 1 && workerPid(e, "conv") != 0 })
	pid := workerPid(e, "conv")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var qe *datachat.QueryError
	if !errors.As(err, &qe) || qe.Kind != datachat.KindMemory {
		t.Fatalf("got %v, want the query failed as killed", err)
	}
	t.Logf("%v", err)
	check(t)
	if p := workerPid(e, "conv"); p == pid || p == 0 {
		t.Errorf("the conversation's worker was not replaced (%d, was %d)", p, pid)
	}
	checkWorkerKept(t, e, tables, "other", otherPid)
}

// TestHardTimeout: a worker that stops answering (here: stopped with
// SIGSTOP, as a query stuck where DuckDB does not look for interrupts) is
// killed past Timeout + KillGrace; the query fails as timed out, and other
// users' queries keep answering meanwhile.
func TestHardTimeout(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 2 * time.Second, KillGrace: time.Second})
	alice := datachat.WithUserID(context.Background(), "alice")
	bob := datachat.WithUserID(context.Background(), "bob")
	if _, err := e.Query(alice, "conv", tables, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	pid := workerPid(e, "conv")
	done := make(chan error, 1)
	go func() {
		_, err := e.Query(alice, "conv", tables, "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7")
		done <- err
	}()
	waitFor(t, e, "the query to run", func() bool { _, r := e.Load(); return r == 1 })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	answered := 0
	for {
		select {
		case err := <-done:
			var qe *datachat.QueryError
			if !errors.As(err, &qe) || qe.Kind != datachat.KindTimeout {
				t.Fatalf("got %v, want a timeout", err)
			}
			t.Logf("%v; another user's queries answered %d times meanwhile", err, answered)
			if answered == 0 {
				t.Error("another user's queries did not answer while the worker hung")
			}
			check(t)
			return
		default:
		}
		if _, err := e.Query(bob, "bob", tables, "SELECT count(*) FROM t"); err != nil {
			t.Fatalf("another user's query: %v", err)
		}
		answered++
	}
}
