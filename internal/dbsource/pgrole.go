package dbsource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The proof of a PostgreSQL source's role. What a source may read is what
// its role is granted: the database enforces it on every statement, and
// datachat proves from the catalog, when the source is added, on each new
// connection, before queries (at most roleProofTTL apart) and periodically
// ([DB.Watch]), that the grants are what --tables states and nothing more.
// The role, and every role it is a member of (it could SET ROLE to any),
// must have:
//
//   - no SUPERUSER, CREATEROLE, BYPASSRLS or REPLICATION attribute;
//   - no membership in a superuser role or in a predefined role that reads,
//     writes or signals beyond the grants (pgDangerousRoles);
//   - no SELECT, on a table or any of its columns, granted to it, to a role
//     it is a member of or to PUBLIC, nor ownership, on any relation outside
//     --tables in a schema that is not PostgreSQL's own (a partition reads
//     as its partitioned table);
//   - no EXECUTE on a function PostgreSQL ships restricted (the file,
//     backup, replication, log and statistics-reset functions: pg_catalog
//     functions whose ACL does not grant PUBLIC), on dblink's functions, on
//     a SECURITY DEFINER function outside pg_catalog, on an IMMUTABLE
//     function of user code (PostgreSQL runs those while planning), or on a
//     function of user code a cast calls (a query would run it without
//     naming it). EXECUTE counts whether or not the role may use the
//     function's schema: a cast or an operator calls a function without
//     naming it.
//
// User code is a function in a language other than C and internal (only a
// superuser can create those), outside PostgreSQL's own schemas, that no
// extension installed.

// pgDangerousRoles are PostgreSQL's predefined roles whose members can read,
// write or signal beyond a source's grants, with what they allow.
var pgDangerousRoles = map[string]string{
	"pg_read_server_files":        "reads any file on the database server (COPY FROM a file, pg_read_file)",
	"pg_write_server_files":       "writes any file on the database server (COPY TO a file)",
	"pg_execute_server_program":   "runs programs on the database server (COPY … PROGRAM)",
	"pg_signal_backend":           "cancels and terminates other sessions' queries",
	"pg_signal_autovacuum_worker": "signals the server's autovacuum workers",
	"pg_read_all_data":            "reads every table of the database",
	"pg_write_all_data":           "writes every table of the database",
	"pg_read_all_stats":           "reads every session's queries and the server's statistics",
	"pg_read_all_settings":        "reads every setting of the server",
	"pg_stat_scan_tables":         "runs monitoring functions that lock tables",
	"pg_monitor":                  "reads every session's queries, the server's settings and statistics",
	"pg_checkpoint":               "runs CHECKPOINT",
	"pg_create_subscription":      "creates subscriptions that connect to other servers",
	"pg_maintain":                 "runs VACUUM, ANALYZE, REINDEX, REFRESH and LOCK on every table",
}

// pgRoleError builds the refusal of role for privilege, with fix.
func (e *pgEngine) pgRoleError(role, privilege, fix string) error {
	return &RoleError{Source: e.db.src.Name, Role: role, Privilege: privilege, Fix: fix}
}

