package dbsource

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"datachat/internal/sqlvalue"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"datachat"
)

// myEngine is a MySQL or MariaDB source.
type myEngine struct {
	db    *DB
	sqldb *sql.DB
	allow allowList

	mu      sync.Mutex
	mariadb bool
	version string // VERSION(), once a connection was made
}

// myParams are the URL parameters a MySQL source accepts; others (the
// driver's allowAllFiles, multiStatements…) are refused.
var myParams = []string{"tls", "connect_timeout"}

func openMySQL(db *DB, u *url.URL, allow allowList) (*myEngine, error) {
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.Timeout = db.opts.ConnectTimeout
	for k, v := range u.Query() {
		switch k {
		case "tls":
			cfg.TLSConfig = v[0] // true, false, skip-verify or preferred
			if !slices.Contains([]string{"true", "false", "skip-verify", "preferred"}, v[0]) {
				return nil, datachat.Errorf(datachat.EINVALID, "source %s: tls=%q: want true, false, skip-verify or preferred", db.src.Name, v[0])
			}
		case "connect_timeout":
			d, err := time.ParseDuration(v[0])
			if err != nil {
				if s, err2 := strconv.Atoi(v[0]); err2 == nil {
					d, err = time.Duration(s)*time.Second, nil
				}
			}
			if err != nil || d <= 0 {
				return nil, datachat.Errorf(datachat.EINVALID, "source %s: connect_timeout=%q: want seconds or a duration", db.src.Name, v[0])
			}
			cfg.Timeout = d
		default:
			return nil, datachat.Errorf(datachat.EINVALID, "source %s: URL parameter %q is not accepted (only %s)", db.src.Name, k, strings.Join(myParams, ", "))
		}
	}
	// The sandbox relies on these driver defaults: say them.
	cfg.MultiStatements = false // the server refuses a second statement
	cfg.InterpolateParams = false
	cfg.AllowAllFiles = false // LOAD DATA LOCAL INFILE may not read our files
	cfg.AllowCleartextPasswords = false
	cfg.ParseTime = false
	cfg.Logger = quietLogger{}
	e := &myEngine{db: db, allow: allow}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "source %s: the MySQL URL is not usable (%s)", db.src.Name, Redact(db.src.URL))
	}
	e.sqldb = sql.OpenDB(&checkedConnector{inner: inner, e: e})
	e.sqldb.SetMaxOpenConns(db.opts.MaxConns)
	e.sqldb.SetMaxIdleConns(db.opts.MaxConns)
	e.sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return e, nil
}

type quietLogger struct{}

func (quietLogger) Print(...any) {}

// checkedConnector checks the role and sets up each new connection.
type checkedConnector struct {
	inner driver.Connector
	e     *myEngine
}

