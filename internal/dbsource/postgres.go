package dbsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"datachat"
	"datachat/internal/sqlvalue"
)

// pgEngine is a PostgreSQL source.
type pgEngine struct {
	db        *DB
	pool      *pgxpool.Pool
	allow     allowList
	defSchema string // where unqualified names resolve after pg_catalog: public

	mu    sync.Mutex
	types map[uint32]string // format_type of result OIDs not in pgTypeNames
}

func openPostgres(db *DB, allow allowList) (*pgEngine, error) {
	cfg, err := pgxpool.ParseConfig(db.src.URL)
	if err != nil {
		// pgx's message may quote the URL: say only what is wrong.
		return nil, datachat.Errorf(datachat.EINVALID, "source %s: the PostgreSQL URL does not parse (%s)", db.src.Name, Redact(db.src.URL))
	}
	e := &pgEngine{db: db, allow: allow, defSchema: "public", types: map[uint32]string{}}
	cfg.MaxConns = int32(db.opts.MaxConns)
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.HealthCheckPeriod = time.Minute
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = db.opts.ConnectTimeout
	}
	// No named prepared statements, so that DISCARD ALL after each use
	// (pgTx.end) leaves pgx nothing stale: every statement is parsed as the
	// unnamed one, described, and run.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	cfg.ConnConfig.StatementCacheCapacity = 0
	cfg.ConnConfig.DescriptionCacheCapacity = 0
	cfg.ConnConfig.RuntimeParams["application_name"] = "datachat"
	// The deparser writes strings as '…' with '' inside: that is what they
	// mean only with standard_conforming_strings on.
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

func (e *pgEngine) checkRole(ctx context.Context) error {
	// A new connection is proved in AfterConnect; a pooled one again here,
	// since grants change.
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
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

// pgTx is one sandboxed transaction on a pooled connection.
type pgTx struct {
	c *pgxpool.Conn
}

// begin starts a read-only transaction on a connection of the pool, with
// the statement timeout set on the server and the search path fixed:
// pg_catalog, then the default schema, so that an unqualified name
// resolves as the check assumed.
func (e *pgEngine) begin(ctx context.Context) (*pgTx, error) {
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e.connErr(err)
	}
	t := &pgTx{c: c}
	ms := max(1, e.db.opts.Timeout.Milliseconds())
	// Our own fixed text: one round trip (the simple protocol).
	_, err = c.Conn().PgConn().Exec(ctx, fmt.Sprintf(
		"BEGIN READ ONLY; SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d; SET LOCAL lock_timeout = %d; SET LOCAL search_path = pg_catalog, %s",
		ms, ms+10_000, ms, pgIdent(e.defSchema))).ReadAll()
	if err != nil {
		t.end()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e.connErr(err)
	}
	return t, nil
}

// end rolls back, resets the session (DISCARD ALL: settings, prepared
// statements, cursors, temporary tables, LISTEN, advisory locks) and
// returns the connection to the pool; a connection that cannot be reset is
// closed instead, so no state outlives its query.
func (t *pgTx) end() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pc := t.c.Conn().PgConn()
	if !pc.IsClosed() {
		err := pc.Exec(ctx, "ROLLBACK").Close()
		if err == nil {
			err = pc.Exec(ctx, "DISCARD ALL").Close()
		}
		if err != nil {
			t.c.Conn().Close(ctx)
		}
	}
	t.c.Release()
}

// pgWrapPrefix and pgWrapSuffix are our text around a checked statement:
// the row cap, applied by the server, which stops after MaxRows+1 rows.
const (
	pgWrapPrefix = "SELECT * FROM (\n"
	pgWrapSuffix = "\n) AS datachat_result LIMIT "
)

// pgWrap puts the checked statement sql inside the row cap, and proves
// that the result parses as our text around exactly sql.
func pgWrap(sql string, limit int) (string, error) {
	wrapped := fmt.Sprintf("%s%s%s%d", pgWrapPrefix, sql, pgWrapSuffix, limit)
	if err := pgCheckWrap(wrapped, sql, limit); err != nil {
		return "", refusedf("the sandbox cannot run this statement inside its row cap (%v); write it more plainly", err)
	}
	return wrapped, nil
}

