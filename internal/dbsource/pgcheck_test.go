package dbsource

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"datachat"
)

// testAllow is the allow list of the checker's tests: tables t, t2… of
// public and s.allowed.
var testAllow = newAllowList([]string{"public.t*", "s.allowed"}, "public")

// TestPgCheckAccepts: queries of every shape pass the parse-tree check, run
// as the deparsed text, with the names to resolve.
func TestPgCheckAccepts(t *testing.T) {
	for _, c := range []struct {
		sql, want string
		rels      []pgRel
		funcs     []string
		ops       []string
	}{
		{sql: "SELECT count(*) AS n, round(avg(x)::numeric, 2) FROM t WHERE y = 'Gentoo';",
			want: "SELECT count(*) AS n, round(avg(x)::numeric, 2) FROM t WHERE y = 'Gentoo'",
			rels: []pgRel{{"", "t"}}, funcs: []string{"count", "round", "avg"}, ops: []string{"="}},
		{sql: "TABLE t", want: "SELECT * FROM t", rels: []pgRel{{"", "t"}}},
		{sql: "VALUES (1, 'a'), (2, 'b')", want: "VALUES (1, 'a'), (2, 'b')"},
		{sql: "SELECT * FROM s.allowed a JOIN t2 USING (id)", rels: []pgRel{{"s", "allowed"}, {"", "t2"}}, ops: []string{"="}},
		{sql: "SELECT x FROM t WHERE a LIKE 'x%' ESCAPE '!' AND b BETWEEN 1 AND 2 AND c IN (1, 2) AND d NOT IN (SELECT 1)",
			funcs: []string{"like_escape"}, ops: []string{"~~", "<=", ">=", "="}, rels: []pgRel{{"", "t"}}},
		{sql: "SELECT EXTRACT(year FROM now()), now() AT TIME ZONE 'UTC', TRIM(BOTH 'x' FROM 'xax'), SUBSTRING('abc' FROM 2), CURRENT_DATE",
			funcs: []string{"extract", "now", "timezone", "btrim", "substring"}},
		{sql: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r", ops: []string{"+", "<"}},
		{sql: "SELECT * FROM t TABLESAMPLE BERNOULLI (10) REPEATABLE (1)", rels: []pgRel{{"", "t"}}, funcs: []string{"bernoulli"}},
		{sql: "SELECT jsonb_path_query('{\"a\":[1,2]}', '$.a[*] ? (@ > 1)'), '{\"a\":1}'::jsonb -> 'a'",
			funcs: []string{"jsonb_path_query"}, ops: []string{"->"}},
		{sql: "SELECT p.x, (p).y FROM t p", rels: []pgRel{{"", "t"}}},
		{sql: "SELECT 1 OPERATOR(pg_catalog.+) 2, pg_catalog.upper('a')", funcs: []string{"upper"}, ops: []string{"+"}},
		{sql: "SELECT CASE x WHEN 1 THEN 'a' END, x IS DISTINCT FROM 2, NULLIF(x, 3) FROM t", rels: []pgRel{{"", "t"}}, ops: []string{"="}},
		{sql: "SELECT * FROM t ORDER BY x USING <", rels: []pgRel{{"", "t"}}, ops: []string{"<"}},
		{sql: "SELECT * FROM generate_series(1, 3) g, LATERAL ROWS FROM (unnest(ARRAY[1]), generate_series(1, 2)) WITH ORDINALITY AS r(a, b, o)",
			funcs: []string{"generate_series", "unnest"}},
		{sql: "SELECT * FROM jsonb_to_record('{\"a\":1}') AS r(a int, b text COLLATE \"C\")", funcs: []string{"jsonb_to_record"}},
		{sql: "SELECT 'it''s', E'a\\nb', $$dollar$$, 1_000, interval '1 day', '1'::int, 'y'::varchar(3), ARRAY[1, 2]::int[], ROW(1, 2)",
			want: "SELECT 'it''s', 'a\nb', 'dollar', 1000, '1 day'::interval, '1'::int, 'y'::varchar(3), ARRAY[1, 2]::int[], ROW(1, 2)"},
		// CTE scope: a CTE is visible in the query that defines it and what
		// it nests, after its definition unless RECURSIVE; elsewhere the
		// name is a table.
		{sql: "WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a", rels: []pgRel{{"", "b"}}},
		{sql: "WITH RECURSIVE a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a"},
		{sql: "WITH hidden AS (SELECT * FROM hidden) SELECT * FROM hidden", rels: []pgRel{{"", "hidden"}}},
		{sql: "SELECT * FROM (WITH c AS (SELECT 1) SELECT * FROM c) x, c", rels: []pgRel{{"", "c"}}},
		{sql: "(WITH c AS (SELECT 1) SELECT * FROM c) UNION SELECT * FROM c", rels: []pgRel{{"", "c"}}},
		{sql: "WITH c AS (SELECT 1) SELECT * FROM c UNION SELECT * FROM (SELECT * FROM c) x WHERE EXISTS (SELECT FROM c)"},
		{sql: "WITH c AS (SELECT 1) SELECT * FROM public.c", rels: []pgRel{{"public", "c"}}},
		{sql: "WITH t AS (SELECT 1 AS x) SELECT (WITH t2 AS (SELECT 2) SELECT * FROM t2), * FROM t"},
	} {
		t.Run(c.sql, func(t *testing.T) {
			got, err := pgCheck(c.sql, testAllow, "public")
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if c.want != "" && got.SQL != c.want {
				t.Errorf("deparsed: got %q, want %q", got.SQL, c.want)
			}
			if !slices.Equal(got.Relations, c.rels) {
				t.Errorf("relations: got %v, want %v", got.Relations, c.rels)
			}
			if c.funcs != nil && !slices.Equal(got.Functions, c.funcs) {
				t.Errorf("functions: got %v, want %v", got.Functions, c.funcs)
			}
			if c.ops != nil && !slices.Equal(got.Operators, c.ops) {
				t.Errorf("operators: got %v, want %v", got.Operators, c.ops)
			}
			checkInvariant(t, got)
		})
	}
}

// TestPgCheckRefuses: each statement is refused before it reaches the
// database, with a message saying why.
func TestPgCheckRefuses(t *testing.T) {
	const sleep = "pg_sleep"
	for _, c := range []struct{ sql, want string }{
		{"", "empty"},
		{"SELECT 1; SELECT 2", "one statement"},
		{"SELECT 1 /* ; */ ; DELETE FROM t", "one statement"},
		{"DELETE FROM t", "writes"},
		{"INSERT INTO t VALUES (1)", "writes"},
		{"MERGE INTO t USING t2 ON true WHEN MATCHED THEN DELETE", "writes"},
		{"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", "writes"},
		{"WITH d AS (UPDATE t SET x = 1 RETURNING *) SELECT * FROM d", "writes"},
		{"SELECT * INTO x FROM t", "INTO"},
		{"CREATE TABLE x AS SELECT 1", "only a query"},
		{"EXPLAIN ANALYZE SELECT 1", "only a query"},
		{"COPY t TO PROGRAM 'id'", "only a query"},
		{"SET ROLE postgres", "only a query"},
		{"DO $$ BEGIN END $$", "only a query"},
		{"CALL p()", "only a query"},
		{"SELECT * FROM t FOR UPDATE", "locking"},
		{"SELECT * FROM (SELECT * FROM t FOR SHARE) x", "locking"},
		{"WITH c AS (SELECT * FROM t FOR KEY SHARE) SELECT * FROM c", "locking"},
		{"SELECT $1", "parameters"},
		{"SELECT * FROM t WHERE x = $1", "parameters"},
		{"SELECT xmlelement(name a)", "XML"},
		{"SELECT * FROM XMLTABLE('/a' PASSING '<a/>' COLUMNS x int PATH '.')", "XML"},
		{"SELECT x IS DOCUMENT FROM t", "XML"},
		{"SELECT JSON_OBJECT('a': 1)", "SQL/JSON"},
		{"SELECT * FROM JSON_TABLE('[]'::jsonb, '$[*]' COLUMNS (a int PATH '$'))", "SQL/JSON"},
		{"SELECT x IS JSON FROM t", "SQL/JSON"},
		{"SELECT JSON_VALUE('{}'::jsonb, '$.a')", "SQL/JSON"},
		{"SELECT * FROM pg_class", "catalog"},
		{"SELECT * FROM pg_catalog.pg_authid", "catalog"},
		{"SELECT * FROM information_schema.tables", "catalog"},
		{"SELECT * FROM pg_toast.pg_toast_1", "catalog"},
		{"SELECT * FROM pg_temp.x", "catalog"},
		{"SELECT * FROM db.s.allowed", "names a database"},
		{"SELECT public.evil()", "public.evil"},
		{"SELECT x::mood FROM t", "type mood"},
		{"SELECT CAST(x AS public.dom) FROM t", "type public.dom"},
		{"SELECT 'secret.creds'::regclass", "type regclass"},
		{"SELECT NULL::pg_authid", "type pg_authid"},
		{"SELECT ARRAY[]::mood[]", "type mood"},
		{"SELECT * FROM jsonb_to_record('{}') AS r(a mood)", "type mood"},
		{"SELECT 1 OPERATOR(public.+) 2", "operator public.+"},
		{"SELECT * FROM t ORDER BY x USING OPERATOR(public.<)", "operator public.<"},
		{"SELECT * FROM t TABLESAMPLE system_rows (10)", "TABLESAMPLE system_rows"},
		{"SELECT query_to_xml('select * from secret.creds', true, true, '')", "runs SQL"},
		{"SELECT * FROM ts_stat('select 1')", "runs SQL"},
		{"SELECT DEFAULT", "DEFAULT"},
		{"VALUES (DEFAULT)", "DEFAULT"},
		{"SELECT 1\x00; DROP TABLE t", "NUL"},
		{"SELECT '\xff'", "UTF-8"},
		{strings.Repeat(" ", pgMaxStatement) + "SELECT 1", "at most"},
		{strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000), "tokens"},
		{"SELECT " + strings.Repeat("1+", 1200) + "1", "nests too deeply"},
		// A call hidden in every place a value can be.
		{"SELECT * FROM (VALUES (pg_sleep(1)::text), ('x')) v", sleep},
		{"VALUES (1), (pg_sleep(1))", sleep},
		{"SELECT pg_sleep(1)::text::int", sleep},
		{"SELECT * FROM t WHERE pg_sleep(1) IS NULL", sleep},
		{"SELECT * FROM t ORDER BY pg_sleep(1)", sleep},
		{"SELECT count(*) FROM t GROUP BY pg_sleep(1)", sleep},
		{"SELECT count(*) FROM t HAVING pg_sleep(1) IS NULL", sleep},
		{"SELECT * FROM t LIMIT (SELECT pg_sleep(1))::int", sleep},
		{"SELECT * FROM t OFFSET length(pg_sleep(1)::text)", sleep},
		{"SELECT * FROM t FETCH FIRST (length(pg_sleep(1)::text)) ROWS ONLY", sleep},
		{"SELECT DISTINCT ON (pg_sleep(1)) x FROM t", sleep},
		{"SELECT rank() OVER (ORDER BY pg_sleep(1)) FROM t", sleep},
		{"SELECT sum(x) OVER (ROWS BETWEEN (pg_sleep(1) IS NULL)::int PRECEDING AND CURRENT ROW) FROM t", sleep},
		{"SELECT count(*) FILTER (WHERE pg_sleep(1) IS NULL) FROM t", sleep},
		{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY pg_sleep(1)::text::float8) FROM t", sleep},
		{"SELECT string_agg(x, ',' ORDER BY pg_sleep(1)) FROM t", sleep},
		{"SELECT CASE WHEN true THEN pg_sleep(1) END", sleep},
		{"SELECT CASE pg_sleep(1) WHEN NULL THEN 1 END", sleep},
		{"SELECT COALESCE(NULL, pg_sleep(1))", sleep},
		{"SELECT GREATEST(1, length(pg_sleep(1)::text))", sleep},
		{"SELECT NULLIF(pg_sleep(1), NULL)", sleep},
		{"SELECT ARRAY[pg_sleep(1)]", sleep},
		{"SELECT ROW(1, pg_sleep(1))", sleep},
		{"SELECT (ROW(1, pg_sleep(1))).f2", sleep},
		{"SELECT ARRAY(SELECT pg_sleep(1))", sleep},
		{"SELECT EXISTS (SELECT pg_sleep(1))", sleep},
		{"SELECT 1 = ANY (SELECT length(pg_sleep(1)::text))", sleep},
		{"SELECT (SELECT pg_sleep(1))", sleep},
		{"SELECT * FROM t, LATERAL (SELECT pg_sleep(1)) s", sleep},
		{"SELECT * FROM ROWS FROM (generate_series(1, 2), pg_sleep(1)) r", sleep},
		{"SELECT * FROM pg_sleep(1)", sleep},
		{"SELECT * FROM t JOIN t2 ON pg_sleep(1) IS NULL", sleep},
		{"WITH c AS (SELECT pg_sleep(1)) SELECT * FROM c", sleep},
		{"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n FROM c WHERE pg_sleep(1) IS NULL) SELECT * FROM c", sleep},
		{"SELECT 1 UNION SELECT length(pg_sleep(1)::text)", sleep},
		{"SELECT * FROM t TABLESAMPLE BERNOULLI (length(pg_sleep(1)::text))", sleep},
		{"SELECT * FROM t TABLESAMPLE BERNOULLI (1) REPEATABLE (length(pg_sleep(1)::text))", sleep},
		{"SELECT 'x' COLLATE \"C\" || pg_sleep(1)::text", sleep},
		{"SELECT x::numeric(length(pg_sleep(1)::text)) FROM t", sleep},
		{"SELECT (ARRAY[1])[length(pg_sleep(1)::text)]", sleep},
		{"SELECT x BETWEEN pg_sleep(1) AND 2 FROM t", sleep},
		{"SELECT x IN (1, length(pg_sleep(1)::text)) FROM t", sleep},
		{"SELECT x LIKE pg_sleep(1)::text ESCAPE '!' FROM t", sleep},
		{"SELECT pg_sleep(1) IS NOT TRUE", sleep},
		{"SELECT GROUPING(x) FROM t GROUP BY ROLLUP (x, length(pg_sleep(1)::text))", sleep},
		{"SELECT jsonb_build_object('a', pg_sleep(1))", sleep},
		{"SELECT format('%s', pg_sleep(1))", sleep},
		{"SELECT upper(VARIADIC ARRAY[pg_sleep(1)::text])", sleep},
		{"SELECT jsonb_path_query('{}', '$', jsonb_build_object('a', pg_sleep(1)))", sleep},
		{"SELECT pg_catalog.pg_sleep(1)", sleep},
		{"SELECT \"pg_sleep\"(1)", sleep},
		{"WITH RECURSIVE c AS (SELECT 1 AS n) CYCLE n SET is_cycle TO true DEFAULT false USING path SELECT pg_sleep(1) FROM c", sleep},
		// Relations outside the allowed tables are for the catalog to
		// resolve (TestPostgresAdversarial); functions are refused here.
		{"SELECT pg_advisory_lock(1)", "advisory"},
		{"SELECT pg_terminate_backend(1)", "signals"},
		{"SELECT pg_read_file('/etc/passwd')", "files"},
		{"SELECT lo_get(1)", "large objects"},
		{"SELECT set_config('a.b', 'c', false)", "settings"},
		{"SELECT current_setting('data_directory')", "settings"},
		{"SELECT nextval('s')", "sequence"},
		{"SELECT pg_notify('a', 'b')", "notifications"},
		{"SELECT txid_current()", "transaction"},
		{"SELECT * FROM dblink('', 'select 1') AS t(a int)", "other servers"},
		{"SELECT has_table_privilege('t', 'SELECT')", "catalog"},
		{"SELECT pg_get_viewdef('t'::text)", "catalog"},
		{"SELECT setseed(0.5)", "settings"},
		{"SELECT system_user", "system_user"},
		{"SELECT version()", "not one of the built-in functions"},
		{"SELECT pg_stat_get_activity(1)", "statistics"},
		{"SELECT pg_create_logical_replication_slot('a', 'b')", "replication"},
	} {
		name := c.sql
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			got, err := pgCheck(c.sql, testAllow, "public")
			if err == nil {
				t.Fatalf("accepted as %q", got.SQL)
			}
			var qe *datachat.QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("got %v (%T), want a *datachat.QueryError", err, err)
			}
			if !strings.Contains(qe.Message, c.want) {
				t.Errorf("message %q does not say %q", qe.Message, c.want)
			}
		})
	}
}

