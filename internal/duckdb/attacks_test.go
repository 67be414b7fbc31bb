package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sqlworker "datachat/internal/duckdb/worker"

	"datachat/internal/duckdb/wire"

	"datachat"
)

// A second round of attacks on the sandbox, beyond adversarial_test.go and
// sandbox_test.go: positions in a statement the first round did not wrap a
// denied call in, statement and EXPLAIN forms it did not try, quoting and
// look-alike names, more allocation and planning bombs, a crash of DuckDB
// itself, and names a conversation's own tables may take.

// wrappers2 put a table-valued call (%s) where wrappers does not.
var wrappers2 = []string{
	"SELECT * FROM %s WITH ORDINALITY",
	"SELECT * FROM /* c */ %s /* d */",
	"SELECT * FROM\n%s\n-- trailing",
	"SELECT * FROM memory.main.%s",
	"SELECT * FROM temp.main.%s",
	"SELECT * FROM pg_catalog.%s",
	"SELECT (FROM %s)",
	"SELECT * FROM t WHERE label IN (FROM %s)",
	"SELECT ARRAY(SELECT 1 FROM %s)",
	"SELECT * FROM range((SELECT count(*) FROM %s))",
	"SELECT * FROM unnest((SELECT list(1) FROM %s))",
	"SELECT * FROM summary((SELECT 1 FROM %s))",
	"SELECT * FROM json_each((SELECT '[]' FROM %s))",
	"SELECT * FROM repeat_row(1, num_rows := (SELECT count(*) FROM %s))",
	"SELECT * REPLACE ((SELECT 1 FROM %s) AS label) FROM t",
	"SELECT * FROM t AT (VERSION => (SELECT 1 FROM %s))",
	"SELECT sum(id) OVER (ORDER BY id ROWS BETWEEN (SELECT 1 FROM %s) PRECEDING AND CURRENT ROW) FROM t",
	"SELECT sum(id) OVER w FROM t WINDOW w AS (ORDER BY (SELECT 1 FROM %s))",
	"SELECT DISTINCT ON ((SELECT 1 FROM %s)) * FROM t",
	"SELECT g FROM t GROUP BY CUBE(g, (SELECT 1 FROM %s))",
	"SELECT g FROM t GROUP BY GROUPING SETS ((g), ((SELECT 1 FROM %s)))",
	"SELECT * FROM t LIMIT 1 OFFSET (SELECT 1 FROM %s)",
	"WITH RECURSIVE r(n) USING KEY (n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < (SELECT 1 FROM %s)) SELECT * FROM r",
	"SELECT list_transform([1], lambda x: (SELECT 1 FROM %s))",
	"SELECT [x FOR x IN [1] IF EXISTS (SELECT 1 FROM %s)]",
	"SELECT MAP {(SELECT 1 FROM %s): 1}",
	"SELECT struct_pack(a := (SELECT 1 FROM %s))",
	"VALUES ((SELECT 1 FROM %s))",
	"FROM t SELECT (SELECT 1 FROM %s)",
	"UNPIVOT (SELECT * FROM %s) ON COLUMNS(*) INTO NAME k VALUE v",
	"PIVOT t ON g IN (0, 1) USING max((SELECT 1 FROM %s))",
	"PIVOT (FROM %s) ON x IN (0) USING count(*)",
	"SELECT * FROM t NATURAL JOIN %s",
	"SELECT * FROM t ANTI JOIN %s ON true",
	"SELECT * FROM t SEMI JOIN %s ON true",
	"SELECT * FROM t WHERE label LIKE 'x' ESCAPE (SELECT '!' FROM %s)",
	"SELECT * FROM t UNION BY NAME SELECT * FROM %s",
	"SELECT * FROM t INTERSECT ALL SELECT * FROM %s",
	"SELECT * FROM (TABLE t), LATERAL (FROM %s)",
	"SELECT * FROM t WHERE id = ANY (SELECT 1 FROM %s)",
	"SELECT * FROM t WHERE (id, g) IN (SELECT 1, 1 FROM %s)",
	"SELECT (SELECT 1 FROM %s)::VARCHAR COLLATE nocase",
	"SUMMARIZE FROM %s",
	"DESCRIBE FROM %s",
	"SELECT * FROM (SUMMARIZE FROM %s)",
	"SELECT * FROM t ORDER BY id LIMIT (SELECT count(*) FROM %s)",
	"SELECT unnest((SELECT [1] FROM %s), recursive := true)",
	"SELECT string_agg(label, ',' ORDER BY (SELECT 1 FROM %s)) FROM t",
}

