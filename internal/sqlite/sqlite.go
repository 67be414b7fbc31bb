// Package sqlite implements [datachat.Store] on an SQLite file through
// modernc.org/sqlite, pure Go.
//
// A [Store] holds two connection pools on the same file: a single-connection
// writer pool, whose transactions begin with BEGIN IMMEDIATE, and a reader
// pool. Every write in the process therefore queues on one connection instead
// of failing with SQLITE_BUSY, while reads run concurrently under WAL; the
// write transactions that queue together commit together ([committer]).
// Writers in other processes sharing the file wait on busy_timeout.
//
// Open a store with [Open], then bring its schema up to date with
// [Store.Migrate]; [Store.PendingMigrations] reports what Migrate would apply.
//
// The methods whose SQL is PostgreSQL's too are [sqlstore.Store]'s, in
// SQLite's [sqlstore.Dialect]; this package has those that are SQLite's
// alone.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// BusyTimeout is how long a connection waits for a lock held by another
// process before failing with SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

var _ datachat.Store = (*Store)(nil)

// Store is a [datachat.Store] on one SQLite file. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store // the methods whose SQL is PostgreSQL's too

	path   string
	write  *sql.DB // one connection; transactions BEGIN IMMEDIATE
	read   *sql.DB // query_only connections
	commit *committer
	ckpt   *checkpointer
}

// pingBusy opens a first connection, retrying while the file is locked: when
// several processes create the database at once, switching it to WAL can
// answer SQLITE_BUSY without waiting for busy_timeout.
func pingBusy(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || errorCode(err)&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Open opens (creating if needed) the SQLite database at path, a file name,
// and checks that it answers. It does not migrate: call [Store.Migrate].
// In-memory databases are refused, since the two pools would each see their
// own.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, nil)
}

// open is [Open]; checkpointed, when not nil, is told each checkpoint's
// outcome.
func open(ctx context.Context, path string, checkpointed func(frames, copied int, err error)) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open sqlite: %q: want the path of a database file", path)
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
	}

	// The store's writer leaves the WAL to its checkpointer (checkpoint.go).
	write, read, err := pools(ctx, path, "wal_autocheckpoint(0)")
	if err != nil {
		return nil, err
	}
	ckpt := newCheckpointer(read, checkpointed)
	s := &Store{path: path, write: write, read: read, commit: newCommitter(write, ckpt.written), ckpt: ckpt}
	readTx := func(ctx context.Context, fn func(sqlstore.DB) error) error {
		return s.readTx(ctx, func(tx *sql.Tx) error { return fn(sqlDB{q: tx}) })
	}
	writeTx := func(ctx context.Context, fn func(sqlstore.DB) error) error {
		return s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return fn(sqlDB{q: tx, ctx: ctx}) })
	}
	s.Store = sqlstore.New(sqlstore.Engine{
		Read:    sqlDB{q: read},
		Write:   sqlDB{q: signaling{write, ckpt}},
		ReadTx:  readTx,
		WriteTx: writeTx,
		// One transaction, to spare the writer.
		Touch: writeTx,
	}, dialect)
	return s, nil
}

// dialect is how SQLite's SQL and values differ from PostgreSQL's.
var dialect = sqlstore.Dialect{
	Decode:    decode,
	Time:      func(t time.Time) any { return ts(t) },
	NullTime:  func(t *time.Time) any { return tsPtr(t) },
	Bool:      func(b bool) any { return boolInt(b) },
	Violation: violation,
	RowSeq:    "rowid",
	Bytewise:  "", // the default collation, BINARY
	Greatest:  "MAX",
	StringAgg: "group_concat",
	Position:  "instr",
	RecentMessages: `messages WHERE rowid IN (SELECT rowid FROM messages WHERE conversation_id = ?
		ORDER BY created_at DESC, rowid DESC LIMIT ?)`,
	NoLimit:     -1,
	InsertParts: insertParts,
	// Write transactions BEGIN IMMEDIATE, holding the database's write lock
	// from the start: no row, admin or request lock is needed.
	LockRows: "",
}

// sqlDB is a pool or transaction as the shared methods use it. In a write
// transaction its statements run under the transaction's context, not the
// one the shared method passes (see [committer]).
type sqlDB struct {
	q   queryer
	ctx context.Context // when set, every statement's context
}

func (d sqlDB) on(ctx context.Context) context.Context {
	if d.ctx != nil {
		return d.ctx
	}
	return ctx
}

