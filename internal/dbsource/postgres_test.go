package dbsource_test

import (
	"context"
	"datachat"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// pgFixture is a database of the test cluster with the CSVs loaded, tables
// and functions a query must not reach, and a reader role granted SELECT on
// the allowed tables (pgAllowed) only, as the README tells operators to
// make one.
type pgFixture struct {
	admin    string // superuser URL of the database
	reader   string // the reader's URL
	password string
	suffix   string
	dblink   bool // the dblink extension is installed
}

var pgShared shared[pgFixture]

func pgSetup(t *testing.T) *pgFixture {
	t.Helper()
	base := dbsourcetest.PostgresURL(t)
	return pgShared.get(t, "PostgreSQL", func() (*pgFixture, error) { return newPgFixture(t, base) })
}

func newPgFixture(t *testing.T, base string) (*pgFixture, error) {
	ctx := context.Background()
	f := &pgFixture{suffix: dbsourcetest.Suffix()}
	f.password = "pw-" + f.suffix
	db := "dcsrc_" + f.suffix
	reader := "dcsrc_reader_" + f.suffix
	root, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, err
	}
	defer root.Close(ctx)
	if _, err := root.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		return nil, err
	}
	if _, err := root.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", reader, f.password)); err != nil {
		return nil, err
	}
	atEnd(func() { dbsourcetest.DropPostgres(base, db, reader) })
	f.admin = dbsourcetest.WithDB(base, db, "", "")
	f.reader = dbsourcetest.WithDB(base, db, reader, f.password)
	c, err := pgx.Connect(ctx, f.admin)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	for _, name := range csvNames {
		if err := dbsourcetest.Read(t, name).LoadPostgres(ctx, c, "public"); err != nil {
			return nil, err
		}
	}
	setup := []string{
		`CREATE SCHEMA secret`,
		`CREATE TABLE secret.creds (id int PRIMARY KEY, password text)`,
		`INSERT INTO secret.creds VALUES (1, 'hunter2')`,
		`CREATE TABLE public.hidden (id int, note text)`,
		`INSERT INTO public.hidden VALUES (1, 'not for the model')`,
		`CREATE VIEW public.leaky AS SELECT * FROM secret.creds`,
		`CREATE VIEW public.penguin_species AS SELECT DISTINCT species FROM public.penguins`,
		`CREATE TABLE public.big AS SELECT g AS id, md5(g::text) AS h FROM generate_series(1, 5000) g`,
		`CREATE TABLE public.events (id int, at date, what text) PARTITION BY RANGE (at)`,
		`CREATE TABLE public.events_2023 PARTITION OF public.events FOR VALUES FROM ('2023-01-01') TO ('2024-01-01')`,
		`CREATE TABLE public.events_2024 PARTITION OF public.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')`,
		`INSERT INTO public.events VALUES (1, '2023-05-01', 'a'), (2, '2024-05-01', 'b')`,
		`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`,
		`CREATE TABLE public.alltypes (
			i2 smallint, i4 integer, i8 bigint, big bigint, n numeric(20,4), nn numeric, f4 real, f8 double precision,
			fnan double precision, finf double precision, b boolean, t text, vc varchar(10), d date, dinf date,
			ts timestamp, tstz timestamptz, tm time, iv interval, by bytea, u uuid, j json, jb jsonb,
			ai int[], at text[], m mood, ip inet, long text)`,
		`INSERT INTO public.alltypes VALUES (
			-2, 4, 8, 9007199254740993, 12345.6789, 'NaN', 1.5, 0.1,
			'NaN', '-Infinity', true, 'héllo', 'abc', '2024-02-29', 'infinity',
			'2024-02-29 13:14:15.123456', '2024-02-29 13:14:15+02', '23:59:58.5', '1 year 2 mons 3 days 04:05:06.5', '\xdeadbeef',
			'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"b": 1, "a": 12345678901234567890}', '{"k": [1, 2]}',
			'{1,2,3}', '{x,NULL}', 'happy', '10.1.2.3', repeat('é', 100))`,
		`CREATE FUNCTION public.evil() RETURNS text LANGUAGE sql SECURITY DEFINER AS $$ SELECT password FROM secret.creds LIMIT 1 $$`,
		// Only its owner may run the SECURITY DEFINER function: a role that
		// could would be refused (TestPostgresGrants).
		`REVOKE EXECUTE ON FUNCTION public.evil() FROM PUBLIC`,
		`CREATE FUNCTION public.upper(text) RETURNS text LANGUAGE sql AS $$ SELECT 'shadowed' $$`,
		`CREATE PROCEDURE public.wipe() LANGUAGE sql AS $$ DELETE FROM public.penguins $$`,
		`CREATE SCHEMA ext`,
		// Code of the database that a query must not reach: a function with
		// a side effect (an advisory lock a test looks for), a domain whose
		// CHECK calls it, a view and an aggregate calling it, a function
		// field notation (p.leak_field) would call, an aggregate shadowing
		// a built-in one.
		`CREATE FUNCTION public.side_effect(text) RETURNS boolean STRICT LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(220040); RETURN true; END $$`,
		`CREATE DOMAIN public.checked AS text CHECK (public.side_effect(VALUE))`,
		`CREATE VIEW public.busy AS SELECT species, public.side_effect(species) AS s FROM public.penguins`,
		`CREATE FUNCTION public.leak_step(text, text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(220040); RETURN $1 || $2; END $$`,
		`CREATE AGGREGATE public.leak_agg(text) (SFUNC = public.leak_step, STYPE = text, INITCOND = '')`,
		`CREATE FUNCTION public.leak_step(text, text, text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(220040); RETURN $1 || $3 || $2; END $$`,
		`CREATE AGGREGATE public.string_agg(text, text) (SFUNC = public.leak_step, STYPE = text)`,
		`CREATE FUNCTION public.leak_field(public.penguins) RETURNS text LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(220040); RETURN 'x'; END $$`,
		`CREATE FUNCTION public.length(public.penguins) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$`,
		// DEFAULT, identity and generated columns: their expressions run on
		// INSERT and UPDATE, which no query can do; a SELECT reads stored
		// values and evaluates none of them.
		`CREATE SEQUENCE public.counter`,
		`CREATE TABLE public.with_defaults (id int GENERATED ALWAYS AS IDENTITY, n bigint DEFAULT nextval('public.counter'), g int GENERATED ALWAYS AS (id * 2) STORED, d public.checked)`,
		`INSERT INTO public.with_defaults (d) VALUES (NULL), (NULL)`,
		`ANALYZE`,
		// The reader may read the allowed tables and nothing else: the
		// database, not the sandbox, is what keeps it from the others.
		fmt.Sprintf(`GRANT USAGE ON SCHEMA public TO %s`, reader),
		fmt.Sprintf(`GRANT SELECT ON %s TO %s`, strings.Join(pgAllowed, ", "), reader),
		// A role that may write two tables: the sandbox, not the grants,
		// keeps it read-only.
		fmt.Sprintf(`GRANT INSERT, UPDATE, DELETE, TRUNCATE ON public.penguins, public.big TO %s`, reader),
	}
	for _, s := range setup {
		if _, err := c.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	// dblink, where the server has it, in a schema the reader may not use,
	// its functions revoked from PUBLIC (else the reader is refused).
	if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS dblink SCHEMA ext"); err == nil {
		f.dblink = true
		if _, err := c.Exec(ctx, "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA ext FROM PUBLIC"); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// pgAllowed are the tables the source may read: the CSVs' and a few more.
var pgAllowed = []string{"public.avengers", "public.cabinet_turnover", "public.diamonds", "public.flights", "public.penguins", "public.test_mskanji",
	"public.tips", "public.titanic", "public.alltypes", "public.big", "public.events", "public.penguin_species", "public.with_defaults"}

// adminConn connects to the fixture's database as its superuser, for the
// rest of the test.
func (f *pgFixture) adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), f.admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func openPg(t *testing.T, f *pgFixture, opts dbsource.Options) *dbsource.DB {
	t.Helper()
	return openSource(t, "warehouse", f.reader, pgAllowed, opts)
}