// TestDeniedWrapped2: every denied table function, table macro and pragma
// stays refused in the wrappings of wrappers2, named with a quoted schema
// and odd letter case, or with a comment before its parenthesis.
func TestDeniedWrapped2(t *testing.T) {
	mustRefuseDenied(t, wrappers2, func(call, name, args string) []string {
		return []string{call, `"main"."` + strings.ToUpper(name) + `"(` + args, name + " /* c */ (" + args}
	})
}

// TestDeniedScalars2: the denied scalar functions (which show settings and
// the environment, or write to the log) in every expression position that
// TestDeniedScalars does not try.
func TestDeniedScalars2(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	calls := []string{
		"getenv('HOME')", "getenv('PATH')", `"GETENV"('HOME')`, "pg_catalog.current_setting('allowed_paths')",
		"current_setting/**/('allowed_paths')", "write_log /* c */ ('x')", "current_setting('allowed_directories')",
		"current_setting('extension_directory')", "current_setting('home_directory')", `memory.main."Current_Setting"('allowed_paths')`,
	}
	forms := []string{
		"SELECT * REPLACE (%s AS label) FROM t",
		"SELECT * FROM t AT (VERSION => length(%s))",
		"SELECT sum(id) OVER (ORDER BY id ROWS BETWEEN length(%s) PRECEDING AND CURRENT ROW) FROM t",
		"SELECT sum(id) OVER w FROM t WINDOW w AS (PARTITION BY %s)",
		"SELECT DISTINCT ON (%s) * FROM t",
		"SELECT g FROM t GROUP BY CUBE(g, %s)",
		"SELECT g FROM t GROUP BY ROLLUP(g, %s)",
		"SELECT g FROM t GROUP BY GROUPING SETS ((g), (%s))",
		"SELECT * FROM t LIMIT 1 OFFSET length(%s)",
		"WITH RECURSIVE r(n) USING KEY (n) AS (SELECT 1 UNION SELECT n + 1 FROM r WHERE n < length(%s)) SELECT * FROM r",
		"SELECT list_transform([1], lambda x: %s)",
		"SELECT [x FOR x IN [1] IF %s IS NOT NULL]",
		"SELECT MAP {%s: 1}",
		"SELECT struct_pack(a := %s)",
		"VALUES (%s)",
		"FROM t SELECT %s",
		"SELECT * FROM t, unnest([%s])",
		"SELECT * FROM json_each(%s)",
		"SELECT * FROM summary(%s)",
		"SELECT * FROM repeat_row(%s, num_rows := 1)",
		"SELECT * FROM t WHERE label SIMILAR TO %s",
		"SELECT * FROM t WHERE label LIKE 'x' ESCAPE %s",
		"SELECT * FROM t WHERE label IN (%s)",
		"SELECT * FROM t WHERE label BETWEEN %s AND 'z'",
		"SELECT if(true, %s, NULL)",
		"SELECT CASE %s WHEN 'x' THEN 1 END",
		"SELECT %s COLLATE nocase",
		"SELECT [1, 2, 3][length(%s):]",
		"PIVOT t ON g IN (0, 1) USING max(%s)",
		"UNPIVOT (SELECT %s AS a) ON a INTO NAME k VALUE v",
		"SELECT * FROM t QUALIFY %s IS NOT NULL",
		"SELECT count(*) FILTER (%s IS NOT NULL) FROM t",
		"SELECT string_agg(label, ',' ORDER BY %s) FROM t",
		"SELECT list(label ORDER BY %s) FROM t",
		"SELECT %s AS x ORDER BY ALL",
		"SELECT * FROM (SELECT %s) AS s(x) POSITIONAL JOIN t",
		"SELECT * FROM t JOIN t AS u ON %s IS NOT NULL",
		"SELECT * FROM t ASOF JOIN t AS u ON t.id >= u.id AND %s IS NOT NULL",
		"SELECT COLUMNS(* EXCLUDE (id)) FROM t WHERE %s IS NOT NULL",
		"SELECT * FROM t ORDER BY id LIMIT (SELECT length(%s))",
		"DESCRIBE SELECT %s",
		"SUMMARIZE SELECT %s",
		"SELECT * FROM (DESCRIBE SELECT %s)",
		"EXPLAIN SELECT * FROM t WHERE %s IS NULL",
		"SELECT TRY_CAST(%s AS INTEGER)",
		"SELECT %s::JSON->>'$'",
		"SELECT ARRAY[%s]",
		"SELECT ROW(%s)",
		"SELECT (1, %s)",
		"SELECT EXISTS (SELECT %s)",
		"SELECT * FROM t WHERE (label, label) = (%s, 'x')",
		"SELECT unnest([%s], recursive := true)",
		"SELECT label FROM t UNION ALL SELECT %s",
		"SELECT * FROM (VALUES (1)) v(x) WHERE x = length(%s)",
	}
	mustRefuseEach(t, e, tables, forms, calls...)
	check(t)
}

