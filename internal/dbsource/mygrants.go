package dbsource

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// The database decides what a MySQL/MariaDB source may read, and checkRole
// proves it from the server's catalog: the account, and every role it holds,
// may SELECT nothing outside --tables, and holds none of the global
// privileges that reach past a query (myRefused). --tables then states the
// grant; the statement checker (mycheck.go) enforces the same list a second
// time.
//
// Where the grants come from:
//   - the account's own: information_schema's USER_, SCHEMA_, TABLE_ and
//     COLUMN_PRIVILEGES (rows, not text: MariaDB's SHOW GRANTS lines of the
//     account carry syntax no MySQL parser reads, IDENTIFIED VIA … and
//     MariaDB-only privilege names);
//   - on MySQL also SHOW GRANTS, each line parsed by TiDB's parser into a
//     GrantStmt or GrantRoleStmt (the roles it names), and
//     SHOW GRANTS … USING those roles for their privileges;
//   - on MariaDB, the roles from information_schema.APPLICABLE_ROLES (nested
//     ones too), and for each role granted to the account, SHOW GRANTS FOR it
//     with it enabled (which lists its nested roles' grants), and SHOW GRANTS
//     FOR PUBLIC (MariaDB 10.11's grants to every account), each line parsed
//     by TiDB's parser. A line the parser cannot read refuses the source:
//     what it grants cannot be proven.
//
// The lines are never logged or shown: MariaDB's may carry a password hash.

// myRefused are global privileges that let a query escape read-only or reach
// past the source, and why.
var myRefused = map[string]string{
	"ALL PRIVILEGES":           "every privilege, FILE and SUPER among them",
	"FILE":                     "FILE (read and write the server's files: LOAD_FILE, SELECT … INTO OUTFILE, LOAD DATA INFILE)",
	"SUPER":                    "SUPER (bypass read_only, kill other sessions, change global settings)",
	"PROCESS":                  "PROCESS (read other sessions' statements)",
	"SHUTDOWN":                 "SHUTDOWN (stop the server)",
	"RELOAD":                   "RELOAD (flush and lock the server)",
	"CREATE USER":              "CREATE USER (create and change accounts)",
	"CONNECTION ADMIN":         "CONNECTION ADMIN (kill other sessions)",
	"READ_ONLY ADMIN":          "READ_ONLY ADMIN (write despite read_only)",
	"FEDERATED ADMIN":          "FEDERATED ADMIN (make connections to other servers)",
	"SET USER":                 "SET USER (act as another account)",
	"BINLOG ADMIN":             "BINLOG ADMIN",
	"REPLICATION MASTER ADMIN": "REPLICATION MASTER ADMIN",
	"REPLICATION SLAVE ADMIN":  "REPLICATION SLAVE ADMIN",
	"SYSTEM_VARIABLES_ADMIN":   "SYSTEM_VARIABLES_ADMIN (change global settings)",
	"CONNECTION_ADMIN":         "CONNECTION_ADMIN (kill other sessions)",
	"SYSTEM_USER":              "SYSTEM_USER",
}

// myGrant is one privilege of the account or of a role it holds.
type myGrant struct {
	grantee string // as REVOKE … FROM names it: 'user'@'host' or `role`
	via     string // the role it comes through ("" for the account's own), for messages
	priv    string // upper case: SELECT, ALL PRIVILEGES, FILE…
	level   ast.GrantLevelType
	db      string // a LIKE pattern at database level (`shop\_%`), else a name
	table   string
	cols    []string
}

// holder names who has g, for a RoleError.
func (g myGrant) holder(account string) string {
	if g.via != "" {
		return account + " (through role " + g.via + ")"
	}
	return account
}

// on writes the object of g as GRANT and REVOKE write it: *.*, `db`.*,
// `db`.`t` or (`a`, `b`) ON `db`.`t`.
func (g myGrant) on() string {
	switch g.level {
	case ast.GrantLevelGlobal:
		return "ON *.*"
	case ast.GrantLevelDB:
		return "ON " + myIdent(g.db) + ".*"
	}
	on := "ON " + myIdent(g.db) + "." + myIdent(g.table)
	if len(g.cols) > 0 {
		cols := make([]string, len(g.cols))
		for i, c := range g.cols {
			cols[i] = myIdent(c)
		}
		on = "(" + strings.Join(cols, ", ") + ") " + on
	}
	return on
}