func (c *checkedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.e.setup(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (c *checkedConnector) Driver() driver.Driver { return c.inner.Driver() }

// dquery runs one of our own statements on a driver connection and returns its
// rows as text.
func dquery(ctx context.Context, conn driver.Conn, q string) ([][]string, error) {
	qc, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil, errors.New("the MySQL driver cannot query")
	}
	rows, err := qc.QueryContext(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	var out [][]string
	for {
		if err := rows.Next(vals); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			switch x := v.(type) {
			case []byte:
				row[i] = string(x)
			case nil:
			default:
				row[i] = fmt.Sprint(x)
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// setup runs on every new connection: the role check, the flavour, and the
// session settings the sandbox's checks rely on (no ANSI_QUOTES or
// NO_BACKSLASH_ESCAPES, so rewritten queries quote as expected; UTC).
func (e *myEngine) setup(ctx context.Context, conn driver.Conn) error {
	v, err := dquery(ctx, conn, "SELECT VERSION(), @@SESSION.sql_mode")
	if err != nil || len(v) != 1 {
		return fmt.Errorf("source %s: read the server's version: %w", e.db.src.Name, err)
	}
	e.mu.Lock()
	e.version = v[0][0]
	e.mariadb = strings.Contains(strings.ToLower(v[0][0]), "mariadb")
	e.mu.Unlock()
	if err := e.roleOK(ctx, conn); err != nil {
		return err
	}
	var modes []string
	for _, m := range strings.Split(v[0][1], ",") {
		if m != "" && m != "ANSI_QUOTES" && m != "NO_BACKSLASH_ESCAPES" && m != "ANSI" {
			modes = append(modes, m)
		}
	}
	ec := conn.(driver.ExecerContext)
	_, err = ec.ExecContext(ctx, fmt.Sprintf("SET SESSION sql_mode = '%s', time_zone = '+00:00', character_set_results = 'utf8mb4'", strings.Join(modes, ",")), nil)
	return err
}

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

// roleOK reads SHOW GRANTS of the account and of every role it holds, and
// refuses a global privilege of myRefused. The lines are never logged: one
// may carry a password hash. A role's grants are read with the role enabled
// (MariaDB shows them only so), then the session's role is put back.
func (e *myEngine) roleOK(ctx context.Context, conn driver.Conn) error {
	who, err := dquery(ctx, conn, "SELECT CURRENT_USER(), CURRENT_ROLE()")
	if err != nil || len(who) != 1 {
		if e.isMariaDB() || err == nil {
			return fmt.Errorf("source %s: read the account: %w", e.db.src.Name, err)
		}
		if who, err = dquery(ctx, conn, "SELECT CURRENT_USER(), NULL"); err != nil || len(who) != 1 {
			return fmt.Errorf("source %s: read the account: %w", e.db.src.Name, err)
		}
	}
	account, current := who[0][0], who[0][1]
	check := func(lines [][]string, via string) (roles []string, err error) {
		for _, l := range lines {
			privs, rs := parseGrant(l[0])
			for _, p := range privs {
				if why, ok := myRefused[p]; ok {
					holder := account
					if via != "" {
						holder += ", through role " + via
					}
					return nil, &RoleError{Source: e.db.src.Name, Role: holder, Privilege: "the global privilege " + why,
						Fix: fmt.Sprintf("REVOKE %s ON *.* FROM the account or role (or connect as an account granted only SELECT)", p)}
				}
			}
			roles = append(roles, rs...)
		}
		return roles, nil
	}
	lines, err := dquery(ctx, conn, "SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("source %s: read the account's grants: %w", e.db.src.Name, err)
	}
	queue, err := check(lines, "")
	if err != nil {
		return err
	}
	ec := conn.(driver.ExecerContext)
	seen := map[string]bool{}
	defer func() {
		if !e.isMariaDB() {
			return
		}
		restore := "SET ROLE NONE"
		if current != "" {
			restore = "SET ROLE " + myIdent(current)
		}
		ec.ExecContext(ctx, restore, nil)
	}()
	for len(queue) > 0 && len(seen) < 32 {
		role := queue[0]
		queue = queue[1:]
		if seen[role] {
			continue
		}
		seen[role] = true
		q := "SHOW GRANTS FOR CURRENT_USER() USING " + role
		if e.isMariaDB() {
			if _, err := ec.ExecContext(ctx, "SET ROLE "+role, nil); err != nil && len(seen) == 1 {
				return &RoleError{Source: e.db.src.Name, Role: account, Privilege: "the role " + role + ", whose privileges cannot be read",
					Fix: "grant the account no roles, or only roles without global privileges"}
			}
			q = "SHOW GRANTS FOR " + role
		}
		lines, err := dquery(ctx, conn, q)
		if err != nil {
			return &RoleError{Source: e.db.src.Name, Role: account, Privilege: "the role " + role + ", whose privileges cannot be read",
				Fix: "grant the account no roles, or only roles without global privileges"}
		}
		more, err := check(lines, role)
		if err != nil {
			return err
		}
		queue = append(queue, more...)
	}
	return nil
}

// parseGrant reads one line of SHOW GRANTS: the global privileges of
// "GRANT p, q ON *.* TO …", or the roles of "GRANT `r` TO …".
func parseGrant(line string) (privs, roles []string) {
	rest, ok := strings.CutPrefix(line, "GRANT ")
	if !ok {
		return nil, nil
	}
	if what, on, ok := strings.Cut(rest, " ON "); ok {
		if !strings.HasPrefix(on, "*.* ") {
			return nil, nil
		}
		for _, p := range strings.Split(what, ",") {
			p = strings.TrimSpace(p)
			if i := strings.IndexByte(p, '('); i > 0 { // column privileges: SELECT (a, b)
				p = strings.TrimSpace(p[:i])
			}
			privs = append(privs, strings.ToUpper(p))
		}
		return privs, nil
	}
	what, _, ok := strings.Cut(rest, " TO ")
	if !ok {
		return nil, nil
	}
	for _, r := range strings.Split(what, ",") {
		if r = strings.TrimSpace(r); r != "" {
			roles = append(roles, r)
		}
	}
	return nil, roles
}

func (e *myEngine) close() { e.sqldb.Close() }

func (e *myEngine) connErr(err error) error {
	var re *RoleError
	if errors.As(err, &re) {
		return re
	}
	// The server refused the login (1045 access denied, 1698 without a
	// password) or the database (1044 no access to it, 1049 no such one).
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1044 || me.Number == 1045 || me.Number == 1049 || me.Number == 1698) {
		return &LoginError{Source: e.db.src.Name, Reason: me.Message}
	}
	return fmt.Errorf("source %s: connect to MySQL: %w", e.db.src.Name, err)
}

func (e *myEngine) checkRole(ctx context.Context) error {
	c, err := e.sqldb.Conn(ctx)
	if err != nil {
		return e.connErr(err)
	}
	defer c.Close()
	return c.Raw(func(dc any) error { return e.roleOK(ctx, dc.(driver.Conn)) })
}

func (e *myEngine) dialect(ctx context.Context) (string, error) {
	e.mu.Lock()
	v, maria := e.version, e.mariadb
	e.mu.Unlock()
	if v == "" {
		if err := e.sqldb.PingContext(ctx); err != nil {
			return "", e.connErr(err)
		}
		e.mu.Lock()
		v, maria = e.version, e.mariadb
		e.mu.Unlock()
	}
	num, _, _ := strings.Cut(v, "-")
	if maria {
		return "MariaDB " + num, nil
	}
	return "MySQL " + num, nil
}

func (e *myEngine) isMariaDB() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mariadb
}

// myTx is one sandboxed transaction on a connection of the pool.
type myTx struct {
	c *sql.Conn
}

// begin takes a connection, sets the statement timeout (MariaDB's
// max_statement_time in seconds for every statement; MySQL's
// max_execution_time in milliseconds, for SELECT) and the row cap
// (sql_select_limit), and starts a read-only transaction.
func (e *myEngine) begin(ctx context.Context, selectLimit int) (*myTx, error) {
	c, err := e.sqldb.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e.connErr(err)
	}
	t := &myTx{c: c}
	limit := "DEFAULT"
	if selectLimit > 0 {
		limit = strconv.Itoa(selectLimit)
	}
	set := fmt.Sprintf("SET SESSION max_execution_time = %d, sql_select_limit = %s", max(1, e.db.opts.Timeout.Milliseconds()), limit)
	if e.isMariaDB() {
		set = fmt.Sprintf("SET SESSION max_statement_time = %.3f, sql_select_limit = %s", max(0.001, e.db.opts.Timeout.Seconds()), limit)
	}
	if _, err := c.ExecContext(ctx, set); err != nil {
		c.Close()
		return nil, e.classify(ctx, err, "")
	}
	if _, err := c.ExecContext(ctx, "START TRANSACTION READ ONLY"); err != nil {
		c.Close()
		return nil, e.classify(ctx, err, "")
	}
	return t, nil
}

// end rolls back and returns the connection; a connection whose rollback
// fails is closed, not reused.
func (t *myTx) end() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := t.c.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.c.Raw(func(any) error { return driver.ErrBadConn })
	}
	t.c.Close()
}

