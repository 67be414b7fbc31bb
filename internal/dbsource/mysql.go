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
	db     *DB
	sqldb  *sql.DB
	allow  allowList
	dbName string // the URL's database: where a table name without a database is

	mu      sync.Mutex
	server  *myServer          // what the first connection found; nil before
	definer map[[2]string]bool // views reading with their definer's rights, as the last role proof listed them
}

// myServer is what a source's server is, read on its first connection.
type myServer struct {
	version   string // VERSION()
	mariadb   bool
	sqlMode   string // the session's sql_mode: the server's, less the modes that change how SQL reads
	foldNames bool   // lower_case_table_names ≠ 0
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
	e := &myEngine{db: db, allow: allow, dbName: cfg.DBName}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "source %s: the MySQL URL is not usable (%s)", db.src.Name, Redact(db.src.URL))
	}
	e.sqldb = sql.OpenDB(&myConnector{inner: inner, e: e})
	e.sqldb.SetMaxOpenConns(db.opts.MaxConns)
	// No connection is reused: each query, role proof and catalog read gets
	// a session of its own, closed after it, so that nothing one query left
	// in a session (a variable, a lock, a temporary table, a setting) can
	// reach the next. go-sql-driver/mysql v1.10 does not send
	// COM_RESET_CONNECTION, which would have kept the connection; a new
	// session costs a connect and login per query (BenchmarkMySQLSession).
	e.sqldb.SetMaxIdleConns(-1)
	return e, nil
}

type quietLogger struct{}

func (quietLogger) Print(...any) {}

// myConnector opens the pool's connections; the first one reads what the
// server is.
type myConnector struct {
	inner driver.Connector
	e     *myEngine
}

func (c *myConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if c.e.serverInfo() == nil {
		if err := c.e.readServer(ctx, conn); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

func (c *myConnector) Driver() driver.Driver { return c.inner.Driver() }

// mySafeModes are the sql_mode flags a session keeps from the server's: they
// change what a value becomes or which queries are valid, not how the
// statement's text reads (ANSI_QUOTES, PIPES_AS_CONCAT, IGNORE_SPACE,
// HIGH_NOT_PRECEDENCE, NO_BACKSLASH_ESCAPES, ORACLE… would: the checker's
// parser and the restored text assume none of them).
var mySafeModes = map[string]bool{
	"ONLY_FULL_GROUP_BY": true, "STRICT_TRANS_TABLES": true, "STRICT_ALL_TABLES": true, "NO_ZERO_IN_DATE": true,
	"NO_ZERO_DATE": true, "ERROR_FOR_DIVISION_BY_ZERO": true, "NO_AUTO_CREATE_USER": true, "NO_ENGINE_SUBSTITUTION": true,
	"ALLOW_INVALID_DATES": true, "NO_UNSIGNED_SUBTRACTION": true, "REAL_AS_FLOAT": true, "PAD_CHAR_TO_FULL_LENGTH": true,
	"TIME_TRUNCATE_FRACTIONAL": true, "NO_DIR_IN_CREATE": true, "NO_AUTO_VALUE_ON_ZERO": true, "SIMULTANEOUS_ASSIGNMENT": true,
	"TIME_ROUND_FRACTIONAL": true,
}

// readServer reads the server's version, flavour, sql_mode and name
// folding on a new connection.
func (e *myEngine) readServer(ctx context.Context, conn driver.Conn) error {
	v, err := dquery(ctx, conn, "SELECT VERSION(), @@SESSION.sql_mode, @@lower_case_table_names")
	if err != nil || len(v) != 1 {
		return fmt.Errorf("source %s: read the server's version: %w", e.db.src.Name, err)
	}
	var modes []string
	for _, m := range strings.Split(v[0][1], ",") {
		if mySafeModes[m] {
			modes = append(modes, m)
		}
	}
	s := &myServer{
		version:   v[0][0],
		mariadb:   strings.Contains(strings.ToLower(v[0][0]), "mariadb"),
		sqlMode:   strings.Join(modes, ","),
		foldNames: v[0][2] != "0",
	}
	e.mu.Lock()
	e.server = s
	e.mu.Unlock()
	return nil
}

func (e *myEngine) serverInfo() *myServer {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.server
}

// connectedServer returns what the server is, connecting once if no
// connection was made yet.
func (e *myEngine) connectedServer(ctx context.Context) (*myServer, error) {
	if s := e.serverInfo(); s != nil {
		return s, nil
	}
	if err := e.sqldb.PingContext(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e.connErr(err)
	}
	if s := e.serverInfo(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("source %s: the server's version was not read", e.db.src.Name)
}

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

func (e *myEngine) dialect(ctx context.Context) (string, error) {
	s, err := e.connectedServer(ctx)
	if err != nil {
		return "", err
	}
	num, _, _ := strings.Cut(s.version, "-")
	if s.mariadb {
		return "MariaDB " + num, nil
	}
	return "MySQL " + num, nil
}

// myTx is one sandboxed transaction on a session of its own.
type myTx struct {
	c *sql.Conn
}

// begin opens a session and sets it up: the sql_mode the checker's
// restored text assumes, UTC, the statement timeout (MariaDB's
// max_statement_time in seconds for every statement; MySQL's
// max_execution_time in milliseconds, for SELECT) and the row cap
// (sql_select_limit); then it starts a read-only transaction.
func (e *myEngine) begin(ctx context.Context, selectLimit int) (*myTx, error) {
	c, err := e.sqldb.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e.connErr(err)
	}
	s := e.serverInfo() // read by the connector on the first connection
	if s == nil {
		c.Close()
		return nil, fmt.Errorf("source %s: the server's version was not read", e.db.src.Name)
	}
	limit := "DEFAULT"
	if selectLimit > 0 {
		limit = strconv.Itoa(selectLimit)
	}
	timeout := fmt.Sprintf("max_execution_time = %d", max(1, e.db.opts.Timeout.Milliseconds()))
	if s.mariadb {
		timeout = fmt.Sprintf("max_statement_time = %.3f", max(0.001, e.db.opts.Timeout.Seconds()))
	}
	set := fmt.Sprintf("SET SESSION sql_mode = '%s', time_zone = '+00:00', character_set_results = 'utf8mb4', %s, sql_select_limit = %s",
		s.sqlMode, timeout, limit)
	if _, err := c.ExecContext(ctx, set); err != nil {
		c.Close()
		return nil, e.classify(ctx, err)
	}
	if _, err := c.ExecContext(ctx, "START TRANSACTION READ ONLY"); err != nil {
		c.Close()
		return nil, e.classify(ctx, err)
	}
	return &myTx{c: c}, nil
}

// end rolls back and closes the session.
func (t *myTx) end() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := t.c.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.c.Raw(func(any) error { return driver.ErrBadConn })
	}
	t.c.Close()
}

