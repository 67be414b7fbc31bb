package dbsource

import (
	"context"
	"datachat/internal/sqlvalue"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"datachat"
)

// pgEngine is a PostgreSQL source.
type pgEngine struct {
	db    *DB
	pool  *pgxpool.Pool
	allow allowList

	mu    sync.Mutex
	types map[uint32]string // format_type of result OIDs not in pgTypeNames
}

func openPostgres(db *DB, allow allowList) (*pgEngine, error) {
	cfg, err := pgxpool.ParseConfig(db.src.URL)
	if err != nil {
		// pgx's message may quote the URL: say only what is wrong.
		return nil, datachat.Errorf(datachat.EINVALID, "source %s: the PostgreSQL URL does not parse (%s)", db.src.Name, Redact(db.src.URL))
	}
	e := &pgEngine{db: db, allow: allow, types: map[uint32]string{}}
	cfg.MaxConns = int32(db.opts.MaxConns)
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.HealthCheckPeriod = time.Minute
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = db.opts.ConnectTimeout
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "datachat"
	// Fixed GUCs the sandbox's checks rely on: the deparsed plan quotes
	// strings with '' only, and intervals print in ISO 8601.
	cfg.ConnConfig.RuntimeParams["standard_conforming_strings"] = "on"
	cfg.ConnConfig.RuntimeParams["IntervalStyle"] = "iso_8601"
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		return e.roleOK(ctx, c)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", db.src.Name, err)
	}
	e.pool = pool
	return e, nil
}

func (e *pgEngine) close() { e.pool.Close() }

// connErr describes a failure to reach the source without its credentials.
func (e *pgEngine) connErr(err error) error {
	var re *RoleError
	if errors.As(err, &re) {
		return re
	}
	// The server refused the login (SQLSTATE class 28: no such role, a
	// wrong password, no pg_hba.conf entry), the database (3D000: it does
	// not exist) or its CONNECT privilege (42501).
	if c := pgCode(err); strings.HasPrefix(c, "28") || c == "3D000" || c == "42501" {
		return &LoginError{Source: e.db.src.Name, Reason: pgMessage(err)}
	}
	return fmt.Errorf("source %s: connect to PostgreSQL: %w", e.db.src.Name, err)
}

// The roles whose members read or write the server's files or run programs on
// it (PostgreSQL's predefined roles).
var pgDangerousRoles = map[string]string{
	"pg_read_server_files":      "can read any file on the database server (COPY FROM a file, pg_read_file)",
	"pg_write_server_files":     "can write any file on the database server (COPY TO a file, lo_export)",
	"pg_execute_server_program": "can run programs on the database server (COPY … TO PROGRAM)",
}