// TestExplainForms2: EXPLAIN forms TestExplainForms does not try — other
// white space before ANALYZE, options with values, every statement type
// behind EXPLAIN, denied relations — are refused by Query and EstimateRows;
// a comment that looks like options does not make the plain EXPLAIN an
// ANALYZE.
func TestExplainForms2(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	for _, sql := range []string{
		"ExPlAiN AnAlYzE SELECT 1",
		"EXPLAIN \vANALYZE SELECT 1",
		"EXPLAIN\vANALYZE SELECT 1",
		"EXPLAIN\u00a0ANALYZE SELECT 1",
		"EXPLAIN ANALYZE\nSELECT * FROM t",
		"EXPLAIN VERBOSE ANALYZE SELECT 1",
		"EXPLAIN (ANALYZE false) SELECT 1",
		"EXPLAIN (ANALYZE true, FORMAT text) SELECT 1",
		"EXPLAIN (FORMAT html) SELECT 1",
		"EXPLAIN (FORMAT yaml) SELECT 1",
		"EXPLAIN (COSTS off) SELECT 1",
		"EXPLAIN (ANALYZE) /* c */ SELECT 1",
		"EXPLAIN -- c\n(ANALYZE) SELECT 1",
		"EXPLAIN SELECT * FROM pg_catalog.pg_settings",
		"EXPLAIN SELECT * FROM system.main.duckdb_databases",
		"EXPLAIN SELECT current_setting('allowed_paths')",
		"EXPLAIN SELECT * FROM read_text('/etc/passwd')",
		"EXPLAIN FROM query('SELECT 1')",
		"EXPLAIN TABLE query",
		"EXPLAIN (SELECT 1) UNION ALL (SELECT * FROM query('SELECT 1'))",
		"EXPLAIN SUMMARIZE SELECT * FROM read_text('/etc/passwd')",
		"EXPLAIN DESCRIBE SELECT * FROM query('SELECT 1')",
		"EXPLAIN ATTACH ':memory:' AS m",
		"EXPLAIN SET threads = 1",
		"EXPLAIN RESET memory_limit",
		"EXPLAIN EXPORT DATABASE 'out'",
		"EXPLAIN CALL enable_logging()",
		"EXPLAIN PREPARE p AS SELECT 1",
		"EXPLAIN EXECUTE p",
		"EXPLAIN UPDATE t SET id = 1",
		"EXPLAIN DELETE FROM t",
		"EXPLAIN MERGE INTO t USING t AS s ON true WHEN MATCHED THEN DELETE",
		"EXPLAIN VACUUM",
		"EXPLAIN LOAD httpfs",
		"EXPLAIN INSTALL httpfs",
		"EXPLAIN CHECKPOINT",
		"EXPLAIN PIVOT t ON g USING count(*)",
		"EXPLAIN SELECT 1; EXPLAIN ANALYZE SELECT 1",
		"SELECT 1;\nEXPLAIN ANALYZE SELECT 1",
		"EXPLAIN SELECT 1 UNION ALL EXPLAIN ANALYZE SELECT 1",
	} {
		t.Run(firstLine(sql), func(t *testing.T) {
			mustRefuse(t, e, tables, sql)
			if _, err := e.EstimateRows(context.Background(), "conv", tables, sql); err == nil {
				t.Errorf("EstimateRows(%q) was estimated", sql)
			}
			check(t)
		})
	}
	// A comment holding EXPLAIN's options is only a comment: the plan is
	// the plain one, not an analysed one.
	for _, sql := range []string{"EXPLAIN -- (ANALYZE)\nSELECT count(*) FROM t", "EXPLAIN /* ANALYZE */ SELECT count(*) FROM t"} {
		res, err := e.Query(context.Background(), "conv", tables, sql)
		if err != nil {
			t.Fatalf("%q: %v", sql, err)
		}
		if len(res.Rows) == 0 || wire.CellText(res.Rows[0][0]) != "physical_plan" {
			t.Errorf("%q: got %v, want the plain physical plan", sql, res.Rows)
		}
	}
	check(t)
}