// roleOK proves the role of connection c (see above).
func (e *pgEngine) roleOK(ctx context.Context, c *pgx.Conn) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("source %s: check the role's %s: %w", e.db.src.Name, what, err)
	}
	// Attributes, of the role and of every role it is a member of.
	rows, err := c.Query(ctx, `SELECT r.rolname, r.rolname = current_user, r.rolsuper, r.rolcreaterole, r.rolbypassrls, r.rolreplication
		FROM pg_catalog.pg_roles r WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
		ORDER BY r.rolname = current_user DESC, r.rolname`)
	if err != nil {
		return fail("attributes", err)
	}
	var user string
	type attrs struct {
		name                        string
		self, super, create, bypass bool
		repl                        bool
	}
	var roles []attrs
	for rows.Next() {
		var a attrs
		if err := rows.Scan(&a.name, &a.self, &a.super, &a.create, &a.bypass, &a.repl); err != nil {
			rows.Close()
			return fail("attributes", err)
		}
		if a.self {
			user = a.name
		}
		roles = append(roles, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("attributes", err)
	}
	u := pgIdent(user)
	for _, a := range roles {
		r := pgIdent(a.name)
		attr := func(name, does, off string) error {
			if a.self {
				return e.pgRoleError(user, name+", which "+does, fmt.Sprintf("run ALTER ROLE %s %s (or connect as a LOGIN role granted only SELECT on the tables of --tables)", u, off))
			}
			return e.pgRoleError(user, fmt.Sprintf("membership in the role %s, which has %s (SET ROLE %s %s)", a.name, name, a.name, does),
				fmt.Sprintf("run REVOKE %s FROM %s", r, u))
		}
		switch {
		case a.super:
			return attr("SUPERUSER", "bypasses every privilege", "NOSUPERUSER")
		case a.create:
			return attr("CREATEROLE", "can create roles and grant itself their privileges", "NOCREATEROLE")
		case a.bypass:
			return attr("BYPASSRLS", "reads the rows row-level security hides", "NOBYPASSRLS")
		case a.repl:
			return attr("REPLICATION", "can stream the whole database over a replication connection", "NOREPLICATION")
		}
		if does := pgDangerousRoles[a.name]; does != "" {
			return e.pgRoleError(user, fmt.Sprintf("membership in %s, which %s", a.name, does),
				fmt.Sprintf("run REVOKE %s FROM %s (or from the role %s holds it through)", a.name, u, u))
		}
	}
	if err := e.proveRelations(ctx, c, user); err != nil {
		return err
	}
	return e.proveFunctions(ctx, c, user)
}

// pgGranteesSQL lists the grantees holding priv in the ACL entries a of
// from that matter to the role: PUBLIC and the roles it is a member of,
// comma-separated, or NULL.
func pgGranteesSQL(from, priv string) string {
	return `(SELECT pg_catalog.string_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END, ', ')
		FROM ` + from + `
		AND a.privilege_type = '` + priv + `' AND (a.grantee = 0 OR pg_catalog.pg_has_role(current_user, a.grantee, 'MEMBER')))`
}

