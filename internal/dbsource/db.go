package dbsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat"
)

// Options bound a source's connections and queries. Zero values take the
// defaults shown.
type Options struct {
	Timeout        time.Duration // per statement, enforced by the server; 30s
	MaxRows        int           // rows returned at most; 1000
	MaxConns       int           // connections open at once to the source; 4
	ConnectTimeout time.Duration // to open one connection, TLS included; 10s (a connect_timeout in the URL wins)
	MaxCellBytes   int           // a text or blob value longer than this is cut and the result marked truncated; 1 MiB
	MaxResultBytes int           // bytes of values read beyond which rows stop (truncated); 64 MiB
	SampleRows     int           // rows read per table for the catalog's sample values; 100
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 1000
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 4
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.MaxCellBytes <= 0 {
		o.MaxCellBytes = 1 << 20
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 64 << 20
	}
	if o.SampleRows <= 0 {
		o.SampleRows = 100
	}
	return o
}

// Table is an allowed table of a source, as the system prompt lists it.
type Table struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	View   bool   `json:"view,omitempty"`
	// Rows is the engine's estimate of the row count (PostgreSQL
	// pg_class.reltuples, MySQL information_schema.TABLES.TABLE_ROWS); nil
	// when the engine has none (a table never analysed, a view).
	Rows *int64 `json:"rows"`
	// Columns carry the engine's type (SQLType), its friendly name (Type) and
	// up to 3 distinct sample values of at most 40 characters.
	Columns []datachat.Column `json:"columns"`
	// ForeignKeys are the table's foreign keys to other allowed tables, from
	// the engine's catalog (one to a table not allowed is left out).
	ForeignKeys []ForeignKey `json:"foreign_keys,omitempty"`
}

// ForeignKey is a foreign key: Columns of its table reference RefColumns of
// RefSchema.RefName.
type ForeignKey struct {
	Columns    []string `json:"columns"`
	RefSchema  string   `json:"ref_schema"`
	RefName    string   `json:"ref_name"`
	RefColumns []string `json:"ref_columns"`
}

// QualifiedName is SCHEMA.TABLE as the source's SQL writes it, quoted where
// the engine needs it.
func (t Table) QualifiedName(kind string) string {
	return QuoteIdent(kind, t.Schema) + "." + QuoteIdent(kind, t.Name)
}

// QuoteIdent quotes an identifier (a table, schema or column name) for the
// SQL of a source of kind: double quotes for PostgreSQL, backticks for
// MySQL, each doubled inside.
func QuoteIdent(kind, name string) string {
	if kind == KindPostgres {
		return pgIdent(name)
	}
	return myIdent(name)
}

// quote writes s between two q, each q inside doubled: an identifier as
// the engines quote it (q ` or ").
func quote(q, s string) string {
	return q + strings.ReplaceAll(s, q, q+q) + q
}

// quotedIn returns the first text between two q of an engine's message: the
// name of `relation "x" does not exist` (PostgreSQL, q ") or of
// "Table 'db.x' doesn't exist" (MySQL, q ').
func quotedIn(msg, q string) string {
	_, rest, ok := strings.Cut(msg, q)
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, q)
	return s
}

// engine is one kind of database behind a DB.
type engine interface {
	checkRole(ctx context.Context) error
	dialect(ctx context.Context) (string, error)
	catalog(ctx context.Context) ([]Table, error)
	tableNames(ctx context.Context) ([]string, error)
	// stream runs sql in the sandbox, giving sink its columns then its
	// rows, at most lim.maxRows (and, when lim.maxBytes is set, stopping
	// past that many bytes of values); it returns the columns with their
	// types as the engine names them, and whether rows or values were cut.
	stream(ctx context.Context, sql string, lim streamLimits, sink datachat.RowSink) ([]datachat.Column, bool, error)
	estimate(ctx context.Context, sql string) (int64, error)
	close()
}

// DB is an open source: a bounded pool of connections whose role is checked on
// every connect, and the sandbox its queries run in. It is safe for
// concurrent use.
type DB struct {
	src  Source
	opts Options
	eng  engine

	mu     sync.Mutex
	tables []string // allowed tables, SCHEMA.TABLE, for unknown-table hints; nil until Check or Catalog

	// The last proof of the role ([DB.proveRole]): when it ran and what it
	// found. proofMu is held while a proof runs, so that the queries arriving
	// meanwhile wait for it instead of each proving again.
	proofMu  sync.Mutex
	provedAt time.Time
	proofErr error
	now      func() time.Time // time.Now; tests move it
}

// roleProofTTL is how long a proof of the role's privileges holds: a query
// more than this after the last proof proves the role again before it runs,
// so that a privilege granted to the role after the source was added (or
// after its connections were opened) refuses the next query, not the next
// connection.
const roleProofTTL = 5 * time.Second