// TestStatementForms2: statements other than SELECT that TestSandbox does
// not try, each refused (or rejected by the parser) before it runs.
func TestStatementForms2(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	out := filepath.Join(t.TempDir(), "out")
	lit := datachat.QuoteLiteral
	mustRefuseAll(t, e, tables, check, []string{
		"RESET ALL",
		"SET SESSION memory_limit = '100GB'",
		"SET LOCAL threads = 64",
		"SET GLOBAL allowed_paths = ['/etc/passwd']",
		"SET allowed_directories = ['/']",
		"RESET lock_configuration",
		"PRAGMA threads = 64",
		"PRAGMA database_list",
		"PRAGMA show_tables",
		"PRAGMA json_execute_serialized_sql('{}')",
		"CALL pragma_database_list()",
		"CALL duckdb_settings()",
		"CALL query('SELECT 1')",
		"ATTACH " + lit(out+".duckdb") + " (READ_ONLY)",
		"ATTACH 'data/t.parquet' AS p",
		"DETACH memory",
		"USE system.main",
		"USE temp",
		"INSTALL httpfs FROM 'http://127.0.0.1:9/'",
		"FORCE INSTALL httpfs",
		"UPDATE EXTENSIONS",
		"LOAD 'data/t.parquet'",
		"COPY (SELECT 1) TO " + lit(out+".csv") + " (FORMAT csv)",
		"COPY t TO " + lit(out+".json") + " (FORMAT json)",
		"COPY FROM DATABASE memory TO temp",
		"EXPORT DATABASE " + lit(out) + " (FORMAT parquet)",
		"IMPORT DATABASE 'data'",
		"IMPORT DATABASE " + lit(out),
		"CREATE TEMP MACRO m() AS current_setting('allowed_paths')",
		"CREATE TEMP MACRO q() AS TABLE SELECT * FROM query('SELECT 1')",
		"CREATE TEMP TABLE x AS SELECT 1",
		"CREATE TEMP VIEW t AS SELECT 1",
		"CREATE TEMP SEQUENCE s",
		"CREATE TYPE e AS ENUM ('a')",
		"CREATE SECRET s (TYPE http)",
		"DROP SECRET s",
		"CHECKPOINT memory",
		"FORCE CHECKPOINT",
		"ANALYZE",
		"ANALYZE t",
		"VACUUM ANALYZE",
		"COMMENT ON VIEW t IS 'x'",
		"BEGIN",
		"ABORT",
		"COMMIT",
		"ROLLBACK",
		"DEALLOCATE ALL",
		"PREPARE p AS SELECT current_setting('allowed_paths')",
		"EXECUTE p",
		"RESET VARIABLE x",
		"ALTER VIEW t RENAME TO u",
		"INSERT OR REPLACE INTO t VALUES (1, 1, 'x')",
		"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x",
		"WITH x AS (SELECT 1) DELETE FROM t",
		"WITH x AS (SELECT 1) UPDATE t SET id = 1",
		"DROP MACRO IF EXISTS histogram",
		"DROP SCHEMA main CASCADE",
		"DESCRIBE read_text('/etc/passwd')",
		"SUMMARIZE read_text('/etc/passwd')",
		"SHOW read_text('/etc/passwd')",
	})
	for _, p := range []string{out, out + ".duckdb", out + ".csv", out + ".json"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// TestQuotingTricks: a second statement hidden in a string, a dollar-quoted
// string, an identifier or a comment stays text (the query answers it as a
// value) or is refused; none runs, and nothing is written.
func TestQuotingTricks(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	out := filepath.Join(t.TempDir(), "out.csv")
	copyOut := "COPY t TO " + datachat.QuoteLiteral(out)
	answers := map[string]string{
		"SELECT 'a; " + strings.ReplaceAll(copyOut, "'", "''") + "; --' AS s": "a; " + copyOut + "; --",
		"SELECT $tag$x'); " + copyOut + "; --$tag$":                           "x'); " + copyOut + "; --",
		"SELECT $$'; " + copyOut + "; --$$":                                   "'; " + copyOut + "; --",
		"SELECT 'x' -- '; " + copyOut:                                         "x",
		"SELECT 1 /*; " + copyOut + " */":                                     "1",
		";SELECT 2":                                                           "2",
		"SELECT 3;;":                                                          "3",
		"\ufeffSELECT 4":                                                      "4",
		"SELECT 5 ; /* ; " + copyOut + " */":                                  "5",
		`SELECT 6 AS "x""; ` + copyOut + `; --"`:                              "6",
		`SELECT "a;b" FROM (SELECT 7 AS "a;b")`:                               "7",
		"SELECT E'it\\'s; " + strings.ReplaceAll(copyOut, "'", "''") + "'":    "it's; " + copyOut,
	}
	for sql, want := range answers {
		res, err := e.Query(context.Background(), "conv", tables, sql)
		if err != nil {
			var qe *datachat.QueryError
			if !errors.As(err, &qe) || qe.Kind != datachat.KindRefused && qe.Kind != datachat.KindSyntax {
				t.Errorf("%q: %v, want %q or a refusal", sql, err, want)
			}
			continue
		}
		if len(res.Rows) != 1 || wire.CellText(res.Rows[0][0]) != want {
			t.Errorf("%q: got %v, want %q", sql, res.Rows, want)
		}
	}
	for _, sql := range []string{
		"SELECT 1\u2028; " + copyOut,
		"SELECT 1\u00a0; " + copyOut,
		"SELECT 1\x00; " + copyOut,
		"SELECT 1 \\; " + copyOut,
		"SELECT '\\'; " + copyOut + "; --'",
		"SELECT 1 -- \r" + copyOut,
		"SELECT 1 /* /* */ */; " + copyOut,
	} {
		mustRefuse(t, e, tables, sql)
	}
	check(t)
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was written", out)
	}
}

// TestLookalikeNames: look-alike letters, full-width forms, zero-width
// characters and Unicode escapes in a function's name never reach a denied
// function: the name is refused, or not found, and nothing is read.
func TestLookalikeNames(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second})
	for _, sql := range []string{
		`SELECT * FROM "reаd_text"('/etc/passwd')`, // Cyrillic а
		`SELECT * FROM ｒｅａｄ_ｔｅｘｔ('/etc/passwd')`,
		"SELECT * FROM \"read\u200b_text\"('/etc/passwd')",
		`SELECT * FROM U&"read_te\0078t"('/etc/passwd')`,
		`SELECT * FROM "read_text "('/etc/passwd')`,
		"SELECT * FROM \"chec\u212apoint\"()", // Kelvin sign, which Go lower-cases to k
		`SELECT gеtenv('HOME')`,               // Cyrillic е
		`SELECT ＧＥＴＥＮＶ('HOME')`,
		`SELECT "getenv "('HOME')`,
		`SELECT U&"get\0065nv"('HOME')`,
		"SELECT \"current_settıng\"('allowed_paths')", // dotless ı
		"SELECT * FROM \"QUERY\u0301\"('SELECT 1')",
	} {
		res, err := e.Query(context.Background(), "conv", tables, sql)
		if err == nil {
			t.Errorf("%s: answered %v, want an error", sql, res.Rows)
		}
		var qe *datachat.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%s: %v, want a query error", sql, err)
		}
	}
	check(t)
}