// proveRelations refuses a role that can read a relation outside --tables.
func (e *pgEngine) proveRelations(ctx context.Context, c *pgx.Conn, user string) error {
	rows, err := c.Query(ctx, `SELECT n.nspname, c.relname, c.relkind::text,
			coalesce(rn.nspname, ''), coalesce(rc.relname, ''),
			pg_catalog.pg_has_role(current_user, c.relowner, 'MEMBER'),
			coalesce(`+pgGranteesSQL("pg_catalog.aclexplode(c.relacl) a WHERE true", "SELECT")+`, ''),
			coalesce(`+pgGranteesSQL("pg_catalog.pg_attribute at, pg_catalog.aclexplode(at.attacl) a WHERE at.attrelid = c.oid", "SELECT")+`, '')
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_catalog.pg_class rc ON rc.oid = pg_catalog.pg_partition_root(c.oid)
		LEFT JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_(toast|temp_)'
		  AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
			AND (pg_catalog.has_table_privilege(r.oid, c.oid, 'SELECT') OR pg_catalog.has_any_column_privilege(r.oid, c.oid, 'SELECT')))
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return fmt.Errorf("source %s: check the role's tables: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema, name, kind, rootSchema, root, tableGrantees, columnGrantees string
		var owner bool
		if err := rows.Scan(&schema, &name, &kind, &rootSchema, &root, &owner, &tableGrantees, &columnGrantees); err != nil {
			return err
		}
		if e.allow.allowed(schema, name) || root != "" && e.allow.allowed(rootSchema, root) {
			continue
		}
		rel := pgIdent(schema) + "." + pgIdent(name)
		what := map[string]string{"v": "view", "m": "materialized view", "f": "foreign table", "S": "sequence", "p": "partitioned table"}[kind]
		if what == "" {
			what = "table"
		}
		orAdd := fmt.Sprintf(", or add %s.%s to --tables if the source may read it", schema, name)
		switch {
		case owner:
			return e.pgRoleError(user, fmt.Sprintf("ownership of the %s %s.%s, outside --tables", what, schema, name),
				fmt.Sprintf("connect as a role that does not own it (ALTER TABLE %s OWNER TO another role)%s", rel, orAdd))
		case tableGrantees != "" || columnGrantees != "":
			grantees := tableGrantees
			kindOf := "SELECT"
			if grantees == "" {
				grantees, kindOf = columnGrantees, "SELECT on columns"
			}
			return e.pgRoleError(user, fmt.Sprintf("%s of the %s %s.%s, outside --tables (granted to %s)", kindOf, what, schema, name, grantees),
				fmt.Sprintf("run REVOKE SELECT ON %s FROM %s (this revokes its column grants too)%s", rel, grantees, orAdd))
		default: // through a predefined role refused above, or a grant the ACLs do not show
			return e.pgRoleError(user, fmt.Sprintf("SELECT on the %s %s.%s, outside --tables", what, schema, name),
				fmt.Sprintf("revoke the role's SELECT on %s%s", rel, orAdd))
		}
	}
	return rows.Err()
}

// proveFunctions refuses a role that can execute a dangerous function (see
// above); the first found, with the REVOKE that ends it.
func (e *pgEngine) proveFunctions(ctx context.Context, c *pgx.Conn, user string) error {
	var fn, why, grantees string
	var owner bool
	err := c.QueryRow(ctx, `WITH usable AS (
			SELECT p.oid, p.proname, p.proowner, p.proacl, p.prosecdef, p.provolatile, n.nspname,
				l.lanname NOT IN ('internal', 'c') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
					WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e') AS user_code,
				(SELECT x.extname FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid
					WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
					  AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass) AS ext
			FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
			JOIN pg_catalog.pg_language l ON l.oid = p.prolang
			WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
				AND pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE'))
		), dangerous AS (
			SELECT u.*, CASE
				WHEN u.nspname = 'pg_catalog' AND u.proacl IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(u.proacl) a
					WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
					THEN 'which PostgreSQL allows only to superusers unless granted (files, backups, replication, logs, statistics)'
				WHEN u.ext = 'dblink' THEN 'which connects to other databases and servers (dblink)'
				WHEN u.prosecdef AND u.nspname <> 'pg_catalog' THEN 'which is SECURITY DEFINER: it runs with its owner''s privileges, beyond the role''s grants'
				WHEN u.user_code AND u.provolatile = 'i' THEN 'which is IMMUTABLE: PostgreSQL runs it while planning, before the sandbox can check a query (or declare it STABLE)'
				WHEN u.user_code AND EXISTS (SELECT 1 FROM pg_catalog.pg_cast k WHERE k.castfunc = u.oid)
					THEN 'which a cast calls: a query could run it without naming it'
				END AS why
			FROM usable u)
		SELECT pg_catalog.quote_ident(d.nspname) || '.' || pg_catalog.quote_ident(d.proname) || '(' || pg_catalog.pg_get_function_identity_arguments(d.oid) || ')',
			d.why, pg_catalog.pg_has_role(current_user, d.proowner, 'MEMBER'),
			coalesce(`+pgGranteesSQL("pg_catalog.aclexplode(coalesce(d.proacl, pg_catalog.acldefault('f', d.proowner))) a WHERE true", "EXECUTE")+`, '')
		FROM dangerous d WHERE d.why IS NOT NULL ORDER BY 1 LIMIT 1`).Scan(&fn, &why, &owner, &grantees)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("source %s: check the role's functions: %w", e.db.src.Name, err)
	case owner:
		return e.pgRoleError(user, fmt.Sprintf("ownership of the function %s, %s", fn, why),
			fmt.Sprintf("connect as a role that does not own it (ALTER FUNCTION %s OWNER TO another role)", fn))
	}
	if grantees == "" {
		grantees = pgIdent(user)
	}
	return e.pgRoleError(user, fmt.Sprintf("EXECUTE on the function %s, %s", fn, why),
		fmt.Sprintf("run REVOKE EXECUTE ON FUNCTION %s FROM %s", fn, strings.TrimSuffix(grantees, ", ")))
}