func (g myGrant) revoke() string {
	return fmt.Sprintf("REVOKE %s %s FROM %s", g.priv, g.on(), g.grantee)
}

// checkRole proves the account's grants (see above), and reads which views
// of the server read with their definer's rights, for the statement checker.
func (e *myEngine) checkRole(ctx context.Context) error {
	c, err := e.sqldb.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return e.connErr(err)
	}
	defer c.Close() // the session is not reused: its role may have been changed below
	s := e.serverInfo()
	if s == nil {
		return fmt.Errorf("source %s: the server's version was not read", e.db.src.Name)
	}
	var account string
	if err := c.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&account); err != nil {
		return e.proofErr("read the account", err)
	}
	grants, err := e.accountGrants(ctx, c, account)
	if err != nil {
		return err
	}
	var more []myGrant
	if s.mariadb {
		more, err = e.mariadbRoleGrants(ctx, c, account)
	} else {
		more, err = e.mysqlGrants(ctx, c, account)
	}
	if err != nil {
		return err
	}
	if err := e.judge(ctx, c, myAccount(account), append(grants, more...)); err != nil {
		return err
	}
	return e.readDefinerViews(ctx, c)
}

func (e *myEngine) proofErr(what string, err error) error {
	return fmt.Errorf("source %s: %s: %w", e.db.src.Name, what, err)
}

// myAccount writes CURRENT_USER()'s user@host as GRANT and REVOKE name an
// account: 'user'@'host'.
func myAccount(userHost string) string {
	i := strings.LastIndexByte(userHost, '@')
	if i < 0 {
		return quote("'", userHost)
	}
	return quote("'", userHost[:i]) + "@" + quote("'", userHost[i+1:])
}

