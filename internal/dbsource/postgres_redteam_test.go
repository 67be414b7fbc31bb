package dbsource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// TestPostgresRedTeam replays the holes the outside red team found in the
// PostgreSQL sandbox (issue 22, items 1, 3 and 4), each as it was sent.
func TestPostgresRedTeam(t *testing.T) {
	f := pgSetup(t)
	ctx := context.Background()
	admin := f.adminConn(t)

	// Item 1: a call inside a multi-row VALUES list, which EXPLAIN VERBOSE
	// printed as "*VALUES*".column1, read a table outside --tables.
	t.Run("query_to_xml in VALUES", func(t *testing.T) {
		db := openPg(t, f, dbsource.Options{})
		res, err := db.Query(ctx, `SELECT * FROM (VALUES (query_to_xml('select * from secret.creds',true,true,'')::text),('x')) v`)
		if err == nil {
			t.Fatalf("ran: %v", res.Rows)
		}
		wantKind(t, err, datachat.KindRefused, "query_to_xml")
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the secret: %v", err)
		}
	})

	// Item 1: the same hole signalled another connection of the role.
	t.Run("pg_terminate_backend in VALUES", func(t *testing.T) {
		victim, err := pgx.Connect(ctx, f.reader)
		if err != nil {
			t.Fatal(err)
		}
		defer victim.Close(ctx)
		db := openPg(t, f, dbsource.Options{})
		_, err = db.Query(ctx, fmt.Sprintf(`SELECT * FROM (VALUES (pg_terminate_backend(%d)::text), ('x')) v`, victim.PgConn().PID()))
		wantKind(t, err, datachat.KindRefused, "pg_terminate_backend")
		if err := victim.Ping(ctx); err != nil {
			t.Errorf("the other connection was terminated: %v", err)
		}
	})

	// Item 1: and left a session advisory lock held on the pooled
	// connection after the rollback.
	t.Run("pg_advisory_lock in VALUES", func(t *testing.T) {
		db := openPg(t, f, dbsource.Options{MaxConns: 1})
		_, err := db.Query(ctx, `SELECT * FROM (VALUES (pg_advisory_lock(220022)::text), ('x')) v`)
		wantKind(t, err, datachat.KindRefused, "pg_advisory_lock")
		if n := advisoryLocks(t, admin, 220022); n != 0 {
			t.Errorf("%d advisory locks 220022 are held after the query", n)
		}
	})

	// Item 4: an operator of the database hid a function the plan check did
	// not see: here one that reads a table outside --tables, and one that
	// takes an advisory lock.
	t.Run("user-defined operator", func(t *testing.T) {
		for _, q := range []string{
			`CREATE OR REPLACE FUNCTION public.peek(int, int) RETURNS text LANGUAGE plpgsql AS $$ BEGIN RETURN (SELECT password FROM secret.creds LIMIT 1); END $$`,
			`CREATE OR REPLACE FUNCTION public.hold(text, text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(220023); RETURN $1; END $$`,
			`DROP OPERATOR IF EXISTS public.### (int, int)`,
			`CREATE OPERATOR public.### (LEFTARG = int, RIGHTARG = int, FUNCTION = public.peek)`,
			`DROP OPERATOR IF EXISTS public.+ (text, text)`,
			`CREATE OPERATOR public.+ (LEFTARG = text, RIGHTARG = text, FUNCTION = public.hold)`,
		} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() {
			dbsourcetest.CleanPostgres(f.admin, `DROP OPERATOR IF EXISTS public.### (int, int)`, `DROP OPERATOR IF EXISTS public.+ (text, text)`,
				`DROP FUNCTION IF EXISTS public.peek(int, int)`, `DROP FUNCTION IF EXISTS public.hold(text, text)`)
		})
		db := openPg(t, f, dbsource.Options{MaxConns: 1})
		res, err := db.Query(ctx, `SELECT 1 ### 2 AS x`)
		if err == nil {
			t.Fatalf("the operator ran: %v", res.Rows)
		}
		wantKind(t, err, datachat.KindRefused, "###")
		_, err = db.Query(ctx, `SELECT species + 'x' FROM penguins LIMIT 1`)
		wantKind(t, err, datachat.KindRefused, "+")
		if n := advisoryLocks(t, admin, 220023); n != 0 {
			t.Errorf("the operator's function ran: %d advisory locks held", n)
		}
	})

	// Item 3: a role that gains a dangerous privilege after its pooled
	// connections were opened is refused at its next query.
	t.Run("privilege granted after connect", func(t *testing.T) {
		role := "dcsrc_late_" + f.suffix
		for _, q := range []string{
			fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, f.password),
			fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s", role),
			fmt.Sprintf("GRANT SELECT ON public.penguins TO %s", role),
		} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() {
			dbsourcetest.CleanPostgres(f.admin, "REVOKE ALL ON public.penguins FROM "+role, "REVOKE ALL ON SCHEMA public FROM "+role)
			dbsourcetest.CleanPostgres(f.admin, "DROP ROLE IF EXISTS "+role)
		})
		db := openSource(t, "late", pgRoleURL(f, role), []string{"public.penguins"}, dbsource.Options{MaxConns: 1})
		now := time.Now()
		dbsource.SetNow(db, func() time.Time { return now })
		if err := db.Check(ctx); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if _, err := db.Query(ctx, "SELECT count(*) FROM penguins"); err != nil {
			t.Fatalf("first query: %v", err)
		}
		for _, step := range []struct{ grant, privilege string }{
			{"GRANT pg_read_server_files TO " + role, "pg_read_server_files"},
			{"ALTER ROLE " + role + " SUPERUSER", "SUPERUSER"},
		} {
			if _, err := admin.Exec(ctx, step.grant); err != nil {
				t.Fatal(err)
			}
			now = now.Add(6 * time.Second)
			_, err := db.Query(ctx, "SELECT count(*) FROM penguins")
			wantRole(t, err, step.privilege)
			if _, err := admin.Exec(ctx, "REVOKE pg_read_server_files FROM "+role); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.Exec(ctx, "ALTER ROLE "+role+" NOSUPERUSER"); err != nil {
			t.Fatal(err)
		}
	})
}