// TestPgDecide: the catalog's facts refuse what the tree alone could not.
func TestPgDecide(t *testing.T) {
	c, err := pgCheck("SELECT upper(x), p.f FROM t p, s.allowed WHERE x = 'a'", testAllow, "public")
	if err != nil {
		t.Fatal(err)
	}
	base := func() *pgFacts {
		return &pgFacts{
			Relations: []pgRelFact{{Schema: "public", Name: "t"}, {Schema: "s", Name: "allowed"}},
			Functions: map[string]string{}, Fields: map[string]string{}, Operators: map[string]string{},
			Builtin: map[string]bool{"=": true},
		}
	}
	if err := pgDecide(c, base(), testAllow, nil); err != nil {
		t.Fatalf("allowed: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(f *pgFacts)
		want string
	}{
		{"unknown table", func(f *pgFacts) { f.Relations[0] = pgRelFact{} }, `relation "t" does not exist`},
		{"resolved to the catalog", func(f *pgFacts) { f.Relations[0] = pgRelFact{Schema: "pg_catalog", Name: "t"} }, "catalog"},
		{"shadowing function", func(f *pgFacts) { f.Functions["upper"] = "public" }, "schema public"},
		{"field-style call", func(f *pgFacts) { f.Fields["f"] = "public" }, "public.f"},
		{"shadowing operator", func(f *pgFacts) { f.Operators["="] = "public" }, "operator ="},
		{"unknown operator", func(f *pgFacts) { delete(f.Builtin, "=") }, "not one of PostgreSQL's built-in operators"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			tc.edit(f)
			err := pgDecide(c, f, testAllow, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
	// A partition of an allowed table reads as the table; of another, not.
	c, err = pgCheck("SELECT * FROM part_2024", newAllowList([]string{"public.events"}, "public"), "public")
	if err != nil {
		t.Fatal(err)
	}
	f := &pgFacts{Relations: []pgRelFact{{Schema: "public", Name: "part_2024", RootSchema: "public", RootName: "events"}}}
	if err := pgDecide(c, f, newAllowList([]string{"public.events"}, "public"), nil); err != nil {
		t.Errorf("a partition of an allowed table: %v", err)
	}
	if err := pgDecide(c, f, newAllowList([]string{"public.other"}, "public"), nil); err == nil {
		t.Errorf("a partition of a table not allowed: accepted")
	}
}

// TestPgWrap: the row cap holds the checked statement and nothing else.
func TestPgWrap(t *testing.T) {
	got, err := pgWrap("SELECT 1", 1001)
	if err != nil || got != "SELECT * FROM (\nSELECT 1\n) AS datachat_result LIMIT 1001" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"SELECT 1) AS x, (SELECT 2", "SELECT 1 -- ", "SELECT 1) x; DELETE FROM t; SELECT * FROM (SELECT 1"} {
		if w, err := pgWrap(bad, 10); err == nil {
			t.Errorf("%q wrapped as %q", bad, w)
		}
	}
}

// checkInvariant asserts what the check promises of what it returns: the
// deparsed text parses to one SELECT, checks again to the same text, fits
// the row cap, and — with every relation where its name says and no name
// shadowed — reads only allowed relations (or the statement's CTEs) and
// calls only allowed functions.
func checkInvariant(t *testing.T, c *pgChecked) {
	t.Helper()
	tree, err := pg_query.Parse(c.SQL)
	if err != nil {
		t.Fatalf("the deparsed %q does not parse: %v", c.SQL, err)
	}
	if len(tree.Stmts) != 1 || tree.Stmts[0].GetStmt().GetSelectStmt() == nil {
		t.Fatalf("the deparsed %q is not one SELECT", c.SQL)
	}
	again, err := pgCheck(c.SQL, testAllow, "public")
	if err != nil || again.SQL != c.SQL {
		t.Fatalf("the deparsed %q checks as %v, %v", c.SQL, again, err)
	}
	if _, err := pgWrap(c.SQL, 1001); err != nil {
		t.Fatalf("the deparsed %q does not wrap: %v", c.SQL, err)
	}
	facts := &pgFacts{Functions: map[string]string{}, Fields: map[string]string{}, Operators: map[string]string{}, Builtin: map[string]bool{}}
	for _, r := range c.Relations {
		s := r.Schema
		if s == "" {
			s = "public"
		}
		facts.Relations = append(facts.Relations, pgRelFact{Schema: s, Name: r.Name})
	}
	for _, op := range c.Operators {
		facts.Builtin[op] = true
	}
	if pgDecide(c, facts, testAllow, nil) != nil {
		return
	}
	rels, funcs, ctes := pgTouches(tree)
	for _, r := range rels {
		s := r.Schema
		if s == "" && slices.Contains(ctes, r.Name) {
			continue
		}
		if s == "" {
			s = "public"
		}
		if !testAllow.allowed(s, r.Name) {
			t.Errorf("%q reads %s.%s, which is not allowed", c.SQL, s, r.Name)
		}
	}
	for _, f := range funcs {
		if !pgFunctions[f] && f != "bernoulli" && f != "system" {
			t.Errorf("%q calls %s, which is not allowed", c.SQL, f)
		}
	}
}

// pgTouches lists, independently of the checker, what a parse tree reads
// and calls: every RangeVar (schema "" when unqualified), every function
// name, and every CTE name defined anywhere in it.
func pgTouches(tree *pg_query.ParseResult) (rels []pgRel, funcs, ctes []string) {
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		switch x := m.Interface().(type) {
		case *pg_query.CommonTableExpr:
			ctes = append(ctes, x.Ctename)
		case *pg_query.RangeVar:
			rels = append(rels, pgRel{Schema: x.Schemaname, Name: x.Relname})
		case *pg_query.FuncCall:
			if s := x.Funcname[len(x.Funcname)-1].GetString_(); s != nil {
				funcs = append(funcs, s.Sval)
			}
		case *pg_query.RangeTableSample:
			if s := x.Method[len(x.Method)-1].GetString_(); s != nil {
				funcs = append(funcs, s.Sval)
			}
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() != protoreflect.MessageKind {
				return true
			}
			if fd.IsList() {
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			} else {
				walk(v.Message())
			}
			return true
		})
	}
	walk(tree.ProtoReflect())
	return rels, funcs, ctes
}

// FuzzPgCheck: whatever the input, the check refuses it with a
// *datachat.QueryError, or returns a deparsed statement that parses to one
// SELECT touching only allowed relations and allowed functions (see
// checkInvariant). It must never crash.
func FuzzPgCheck(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", "SELECT * FROM t", "TABLE t2", "VALUES (1), (2)", "SELECT * FROM s.allowed",
		"WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
		"SELECT * FROM (VALUES (query_to_xml('select 1',true,true,'')::text),('x')) v",
		"SELECT x FROM t WHERE a LIKE 'x%' ESCAPE '!' AND b BETWEEN 1 AND 2",
		"SELECT jsonb_path_query('{}', '$.a'), x -> 'a' FROM t",
		"SELECT * FROM t p, LATERAL ROWS FROM (generate_series(1, p.x)) g",
		"SELECT count(*) FILTER (WHERE x > 1) OVER w FROM t WINDOW w AS (PARTITION BY y)",
		"SELECT 'a'::text COLLATE \"C\", E'\\x41', U&'\\0041', B'101', X'1F', 1e10, -.5",
		"(SELECT 1) UNION ALL (SELECT 2 ORDER BY 1 LIMIT 1) ORDER BY 1",
		"SELECT * FROM t TABLESAMPLE SYSTEM (1)", "SELECT (p).x, p.* FROM t p",
		"SELECT 1 OPERATOR(pg_catalog.+) 2", "SELECT * FROM t FOR UPDATE", "SELECT $1", "COPY t TO STDOUT",
		"WITH c AS MATERIALIZED (SELECT 1) SELECT * FROM c", "SELECT ARRAY(SELECT 1)[1:2]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		c, err := pgCheck(sql, testAllow, "public")
		if err != nil {
			var qe *datachat.QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("%q: got %v (%T), want a *datachat.QueryError", sql, err, err)
			}
			return
		}
		checkInvariant(t, c)
	})
}