// TestResourceBombs2: more values DuckDB's memory_limit does not track
// (format widths, list repeats, splits, concatenations), amplifying
// replacements, planning bombs (a 5,000-branch UNION ALL, a 100,000-value IN
// list), recursion, and nesting past what DuckDB's parser and JSON reader
// take: each stops with a clear error within the worker's limits, while
// another user's queries keep answering.
func TestResourceBombs2(t *testing.T) {
	if raceEnabled {
		// The bombs drive workers to their memory limit, calibrated for
		// a plain build: a race-instrumented worker dies of it on the
		// next query instead. go test ./... runs this test without -race.
		t.Skip("resource bombs run without -race: a race-instrumented worker needs several times its memory limit")
	}
	e, tables, check := sandboxEngine(t, Options{Timeout: 2 * time.Second, KillGrace: time.Second, MemoryLimit: 256 << 20})
	unions := make([]string, 5000)
	for i := range unions {
		unions[i] = fmt.Sprint("SELECT ", i)
	}
	in := make([]string, 100000)
	for i := range in {
		in[i] = fmt.Sprint(i)
	}
	nested := "1"
	for range 500 {
		nested = "(SELECT " + nested + ")"
	}
	bombs := []string{
		"SELECT length(format('{:>2000000000}', 'x'))",
		"SELECT length(format('{:0>2000000000}', 1))",
		"SELECT len(repeat([1, 2, 3], 700000000))",
		"SELECT length(array_to_string(range(1000000000), ','))",
		"SELECT bit_count(repeat('1', 2000000000)::BIT)",
		"SELECT length(base64(repeat('x', 1500000000)::BLOB))",
		"SELECT length(to_json(list(repeat('x', 1000000)))) FROM range(3000)",
		"SELECT length(concat(repeat('x', 1000000000), repeat('x', 1000000000)))",
		"SELECT length(replace(repeat('x', 100000), 'x', repeat('y', 100000)))",
		"SELECT length(regexp_replace(repeat('x', 100000), 'x', repeat('y', 100000), 'g'))",
		"SELECT length(string_agg(label, repeat(',', 100000000))) FROM t",
		"SELECT length(list_aggregate(range(100000000), 'string_agg', ','))",
		"SELECT count(*) FROM range(1000000000000)",
		"SELECT length(lpad('', 2147483647, ' '))",
		"SELECT len(list_concat(range(500000000), range(500000000)))",
		"SELECT len(flatten([range(300000000), range(300000000)]))",
		"SELECT length(json_array(range(100000000))::VARCHAR)",
		"SELECT length(printf('%s', repeat('x', 2000000000)))",
		"SELECT len(str_split(repeat('x,', 500000000), ','))",
		"SELECT len(regexp_split_to_array(repeat('x,', 500000000), ','))",
		"SELECT length(md5(repeat('x', 2000000000)))",
		"SELECT length(upper(repeat('ß', 1000000000)))",
		"SELECT count(*) FROM (SELECT unnest(range(3000000000)))",
		"SELECT len(generate_series(1, 3000000000))",
		"SELECT len(range(0, 9223372036854775807, 1))",
		"SELECT len(list_zip(range(500000000), range(500000000)))",
		"SELECT len(array_value(repeat('x', 1000000000), repeat('y', 1000000000)))",
		"SELECT length(string_agg(repeat('x', 1000000), '' ORDER BY range)) FROM range(3000)",
		"SELECT count(*) FROM range(100000) a JOIN range(100000) b ON a.range::VARCHAR LIKE '%' || b.range::VARCHAR || '%'",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r, range(10) WHERE n < 100) SELECT count(*) FROM r",
		"SELECT CAST(repeat('x', 50000000) AS INTEGER)",
		"SELECT 1" + strings.Repeat("+1", 20000),
		"SELECT " + nested,
		"SELECT CAST('[1]' AS INTEGER" + strings.Repeat("[]", 2000) + ")",
		"SELECT * FROM json_tree(repeat('[', 100000) || repeat(']', 100000))",
	}
	stopOther := otherUserQueries(t, e, tables)
	alice := datachat.WithUserID(context.Background(), "alice")
	for _, q := range bombs {
		_, err := e.Query(alice, "conv", tables, q)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) || qe.Kind != datachat.KindMemory && qe.Kind != datachat.KindTimeout && qe.Kind != datachat.KindOther && qe.Kind != datachat.KindSyntax {
			t.Errorf("%.100s: got %v, want the query stopped", q, err)
			continue
		}
		if qe.Kind == datachat.KindOther && len(qe.Message) > 4096 {
			t.Errorf("%.100s: a %d-byte message", q, len(qe.Message))
		}
		t.Logf("%.80s: %.160s", q, firstLine(qe.Error()))
		check(t)
	}
	// Large but bounded: these answer (the result is cut at MaxRows) or stop,
	// depending on how fast the machine is.
	for _, q := range []string{
		"SELECT sum(len(x)) FROM (SELECT range(10000000) AS x FROM range(100))",
		strings.Join(unions, " UNION ALL "),
		"SELECT * FROM t WHERE id IN (" + strings.Join(in, ",") + ")",
		"SELECT json_transform('[1]', repeat('[', 5000) || '\"INTEGER\"' || repeat(']', 5000))",
		"SELECT from_json('{}', repeat('{\"a\":', 3000) || '\"INTEGER\"' || repeat('}', 3000))",
		"SELECT count(*) FROM repeat_row(1, num_rows := 3000000000)",
		"SELECT * FROM repeat_row(1, num_rows := 3000000000)",
		"SELECT " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000),
		"SELECT regexp_matches(repeat('a', 100000000), '(a|aa)*c')",
		"SELECT count(*) FROM " + strings.Repeat("t, ", 7) + "t",
	} {
		res, err := e.Query(alice, "conv", tables, q)
		var qe *datachat.QueryError
		switch {
		case err == nil:
			if len(res.Rows) > e.opts.MaxRows {
				t.Errorf("%.80s: %d rows", q, len(res.Rows))
			}
		case !errors.As(err, &qe):
			t.Errorf("%.80s: %v, want an answer or a query error", q, err)
		}
		check(t)
	}
	stopOther()
}