// roleOK refuses a role that could escape read-only: a superuser, a member
// (direct or inherited, or by SET ROLE) of a superuser role or of one of the
// server-file roles, and a role with CREATEROLE (which can grant itself those
// roles before PostgreSQL 16).
func (e *pgEngine) roleOK(ctx context.Context, c *pgx.Conn) error {
	var (
		user             string
		super, createRol bool
	)
	err := c.QueryRow(ctx, `SELECT current_user, r.rolsuper, r.rolcreaterole
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`).Scan(&user, &super, &createRol)
	if err != nil {
		return fmt.Errorf("source %s: check the role: %w", e.db.src.Name, err)
	}
	fail := func(priv, fix string) error {
		return &RoleError{Source: e.db.src.Name, Role: user, Privilege: priv, Fix: fix}
	}
	if super {
		return fail("SUPERUSER", fmt.Sprintf("connect as a role without it (ALTER ROLE %s NOSUPERUSER, or a new LOGIN role granted only SELECT)", pgIdent(user)))
	}
	if createRol {
		return fail("CREATEROLE", fmt.Sprintf("ALTER ROLE %s NOCREATEROLE", pgIdent(user)))
	}
	rows, err := c.Query(ctx, `SELECT b.rolname, b.rolsuper FROM pg_catalog.pg_roles b
		WHERE b.rolname <> current_user AND pg_catalog.pg_has_role(current_user, b.oid, 'MEMBER')
		  AND (b.rolsuper OR b.rolname = ANY($1)) ORDER BY b.rolname`, []string{"pg_read_server_files", "pg_write_server_files", "pg_execute_server_program"})
	if err != nil {
		return fmt.Errorf("source %s: check the role: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var bsuper bool
		if err := rows.Scan(&name, &bsuper); err != nil {
			return err
		}
		if bsuper {
			return fail(fmt.Sprintf("membership in the superuser role %s (SET ROLE)", name), fmt.Sprintf("REVOKE %s FROM %s", pgIdent(name), pgIdent(user)))
		}
		return fail(fmt.Sprintf("membership in %s, which %s", name, pgDangerousRoles[name]), fmt.Sprintf("REVOKE %s FROM %s (and from any role %s is a member of)", name, pgIdent(user), pgIdent(user)))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	// PostgreSQL runs an IMMUTABLE function with constant arguments while
	// planning, EXPLAIN included, and prints only its result: the sandbox
	// would not see it. Such functions in a language that can read tables
	// (not C or internal, not an extension's) must not be the role's to run.
	var fn string
	err = c.QueryRow(ctx, `SELECT n.nspname || '.' || p.proname FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace JOIN pg_catalog.pg_language l ON l.oid = p.prolang
		WHERE p.provolatile = 'i' AND l.lanname NOT IN ('internal', 'c')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
			WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
		  AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')
		ORDER BY 1 LIMIT 1`).Scan(&fn)
	switch {
	case err == nil:
		return fail(fmt.Sprintf("EXECUTE on the IMMUTABLE function %s, which PostgreSQL runs while planning, before the sandbox can check a query", fn),
			fmt.Sprintf("REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC, %s (or declare it STABLE)", fn, pgIdent(user)))
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	default:
		return fmt.Errorf("source %s: check the role's functions: %w", e.db.src.Name, err)
	}
}

func (e *pgEngine) checkRole(ctx context.Context) error {
	// A new connection runs roleOK in AfterConnect; a pooled one is checked
	// again, since grants change.
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		return e.connErr(err)
	}
	defer c.Release()
	return e.roleOK(ctx, c.Conn())
}

func (e *pgEngine) dialect(ctx context.Context) (string, error) {
	var v string
	if err := e.pool.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", e.connErr(err)
	}
	v, _, _ = strings.Cut(v, " ")
	return "PostgreSQL " + v, nil
}

// tx is one sandboxed transaction on a pooled connection.
type pgTx struct {
	c *pgxpool.Conn
}

// begin starts a read-only transaction with the statement timeout set on the
// server, on a connection of the pool.
func (e *pgEngine) begin(ctx context.Context) (*pgTx, error) {
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e.connErr(err)
	}
	t := &pgTx{c: c}
	if err := t.start(ctx, e.db.opts.Timeout); err != nil {
		t.end()
		return nil, err
	}
	return t, nil
}

func (t *pgTx) start(ctx context.Context, timeout time.Duration) error {
	ms := max(1, timeout.Milliseconds())
	// Our own fixed text: one round trip (the simple protocol).
	_, err := t.c.Conn().PgConn().Exec(ctx, fmt.Sprintf(
		"BEGIN READ ONLY; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d; SET LOCAL lock_timeout = %d",
		ms, ms+10_000, ms)).ReadAll()
	return err
}

// restart rolls back and begins again, after a failed statement.
func (t *pgTx) restart(ctx context.Context, timeout time.Duration) error {
	if _, err := t.c.Exec(ctx, "ROLLBACK"); err != nil {
		return err
	}
	return t.start(ctx, timeout)
}

// end rolls back and returns the connection to the pool (closing it if the
// rollback fails, so no transaction outlives its query).
func (t *pgTx) end() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !t.c.Conn().PgConn().IsClosed() && t.c.Conn().PgConn().TxStatus() != 'I' {
		if _, err := t.c.Exec(ctx, "ROLLBACK"); err != nil {
			t.c.Conn().Close(ctx)
		}
	}
	t.c.Release()
}