func TestPostgresQueries(t *testing.T) {
	f := pgSetup(t)
	ctx := context.Background()
	db := openPg(t, f, dbsource.Options{})
	if err := db.Check(ctx); err != nil {
		t.Fatalf("Check of a read-only role: %v", err)
	}
	d, err := db.Dialect(ctx)
	if err != nil || !strings.HasPrefix(d, "PostgreSQL ") {
		t.Errorf("Dialect: got %q, %v", d, err)
	}

	t.Run("csv values", func(t *testing.T) {
		res := checkCSVAnswers(t, db,
			"SELECT count(*) AS n, round(avg(body_mass_g)::numeric, 2) AS mass FROM penguins WHERE species = 'Gentoo';",
			"SELECT day, sum(tip) AS tips FROM tips GROUP BY day ORDER BY tips DESC LIMIT 1",
			"SELECT sex, count(*) FILTER (WHERE survived = 1) AS survived, count(*) AS n FROM titanic GROUP BY sex ORDER BY sex")
		if res.Columns[0].Type != "integer" || res.Columns[1].Type != "decimal" || res.Columns[1].SQLType != "numeric" {
			t.Errorf("columns: got %+v", res.Columns)
		}
	})

	t.Run("every csv", func(t *testing.T) { checkCSVTables(t, db, dbsource.KindPostgres) })

	t.Run("value shapes", func(t *testing.T) {
		res, err := db.Query(ctx, "SELECT * FROM alltypes")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Rows[0])
		got := string(b)
		for _, want := range []string{
			`-2,4,8,"9007199254740993","12345.6789","NaN",1.5,0.1,"NaN","-Infinity",true,"héllo","abc","2024-02-29","infinity"`,
			`"2024-02-29T13:14:15.123456","2024-02-29T11:14:15Z","23:59:58.5","P1Y2M3DT4H5M6.5S","3q2+7w=="`,
			`"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","{\"b\": 1, \"a\": 12345678901234567890}","{\"k\": [1, 2]}",[1,2,3],["x",null],"happy","10.1.2.3"`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("row %s\ndoes not hold %s", got, want)
			}
		}
		checkColumnTypes(t, res, map[string]string{"i8": "integer", "n": "decimal", "f4": "float", "b": "boolean", "t": "text",
			"d": "date", "ts": "timestamp", "tstz": "timestamp", "tm": "time", "iv": "interval", "by": "blob", "u": "uuid",
			"ai": "list", "m": "text", "j": "text"})
	})

	t.Run("long values are cut", func(t *testing.T) {
		small := openPg(t, f, dbsource.Options{MaxCellBytes: 10})
		res, err := small.Query(ctx, "SELECT long FROM alltypes")
		if err != nil {
			t.Fatal(err)
		}
		if s := res.Rows[0][0].(string); s != "ééééé…" || !res.Truncated {
			t.Errorf("got %q truncated=%v, want 5 é and … , truncated", s, res.Truncated)
		}
	})

	t.Run("row cap", func(t *testing.T) {
		checkRowCap(t, db)
		res, err := db.Query(ctx, "SELECT * FROM big LIMIT 1000")
		if err != nil {
			t.Fatal(err)
		}
		if res.RowCount != 1000 || res.Truncated {
			t.Errorf("exactly 1000 rows: got %d, truncated=%v", res.RowCount, res.Truncated)
		}
		res, err = db.Query(ctx, "VALUES (1, 'a'), (2, 'b')")
		if err != nil || res.RowCount != 2 {
			t.Errorf("VALUES: %v, %v", res, err)
		}
		res, err = db.Query(ctx, "SELECT 1 AS a, 2 AS a -- two columns of one name, and a comment")
		if err != nil || len(res.Columns) != 2 {
			t.Errorf("duplicate names: %v, %v", res, err)
		}
	})

	t.Run("partitions and views", func(t *testing.T) {
		res, err := db.Query(ctx, "SELECT what FROM events WHERE at > '2024-01-01'")
		if err != nil || fmt.Sprint(res.Rows) != "[[b]]" {
			t.Errorf("a partition of an allowed table: %v, %v", res, err)
		}
		res, err = db.Query(ctx, "SELECT count(*) FROM penguin_species")
		if err != nil || fmt.Sprint(res.Rows) != "[[3]]" {
			t.Errorf("a view over an allowed table: %v, %v", res, err)
		}
		if _, err := db.Query(ctx, "SELECT upper(species) FROM penguins LIMIT 1"); err == nil {
			t.Errorf("upper is shadowed by public.upper: want a refusal")
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := db.Query(ctx, "SELECT * FROM penguin")
		wantKind(t, err, datachat.KindUnknownTable, `relation "penguin" does not exist`, "public.penguins")
		_, err = db.Query(ctx, "SELECT bill_len FROM penguins")
		wantKind(t, err, datachat.KindUnknownColumn, `column "bill_len" does not exist`)
		_, err = db.Query(ctx, "SELEC 1")
		wantKind(t, err, datachat.KindSyntax, `syntax error at or near "SELEC"`, "at character 1")
		_, err = db.Query(ctx, "SELECT FROM WHERE")
		wantKind(t, err, datachat.KindSyntax, "syntax error")
		_, err = db.Query(ctx, "SELECT species + 1 FROM penguins")
		wantKind(t, err, datachat.KindTypeMismatch, "operator does not exist")
		// A data exception's message can quote the data: it is withheld,
		// its SQLSTATE and condition named.
		_, err = db.Query(ctx, "SELECT 'x'::int")
		wantKind(t, err, datachat.KindTypeMismatch, "22P02", "invalid_text_representation", "not shown")
		// A pool of one: the hints never wait for a second connection.
		one := openPg(t, f, dbsource.Options{MaxConns: 1})
		_, err = one.Query(ctx, "SELECT * FROM secret.creds")
		wantKind(t, err, datachat.KindRefused, "secret.creds")
		_, err = one.Query(ctx, "SELECT * FROM nowhere")
		wantKind(t, err, datachat.KindUnknownTable, "nowhere")
	})

	t.Run("estimate", func(t *testing.T) { checkEstimate(t, db, 344, 344, "secret.creds") })

	t.Run("catalog", func(t *testing.T) {
		checkCatalog(t, db, []string{"public.alltypes", "public.avengers", "public.big", "public.cabinet_turnover", "public.diamonds", "public.events", "public.flights",
			"public.penguin_species", "public.penguins", "public.test_mskanji", "public.tips", "public.titanic", "public.with_defaults"}, 344, 344)
	})
}

