package dbsource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// TestPostgresGrants: a role that may read anything outside --tables, or
// use a capability beyond reading them, is refused when the source is added
// (DB.Check) and at its first query, with a message naming the privilege
// and the statement that takes it away; the same role, fixed by that
// statement, is accepted. Each case is a role of its own in a database of
// its own, so that grants to PUBLIC touch no other test.
func TestPostgresGrants(t *testing.T) {
	base := dbsourcetest.PostgresURL(t)
	ctx := context.Background()
	s := dbsourcetest.Suffix()
	db := "dcgr_" + s
	password := "pw-" + s
	root, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close(ctx)
	if _, err := root.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	var roles []string
	t.Cleanup(func() { dbsourcetest.DropPostgres(base, db, roles...) })
	admin, err := pgx.Connect(ctx, dbsourcetest.WithDB(base, db, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	exec := func(t *testing.T, stmts ...string) {
		t.Helper()
		for _, q := range stmts {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(t,
		`CREATE TABLE public.ok (id int, note text)`,
		`CREATE TABLE public.other (id int, secret text)`,
		`CREATE SCHEMA hidden`,
		`CREATE TABLE hidden.t (id int, secret text)`,
		`CREATE SCHEMA trap`,
		`REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA trap FROM PUBLIC`,
		`CREATE TABLE public.events (id int, at date) PARTITION BY RANGE (at)`,
		`CREATE TABLE public.events_2024 PARTITION OF public.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')`,
	)
	var dblink bool
	if _, err := admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS dblink SCHEMA trap"); err == nil {
		dblink = true
		exec(t, "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA trap FROM PUBLIC")
	}

	type grantCase struct {
		name     string
		setup    []string // %[1]s is the case's role
		fix      []string // takes the privilege away again
		tables   []string // --tables; public.ok and public.events by default
		want     []string // in the refusal's privilege
		wantFix  string   // in the refusal's fix
		needLink bool     // needs dblink
	}
	cases := []grantCase{
		{name: "superuser", setup: []string{"ALTER ROLE %[1]s SUPERUSER"}, fix: []string{"ALTER ROLE %[1]s NOSUPERUSER"},
			want: []string{"SUPERUSER"}, wantFix: "NOSUPERUSER"},
		{name: "createrole", setup: []string{"ALTER ROLE %[1]s CREATEROLE"}, fix: []string{"ALTER ROLE %[1]s NOCREATEROLE"},
			want: []string{"CREATEROLE"}, wantFix: "NOCREATEROLE"},
		{name: "bypassrls", setup: []string{"ALTER ROLE %[1]s BYPASSRLS"}, fix: []string{"ALTER ROLE %[1]s NOBYPASSRLS"},
			want: []string{"BYPASSRLS"}, wantFix: "NOBYPASSRLS"},
		{name: "replication", setup: []string{"ALTER ROLE %[1]s REPLICATION"}, fix: []string{"ALTER ROLE %[1]s NOREPLICATION"},
			want: []string{"REPLICATION"}, wantFix: "NOREPLICATION"},
		{name: "pg_read_server_files", setup: []string{"GRANT pg_read_server_files TO %[1]s"}, fix: []string{"REVOKE pg_read_server_files FROM %[1]s"},
			want: []string{"pg_read_server_files"}, wantFix: "REVOKE pg_read_server_files FROM"},
		{name: "pg_signal_backend", setup: []string{"GRANT pg_signal_backend TO %[1]s"}, fix: []string{"REVOKE pg_signal_backend FROM %[1]s"},
			want: []string{"pg_signal_backend"}, wantFix: "REVOKE pg_signal_backend"},
		{name: "pg_read_all_data", setup: []string{"GRANT pg_read_all_data TO %[1]s"}, fix: []string{"REVOKE pg_read_all_data FROM %[1]s"},
			want: []string{"pg_read_all_data"}, wantFix: "REVOKE pg_read_all_data"},
		{name: "pg_monitor", setup: []string{"GRANT pg_monitor TO %[1]s"}, fix: []string{"REVOKE pg_monitor FROM %[1]s"},
			want: []string{"pg_monitor"}, wantFix: "REVOKE pg_monitor"},
		{name: "pg_execute_server_program, inherited",
			setup: []string{"CREATE ROLE %[1]s_grp NOLOGIN IN ROLE pg_execute_server_program", "GRANT %[1]s_grp TO %[1]s"},
			fix:   []string{"REVOKE %[1]s_grp FROM %[1]s", "DROP ROLE %[1]s_grp"},
			want:  []string{"pg_execute_server_program"}, wantFix: "REVOKE pg_execute_server_program"},
		{name: "a superuser role it may SET ROLE to",
			setup: []string{"ALTER ROLE %[1]s NOINHERIT", "CREATE ROLE %[1]s_su NOLOGIN SUPERUSER", "GRANT %[1]s_su TO %[1]s"},
			fix:   []string{"REVOKE %[1]s_su FROM %[1]s", "DROP ROLE %[1]s_su", "ALTER ROLE %[1]s INHERIT"},
			want:  []string{"membership in the role", "_su", "SUPERUSER"}, wantFix: "REVOKE"},
		{name: "SELECT on a table outside --tables", setup: []string{"GRANT SELECT ON public.other TO %[1]s"},
			fix:  []string{"REVOKE SELECT ON public.other FROM %[1]s"},
			want: []string{"SELECT of the table public.other", "outside --tables"}, wantFix: `REVOKE SELECT ON "public"."other" FROM`},
		{name: "SELECT through PUBLIC", setup: []string{"GRANT USAGE ON SCHEMA hidden TO PUBLIC", "GRANT SELECT ON hidden.t TO PUBLIC"},
			fix:  []string{"REVOKE SELECT ON hidden.t FROM PUBLIC", "REVOKE USAGE ON SCHEMA hidden FROM PUBLIC"},
			want: []string{"hidden.t", "granted to PUBLIC"}, wantFix: `REVOKE SELECT ON "hidden"."t" FROM PUBLIC`},
		{name: "SELECT on one column", setup: []string{"GRANT SELECT (secret) ON public.other TO %[1]s"},
			fix:  []string{"REVOKE SELECT (secret) ON public.other FROM %[1]s"},
			want: []string{"SELECT on columns of the table public.other"}, wantFix: `REVOKE SELECT ON "public"."other" FROM`},
		{name: "SELECT through a role it is a member of",
			setup: []string{"CREATE ROLE %[1]s_readers NOLOGIN", "GRANT SELECT ON hidden.t TO %[1]s_readers", "GRANT %[1]s_readers TO %[1]s"},
			fix:   []string{"REVOKE %[1]s_readers FROM %[1]s", "REVOKE SELECT ON hidden.t FROM %[1]s_readers", "DROP ROLE %[1]s_readers"},
			want:  []string{"hidden.t", "_readers"}, wantFix: "REVOKE SELECT ON"},
		{name: "a table it owns", setup: []string{"CREATE TABLE public.mine (id int)", "ALTER TABLE public.mine OWNER TO %[1]s"},
			fix:  []string{"DROP TABLE public.mine"},
			want: []string{"ownership of the table public.mine"}, wantFix: "OWNER TO"},
		{name: "a partition of an allowed table is allowed, another table is not",
			setup: []string{"GRANT SELECT ON public.events_2024, public.other TO %[1]s"},
			fix:   []string{"REVOKE SELECT ON public.events_2024, public.other FROM %[1]s"},
			want:  []string{"public.other"}, wantFix: "REVOKE SELECT"},
		{name: "a sequence", setup: []string{"CREATE SEQUENCE public.seq", "GRANT SELECT ON public.seq TO %[1]s"},
			fix:  []string{"DROP SEQUENCE public.seq"},
			want: []string{"sequence public.seq"}, wantFix: "REVOKE SELECT"},
		{name: "EXECUTE on pg_read_file", setup: []string{"GRANT EXECUTE ON FUNCTION pg_read_file(text) TO %[1]s"},
			fix:  []string{"REVOKE EXECUTE ON FUNCTION pg_read_file(text) FROM %[1]s"},
			want: []string{"pg_read_file", "superusers"}, wantFix: "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_read_file(text) FROM"},
		{name: "EXECUTE on lo_import", setup: []string{"GRANT EXECUTE ON FUNCTION lo_import(text) TO %[1]s"},
			fix:  []string{"REVOKE EXECUTE ON FUNCTION lo_import(text) FROM %[1]s"},
			want: []string{"lo_import"}, wantFix: "REVOKE EXECUTE ON FUNCTION pg_catalog.lo_import(text)"},
		{name: "a SECURITY DEFINER function",
			setup: []string{`CREATE FUNCTION trap.peek_%[1]s() RETURNS text LANGUAGE sql SECURITY DEFINER AS $$ SELECT secret FROM hidden.t LIMIT 1 $$`,
				"REVOKE EXECUTE ON FUNCTION trap.peek_%[1]s() FROM PUBLIC", "GRANT EXECUTE ON FUNCTION trap.peek_%[1]s() TO %[1]s"},
			fix:  []string{"DROP FUNCTION trap.peek_%[1]s()"},
			want: []string{"SECURITY DEFINER", "peek_"}, wantFix: "REVOKE EXECUTE ON FUNCTION trap.peek_"},
		{name: "a SECURITY DEFINER function of PUBLIC, in a schema it may not use",
			setup: []string{`CREATE FUNCTION trap.peek2_%[1]s() RETURNS text LANGUAGE sql SECURITY DEFINER AS $$ SELECT secret FROM hidden.t LIMIT 1 $$`,
				"GRANT EXECUTE ON FUNCTION trap.peek2_%[1]s() TO PUBLIC"},
			fix:  []string{"DROP FUNCTION trap.peek2_%[1]s()"},
			want: []string{"SECURITY DEFINER", "peek2_"}, wantFix: "FROM PUBLIC"},
		{name: "an IMMUTABLE function of user code",
			setup: []string{"GRANT USAGE ON SCHEMA trap TO %[1]s",
				`CREATE FUNCTION trap.folds_%[1]s() RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT secret FROM hidden.t LIMIT 1 $$`,
				"REVOKE EXECUTE ON FUNCTION trap.folds_%[1]s() FROM PUBLIC", "GRANT EXECUTE ON FUNCTION trap.folds_%[1]s() TO %[1]s"},
			fix:  []string{"DROP FUNCTION trap.folds_%[1]s()", "REVOKE USAGE ON SCHEMA trap FROM %[1]s"},
			want: []string{"IMMUTABLE", "folds_"}, wantFix: "REVOKE EXECUTE ON FUNCTION trap.folds_"},
		{name: "a cast that calls user code",
			setup: []string{"CREATE TYPE trap.pair_%[1]s AS (a int, b int)",
				`CREATE FUNCTION trap.pair_text_%[1]s(trap.pair_%[1]s) RETURNS text LANGUAGE sql AS $$ SELECT pg_advisory_lock(1)::text $$`,
				"CREATE CAST (trap.pair_%[1]s AS text) WITH FUNCTION trap.pair_text_%[1]s(trap.pair_%[1]s)",
				"GRANT EXECUTE ON FUNCTION trap.pair_text_%[1]s(trap.pair_%[1]s) TO %[1]s"},
			fix:  []string{"DROP TYPE trap.pair_%[1]s CASCADE"},
			want: []string{"a cast calls", "pair_text_"}, wantFix: "REVOKE EXECUTE ON FUNCTION trap.pair_text_"},
		{name: "dblink", setup: []string{"GRANT USAGE ON SCHEMA trap TO %[1]s", "GRANT EXECUTE ON FUNCTION trap.dblink(text, text) TO %[1]s"},
			fix:  []string{"REVOKE EXECUTE ON FUNCTION trap.dblink(text, text) FROM %[1]s", "REVOKE USAGE ON SCHEMA trap FROM %[1]s"},
			want: []string{"dblink"}, wantFix: "REVOKE EXECUTE ON FUNCTION trap.dblink(text, text)", needLink: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needLink && !dblink {
				t.Skip("the dblink extension is not installed on this server")
			}
			role := fmt.Sprintf("dcgr_%d_%s", i, s)
			roles = append(roles, role+"_grp", role+"_su", role+"_readers", role)
			exec(t,
				fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password),
				"GRANT USAGE ON SCHEMA public TO "+role,
				"GRANT SELECT ON public.ok, public.events TO "+role)
			for _, q := range tc.setup {
				exec(t, strings.ReplaceAll(q, "%[1]s", role))
			}
			tables := tc.tables
			if tables == nil {
				tables = []string{"public.ok", "public.events"}
			}
			url := dbsourcetest.WithDB(base, db, role, password)
			src, err := dbsource.Open(dbsource.Source{Name: "bad", URL: url, Tables: tables, AllUsers: true}, dbsource.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			err = src.Check(ctx)
			var re *dbsource.RoleError
			if !errors.As(err, &re) {
				t.Fatalf("Check: got %v, want a RoleError", err)
			}
			msg := re.Error()
			for _, w := range tc.want {
				if !strings.Contains(re.Privilege, w) {
					t.Errorf("privilege %q does not say %q", re.Privilege, w)
				}
			}
			if !strings.Contains(re.Fix, tc.wantFix) {
				t.Errorf("fix %q does not say %q", re.Fix, tc.wantFix)
			}
			if strings.Contains(msg, password) {
				t.Errorf("the refusal shows the password: %s", msg)
			}
			_, err = src.Query(ctx, "SELECT count(*) FROM public.ok")
			wantRole(t, err, tc.want[0])
			// Fixed as the refusal says, the role is accepted.
			for _, q := range tc.fix {
				exec(t, strings.ReplaceAll(q, "%[1]s", role))
			}
			fixed, err := dbsource.Open(dbsource.Source{Name: "fixed", URL: url, Tables: tables, AllUsers: true}, dbsource.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer fixed.Close()
			if err := fixed.Check(ctx); err != nil {
				t.Fatalf("after %q: Check: %v", tc.fix, err)
			}
		})
	}

	// The README's role: CREATE ROLE … LOGIN, USAGE on the schema, SELECT on
	// the tables of --tables; nothing else.
	t.Run("the README's role", func(t *testing.T) {
		role := "dcgr_readme_" + s
		roles = append(roles, role)
		exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password),
			"GRANT USAGE ON SCHEMA public TO "+role, "GRANT SELECT ON public.ok TO "+role)
		src := openSource(t, "readme", dbsourcetest.WithDB(base, db, role, password), []string{"public.ok"}, dbsource.Options{})
		if err := src.Check(ctx); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if _, err := src.Query(ctx, "SELECT count(*) FROM ok"); err != nil {
			t.Fatalf("Query: %v", err)
		}
	})
}