const (
	pgExplainPrefix = "EXPLAIN (FORMAT JSON, VERBOSE) "
	pgWrapPrefix    = "SELECT * FROM (\n"
)

// wrap makes the statement a subquery with the row cap, so the server stops
// after MaxRows+1 rows and the plan can still be parallel.
func (e *pgEngine) wrap(sql string) string {
	return fmt.Sprintf("%s%s\n) AS datachat_result LIMIT %d", pgWrapPrefix, trimStatement(sql), e.db.opts.MaxRows+1)
}

// trimStatement drops trailing semicolons and white space.
func trimStatement(sql string) string {
	return strings.TrimRight(sql, "; \t\r\n\f")
}

// explain returns the plan of stmt, run as EXPLAIN inside t. The extended
// protocol refuses a text holding more than one statement.
func (e *pgEngine) explain(ctx context.Context, t *pgTx, stmt string) (any, error) {
	var out string
	err := t.c.QueryRow(ctx, pgExplainPrefix+stmt, pgx.QueryExecModeDescribeExec).Scan(&out)
	if err != nil {
		return nil, err
	}
	var plan any
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		return nil, fmt.Errorf("read PostgreSQL's plan: %w", err)
	}
	return plan, nil
}

// plan checks stmt in t: EXPLAIN of the wrapped statement, and on failure of
// the statement as given, for an error that speaks of what was written. It
// returns the wrapped statement.
func (e *pgEngine) plan(ctx context.Context, t *pgTx, sql string) (string, error) {
	wrapped := e.wrap(sql)
	plan, err := e.explain(ctx, t, wrapped)
	if err == nil {
		if err := e.checkPlan(ctx, t, plan); err != nil {
			return "", err
		}
		return wrapped, nil
	}
	if ctx.Err() != nil || !isPgError(err) || pgCode(err) == "57014" {
		return "", e.classify(ctx, err, -1, sql)
	}
	// Why did it fail? Ask about the statement as written.
	if rerr := t.restart(ctx, e.db.opts.Timeout); rerr != nil {
		return "", e.classify(ctx, rerr, -1, sql)
	}
	rawPlan, rawErr := e.explain(ctx, t, sql)
	if rawErr == nil {
		if err := e.checkPlan(ctx, t, rawPlan); err != nil {
			return "", err
		}
		return "", refusedf("only a query can run (SELECT, WITH … SELECT, VALUES or TABLE, with no INTO); PostgreSQL does not take this statement as one: %s", pgMessage(err))
	}
	if pgCode(rawErr) != "42601" || strings.Contains(pgMessage(rawErr), "multiple commands") {
		return "", e.classify(ctx, rawErr, utf8.RuneCountInString(pgExplainPrefix), sql)
	}
	// EXPLAIN does not take it: is it a statement of another kind, or no
	// statement at all? Parsing it (the extended protocol's Parse, which
	// runs nothing) tells.
	if rerr := t.restart(ctx, e.db.opts.Timeout); rerr != nil {
		return "", e.classify(ctx, rerr, -1, sql)
	}
	if _, perr := t.c.Conn().PgConn().Prepare(ctx, "", sql, nil); perr != nil {
		return "", e.classify(ctx, perr, 0, sql)
	}
	return "", refusedf("only a query can run (SELECT, WITH … SELECT, VALUES or TABLE); this statement is of another kind")
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func pgMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

func (e *pgEngine) query(ctx context.Context, sql string) (*datachat.QueryResult, error) {
	start := time.Now()
	t, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer t.end()
	wrapped, err := e.plan(ctx, t, sql)
	if err != nil {
		return nil, err
	}
	rows, err := t.c.Query(ctx, wrapped, pgx.QueryExecModeDescribeExec)
	if err != nil {
		return nil, e.classify(ctx, err, utf8.RuneCountInString(pgWrapPrefix), sql)
	}
	fields := rows.FieldDescriptions()
	res := &datachat.QueryResult{Rows: [][]any{}}
	cl := &cells{maxCell: e.db.opts.MaxCellBytes}
	conv := make([]func(any, []byte) any, len(fields))
	for i, f := range fields {
		conv[i] = e.converter(f, cl)
	}
	size := 0
	for rows.Next() {
		if len(res.Rows) == e.db.opts.MaxRows || size > e.db.opts.MaxResultBytes {
			res.Truncated = true
			break
		}
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return nil, e.classify(ctx, err, utf8.RuneCountInString(pgWrapPrefix), sql)
		}
		raw := rows.RawValues()
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = conv[i](v, raw[i])
			size += len(raw[i]) + 8
		}
		res.Rows = append(res.Rows, row)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, e.classify(ctx, err, utf8.RuneCountInString(pgWrapPrefix), sql)
	}
	res.Columns = make([]datachat.Column, len(fields))
	for i, f := range fields {
		name := e.typeName(ctx, t, f.DataTypeOID)
		res.Columns[i] = datachat.Column{Name: f.Name, SQLType: name, Type: pgFriendly(name)}
	}
	res.Truncated = res.Truncated || cl.cut
	res.RowCount = len(res.Rows)
	res.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