func (d sqlDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.q.ExecContext(d.on(ctx), query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d sqlDB) QueryRow(ctx context.Context, query string, args ...any) record.Scanner {
	return d.q.QueryRowContext(d.on(ctx), query, args...)
}

func (d sqlDB) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := d.q.QueryContext(d.on(ctx), query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

// sqlRows are *sql.Rows as [sqlstore.Rows]: Close's error is Err's.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// readerIdle is how long a reader stays open unused. A burst opens every
// reader the pool allows, each with its page cache and prepared statements
// outside the Go heap: a minute after 200 stalled clients left, the readers
// closed after 30 s idle took the server's RSS from 1.15-1.18x its rest to
// 1.12-1.13x (BENCHMARKS, "Stalled clients"). Opening one again costs its
// pragmas and the statements it prepares.
const readerIdle = 30 * time.Second

// Pools opens the two connection pools of the SQLite file at path the way
// every datachat SQLite database is opened (the store's and the retrieval
// index's): one writer whose transactions BEGIN IMMEDIATE, and up to
// max(4, cores) query_only readers, each closed after readerIdle unused;
// WAL, synchronous NORMAL, foreign keys, a 512 KiB page cache, busy_timeout
// BusyTimeout; failures classified (a busy or unreachable database, a full
// disk) and statements kept prepared per connection.
func Pools(ctx context.Context, path string) (write, read *sql.DB, err error) {
	return pools(ctx, path)
}

// pools is [Pools], with more pragmas for the writer.
func pools(ctx context.Context, path string, writer ...string) (write, read *sql.DB, err error) {
	// busy_timeout comes first so that switching to WAL already waits for a
	// lock held by another process.
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	// A connection's page cache at 512 KiB, not SQLite's 2 MiB: the store and
	// the index hold ten connections, whose caches filled during a burst and
	// stayed outside the Go heap after it (4 MiB of a server's RSS a minute
	// after 200 stalled clients left); a turn's statements read a few pages,
	// and BenchmarkTurn shows no difference.
	q.Add("_pragma", "cache_size(-512)")

	wq := cloneValues(q)
	wq.Set("_txlock", "immediate")
	for _, p := range writer {
		wq.Add("_pragma", p)
	}
	write, err = openDB(path + "?" + wq.Encode())
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// The writer connects first: it creates the file and switches it to WAL
	// before any read-only connection opens it.
	if err := pingBusy(ctx, write); err != nil {
		write.Close()
		return nil, nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}

	rq := cloneValues(q)
	rq.Set("_query_only", "1")
	read, err = openDB(path + "?" + rq.Encode())
	if err != nil {
		write.Close()
		return nil, nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	n := max(4, runtime.NumCPU())
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	read.SetConnMaxIdleTime(readerIdle)
	if err := pingBusy(ctx, read); err != nil {
		write.Close()
		read.Close()
		return nil, nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return write, read, nil
}

func cloneValues(v url.Values) url.Values {
	c := make(url.Values, len(v))
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// Close closes both pools.
func (s *Store) Close() error {
	s.commit.close()
	s.ckpt.close()
	return errors.Join(s.read.Close(), s.write.Close())
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.read.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("ping sqlite %s: %w", s.path, err)
	}
	return nil
}

// writeTx runs fn in a write transaction on the writer connection, perhaps
// together with others ([committer]); fn's statements run under the context
// it is given. fn must not use s.write itself: with one connection that would
// wait forever.
func (s *Store) writeTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.commit.run(ctx, fn)
}

// inTx runs fn in a transaction on db, committed when fn returns nil.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// readTx runs fn in a read transaction, so that its queries see one snapshot.
func (s *Store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // read-only: nothing to undo
	return fn(tx)
}

// queryer is what *sql.DB and *sql.Tx have in common.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// timeLayout is the stored form of every timestamp: UTC, fixed width, so
// timestamps compare as strings.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// ts is a time argument: ts(t) binds t in the stored form.
type ts time.Time

func (t ts) Value() (driver.Value, error) {
	return record.Time(time.Time(t)).Format(timeLayout), nil
}

// tsPtr binds a nullable time.
func tsPtr(t *time.Time) driver.Valuer {
	if t == nil {
		return nullValue{}
	}
	return ts(*t)
}

type nullValue struct{}

func (nullValue) Value() (driver.Value, error) { return nil, nil }

// scanTime scans a stored timestamp into *t.
type scanTime struct{ t *time.Time }

func (s scanTime) Scan(src any) error {
	str, ok, err := textOf(src)
	if err != nil || !ok {
		if err == nil {
			err = errors.New("timestamp is NULL")
		}
		return err
	}
	t, err := time.Parse(timeLayout, str)
	if err != nil {
		return fmt.Errorf("parse timestamp %q: %w", str, err)
	}
	*s.t = t
	return nil
}

// scanNullTime scans a nullable stored timestamp into *p.
type scanNullTime struct{ p **time.Time }

func (s scanNullTime) Scan(src any) error {
	if src == nil {
		*s.p = nil
		return nil
	}
	var t time.Time
	if err := (scanTime{&t}).Scan(src); err != nil {
		return err
	}
	*s.p = &t
	return nil
}

func textOf(src any) (string, bool, error) {
	switch v := src.(type) {
	case nil:
		return "", false, nil
	case string:
		return v, true, nil
	case []byte:
		return string(v), true, nil
	default:
		return "", false, fmt.Errorf("got %T, want text", src)
	}
}

// decode decodes rows into records; timestamps are stored as text.
var decode = record.Decoder{
	Time:     func(p *time.Time) any { return scanTime{p} },
	NullTime: func(p **time.Time) any { return scanNullTime{p} },
}

// errorCode returns the extended SQLite result code of err, or 0.
func errorCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// writeError is what a method returns for err, its write's error: see
// [record.WriteError].
func writeError(err error, op, notFound, conflict string) error {
	return record.WriteError(err, violation(err), op, notFound, conflict)
}

// violation tells the constraint err violated, by its extended result code.
func violation(err error) record.Violation {
	switch errorCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return record.ForeignKeyViolation
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return record.UniqueViolation
	}
	return record.NoViolation
}

// notFoundIfNoRows turns sql.ErrNoRows into ENOTFOUND with msg and wraps any
// other error with op.
func notFoundIfNoRows(err error, op, msg string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return datachat.Errorf(datachat.ENOTFOUND, "%s", msg)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