// accountGrants reads the account's own privileges from information_schema.
// An account sees only its own rows there unless it can read the grant
// tables of the mysql database; rows of other grantees say it can, and are
// refused.
func (e *myEngine) accountGrants(ctx context.Context, c *sql.Conn, account string) ([]myGrant, error) {
	grantee := myAccount(account)
	var out []myGrant
	other := ""
	for _, q := range []struct {
		level ast.GrantLevelType
		sql   string
	}{
		{ast.GrantLevelGlobal, "SELECT GRANTEE, PRIVILEGE_TYPE, '', '', '' FROM information_schema.USER_PRIVILEGES"},
		{ast.GrantLevelDB, "SELECT GRANTEE, PRIVILEGE_TYPE, TABLE_SCHEMA, '', '' FROM information_schema.SCHEMA_PRIVILEGES"},
		{ast.GrantLevelTable, "SELECT GRANTEE, PRIVILEGE_TYPE, TABLE_SCHEMA, TABLE_NAME, '' FROM information_schema.TABLE_PRIVILEGES"},
		{ast.GrantLevelTable, "SELECT GRANTEE, PRIVILEGE_TYPE, TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMN_PRIVILEGES"},
	} {
		rows, err := c.QueryContext(ctx, q.sql)
		if err != nil {
			return nil, e.proofErr("read the account's privileges", err)
		}
		for rows.Next() {
			g := myGrant{grantee: grantee, level: q.level}
			var who, col string
			if err := rows.Scan(&who, &g.priv, &g.db, &g.table, &col); err != nil {
				rows.Close()
				return nil, e.proofErr("read the account's privileges", err)
			}
			if who != grantee {
				other = who
				continue
			}
			g.priv = strings.ToUpper(g.priv)
			if col != "" {
				g.cols = []string{col}
			}
			out = append(out, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, e.proofErr("read the account's privileges", err)
		}
	}
	if other != "" {
		// Judge the account's own grants first: they name what to revoke.
		if err := e.judge(ctx, c, grantee, out); err != nil {
			return nil, err
		}
		return nil, &RoleError{Source: e.db.src.Name, Role: grantee, Privilege: "SELECT on the server's grant tables (it can read the privileges of other accounts, " + other + " among them)",
			Fix: "REVOKE SELECT ON `mysql`.* (or the global SELECT) FROM " + grantee}
	}
	return out, nil
}

// mariadbRoleGrants reads the privileges of every role the account holds.
func (e *myEngine) mariadbRoleGrants(ctx context.Context, c *sql.Conn, account string) ([]myGrant, error) {
	rows, err := c.QueryContext(ctx, "SELECT GRANTEE, ROLE_NAME FROM information_schema.APPLICABLE_ROLES")
	if err != nil {
		return nil, e.proofErr("read the account's roles", err)
	}
	var direct, all []string
	for rows.Next() {
		var grantee, role string
		if err := rows.Scan(&grantee, &role); err != nil {
			rows.Close()
			return nil, e.proofErr("read the account's roles", err)
		}
		all = append(all, role)
		if grantee == account {
			direct = append(direct, role)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, e.proofErr("read the account's roles", err)
	}
	var out []myGrant
	seen := map[string]bool{} // roles whose grants were listed
	for _, role := range direct {
		unreadable := func() error {
			return &RoleError{Source: e.db.src.Name, Role: myAccount(account), Privilege: "the role " + myIdent(role) + ", whose privileges cannot be read",
				Fix: fmt.Sprintf("REVOKE %s FROM %s, or grant the role only with plain GRANT … ON … TO statements (the role's grants are read with a MySQL parser)", myIdent(role), myAccount(account))}
		}
		if _, err := c.ExecContext(ctx, "SET ROLE "+myIdent(role)); err != nil {
			return nil, unreadable()
		}
		lines, err := myTextRows(ctx, c, "SHOW GRANTS FOR "+myIdent(role))
		if err != nil {
			return nil, unreadable()
		}
		for _, line := range lines {
			st, err := myParseGrant(line)
			if err != nil {
				return nil, &RoleError{Source: e.db.src.Name, Role: myAccount(account), Privilege: "the role " + myIdent(role) + ", one of whose grants the sandbox's MySQL parser cannot read (MariaDB-only syntax such as WITH ADMIN OPTION or a MariaDB-only privilege)",
					Fix: fmt.Sprintf("grant the role, and the roles it holds, only standard privileges with plain GRANT statements, or REVOKE %s FROM %s", myIdent(role), myAccount(account))}
			}
			if g, ok := st.(*ast.GrantStmt); ok {
				for _, u := range g.Users {
					seen[u.User.Username] = true
					out = append(out, myGrantsOf(g, myIdent(u.User.Username), u.User.Username)...)
				}
			}
		}
	}
	for _, role := range all {
		if !seen[role] {
			return nil, &RoleError{Source: e.db.src.Name, Role: myAccount(account), Privilege: "the role " + myIdent(role) + ", whose privileges cannot be read",
				Fix: fmt.Sprintf("REVOKE %s from the account or the role holding it", myIdent(role))}
		}
	}
	public, err := e.publicGrants(ctx, c, account)
	if err != nil {
		return nil, err
	}
	return append(out, public...), nil
}

// publicGrants reads what MariaDB (10.11 on) grants to PUBLIC, that is to
// every account; information_schema shows none of it. A server without
// PUBLIC refuses the statement (a syntax error, or no such grant).
func (e *myEngine) publicGrants(ctx context.Context, c *sql.Conn, account string) ([]myGrant, error) {
	lines, err := myTextRows(ctx, c, "SHOW GRANTS FOR PUBLIC")
	switch myNumber(err) {
	case 0:
		if err != nil {
			return nil, e.proofErr("read the grants to PUBLIC", err)
		}
	case 1064, 1141, 1133:
		return nil, nil
	default:
		return nil, e.proofErr("read the grants to PUBLIC", err)
	}
	var out []myGrant
	for _, line := range lines {
		st, err := myParseGrant(line)
		if err != nil {
			return nil, &RoleError{Source: e.db.src.Name, Role: myAccount(account) + " (through PUBLIC, every account)", Privilege: "a grant to PUBLIC the sandbox's MySQL parser cannot read",
				Fix: "grant PUBLIC only standard privileges with plain GRANT statements, or none"}
		}
		if g, ok := st.(*ast.GrantStmt); ok {
			out = append(out, myGrantsOf(g, "PUBLIC", "PUBLIC, which every account holds")...)
		}
	}
	return out, nil
}

// mysqlGrants reads MySQL's SHOW GRANTS of the account, and of the account
// using every role it was granted.
func (e *myEngine) mysqlGrants(ctx context.Context, c *sql.Conn, account string) ([]myGrant, error) {
	grantee := myAccount(account)
	lines, err := myTextRows(ctx, c, "SHOW GRANTS")
	if err != nil {
		return nil, e.proofErr("read the account's grants", err)
	}
	var out []myGrant
	var roles []string
	read := func(lines []string, via string) error {
		for _, line := range lines {
			st, err := myParseGrant(line)
			if err != nil {
				return &RoleError{Source: e.db.src.Name, Role: grantee, Privilege: "a grant the sandbox's MySQL parser cannot read",
					Fix: "grant the account (and its roles) only standard privileges with plain GRANT statements"}
			}
			switch g := st.(type) {
			case *ast.GrantStmt:
				out = append(out, myGrantsOf(g, grantee, via)...)
			case *ast.GrantRoleStmt:
				for _, r := range g.Roles {
					roles = append(roles, quote("`", r.Username)+"@"+quote("`", r.Hostname))
				}
			}
		}
		return nil
	}
	if err := read(lines, ""); err != nil {
		return nil, err
	}
	if len(roles) == 0 {
		return out, nil
	}
	using := strings.Join(roles, ", ")
	lines, err = myTextRows(ctx, c, "SHOW GRANTS FOR CURRENT_USER() USING "+using)
	if err != nil {
		return nil, e.proofErr("read the account's roles' grants", err)
	}
	if err := read(lines, using); err != nil {
		return nil, err
	}
	return out, nil
}

// myParseGrant parses one line of SHOW GRANTS with TiDB's parser.
func myParseGrant(line string) (st ast.StmtNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("the parser failed: %v", r)
		}
	}()
	p := myParsers.Get().(*parser.Parser)
	stmts, _, err := p.Parse(line, "", "")
	myParsers.Put(p) // not reached after a panic: that parser is dropped
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("%d statements", len(stmts))
	}
	switch st := stmts[0].(type) {
	case *ast.GrantStmt, *ast.GrantRoleStmt, *ast.GrantProxyStmt, *ast.RevokeStmt, *ast.RevokeRoleStmt, *ast.SetDefaultRoleStmt:
		// A REVOKE line (MySQL's partial revokes) only narrows; ignoring it
		// refuses more, never less.
		return st, nil
	default:
		return nil, fmt.Errorf("not a grant")
	}
}