func (e *pgEngine) estimate(ctx context.Context, sql string) (int64, error) {
	t, err := e.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer t.end()
	plan, err := e.explain(ctx, t, trimStatement(sql))
	if err != nil {
		return 0, e.classify(ctx, err, utf8.RuneCountInString(pgExplainPrefix), sql)
	}
	if err := e.checkPlan(ctx, t, plan); err != nil {
		return 0, err
	}
	if top, ok := topPlan(plan); ok {
		if n, ok := top["Plan Rows"].(float64); ok {
			return int64(n), nil
		}
	}
	return 0, fmt.Errorf("PostgreSQL's plan has no row estimate")
}

func topPlan(plan any) (map[string]any, bool) {
	arr, ok := plan.([]any)
	if !ok || len(arr) == 0 {
		return nil, false
	}
	m, ok := arr[0].(map[string]any)
	if !ok {
		return nil, false
	}
	top, ok := m["Plan"].(map[string]any)
	return top, ok
}

// classify turns a PostgreSQL error into a datachat.QueryError, with the engine's
// message, detail and hint. prefix is what we put before the statement in the
// text PostgreSQL saw, in characters, to give positions in the statement as
// written (-1: give none).
func (e *pgEngine) classify(ctx context.Context, err error, offset int, sql string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		if strings.Contains(err.Error(), "arguments, got 0") {
			return &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the query has $n parameters; write the values in the query instead"}
		}
		return fmt.Errorf("source %s: %w", e.db.src.Name, err)
	}
	msg := pe.Message
	if pe.Detail != "" {
		msg += "; " + pe.Detail
	}
	if pe.Hint != "" {
		msg += "; hint: " + pe.Hint
	}
	if pe.Position > 0 && offset >= 0 {
		if p := int(pe.Position) - offset; p >= 1 && p <= utf8.RuneCountInString(sql) {
			msg += fmt.Sprintf(" (at character %d of the query)", p)
		}
	}
	kind := datachat.KindOther
	switch code := pe.Code; {
	case code == "42601" && strings.Contains(pe.Message, "multiple commands"):
		return refusedf("one statement at a time: %s", pe.Message)
	case code == "42601" || code == "42P02":
		kind = datachat.KindSyntax
	case code == "42P01":
		kind = datachat.KindUnknownTable
		msg += candidates(quotedIn(pe.Message, `"`), e.db.allowedTables(ctx))
	case code == "3F000":
		kind = datachat.KindUnknownTable
		msg += candidates("", e.db.allowedTables(ctx))
	case code == "42703" || code == "42702":
		kind = datachat.KindUnknownColumn
	case code == "42883":
		if strings.Contains(pe.Hint, "cast") {
			kind = datachat.KindTypeMismatch
		}
	case code == "42804" || code == "42846" || code == "42725" || code == "22P02" || code == "22007" ||
		code == "22008" || code == "22003" || code == "42P18" || code == "22023":
		kind = datachat.KindTypeMismatch
	case code == "57014":
		if strings.Contains(pe.Message, "statement timeout") {
			kind = datachat.KindTimeout
			msg = fmt.Sprintf("the query ran past the source's %v statement timeout (%s); make it lighter: filter or aggregate on indexed columns, or add LIMIT", e.db.opts.Timeout, pe.Message)
		}
	case code == "55P03":
		kind = datachat.KindTimeout
	case strings.HasPrefix(code, "53") || code == "54000":
		kind = datachat.KindMemory
	case code == "42501":
		kind = datachat.KindRefused
		msg += " (the source's role may not do this; sources are read-only, and queries read only the allowed tables)"
	case code == "25006" || code == "0A000" || code == "25001" || code == "2F003" || code == "38002" || code == "38003":
		kind = datachat.KindRefused
	}
	return &datachat.QueryError{Kind: kind, Message: msg}
}