// TestPostgresAdversarial: each statement is refused with a clear error, and
// the source answers the next query right.
func TestPostgresAdversarial(t *testing.T) {
	f := pgSetup(t)
	db := openPg(t, f, dbsource.Options{Timeout: 300 * time.Millisecond, MaxConns: 2})
	const refused = datachat.KindRefused
	cases := []refusal{
		{"insert", "INSERT INTO penguins (species) VALUES ('x')", refused, []string{"writes"}},
		{"update", "UPDATE penguins SET species = 'x'", refused, []string{"writes"}},
		{"delete", "DELETE FROM penguins", refused, []string{"writes"}},
		{"merge", "MERGE INTO penguins p USING tips t ON false WHEN NOT MATCHED THEN INSERT (species) VALUES ('x')", refused, []string{"writes"}},
		{"upsert", "INSERT INTO big VALUES (1, 'x') ON CONFLICT DO NOTHING", refused, []string{"writes"}},
		{"data-modifying with", "WITH d AS (DELETE FROM penguins RETURNING *) SELECT count(*) FROM d", refused, []string{"writes"}},
		{"select into", "SELECT * INTO stolen FROM penguins", refused, []string{"only a query"}},
		{"create table as", "CREATE TABLE stolen AS SELECT * FROM penguins", refused, []string{"only a query"}},
		{"create", "CREATE TABLE x (a int)", refused, []string{"only a query"}},
		{"drop", "DROP TABLE penguins", refused, []string{"only a query"}},
		{"alter", "ALTER TABLE penguins ADD COLUMN x int", refused, []string{"only a query"}},
		{"truncate", "TRUNCATE penguins", refused, []string{"only a query"}},
		{"grant", "GRANT SELECT ON secret.creds TO PUBLIC", refused, []string{"only a query"}},
		{"copy to program", "COPY penguins TO PROGRAM 'id'", refused, []string{"only a query"}},
		{"copy to file", "COPY penguins TO '/tmp/stolen.csv'", refused, []string{"only a query"}},
		{"copy from file", "COPY penguins FROM '/etc/passwd'", refused, []string{"only a query"}},
		{"pg_read_file", "SELECT pg_read_file('/etc/passwd')", refused, []string{"pg_read_file"}},
		{"pg_read_file in a where", "SELECT species FROM penguins WHERE species = pg_catalog.pg_read_file('/etc/hostname')", refused, []string{"pg_read_file"}},
		{"pg_ls_dir", "SELECT * FROM pg_ls_dir('.')", refused, []string{"pg_ls_dir"}},
		{"lo_import", "SELECT lo_import('/etc/passwd')", refused, []string{"lo_import"}},
		{"lo_export", "SELECT lo_export(1, '/tmp/x')", refused, []string{"lo_export"}},
		{"dblink", "SELECT * FROM dblink('host=127.0.0.1 dbname=postgres', 'SELECT 1') AS t(a int)", "", nil},
		{"query_to_xml", "SELECT query_to_xml('SELECT * FROM secret.creds', true, true, '')", refused, []string{"runs SQL given as text"}},
		{"set_config", "SELECT set_config('statement_timeout', '0', false)", refused, []string{"settings"}},
		{"current_setting", "SELECT current_setting('data_directory')", refused, []string{"settings"}},
		{"terminate backend", "SELECT pg_terminate_backend(pg_backend_pid())", refused, []string{"signals"}},
		{"advisory lock", "SELECT pg_advisory_lock(1)", refused, []string{"advisory"}},
		{"nextval", "SELECT nextval('x')", "", nil},
		{"security definer function", "SELECT public.evil()", refused, []string{"evil", "built-in"}},
		{"shadowing function", "SELECT upper(species) FROM penguins", refused, []string{"upper", "schema public"}},
		{"procedure", "CALL public.wipe()", refused, []string{"only a query"}},
		{"do block", "DO $$ BEGIN DELETE FROM penguins; END $$", refused, []string{"only a query"}},
		{"pg_sleep", "SELECT pg_sleep(5)", refused, []string{"pg_sleep", "sleeps"}},
		{"slow cross join past the timeout", "SELECT count(*) FROM big a, big b, big c", datachat.KindTimeout, []string{"statement timeout"}},
		{"two statements", "SELECT 1; DROP TABLE penguins", refused, []string{"one statement"}},
		{"commit then delete", "COMMIT; DELETE FROM penguins", refused, []string{"one statement"}},
		{"commit", "COMMIT", refused, []string{"only a query"}},
		{"read write", "SET TRANSACTION READ WRITE", refused, []string{"only a query"}},
		{"set role", "SET ROLE postgres", refused, []string{"only a query"}},
		{"set session authorization", "SET SESSION AUTHORIZATION postgres", refused, []string{"only a query"}},
		{"reset", "RESET ALL", refused, []string{"only a query"}},
		{"prepare", "PREPARE p AS DELETE FROM penguins", refused, []string{"only a query"}},
		{"execute", "EXECUTE p", "", nil},
		{"listen", "LISTEN x", refused, []string{"only a query"}},
		{"vacuum", "VACUUM penguins", refused, []string{"only a query"}},
		{"other schema", "SELECT * FROM secret.creds", refused, []string{"secret.creds", "not one of the source's allowed tables"}},
		{"disallowed table", "SELECT * FROM hidden", refused, []string{"public.hidden"}},
		{"view over a disallowed table", "SELECT * FROM leaky", refused, []string{"public.leaky"}},
		{"subquery", "SELECT species FROM penguins WHERE EXISTS (SELECT 1 FROM secret.creds)", refused, []string{"secret.creds"}},
		{"scalar subquery", "SELECT (SELECT password FROM secret.creds LIMIT 1)", refused, []string{"secret.creds"}},
		{"cte", "WITH c AS (SELECT * FROM secret.creds) SELECT * FROM c", refused, []string{"secret.creds"}},
		{"cte named as the table it reads", "WITH hidden AS (SELECT * FROM hidden) SELECT * FROM hidden", refused, []string{"public.hidden"}},
		{"cte used before its definition", "WITH a AS (SELECT * FROM leaky), leaky AS (SELECT 1) SELECT * FROM a", refused, []string{"public.leaky"}},
		{"cte of a subquery, out of scope", "SELECT * FROM (WITH hidden AS (SELECT 1) SELECT * FROM hidden) x, hidden", refused, []string{"public.hidden"}},
		{"join", "SELECT p.species, c.password FROM penguins p JOIN secret.creds c ON true", refused, []string{"secret.creds"}},
		{"union", "SELECT species FROM penguins UNION ALL SELECT password FROM secret.creds", refused, []string{"secret.creds"}},
		{"lateral", "SELECT * FROM penguins p, LATERAL (SELECT password FROM secret.creds) c", refused, []string{"secret.creds"}},
		{"table command", "TABLE secret.creds", refused, []string{"secret.creds"}},
		{"pg_authid", "SELECT rolname, rolpassword FROM pg_authid", refused, []string{"catalog"}},
		{"pg_catalog", "SELECT rolname FROM pg_roles", refused, []string{"catalog"}},
		{"pg_stats leaks values", "SELECT most_common_vals FROM pg_stats", refused, []string{"catalog"}},
		{"information_schema", "SELECT table_name FROM information_schema.tables", refused, []string{"catalog"}},
		{"pg_stat_activity", "SELECT query FROM pg_stat_activity", refused, []string{"catalog"}},
		{"for update", "SELECT * FROM penguins FOR UPDATE", refused, []string{"locking"}},
		{"for share", "SELECT * FROM penguins FOR SHARE", refused, []string{"locking"}},
		{"for update in a subquery", "SELECT * FROM (SELECT * FROM penguins FOR UPDATE) p", refused, []string{"locking"}},
		{"for no key update skip locked", "SELECT * FROM penguins FOR NO KEY UPDATE SKIP LOCKED", refused, []string{"locking"}},
		{"lock table", "LOCK TABLE penguins", refused, []string{"only a query"}},
		{"explain analyze", "EXPLAIN ANALYZE DELETE FROM penguins", refused, []string{"only a query"}},
		{"declare cursor", "DECLARE c CURSOR FOR SELECT * FROM penguins", refused, []string{"only a query"}},
		{"parenthesis injection", "SELECT 1) AS x, secret.creds AS y; --", "", nil},
		{"comment hiding a statement", "SELECT 1 /* ; */ ; DELETE FROM penguins", refused, []string{"one statement"}},
		{"notify", "SELECT pg_notify('x', 'y')", refused, []string{"pg_notify"}},
		{"xml by table", "SELECT table_to_xml('secret.creds', true, true, '')", refused, []string{"runs SQL"}},
		{"ts_stat", "SELECT * FROM ts_stat('SELECT to_tsvector(password) FROM secret.creds')", refused, []string{"ts_stat"}},
		{"parameter", "SELECT $1", datachat.KindSyntax, []string{"parameters"}},
	}
	checkRefusals(t, db, cases, "hunter2", f.password)
	if !f.dblink {
		t.Log("the dblink extension is not installed here: its case checked that the call fails all the same")
	}
}
