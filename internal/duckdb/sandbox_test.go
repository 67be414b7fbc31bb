package duckdb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// TestSandbox runs adversarial statements against one conversation's instance.
// Each must fail with a datachat.QueryError of the expected kind, and the instance must
// answer the next ordinary query correctly.
func TestSandbox(t *testing.T) {
	root := t.TempDir()
	dirA := filepath.Join(root, "conv-a")
	dirB := filepath.Join(root, "conv-b")
	for _, d := range []string{dirA, dirB} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	own := mustParquet(t, dirA, "t.parquet", "SELECT range AS id, 'row ' || range AS label FROM range(10)")
	other := mustParquet(t, dirB, "secret.parquet", "SELECT 'top secret' AS s")
	secretCSV := filepath.Join(root, "secret.csv")
	if err := os.WriteFile(secretCSV, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "out")

	e := mustEngine(t, Options{Timeout: 2 * time.Second, MemoryLimit: 256 << 20})
	tables := []Table{{Name: "t", Path: own}}
	ctx := context.Background()
	check := func(t *testing.T) {
		t.Helper()
		res, err := e.Query(ctx, "conv-a", tables, "SELECT count(*) AS n, min(label) AS first FROM t")
		if err != nil {
			t.Fatalf("follow-up query: %v", err)
		}
		if got := wire.CellText(res.Rows[0][0]) + "/" + wire.CellText(res.Rows[0][1]); got != "10/row 0" {
			t.Fatalf("follow-up query: got %s, want 10/row 0", got)
		}
	}

	lit := datachat.QuoteLiteral
	cases := []struct {
		sql  string
		kind string
	}{
		// Reading files by every table function.
		{"SELECT * FROM read_csv('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_csv_auto('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_text('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_blob('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_json('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_json_auto('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_ndjson_objects('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_csv('/proc/self/environ')", datachat.KindRefused},
		{"SELECT * FROM sniff_csv('/etc/passwd')", datachat.KindRefused},
		{"SELECT * FROM read_csv(" + lit(secretCSV) + ")", datachat.KindRefused},
		{"SELECT * FROM " + lit(secretCSV), datachat.KindRefused},
		{"SELECT * FROM read_duckdb(" + lit(filepath.Join(root, "x.duckdb")) + ")", datachat.KindRefused},
		// Another conversation's dataset, by path, by glob, in a list.
		{"SELECT * FROM read_parquet(" + lit(other) + ")", datachat.KindRefused},
		{"SELECT * FROM " + lit(other), datachat.KindRefused},
		{"SELECT * FROM parquet_scan(" + lit(other) + ")", datachat.KindRefused},
		{"SELECT * FROM parquet_metadata(" + lit(other) + ")", datachat.KindRefused},
		{"SELECT * FROM parquet_schema(" + lit(other) + ")", datachat.KindRefused},
		{"SELECT * FROM read_parquet(" + lit(dirB+"/*.parquet") + ")", datachat.KindRefused},
		{"SELECT * FROM read_parquet(" + lit(root+"/**/*.parquet") + ")", datachat.KindRefused},
		{"SELECT * FROM read_parquet([" + lit(own) + ", " + lit(other) + "])", datachat.KindRefused},
		{"SELECT * FROM read_parquet(" + lit(dirA+"/../conv-b/secret.parquet") + ")", datachat.KindRefused},
		{"SELECT * FROM glob('/etc/*')", datachat.KindRefused},
		// Writing files.
		{"COPY t TO " + lit(out+".csv"), datachat.KindRefused},
		{"COPY (SELECT * FROM t) TO " + lit(out+".parquet") + " (FORMAT parquet)", datachat.KindRefused},
		{"COPY t FROM '/etc/passwd'", ""}, // fails binding: t is a view
		{"EXPORT DATABASE " + lit(out), datachat.KindRefused},
		{"IMPORT DATABASE " + lit(root), datachat.KindRefused},
		// Other databases, extensions, network.
		{"ATTACH " + lit(filepath.Join(root, "new.duckdb")) + " AS x", datachat.KindRefused},
		{"ATTACH ':memory:' AS m", datachat.KindRefused},
		{"USE memory", datachat.KindRefused},
		{"INSTALL httpfs", datachat.KindRefused},
		{"LOAD httpfs", datachat.KindRefused},
		{"LOAD " + lit(filepath.Join(root, "evil.duckdb_extension")), datachat.KindRefused},
		{"SELECT * FROM read_csv('https://example.com/data.csv')", datachat.KindRefused},
		{"SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')", datachat.KindRefused},
		{"SELECT * FROM read_parquet('s3://bucket/x.parquet')", datachat.KindRefused},
		{"CREATE SECRET (TYPE s3, KEY_ID 'a', SECRET 'b')", ""}, // no s3 without httpfs
		{"CREATE SECRET (TYPE http, BEARER_TOKEN 'b')", ""},
		// Settings.
		{"SET memory_limit = '100GB'", datachat.KindRefused},
		{"SET threads = 64", datachat.KindRefused},
		{"SET enable_external_access = true", datachat.KindRefused},
		{"SET GLOBAL lock_configuration = false", datachat.KindRefused},
		{"RESET memory_limit", datachat.KindRefused},
		{"PRAGMA memory_limit = '100GB'", datachat.KindRefused},
		{"PRAGMA enable_profiling", datachat.KindRefused},
		{"CALL enable_logging()", datachat.KindRefused},
		{"SELECT * FROM enable_logging()", datachat.KindRefused},
		{"SELECT * FROM enable_profiling()", datachat.KindRefused},
		{"SELECT * FROM checkpoint()", datachat.KindRefused},
		{"UPDATE duckdb_settings() SET value = '64' WHERE name = 'threads'", datachat.KindSyntax},
		{"SET VARIABLE x = 1", datachat.KindRefused},
		// Writes to the catalog, hidden or not.
		{"CREATE TABLE x AS SELECT 1", datachat.KindRefused},
		{"CREATE OR REPLACE VIEW t AS SELECT 'hijacked' AS label", datachat.KindRefused},
		{"CREATE MACRO m() AS 1", datachat.KindRefused},
		{"DROP VIEW t", datachat.KindRefused},
		{"ALTER VIEW t RENAME TO u", datachat.KindRefused},
		{"INSERT INTO t VALUES (1, 'x')", datachat.KindRefused}, // t is a view: refused as a write, not "not an table"
		{"insert into t select * from t", datachat.KindRefused},
		{"UPDATE t SET label = 'x'", datachat.KindRefused},
		{"DELETE FROM t", datachat.KindRefused},
		{"/* c */ DELETE FROM t WHERE id = 1", datachat.KindRefused},
		{"TRUNCATE t", datachat.KindRefused},
		{"MERGE INTO t USING t AS s ON t.id = s.id WHEN MATCHED THEN DELETE", datachat.KindRefused},
		{"INSERT INTO nowhere VALUES (1)", datachat.KindRefused},
		{"EXPLAIN ANALYZE CREATE TEMP VIEW t AS SELECT 1 AS id, 'hijacked' AS label", datachat.KindRefused},
		{"EXPLAIN ANALYZE SELECT * FROM enable_logging()", datachat.KindRefused},
		{"PREPARE p AS SELECT 1", datachat.KindRefused},
		{"BEGIN TRANSACTION", datachat.KindRefused},
		{"CHECKPOINT", datachat.KindRefused},
		{"VACUUM", datachat.KindRefused},
		// SQL from strings, several statements.
		{"SELECT * FROM query('SELECT * FROM read_csv(''/etc/passwd'')')", datachat.KindRefused},
		{"SELECT * FROM query_table('t')", datachat.KindRefused},
		{"SELECT 1; SELECT 2", datachat.KindRefused},
		{"SELECT 1; DROP VIEW t", datachat.KindRefused},
		{"SELECT * FROM t; COPY t TO " + lit(out+"2.csv"), datachat.KindRefused},
		// The process's environment (API keys) is out of reach too.
		{"SELECT getenv('GEMINI_API_KEY')", datachat.KindRefused},
		// Resource limits.
		{"SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range + b.range < 0", datachat.KindTimeout},
		{"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r", datachat.KindTimeout},
		{"SELECT length(repeat('x', 2000000000))", datachat.KindMemory},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d adversarial statements", len(cases))
	}
	for _, c := range cases {
		name := c.sql
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			_, err := e.Query(ctx, "conv-a", tables, c.sql)
			var qe *datachat.QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("got %v, want a datachat.QueryError", err)
			}
			if c.kind != "" && qe.Kind != c.kind {
				t.Errorf("got kind %q (%v), want %q", qe.Kind, qe, c.kind)
			}
			if strings.TrimSpace(qe.Message) == "" {
				t.Error("empty message")
			}
			// A write refused says so, whether DuckDB could bind it or not.
			if w := firstWord(c.sql); c.kind == datachat.KindRefused && slices.Contains([]string{"INSERT", "UPDATE", "DELETE", "CREATE", "DROP"}, w) && !strings.Contains(qe.Message, "not allowed") {
				t.Errorf("%s: %q, want the read-only refusal", w, qe.Message)
			}
			t.Logf("%s", firstLine(qe.Error()))
			check(t)
		})
	}
	for _, p := range []string{out, out + ".csv", out + ".parquet", out + "2.csv", filepath.Join(root, "new.duckdb")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// TestSandboxAllows checks the sandbox leaves ordinary read-only SQL alone.
func TestSandboxAllows(t *testing.T) {
	dir := t.TempDir()
	p := mustParquet(t, dir, "t.parquet", "SELECT range AS id, range % 3 AS g FROM range(100)")
	e := mustEngine(t, Options{})
	tables := []Table{{Name: "t", Path: p}}
	for _, q := range []string{
		"SELECT * FROM t",
		"FROM t SELECT g, count(*) GROUP BY ALL",
		"WITH x AS (SELECT * FROM t) SELECT count(*) FROM x",
		"DESCRIBE t",
		"SHOW TABLES",
		"SUMMARIZE t",
		"SELECT * FROM duckdb_columns() WHERE table_name = 't'",
		"EXPLAIN SELECT * FROM t WHERE id > 3",
		"explain\n  select g from t",
		"EXPLAIN /* why */ SELECT 1",
		"EXPLAIN WITH x AS (SELECT 1) SELECT * FROM x",
		"EXPLAIN FROM t",
		"PIVOT t ON g IN (0, 1, 2) USING count(*)",
		"UNPIVOT (SELECT id, g FROM t) ON g INTO NAME k VALUE v",
		"SELECT 1;",
		"SELECT 1; -- done",
		"/* a comment first */ SELECT 2",
		"SELECT * FROM range(3), generate_series(1, 2)",
		"SELECT * FROM unnest([1, 2])",
		"SELECT list_transform([1, 2], x -> x * 2)",
		"SELECT * FROM duckdb_tables()",
		"SELECT * FROM information_schema.columns",
		"SELECT g, sum(id) OVER (PARTITION BY g) FROM t",
		"VALUES (1, 'a')",
		"TABLE t",
		"SELECT * FROM json_each('{\"a\": 1}')",
	} {
		if _, err := e.Query(context.Background(), "c", tables, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// firstWord is a statement's first keyword in upper case, after blanks and
// comments.
func firstWord(sql string) string {
	m := regexp.MustCompile(`^(?:\s|--[^\n]*\n|/\*(?s:.*?)\*/)*([A-Za-z_0-9]*)`).FindStringSubmatch(sql)
	return strings.ToUpper(m[1])
}