func (e *pgEngine) explain(ctx context.Context, t *pgTx, stmt string) (any, error) {
	var out string
	if err := t.c.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+stmt).Scan(&out); err != nil {
		return nil, err
	}
	var plan any
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		return nil, fmt.Errorf("read PostgreSQL's plan: %w", err)
	}
	return plan, nil
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

// prepare checks sql and begins its transaction, with every name the
// statement uses resolved as the check requires.
func (e *pgEngine) prepare(ctx context.Context, sql string) (*pgTx, *pgChecked, error) {
	checked, err := pgCheck(sql, e.allow, e.defSchema)
	if err != nil {
		return nil, nil, err
	}
	t, err := e.begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := e.resolve(ctx, t, checked); err != nil {
		t.end()
		return nil, nil, err
	}
	return t, checked, nil
}

func (e *pgEngine) stream(ctx context.Context, sql string, lim streamLimits, sink datachat.RowSink) ([]datachat.Column, bool, error) {
	t, checked, err := e.prepare(ctx, sql)
	if err != nil {
		return nil, false, err
	}
	defer t.end()
	wrapped, err := pgWrap(checked.SQL, lim.maxRows+1)
	if err != nil {
		return nil, false, err
	}
	rows, err := t.c.Query(ctx, wrapped)
	if err != nil {
		return nil, false, e.classify(ctx, err)
	}
	fields := rows.FieldDescriptions()
	cl := &cells{maxCell: e.db.opts.MaxCellBytes}
	conv := make([]func(any, []byte) any, len(fields))
	cols := make([]datachat.Column, len(fields))
	for i, f := range fields {
		conv[i] = e.converter(f, cl)
		// The name of a type of the database's own is read once the rows
		// are (the connection is busy until then): the sink meanwhile gets
		// what pgx knows of it.
		name := e.knownType(t, f.DataTypeOID)
		cols[i] = datachat.Column{Name: f.Name, SQLType: name, Type: pgFriendly(name)}
	}
	if err := sink.Columns(cols); err != nil {
		rows.Close()
		return nil, false, err
	}
	var (
		size, n   int
		truncated bool
		row       = make([]any, len(fields))
	)
	for rows.Next() {
		if n == lim.maxRows || lim.maxBytes > 0 && size > lim.maxBytes {
			truncated = true
			break
		}
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return nil, false, e.classify(ctx, err)
		}
		raw := rows.RawValues()
		for i, v := range vals {
			row[i] = conv[i](v, raw[i])
			size += len(raw[i]) + 8
		}
		if err := sink.Row(row); err != nil {
			rows.Close()
			return nil, false, err
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, e.classify(ctx, err)
	}
	for i, f := range fields {
		name := e.typeName(ctx, t, f.DataTypeOID)
		cols[i] = datachat.Column{Name: f.Name, SQLType: name, Type: pgFriendly(name)}
	}
	return cols, truncated || cl.cut, nil
}

// estimate is PostgreSQL's estimate of the rows the checked statement
// returns: EXPLAIN, which plans and runs nothing.
func (e *pgEngine) estimate(ctx context.Context, sql string) (int64, error) {
	t, checked, err := e.prepare(ctx, sql)
	if err != nil {
		return 0, err
	}
	defer t.end()
	plan, err := e.explain(ctx, t, checked.SQL)
	if err != nil {
		return 0, e.classify(ctx, err)
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

// knownType names a result column's type from what is known without asking
// the server: the common built-in types, those read before, and pgx's own
// names for the rest of the built-in ones; "" for a type of the database's
// own (an enum, a domain…), which reads as text.
func (e *pgEngine) knownType(t *pgTx, oid uint32) string {
	if n, ok := e.cachedType(oid); ok {
		return n
	}
	if pt, ok := t.c.Conn().TypeMap().TypeForOID(oid); ok {
		return pt.Name
	}
	return ""
}

// cachedType names a type from the common built-in types or those read
// before.
func (e *pgEngine) cachedType(oid uint32) (string, bool) {
	if n, ok := pgTypeNames[oid]; ok {
		return n, true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.types[oid]
	return n, ok
}

// typeName names a result column's type as PostgreSQL's format_type does.
func (e *pgEngine) typeName(ctx context.Context, t *pgTx, oid uint32) string {
	n, ok := e.cachedType(oid)
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

// pgIdent quotes a PostgreSQL identifier: as DuckDB does, datachat.QuoteIdent.
func pgIdent(s string) string { return datachat.QuoteIdent(s) }