// checked checks a statement of the user's and returns the SQL to run in
// its place: the checked parse tree written back by our code.
func (e *myEngine) checked(ctx context.Context, stmt string) (string, error) {
	s, err := e.connectedServer(ctx)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	definer := e.definer
	e.mu.Unlock()
	c := &myChecker{
		defaultDB: e.dbName,
		allow:     e.allow,
		mariadb:   s.mariadb,
		foldNames: s.foldNames,
		definer:   definer,
		exact:     e.namedExactly,
		hint:      func(name string) string { return candidates(name, e.db.allowedTables(ctx)) },
	}
	return c.check(stmt)
}

// namedExactly reports whether a pattern of --tables names schema.table
// without a wildcard.
func (e *myEngine) namedExactly(schema, table string) bool {
	for _, p := range e.allow.patterns {
		if p[0] == schema && p[1] == table && !strings.ContainsAny(p[0]+p[1], "*?[") {
			return true
		}
	}
	return false
}

func (e *myEngine) stream(ctx context.Context, stmt string, lim streamLimits, sink datachat.RowSink) ([]datachat.Column, bool, error) {
	q, err := e.checked(ctx, stmt)
	if err != nil {
		return nil, false, err
	}
	t, err := e.begin(ctx, lim.maxRows+1)
	if err != nil {
		return nil, false, err
	}
	defer t.end()
	// The statement's own context: cancelled to stop a result that runs past
	// the cap despite sql_select_limit (a LIMIT of its own), which closes the
	// connection rather than reading the rest.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rows, err := t.c.QueryContext(qctx, q)
	if err != nil {
		return nil, false, e.classify(ctx, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, false, e.classify(ctx, err)
	}
	cols := make([]datachat.Column, len(types))
	for i, ct := range types {
		name := ct.DatabaseTypeName()
		cols[i] = datachat.Column{Name: ct.Name(), SQLType: name, Type: myFriendly(name)}
	}
	if err := sink.Columns(cols); err != nil {
		return nil, false, err
	}
	cl := &cells{maxCell: e.db.opts.MaxCellBytes}
	raw := make([]sql.RawBytes, len(types))
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	var (
		size, n   int
		truncated bool
		row       = make([]any, len(raw))
	)
	for rows.Next() {
		if n == lim.maxRows || lim.maxBytes > 0 && size > lim.maxBytes {
			truncated = true
			if rows.Next() { // more than sql_select_limit: stop the server
				cancel()
			}
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, false, e.classify(ctx, err)
		}
		for i, b := range raw {
			row[i] = myValue(b, cols[i].SQLType, cl)
			size += len(b) + 8
		}
		if err := sink.Row(row); err != nil {
			return nil, false, err
		}
		n++
	}
	if err := rows.Err(); err != nil && !truncated {
		return nil, false, e.classify(ctx, err)
	}
	return cols, truncated || cl.cut, nil
}

// estimate returns EXPLAIN's estimate of the rows the checked statement
// returns: EXPLAIN runs on the restored text, after the same checks as a
// query (MariaDB evaluates constant subqueries while it explains).
func (e *myEngine) estimate(ctx context.Context, stmt string) (int64, error) {
	q, err := e.checked(ctx, stmt)
	if err != nil {
		return 0, err
	}
	t, err := e.begin(ctx, 0)
	if err != nil {
		return 0, err
	}
	defer t.end()
	rows, err := t.c.QueryContext(ctx, "EXPLAIN "+q)
	if err != nil {
		return 0, e.classify(ctx, err)
	}
	plan, err := readExplain(rows)
	if err != nil {
		return 0, e.classify(ctx, err)
	}
	est := 1.0
	for _, r := range plan {
		if r.id == "1" && r.rows > 0 {
			est *= r.rows * r.filtered / 100
		}
	}
	return int64(est + 0.5), nil
}

type explainRow struct {
	id       string
	rows     float64
	filtered float64
}

func readExplain(rows *sql.Rows) ([]explainRow, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []explainRow
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := explainRow{filtered: 100}
		for i, c := range cols {
			switch strings.ToLower(c) {
			case "id":
				r.id = vals[i].String
			case "rows":
				r.rows, _ = strconv.ParseFloat(vals[i].String, 64)
			case "filtered":
				if f, err := strconv.ParseFloat(vals[i].String, 64); err == nil {
					r.filtered = f
				}
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
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
func myIdent(s string) string { return datachat.QuoteMySQLIdent(s) }