// typeName names a result column's type as PostgreSQL's format_type does.
func (e *pgEngine) typeName(ctx context.Context, t *pgTx, oid uint32) string {
	if n, ok := pgTypeNames[oid]; ok {
		return n
	}
	e.mu.Lock()
	n, ok := e.types[oid]
	e.mu.Unlock()
	if ok {
		return n
	}
	if err := t.c.QueryRow(ctx, "SELECT pg_catalog.format_type($1::oid, NULL)", oid).Scan(&n); err != nil || n == "" {
		return fmt.Sprintf("oid %d", oid)
	}
	e.mu.Lock()
	e.types[oid] = n
	e.mu.Unlock()
	return n
}

// OIDs of common built-in types, with format_type's names.
var pgTypeNames = map[uint32]string{
	pgtype.BoolOID: "boolean", pgtype.ByteaOID: "bytea", pgtype.NameOID: "name", pgtype.Int8OID: "bigint",
	pgtype.Int2OID: "smallint", pgtype.Int4OID: "integer", pgtype.TextOID: "text", pgtype.OIDOID: "oid",
	pgtype.JSONOID: "json", pgtype.Float4OID: "real", pgtype.Float8OID: "double precision",
	pgtype.BPCharOID: "character", pgtype.VarcharOID: "character varying", pgtype.DateOID: "date",
	pgtype.TimeOID: "time without time zone", pgtype.TimestampOID: "timestamp without time zone",
	pgtype.TimestamptzOID: "timestamp with time zone", pgtype.IntervalOID: "interval",
	pgtype.TimetzOID: "time with time zone", pgtype.NumericOID: "numeric", pgtype.UUIDOID: "uuid",
	pgtype.JSONBOID: "jsonb", pgtype.InetOID: "inet", pgtype.CIDROID: "cidr", pgtype.MacaddrOID: "macaddr",
	pgtype.Int4ArrayOID: "integer[]", pgtype.Int8ArrayOID: "bigint[]", pgtype.TextArrayOID: "text[]",
	pgtype.Float8ArrayOID: "double precision[]", pgtype.VarcharArrayOID: "character varying[]",
	pgtype.NumericArrayOID: "numeric[]", pgtype.BoolArrayOID: "boolean[]", pgtype.DateArrayOID: "date[]",
	pgtype.TimestampArrayOID: "timestamp without time zone[]", pgtype.TimestamptzArrayOID: "timestamp with time zone[]",
	pgtype.UUIDArrayOID: "uuid[]", pgtype.Int2ArrayOID: "smallint[]", pgtype.Float4ArrayOID: "real[]",
	pgtype.RecordOID: "record", pgtype.UnknownOID: "unknown", pgtype.XIDOID: "xid",
}