// TestDuckDBCrashContained: an input that crashes DuckDB itself (here: JSON
// nested 100,000 deep, which json_structure recurses through until its stack
// overflows) kills only the conversation's worker; the query fails with a
// clear message, the conversation's next query gets a new worker, and
// another conversation's worker is untouched.
func TestDuckDBCrashContained(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 10 * time.Second})
	ctx := context.Background()
	otherPid, pid := startWorker(t, e, tables, "other"), startWorker(t, e, tables, "conv")
	for _, q := range []string{
		"SELECT json_structure(repeat('[', 100000) || repeat(']', 100000))",
		"SELECT json_structure(repeat('{\"a\":', 100000) || '1' || repeat('}', 100000))",
	} {
		_, err := e.Query(ctx, "conv", tables, q)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) || qe.Kind == datachat.KindRefused {
			t.Fatalf("%.60s: got %v, want the query failed", q, err)
		}
		t.Logf("%.60s: %v", q, err)
		check(t)
	}
	if p := workerPid(e, "conv"); p == pid || p == 0 {
		t.Logf("note: the conversation's worker was not replaced (%d, was %d): DuckDB did not crash", p, pid)
	}
	checkWorkerKept(t, e, tables, "other", otherPid)
}

// TestNoServerPaths2: what TestNoServerPaths does not read — plans, the
// replacement scan of the table's own link (and its filename column), the
// worker's directory through /proc/self/cwd, catalog functions over the
// denied views — names no server path, in answers or errors.
func TestNoServerPaths2(t *testing.T) {
	tmp := t.TempDir()
	e, tables, check := sandboxEngine(t, Options{Timeout: 5 * time.Second, TempDir: tmp})
	dataDir := filepath.Dir(tables[0].Path)
	secrets := []string{tmp, dataDir, filepath.Dir(tmp)}
	mustNotShow(t, e, tables, []string{
		"EXPLAIN SELECT * FROM t",
		"EXPLAIN SELECT * FROM t WHERE id > 3 ORDER BY label",
		"EXPLAIN SELECT * FROM 'data/t.parquet' WHERE id > 3",
		"EXPLAIN SELECT filename FROM 'data/t.parquet'",
		"SELECT filename FROM 'data/t.parquet'",
		"SELECT * FROM '/proc/self/cwd/data/t.parquet' LIMIT 1",
		"SELECT filename FROM '/proc/self/cwd/data/t.parquet' LIMIT 1",
		"SELECT * FROM '/proc/self/cwd/nowhere.parquet'",
		"SELECT * FROM '/proc/self/cwd/data/t.parquet/x'",
		"SELECT * FROM '/proc/self/cwd/spill/x.parquet'",
		"SELECT * FROM '/proc/self/root/etc/passwd'",
		"SELECT * FROM '/proc/self/environ'",
		"SELECT * FROM '/proc/self/cmdline'",
		"SELECT * FROM '/proc/self/maps'",
		"SELECT * FROM 'data/../../x.parquet'",
		"SELECT * FROM 'data/*.parquet'",
		"SELECT * FROM 'data/t.parquet' WHERE label = 1",
		"SUMMARIZE SELECT * FROM 'data/t.parquet'",
		"SELECT * FROM pragma_table_info('pg_catalog.pg_settings')",
		"SELECT * FROM pragma_show('system.main.duckdb_databases')",
		"SELECT * FROM duckdb_schemas()",
		"SELECT * FROM pg_catalog.pg_database",
		"SELECT * FROM information_schema.character_sets",
		"SELECT * FROM sqlite_master",
		"SELECT current_query()",
		"SELECT * FROM duckdb_functions() WHERE macro_definition IS NOT NULL",
	}, secrets)
	check(t)
}