// Open validates src and opens its pool. No connection is made until the first
// use; call [DB.Check] to connect and check the role now (as `sources add`
// does). Errors: datachat.EINVALID for a bad source.
func Open(src Source, opts Options) (*DB, error) {
	if err := src.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(src.URL)
	db := &DB{src: src, opts: opts.withDefaults(), now: time.Now}
	allow := newAllowList(src.Tables, defaultSchema(src.Kind, u))
	var err error
	switch src.Kind {
	case KindPostgres:
		db.eng, err = openPostgres(db, allow)
	default:
		db.eng, err = openMySQL(db, u, allow)
	}
	if err != nil {
		return nil, err
	}
	return db, nil
}

// Source returns the source's definition.
func (db *DB) Source() Source { return db.src }

// Check connects to the source and checks its role: a role that could escape
// read-only is a *RoleError naming the privilege to drop. Every new
// connection of the pool is checked the same way.
func (db *DB) Check(ctx context.Context) error {
	if err := db.prove(ctx); err != nil {
		return err
	}
	names, err := db.eng.tableNames(ctx)
	if err != nil {
		return err
	}
	db.mu.Lock()
	db.tables = names
	db.mu.Unlock()
	return nil
}

// Dialect names the engine and its version for the system prompt, e.g.
// "PostgreSQL 15.14" or "MariaDB 10.11.19".
func (db *DB) Dialect(ctx context.Context) (string, error) {
	return db.eng.dialect(ctx)
}

// Catalog lists the allowed tables from the engine's catalog, with their
// columns, row estimates, sample values and foreign keys (ordered by the
// table they reference), for the system prompt. It reads
// at most SampleRows rows of each table, in the sandbox.
func (db *DB) Catalog(ctx context.Context) ([]Table, error) {
	if err := db.proveRole(ctx); err != nil {
		return nil, err
	}
	tables, err := db.eng.catalog(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		slices.SortStableFunc(t.ForeignKeys, func(a, b ForeignKey) int {
			return strings.Compare(a.RefSchema+"."+a.RefName+"("+strings.Join(a.Columns, ",")+")", b.RefSchema+"."+b.RefName+"("+strings.Join(b.Columns, ",")+")")
		})
	}
	names := qualifiedNames(tables)
	db.mu.Lock()
	db.tables = names
	db.mu.Unlock()
	return tables, nil
}

// allowedTables returns the allowed tables' names as last listed by
// [DB.Check] or [DB.Catalog], for the hints of unknown-table errors. It never
// waits for a connection: it runs while a query holds one.
func (db *DB) allowedTables(context.Context) []string {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.tables
}

