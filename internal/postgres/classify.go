package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"datachat"
)

// The store's errors are classified once, here, as pgx returns them: the
// store and the index reach the database only through a db, whose queries,
// transactions, rows and batches pass every error through classify. So every
// method, present and future, tells "the database cannot be used now" from
// its own failures without doing anything itself.

// PostgreSQL error codes (SQLSTATE) of a database that cannot serve now.
const (
	classConnectionException = "08" // connection_exception and its subclasses
	insufficientResources    = "53000"
	diskFull                 = "53100"
	outOfMemory              = "53200"
	tooManyConnections       = "53300"
	adminShutdown            = "57P01" // pg_ctl stop, or a terminated backend
	crashShutdown            = "57P02"
	cannotConnectNow         = "57P03" // starting up or shutting down
	idleSessionTimeout       = "57P05"
	ioError                  = "58030"
)

// characterNotInRepertoire is PostgreSQL's answer to text that is not UTF-8
// or holds a NUL ("invalid byte sequence for encoding"): the database has
// no such value, and cannot be asked about one.
const characterNotInRepertoire = "22021"

// notUTF8 is the store's answer to a value PostgreSQL's text cannot hold. A
// client sent it (an id in a path, a field of a message): what the client
// sent is wrong, not the server.
const notUTF8 = "The request holds text that is not UTF-8, or a NUL character; send UTF-8 text without NUL characters."

// classify turns a pgx error that is a condition of the server rather than a
// failure of the operation into the error the server answers with: the
// database cannot be reached or cannot serve now — a connection refused,
// reset or closed under us, the server shutting down or starting up, out of
// connections or resources, an I/O error — is datachat.StoreUnavailable; the
// database's disk full is datachat.NoSpace. pgx's error stays in the chain;
// text PostgreSQL cannot hold (not UTF-8, or a NUL) is datachat.EINVALID; any
// other error (a constraint, no rows, the caller's context ending) is
// returned as it is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return datachat.StoreUnavailable(err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == diskFull:
			return datachat.NoSpace(err)
		case pe.Code == characterNotInRepertoire:
			return datachat.WrapError(datachat.EINVALID, notUTF8, err)
		case len(pe.Code) == 5 && pe.Code[:2] == classConnectionException,
			pe.Code == insufficientResources, pe.Code == outOfMemory, pe.Code == tooManyConnections,
			pe.Code == adminShutdown, pe.Code == crashShutdown, pe.Code == cannotConnectNow,
			pe.Code == idleSessionTimeout, pe.Code == ioError:
			return datachat.StoreUnavailable(err)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ne net.Error
	if errors.Is(err, pgconn.ErrConnClosed) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return datachat.StoreUnavailable(err)
	}
	return err
}

// db is the store's pool with its errors classified. It has the pool's
// methods the store uses, with the same signatures.
type db struct{ pool *pgxpool.Pool }

func (d *db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.pool.Exec(ctx, sql, args...)
	return tag, classify(err)
}

func (d *db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	return classifyingRows{rows}, nil
}

func (d *db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifyingRow{d.pool.QueryRow(ctx, sql, args...)}
}

func (d *db) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifyingBatch{d.pool.SendBatch(ctx, b)}
}

func (d *db) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, classify(err)
	}
	return classifyingTx{tx}, nil
}

func (d *db) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := d.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, classify(err)
	}
	return classifyingTx{tx}, nil
}

func (d *db) Ping(ctx context.Context) error { return classify(d.pool.Ping(ctx)) }

func (d *db) Close() { d.pool.Close() }

type classifyingRows struct{ pgx.Rows }

func (r classifyingRows) Err() error             { return classify(r.Rows.Err()) }
func (r classifyingRows) Scan(dest ...any) error { return classify(r.Rows.Scan(dest...)) }
func (r classifyingRows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	return v, classify(err)
}

type classifyingRow struct{ row pgx.Row }

func (r classifyingRow) Scan(dest ...any) error { return classify(r.row.Scan(dest...)) }

type classifyingBatch struct{ pgx.BatchResults }

func (b classifyingBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, classify(err)
}

func (b classifyingBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return nil, classify(err)
	}
	return classifyingRows{rows}, nil
}

func (b classifyingBatch) QueryRow() pgx.Row { return classifyingRow{b.BatchResults.QueryRow()} }
func (b classifyingBatch) Close() error      { return classify(b.BatchResults.Close()) }

type classifyingTx struct{ pgx.Tx }

func (t classifyingTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, classify(err)
	}
	return classifyingTx{tx}, nil
}

func (t classifyingTx) Commit(ctx context.Context) error   { return classify(t.Tx.Commit(ctx)) }
func (t classifyingTx) Rollback(ctx context.Context) error { return classify(t.Tx.Rollback(ctx)) }

func (t classifyingTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	n, err := t.Tx.CopyFrom(ctx, table, columns, src)
	return n, classify(err)
}

func (t classifyingTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifyingBatch{t.Tx.SendBatch(ctx, b)}
}

func (t classifyingTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	d, err := t.Tx.Prepare(ctx, name, sql)
	return d, classify(err)
}

func (t classifyingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, classify(err)
}

func (t classifyingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	return classifyingRows{rows}, nil
}

func (t classifyingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifyingRow{t.Tx.QueryRow(ctx, sql, args...)}
}