// TestPgCheckNodes: every node kind the checker allows is a real one of the
// parse tree, so that a rename in pg_query cannot silently widen the list.
func TestPgCheckNodes(t *testing.T) {
	known := map[string]bool{}
	fields := (&pg_query.Node{}).ProtoReflect().Descriptor().Oneofs().ByName("node").Fields()
	for i := range fields.Len() {
		known[string(fields.Get(i).Message().Name())] = true
	}
	for name := range pgNodes {
		if !known[name] {
			t.Errorf("pgNodes holds %s, which is no node of pg_query's parse tree", name)
		}
	}
	if fmt.Sprint(len(known)) == "0" {
		t.Fatal("no nodes read")
	}
}

// TestPgParserStack: the deepest statements the caps let through — each
// kind of nesting, at pgMaxTokens — parse, check and deparse without
// crashing on a 2 MiB thread stack, the least a thread gets (glibc's
// default under an unlimited RLIMIT_STACK; usually 8 MiB); over the cap,
// they are refused before the parser runs. PostgreSQL's parser is C: a
// stack overflow in it would end the server, so this runs in a child
// process with `ulimit -s 2048`.
func TestPgParserStack(t *testing.T) {
	if os.Getenv("DATACHAT_PGSTACK_CHILD") == "1" {
		pgParserStackChild(t)
		return
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the child with a smaller stack")
	}
	cmd := exec.Command("sh", "-c", `ulimit -s 2048 && exec "$0" -test.run='^TestPgParserStack$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), "DATACHAT_PGSTACK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child on a 2 MiB stack failed: %v\n%s", err, tail(string(out), 3000))
	}
	if !strings.Contains(string(out), "deepest statements checked") {
		t.Fatalf("the child did not run the statements:\n%s", tail(string(out), 3000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func pgParserStackChild(t *testing.T) {
	nest := func(open, middle, close string, perLevel int) string {
		n := pgMaxTokens/perLevel - 2
		return strings.Repeat(open, n) + middle + strings.Repeat(close, n)
	}
	deepest := []string{
		"SELECT " + strings.Repeat("1+", pgMaxTokens/2-2) + "1",
		"SELECT " + strings.Repeat("NOT ", pgMaxTokens-4) + "true",
		"SELECT " + strings.Repeat("- ", pgMaxTokens-4) + "1",
		"SELECT 1" + strings.Repeat("::int", pgMaxTokens/2-2),
		nest("SELECT (", "1", ")", 3),
		nest("(SELECT ", "1", ")", 3),
		"SELECT " + nest("abs(", "1", ")", 3),
		"SELECT " + nest("ARRAY[", "1", "]", 3),
		"SELECT " + nest("ROW(", "1", ")", 3),
		"SELECT " + nest("CASE WHEN true THEN ", "1", " END", 5),
		"SELECT " + nest("(", "1", ")[1]", 5),
		nest("SELECT * FROM (", "SELECT 1", ") x", 5),
		"SELECT 1 " + strings.Repeat("UNION SELECT 1 ", pgMaxTokens/3-2),
		nest("WITH c AS (", "SELECT 1", ") SELECT * FROM c", 8),
		"SELECT " + nest("1 IN (", "1", ")", 4),
		"SELECT " + nest("EXISTS (SELECT ", "1", ")", 4),
	}
	for _, q := range deepest {
		c, err := pgCheck(q, testAllow, "public")
		if err == nil {
			checkInvariant(t, c)
		}
		over := q + strings.Repeat(" + 1", pgMaxTokens/2)
		if _, err := pgCheck(over, testAllow, "public"); err == nil || !strings.Contains(err.Error(), "tokens") {
			t.Errorf("%.40q… over the cap: %v, want refused for its tokens", q, err)
		}
	}
	t.Log("deepest statements checked")
}

// BenchmarkPgCheck measures the parse-tree check of a typical query and of
// the largest and deepest the caps let through.
func BenchmarkPgCheck(b *testing.B) {
	for _, c := range []struct{ name, sql string }{
		{"typical", `WITH s AS (SELECT species, island, avg(body_mass_g) AS mass, count(*) AS n FROM t WHERE sex IS NOT NULL
			GROUP BY species, island) SELECT species, island, round(mass::numeric, 1), n, rank() OVER (PARTITION BY species ORDER BY mass DESC)
			FROM s WHERE n > 5 ORDER BY species, mass DESC LIMIT 20`},
		{"in-list-at-cap", "SELECT * FROM t WHERE x IN (" + strings.Repeat("12345,", pgMaxTokens/2-10) + "1)"},
		{"deepest", "SELECT " + strings.Repeat("1+", pgMaxDepth/4) + "1"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := pgCheck(c.sql, testAllow, "public"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