// Query runs one statement in the sandbox and returns at most MaxRows rows
// (Truncated when more existed), with JSON-ready values (see cells).
//
// Errors: *datachat.QueryError (EINVALID) when the statement fails or is refused, with
// the engine's own message; ctx's error when ctx ends first; other errors
// (the source unreachable, its role refused) are internal.
func (db *DB) Query(ctx context.Context, sql string) (*datachat.QueryResult, error) {
	if err := db.proveRole(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	c := &collector{res: &datachat.QueryResult{Rows: [][]any{}}}
	cols, truncated, err := db.eng.stream(ctx, sql, streamLimits{maxRows: db.opts.MaxRows, maxBytes: db.opts.MaxResultBytes}, c)
	if err != nil {
		return nil, err
	}
	r := c.res
	r.Columns, r.Truncated, r.RowCount = cols, truncated, len(r.Rows)
	r.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
	return r, nil
}

// Stream runs one statement in the sandbox as Query does — the same checks
// and the same read-only transaction — and hands its rows to sink as they
// arrive instead of holding them: at most maxRows rows, cut on the server
// (maxRows ≤ 0: MaxRows), with no cap on their bytes (the sink keeps its
// own). Query's errors, and a sink's error as is.
func (db *DB) Stream(ctx context.Context, sql string, maxRows int, sink datachat.RowSink) (datachat.StreamResult, error) {
	if err := db.proveRole(ctx); err != nil {
		return datachat.StreamResult{}, err
	}
	if maxRows <= 0 {
		maxRows = db.opts.MaxRows
	}
	start := time.Now()
	c := &counter{sink: sink}
	_, truncated, err := db.eng.stream(ctx, sql, streamLimits{maxRows: maxRows}, c)
	if err != nil {
		return datachat.StreamResult{}, err
	}
	return datachat.StreamResult{Rows: c.rows, Truncated: truncated, ElapsedMS: float64(time.Since(start).Microseconds()) / 1000}, nil
}

// streamLimits bound what an engine's stream reads.
type streamLimits struct {
	maxRows  int
	maxBytes int // 0: no cap
}

// collector is the sink of Query: the rows, held.
type collector struct{ res *datachat.QueryResult }

func (c *collector) Columns([]datachat.Column) error { return nil }

func (c *collector) Row(values []any) error {
	c.res.Rows = append(c.res.Rows, slices.Clone(values))
	return nil
}

// counter passes rows on and counts them.
type counter struct {
	sink datachat.RowSink
	rows int64
}

func (c *counter) Columns(cols []datachat.Column) error { return c.sink.Columns(cols) }

func (c *counter) Row(values []any) error {
	c.rows++
	return c.sink.Row(values)
}

// EstimateRows returns the engine's EXPLAIN estimate of the rows a statement
// would return, without running it. The sandbox's checks apply as for Query.
func (db *DB) EstimateRows(ctx context.Context, sql string) (int64, error) {
	if err := db.proveRole(ctx); err != nil {
		return 0, err
	}
	return db.eng.estimate(ctx, sql)
}

// proveRole proves the role's privileges from the engine's catalog unless a
// proof less than roleProofTTL old stands; a refusal stands as long as a
// success does, so a refused source is not asked again at every query.
// Errors other than a refusal (the source unreachable) are not kept.
func (db *DB) proveRole(ctx context.Context) error {
	db.proofMu.Lock()
	defer db.proofMu.Unlock()
	if !db.provedAt.IsZero() && db.now().Sub(db.provedAt) < roleProofTTL {
		return db.proofErr
	}
	return db.proveLocked(ctx)
}

// prove proves the role now, whatever the last proof found.
func (db *DB) prove(ctx context.Context) error {
	db.proofMu.Lock()
	defer db.proofMu.Unlock()
	return db.proveLocked(ctx)
}

func (db *DB) proveLocked(ctx context.Context) error {
	err := db.eng.checkRole(ctx)
	var re *RoleError
	switch {
	case err == nil, errors.As(err, &re):
		db.provedAt, db.proofErr = db.now(), err
	default:
		db.provedAt, db.proofErr = time.Time{}, nil
	}
	return err
}

// Watch proves the source's role again at each tick, until ctx ends or
// ticks is closed, so that a privilege granted to the role is found while no
// query runs: a refusal (a *RoleError) is logged at level Error, naming
// the privilege and the statement that takes it away, and stands for the
// queries until a later proof passes; a source that does not answer is
// logged at level Warn. The caller owns the ticks (a time.Ticker's channel,
// e.g. every minute) and runs Watch in its own goroutine.
func (db *DB) Watch(ctx context.Context, ticks <-chan time.Time, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
		}
		pctx, cancel := context.WithTimeout(ctx, db.opts.ConnectTimeout+db.opts.Timeout)
		err := db.prove(pctx)
		cancel()
		var re *RoleError
		switch {
		case err == nil, ctx.Err() != nil:
		case errors.As(err, &re):
			log.Error("database source refused: its role may do more than read the tables of --tables",
				slog.String("source", db.src.Name), slog.String("role", re.Role),
				slog.String("privilege", re.Privilege), slog.String("fix", re.Fix))
		default:
			log.Warn("database source: the periodic proof of its role failed",
				slog.String("source", db.src.Name), slog.String("error", err.Error()))
		}
	}
}

// Close closes the pool.
func (db *DB) Close() { db.eng.close() }

func dcColumn(name, friendly, sqlType string) datachat.Column {
	return datachat.Column{Name: name, Type: friendly, SQLType: sqlType}
}

// sortTables orders tables by schema and name, byte by byte, whatever the
// engine's collation.
func sortTables(tables []Table) {
	slices.SortFunc(tables, func(a, b Table) int {
		if c := strings.Compare(a.Schema, b.Schema); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// qualifiedNames are the tables' SCHEMA.TABLE names, unquoted, as
// [DB.allowedTables] keeps them.
func qualifiedNames(tables []Table) []string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.Schema + "." + t.Name
	}
	return names
}

// sampleQuery selects the first SampleRows rows of tb for its columns'
// samples: each column as text cut to 200 characters by the engine's
// expression text, blobs as null (the engine's null of a text type).
func (db *DB) sampleQuery(tb *Table, null string, text func(col string) string) string {
	exprs := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		if c.Type == datachat.TypeBlob {
			exprs[i] = null
			continue
		}
		exprs[i] = text(c.Name)
	}
	return fmt.Sprintf("SELECT %s FROM %s LIMIT %d", strings.Join(exprs, ", "), tb.QualifiedName(db.src.Kind), db.opts.SampleRows)
}

// sampleRows are the rows of a sampleQuery, from database/sql or pgx.
type sampleRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// readSamples keeps up to 3 distinct values per column of tb from rows, one
// text value per column.
func readSamples(rows sampleRows, tb *Table) error {
	vals := make([]*string, len(tb.Columns))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			addSample(&tb.Columns[i].Samples, v)
		}
	}
	return rows.Err()
}

func addSample(samples *[]string, v *string) {
	if v == nil || len(*samples) >= 3 {
		return
	}
	s := sample(*v)
	if s == "" || slices.Contains(*samples, s) {
		return
	}
	*samples = append(*samples, s)
}

// isIdentStart and isIdentPart classify the bytes of an unquoted
// identifier (mycheck.go reads MySQL names with them).
func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}

// trimStatement drops trailing semicolons and white space.
func trimStatement(sql string) string {
	return strings.TrimRight(sql, "; \t\r\n\f")
}