// myGrantsOf lists the privileges a parsed GRANT gives one grantee.
func myGrantsOf(g *ast.GrantStmt, grantee, via string) []myGrant {
	if g.ObjectType == ast.ObjectTypeFunction || g.ObjectType == ast.ObjectTypeProcedure {
		return nil // EXECUTE on a routine: queries call no routine
	}
	var out []myGrant
	for _, p := range g.Privs {
		name := p.Name
		if name == "" {
			name = p.Priv.String()
		}
		if p.Priv == mysql.AllPriv {
			name = "ALL PRIVILEGES"
		}
		mg := myGrant{grantee: grantee, via: via, priv: strings.ToUpper(name), level: g.Level.Level, db: g.Level.DBName, table: g.Level.TableName}
		for _, c := range p.Cols {
			mg.cols = append(mg.cols, c.Name.O)
		}
		out = append(out, mg)
	}
	return out
}

// myTextRows runs one of our statements and returns its first column.
func myTextRows(ctx context.Context, c *sql.Conn, q string) ([]string, error) {
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// judge refuses a grant that reaches past the source: a dangerous global
// privilege first, then a global SELECT, then a SELECT on a database,
// table or column outside --tables.
func (e *myEngine) judge(ctx context.Context, c *sql.Conn, account string, grants []myGrant) error {
	reads := func(g myGrant) bool { return g.priv == "SELECT" || g.priv == "ALL PRIVILEGES" }
	refuse := func(g myGrant, what, fix string) error {
		return &RoleError{Source: e.db.src.Name, Role: g.holder(account), Privilege: what, Fix: fix}
	}
	for _, g := range grants {
		if why, ok := myRefused[g.priv]; ok && g.level == ast.GrantLevelGlobal {
			return refuse(g, "the global privilege "+why, "run "+g.revoke()+" (or connect as an account granted only SELECT on the tables of --tables)")
		}
	}
	for _, g := range grants {
		if reads(g) && g.level == ast.GrantLevelGlobal {
			return refuse(g, "SELECT on every table of every database (a global grant ON *.*)",
				"run "+g.revoke()+", then GRANT SELECT ON each table of --tables TO "+g.grantee)
		}
	}
	fold := e.serverInfo().foldNames
	for _, g := range grants {
		if !reads(g) {
			continue
		}
		switch g.level {
		case ast.GrantLevelDB:
			outside, inside, err := e.tablesOf(ctx, c, g.db, fold)
			if err != nil {
				return err
			}
			if len(outside) > 0 {
				fix := "run " + g.revoke()
				if len(inside) > 0 {
					grants := make([]string, 0, 4)
					for i, t := range inside {
						if i == 3 {
							grants = append(grants, fmt.Sprintf("… (%d tables in all)", len(inside)))
							break
						}
						grants = append(grants, fmt.Sprintf("GRANT SELECT ON %s TO %s", t, g.grantee))
					}
					fix += ", then " + strings.Join(grants, "; ")
				}
				return refuse(g, fmt.Sprintf("SELECT on every table of the database %s (a database-level grant), which holds %s, outside the source's --tables",
					myIdent(g.db), strings.Join(outside, ", ")), fix)
			}
		case ast.GrantLevelTable:
			schema, table := g.db, g.table
			if fold {
				schema, table = strings.ToLower(schema), strings.ToLower(table)
			}
			catalog := myCatalogSchemas[strings.ToLower(schema)]
			if catalog || !e.allow.allowed(schema, table) {
				what := "the table"
				if len(g.cols) > 0 {
					what = "columns of the table"
				}
				fix := "run " + g.revoke()
				if !catalog {
					fix += " (or add the table to --tables if the source should read it)"
				}
				return refuse(g, fmt.Sprintf("SELECT on %s %s.%s, outside the source's --tables", what, myIdent(g.db), myIdent(g.table)), fix)
			}
		}
	}
	return nil
}

// tablesOf lists the tables of the databases matching a database-level
// grant (a LIKE pattern, as the server matches it), split into those outside
// --tables (at most 5 named) and those inside, as `db`.`t`.
func (e *myEngine) tablesOf(ctx context.Context, c *sql.Conn, pattern string, fold bool) (outside, inside []string, err error) {
	rows, err := c.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE ? AND TABLE_SCHEMA <> 'information_schema' ORDER BY TABLE_SCHEMA, TABLE_NAME", pattern)
	if err != nil {
		return nil, nil, e.proofErr("list the tables a grant reaches", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var schema, table string
		if err := rows.Scan(&schema, &table); err != nil {
			return nil, nil, e.proofErr("list the tables a grant reaches", err)
		}
		s, t := schema, table
		if fold {
			s, t = strings.ToLower(s), strings.ToLower(t)
		}
		name := myIdent(schema) + "." + myIdent(table)
		if myCatalogSchemas[strings.ToLower(s)] || !e.allow.allowed(s, t) {
			if n++; n <= 5 {
				outside = append(outside, name)
			} else if n == 6 {
				outside = append(outside, "…")
			}
			continue
		}
		inside = append(inside, name)
	}
	return outside, inside, rows.Err()
}

// readDefinerViews keeps the views of the server that read with their
// definer's rights.
func (e *myEngine) readDefinerViews(ctx context.Context, c *sql.Conn) error {
	rows, err := c.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.VIEWS WHERE SECURITY_TYPE <> 'INVOKER'")
	if err != nil {
		return e.proofErr("list the views", err)
	}
	defer rows.Close()
	views := map[[2]string]bool{}
	for rows.Next() {
		var v [2]string
		if err := rows.Scan(&v[0], &v[1]); err != nil {
			return e.proofErr("list the views", err)
		}
		if e.serverInfo().foldNames {
			v[0], v[1] = strings.ToLower(v[0]), strings.ToLower(v[1])
		}
		views[v] = true
	}
	if err := rows.Err(); err != nil {
		return e.proofErr("list the views", err)
	}
	e.mu.Lock()
	e.definer = views
	e.mu.Unlock()
	return nil
}