// shadowEngine starts an engine whose conversation has tables named as the
// catalog's denied views (a user uploading pg_settings.csv gets a table
// pg_settings), and t.
func shadowEngine(t *testing.T, tmp string) (*Engine, []Table, string) {
	t.Helper()
	data := t.TempDir()
	p := mustParquet(t, data, "x.parquet", "SELECT range AS id FROM range(10)")
	e := mustEngine(t, Options{Timeout: 5 * time.Second, TempDir: tmp})
	var tables []Table
	for _, n := range append([]string{"t"}, sqlworker.DeniedRelations()...) {
		tables = append(tables, Table{Name: n, Path: p})
	}
	return e, tables, data
}

// TestShadowedViewsOwnTables: a conversation's own tables named as the
// catalog's denied views answer as its tables.
func TestShadowedViewsOwnTables(t *testing.T) {
	e, tables, _ := shadowEngine(t, t.TempDir())
	for _, tb := range tables {
		res, err := e.Query(context.Background(), "conv", tables, "SELECT count(*) FROM "+datachat.QuoteIdent(tb.Name))
		if err != nil || wire.CellText(res.Rows[0][0]) != "10" {
			t.Errorf("%s: %v %v, want the table's 10 rows", tb.Name, res, err)
		}
	}
}

// TestShadowedViewsQualified: a table named as a denied view must not open
// the catalog's own view of that name, reached by its qualified name: that
// view shows the instance's settings, with the absolute paths of the
// dataset files (allowed_paths) and of the worker's directory
// (allowed_directories).
func TestShadowedViewsQualified(t *testing.T) {
	tmp := t.TempDir()
	e, tables, data := shadowEngine(t, tmp)
	secrets := []string{tmp, data}
	for _, q := range []string{
		"SELECT * FROM pg_catalog.pg_settings",
		"SELECT * FROM system.pg_catalog.pg_settings",
		"FROM pg_catalog.pg_settings",
		"SUMMARIZE pg_catalog.pg_settings",
		"SELECT * FROM (SHOW pg_catalog.pg_settings)",
		"SELECT * FROM system.main.duckdb_databases",
		"SELECT * FROM system.main.pragma_database_list",
		"SELECT * FROM system.main.duckdb_logs",
	} {
		res, err := e.Query(context.Background(), "conv", tables, q)
		var qe *datachat.QueryError
		if err == nil || !errors.As(err, &qe) || qe.Kind != datachat.KindRefused && qe.Kind != datachat.KindUnknownTable && qe.Kind != datachat.KindSyntax {
			b, _ := json.Marshal(res)
			t.Errorf("%s: got %v, want the catalog's view refused\n%.300s", q, err, b)
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					t.Errorf("%s shows a server path (%s)", q, s)
				}
			}
		}
	}
}