// advisoryLocks counts the advisory locks on key held in the database.
func advisoryLocks(t *testing.T, admin *pgx.Conn, key int) int {
	t.Helper()
	var n int
	err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pgRoleURL is the URL of the fixture's database for role, whose password
// is the fixture's.
func pgRoleURL(f *pgFixture, role string) string {
	return dbsourcetest.WithDB(f.admin, pgDBName(f), role, f.password)
}

func pgDBName(f *pgFixture) string { return "dcsrc_" + f.suffix }

// TestPostgresSessionState: nothing a statement leaves in its session
// outlives it on the pooled connection — a session advisory lock, a prepared
// statement, a setting — whatever let it run. The statements run unchecked
// here (dbsource.RawExec): the sandbox's check refuses each of them, and
// this is the layer under it. A pool of one connection: the next query is on
// the same session.
func TestPostgresSessionState(t *testing.T) {
	f := pgSetup(t)
	ctx := context.Background()
	admin := f.adminConn(t)
	db := openPg(t, f, dbsource.Options{MaxConns: 1})
	raw := func(sql string) string {
		t.Helper()
		v, err := dbsource.RawExec(ctx, db, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	pid := raw("SELECT pg_backend_pid()")
	raw("SELECT pg_advisory_lock(220031)")
	raw("PREPARE leak AS SELECT 1")
	raw("SELECT set_config('work_mem', '7777kB', false)")
	raw("SELECT setseed(0.25)")
	if got := raw("SELECT pg_backend_pid()"); got != pid {
		t.Fatalf("the pool of one connection changed session: %s, then %s", pid, got)
	}
	if n := advisoryLocks(t, admin, 220031); n != 0 {
		t.Errorf("%d advisory locks 220031 held after the statement's end", n)
	}
	if got := raw("SELECT count(*) FROM pg_prepared_statements"); got != "0" {
		t.Errorf("%s prepared statements left in the session", got)
	}
	if got := raw("SELECT current_setting('work_mem')"); got == "7777kB" {
		t.Errorf("work_mem set by an earlier statement: %s", got)
	}
	// The checked path runs on the same session, with pgx's statement
	// handling undisturbed by DISCARD ALL.
	for range 3 {
		res, err := db.Query(ctx, "SELECT count(*) FROM penguins")
		if err != nil || fmt.Sprint(res.Rows) != "[[344]]" {
			t.Fatalf("a query after the reset: %v, %v", res, err)
		}
	}
}

// TestPgBuiltins: every function a query may call and every type it may
// cast to is PostgreSQL's own, in pg_catalog of a real server (or newer
// than the server, for the few PostgreSQL 16 and 18 added), executable by
// PUBLIC as PostgreSQL ships it, and none is SECURITY DEFINER.
func TestPgBuiltins(t *testing.T) {
	f := pgSetup(t)
	ctx := context.Background()
	c := f.adminConn(t)
	var major int
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	since := map[string]int{"any_value": 16, "array_sample": 16, "array_shuffle": 16, "date_add": 16, "date_subtract": 16,
		"erf": 16, "erfc": 16, "random_normal": 16, "json_agg_strict": 16, "json_object_agg_strict": 16, "json_object_agg_unique": 16,
		"json_object_agg_unique_strict": 16, "jsonb_agg_strict": 16, "jsonb_object_agg_strict": 16, "jsonb_object_agg_unique": 16,
		"jsonb_object_agg_unique_strict": 16, "array_reverse": 18, "array_sort": 18, "casefold": 18, "uuidv4": 18, "uuidv7": 18}
	rows, err := c.Query(ctx, `SELECT n, count(p.oid), coalesce(bool_or(p.prosecdef), false),
			coalesce(bool_or(p.proacl IS NOT NULL AND NOT EXISTS (SELECT 1 FROM aclexplode(p.proacl) a WHERE a.grantee = 0)), false)
		FROM unnest($1::text[]) n LEFT JOIN pg_proc p ON p.proname = n AND p.pronamespace = 'pg_catalog'::regnamespace
		GROUP BY n ORDER BY n`, dbsource.PgFunctionNames())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var n int
		var definer, restricted bool
		if err := rows.Scan(&name, &n, &definer, &restricted); err != nil {
			t.Fatal(err)
		}
		switch {
		case n == 0 && (since[name] == 0 || since[name] <= major):
			t.Errorf("function %s is not in pg_catalog of PostgreSQL %d", name, major)
		case definer:
			t.Errorf("function %s is SECURITY DEFINER", name)
		case restricted:
			t.Errorf("function %s is not executable by PUBLIC as PostgreSQL ships it", name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var missing []string
	if err := c.QueryRow(ctx, `SELECT coalesce(array_agg(n), '{}') FROM unnest($1::text[]) n WHERE NOT EXISTS (SELECT 1 FROM pg_type
		WHERE typname = n AND typnamespace = 'pg_catalog'::regnamespace AND typtype IN ('b', 'r', 'm'))`, dbsource.PgTypeNames()).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("types that are not base, range or multirange types of pg_catalog: %v", missing)
	}
}