func (e *myEngine) query(ctx context.Context, stmt string) (*datachat.QueryResult, error) {
	start := time.Now()
	stmt = trimStatement(stmt)
	if err := myLexicalCheck(stmt); err != nil {
		return nil, err
	}
	t, err := e.begin(ctx, e.db.opts.MaxRows+1)
	if err != nil {
		return nil, err
	}
	defer t.end()
	if _, err := e.check(ctx, t, stmt); err != nil {
		return nil, err
	}
	// The statement's own context: cancelled to stop a result that runs past
	// the cap despite sql_select_limit (a LIMIT of its own), which closes the
	// connection rather than reading the rest.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := t.c.QueryContext(qctx, stmt)
	if err != nil {
		return nil, e.classify(ctx, err, stmt)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, e.classify(ctx, err, stmt)
	}
	if len(types) == 0 {
		return nil, refusedf("the statement returned no rows (SELECT … INTO?); only a query that returns rows can run")
	}
	res := &datachat.QueryResult{Rows: [][]any{}, Columns: make([]datachat.Column, len(types))}
	for i, ct := range types {
		name := ct.DatabaseTypeName()
		res.Columns[i] = datachat.Column{Name: ct.Name(), SQLType: name, Type: myFriendly(name)}
	}
	cl := &cells{maxCell: e.db.opts.MaxCellBytes}
	raw := make([]sql.RawBytes, len(types))
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	size := 0
	for rows.Next() {
		if len(res.Rows) == e.db.opts.MaxRows || size > e.db.opts.MaxResultBytes {
			res.Truncated = true
			if rows.Next() { // more than sql_select_limit: stop the server
				cancel()
			}
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, e.classify(ctx, err, stmt)
		}
		row := make([]any, len(raw))
		for i, b := range raw {
			row[i] = myValue(b, res.Columns[i].SQLType, cl)
			size += len(b) + 8
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil && !res.Truncated {
		return nil, e.classify(ctx, err, stmt)
	}
	res.Truncated = res.Truncated || cl.cut
	res.RowCount = len(res.Rows)
	res.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

func (e *myEngine) estimate(ctx context.Context, stmt string) (int64, error) {
	stmt = trimStatement(stmt)
	if err := myLexicalCheck(stmt); err != nil {
		return 0, err
	}
	t, err := e.begin(ctx, 0)
	if err != nil {
		return 0, err
	}
	defer t.end()
	return e.check(ctx, t, stmt)
}

// classify turns a MySQL error into a datachat.QueryError with the server's message.
// stmt is the statement as given, for "near '…'" messages.
func (e *myEngine) classify(ctx context.Context, err error, stmt string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return fmt.Errorf("source %s: %w", e.db.src.Name, err)
	}
	msg := me.Message
	kind := datachat.KindOther
	switch me.Number {
	case 1064, 1149:
		kind = datachat.KindSyntax
		if near := nearText(msg); stmt != "" && near != "" {
			if i := strings.Index(stmt, near); i > 0 && strings.HasSuffix(strings.TrimSpace(stmt[:i]), ";") {
				return refusedf("one statement at a time (%s)", msg)
			}
		}
	case 1146, 1109, 1051, 1049:
		kind = datachat.KindUnknownTable
		msg += candidates(quotedIn(msg, "'"), e.db.allowedTables(ctx))
	case 1054, 1052, 1247:
		kind = datachat.KindUnknownColumn
	case 1366, 1292, 1265, 1267, 1270, 1271, 1690, 1582, 1583, 1584, 1241, 1222:
		kind = datachat.KindTypeMismatch
	case 1969, 3024, 1317, 1028:
		kind = datachat.KindTimeout
		msg = fmt.Sprintf("the query ran past the source's %v statement timeout (%s); make it lighter: filter or aggregate on indexed columns, or add LIMIT", e.db.opts.Timeout, msg)
	case 1038, 1041, 1114, 5, 1037, 3015:
		kind = datachat.KindMemory
	case 1792:
		kind = datachat.KindRefused
		msg += " (sources are read-only)"
	case 1044, 1045, 1142, 1143, 1227, 1370, 1290, 1148, 3948, 1235, 1295, 1314, 1336, 1418:
		kind = datachat.KindRefused
	}
	return &datachat.QueryError{Kind: kind, Message: msg}
}

// nearText returns the … of a MySQL syntax error's "near '…' at line".
func myNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func nearText(msg string) string {
	_, rest, ok := strings.Cut(msg, "near '")
	if !ok {
		return ""
	}
	i := strings.LastIndex(rest, "' at line")
	if i < 0 {
		return ""
	}
	return rest[:i]
}

// myFriendly maps a MySQL type (the driver's DatabaseTypeName or
// information_schema's DATA_TYPE) to a friendly type name.
func myFriendly(t string) string {
	t = strings.ToUpper(strings.TrimSpace(t))
	t = strings.TrimPrefix(t, "UNSIGNED ")
	switch t {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT", "YEAR", "BIT":
		return datachat.TypeInteger
	case "FLOAT", "DOUBLE", "REAL":
		return datachat.TypeFloat
	case "DECIMAL", "NUMERIC":
		return datachat.TypeDecimal
	case "DATE":
		return datachat.TypeDate
	case "TIME":
		return datachat.TypeTime
	case "DATETIME", "TIMESTAMP":
		return datachat.TypeTimestamp
	case "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY", "GEOMETRY",
		"POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION":
		return datachat.TypeBlob
	case "UUID":
		return datachat.TypeUUID
	}
	return datachat.TypeText
}

// myValue converts one value of the text protocol.
func myValue(b sql.RawBytes, typ string, cl *cells) any {
	if b == nil {
		return nil
	}
	s := string(b)
	switch strings.TrimPrefix(typ, "UNSIGNED ") {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
		return intText(s)
	case "FLOAT", "DOUBLE":
		bits := 64
		if typ == "FLOAT" {
			bits = 32
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return s
		}
		return sqlvalue.Float(f, bits)
	case "DECIMAL":
		return s
	case "BIT":
		var v uint64
		for _, c := range []byte(b) {
			v = v<<8 | uint64(c)
		}
		return sqlvalue.Uint(v)
	case "DATETIME":
		return strings.Replace(s, " ", "T", 1)
	case "TIMESTAMP":
		return strings.Replace(s, " ", "T", 1) + "Z" // the session's time_zone is UTC
	case "BLOB", "BINARY", "VARBINARY", "GEOMETRY":
		return cl.blob(b)
	}
	return cl.text(s)
}

// myIdent quotes a MySQL identifier.
func myIdent(s string) string { return quote("`", s) }