// pgFriendly maps a PostgreSQL type as format_type spells it to a friendly
// type name.
func pgFriendly(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	if strings.HasSuffix(t, "]") {
		return datachat.TypeList
	}
	if i := strings.IndexByte(t, '('); i > 0 {
		t = strings.TrimSpace(t[:i]) + t[strings.IndexByte(t, ')')+1:]
	}
	switch t {
	case "smallint", "integer", "bigint", "oid", "xid", "int2", "int4", "int8", "smallserial", "serial", "bigserial":
		return datachat.TypeInteger
	case "real", "double precision", "float4", "float8":
		return datachat.TypeFloat
	case "numeric", "decimal":
		return datachat.TypeDecimal
	case "boolean", "bool":
		return datachat.TypeBoolean
	case "date":
		return datachat.TypeDate
	case "time without time zone", "time with time zone", "time", "timetz":
		return datachat.TypeTime
	case "timestamp without time zone", "timestamp with time zone", "timestamp", "timestamptz":
		return datachat.TypeTimestamp
	case "interval":
		return datachat.TypeInterval
	case "bytea":
		return datachat.TypeBlob
	case "uuid":
		return datachat.TypeUUID
	case "record":
		return datachat.TypeStruct
	case "hstore":
		return datachat.TypeMap
	}
	return datachat.TypeText
}

// converter returns the function turning one column's values, as pgx decodes
// them, into JSON-ready values.
func (e *pgEngine) converter(f pgconn.FieldDescription, cl *cells) func(any, []byte) any {
	switch f.DataTypeOID {
	case pgtype.JSONOID, pgtype.JSONBOID:
		// Keep the document's text (its key order and big numbers).
		binary := f.Format == pgtype.BinaryFormatCode && f.DataTypeOID == pgtype.JSONBOID
		return func(v any, raw []byte) any {
			if raw == nil {
				return nil
			}
			if binary && len(raw) > 0 {
				raw = raw[1:] // jsonb's version byte
			}
			return cl.text(string(raw))
		}
	}
	oid := f.DataTypeOID
	return func(v any, _ []byte) any { return pgValue(v, oid, cl) }
}

// pgValue converts one value pgx decoded; oid tells dates from timestamps.
func pgValue(v any, oid uint32, cl *cells) any {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return x
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return sqlvalue.Int(x)
	case uint32:
		return int64(x)
	case uint64:
		return sqlvalue.Uint(x)
	case float32:
		return sqlvalue.Float(float64(x), 32)
	case float64:
		return sqlvalue.Float(x, 64)
	case pgtype.Numeric:
		s, err := x.Value()
		if err != nil || s == nil {
			return nil
		}
		return s.(string)
	case string:
		return cl.text(x)
	case []byte:
		return cl.blob(x)
	case time.Time:
		switch oid {
		case pgtype.DateOID, pgtype.DateArrayOID:
			return formatDate(x)
		case pgtype.TimestamptzOID, pgtype.TimestamptzArrayOID:
			return formatTimestamp(x.UTC(), "Z")
		default:
			return formatTimestamp(x, "")
		}
	case pgtype.InfinityModifier:
		if x == pgtype.Infinity {
			return "infinity"
		}
		return "-infinity"
	case pgtype.Time:
		return formatClock(x.Microseconds)
	case pgtype.Interval:
		return sqlvalue.Interval(x.Months, x.Days, x.Microseconds)
	case [16]byte:
		return formatUUID(x)
	case netip.Prefix:
		if x.Bits() == x.Addr().BitLen() {
			return x.Addr().String()
		}
		return x.String()
	case net.HardwareAddr:
		return x.String()
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = pgValue(el, oid, cl)
		}
		return out
	case map[string]any:
		b, _ := json.Marshal(x)
		return cl.text(string(b))
	case fmt.Stringer:
		return cl.text(x.String())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return cl.text(fmt.Sprint(v))
	}
	return cl.text(string(b))
}

func formatUUID(b [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// pgIdent quotes a PostgreSQL identifier.
func pgIdent(s string) string { return quote(`"`, s) }