// TestResultBytesCapped: MaxResultMB bounds what one result holds, however
// it is shaped: one wide row of many cells at MaxCellBytes each too.
func TestResultBytesCapped(t *testing.T) {
	e, tables, _ := sandboxEngine(t, Options{Timeout: 20 * time.Second, MaxResultMB: 8})
	cols := make([]string, 40)
	for i := range cols {
		cols[i] = fmt.Sprintf("x AS c%d", i)
	}
	res, err := e.Query(context.Background(), "conv", tables, "SELECT "+strings.Join(cols, ", ")+" FROM (SELECT repeat('y', 1048576) AS x)")
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	n := 0
	for _, row := range res.Rows {
		for _, v := range row {
			n += len(wire.CellText(v))
		}
	}
	if limit := 8<<20 + e.opts.MaxCellBytes; n > limit {
		t.Errorf("the result holds %d bytes, more than MaxResultMB (8 MiB) and a cell", n)
	}
}

// TestErrorMessageCapped: an error message a query makes (error() of a long
// string; a cast that quotes its long input) is cut like a cell, not
// carried whole to the server and the model.
func TestErrorMessageCapped(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 20 * time.Second})
	for _, q := range []string{
		"SELECT error(repeat('x', 10000000))",
		"SELECT CAST(repeat('x', 5000000) AS INTEGER)",
	} {
		_, err := e.Query(context.Background(), "conv", tables, q)
		if err == nil {
			t.Fatalf("%s answered", q)
		}
		if n := len(err.Error()); n > 8<<10 {
			t.Errorf("%s: a %d-byte error message, want it cut to a few KiB", q, n)
		}
		check(t)
	}
}
