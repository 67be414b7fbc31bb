package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"datachat"
)

// The store's errors are classified once, here, as the driver returns them:
// both pools open their connections through a connector whose connections,
// statements, transactions and rows pass every error through classify. So
// every method, present and future, tells "the database cannot be used now"
// from its own failures without doing anything itself.

// classify turns an SQLite error that is a condition of the server rather than
// a failure of the operation into the error the server answers with: a full
// disk (SQLITE_FULL) is datachat.NoSpace; the database locked by another
// process past busy_timeout (SQLITE_BUSY), an I/O error (SQLITE_IOERR_*), a
// file that cannot be opened (SQLITE_CANTOPEN) or a broken WAL lock protocol
// (SQLITE_PROTOCOL) is datachat.StoreUnavailable. The driver's *sqlite.Error
// stays in the chain; any other error is returned as it is.
func classify(err error) error {
	var e *sqlite.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	return classifyCode(e.Code(), err)
}

// classifyCode is classify for an error whose extended result code is code.
func classifyCode(code int, err error) error {
	switch code & 0xff {
	case sqlite3.SQLITE_FULL:
		return datachat.NoSpace(err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL:
		return datachat.StoreUnavailable(err)
	}
	return err
}

// openDB opens a database/sql pool on dsn whose errors are classified.
func openDB(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(classifyingConnector{c}), nil
}

type classifyingConnector struct{ driver.Connector }

func (c classifyingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, classify(err)
	}
	full, ok := conn.(fullConn)
	if !ok {
		conn.Close()
		return nil, errors.New("sqlite driver connection lacks an interface the store needs: " + reflect.TypeOf(conn).String())
	}
	return &classifyingConn{full}, nil
}

// fullConn is what modernc.org/sqlite's connections implement and
// database/sql uses.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type classifyingConn struct{ c fullConn }

func (c *classifyingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *classifyingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, classify(err)
	}
	return wrapStmt(s), nil
}

func (c *classifyingConn) Close() error { return classify(c.c.Close()) }

func (c *classifyingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *classifyingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.c.BeginTx(ctx, opts)
	if err != nil {
		return nil, classify(err)
	}
	return classifyingTx{tx}, nil
}

func (c *classifyingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.c.ExecContext(ctx, query, args)
	return r, classify(err)
}

func (c *classifyingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.c.QueryContext(ctx, query, args)
	if err != nil {
		return nil, classify(err)
	}
	return wrapRows(r), nil
}

func (c *classifyingConn) Ping(ctx context.Context) error { return classify(c.c.Ping(ctx)) }

func (c *classifyingConn) ResetSession(ctx context.Context) error { return c.c.ResetSession(ctx) }

func (c *classifyingConn) IsValid() bool { return c.c.IsValid() }

type classifyingTx struct{ tx driver.Tx }

func (t classifyingTx) Commit() error   { return classify(t.tx.Commit()) }
func (t classifyingTx) Rollback() error { return classify(t.tx.Rollback()) }

// fullStmt is what modernc.org/sqlite's statements implement.
type fullStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type classifyingStmt struct{ s fullStmt }

// wrapStmt classifies a statement's errors; one without the context methods
// is left as it is (database/sql then uses its plain ones).
func wrapStmt(s driver.Stmt) driver.Stmt {
	if fs, ok := s.(fullStmt); ok {
		return classifyingStmt{fs}
	}
	return s
}

func (s classifyingStmt) Close() error  { return classify(s.s.Close()) }
func (s classifyingStmt) NumInput() int { return s.s.NumInput() }

func (s classifyingStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.s.Exec(args)
	return r, classify(err)
}

func (s classifyingStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.s.Query(args)
	if err != nil {
		return nil, classify(err)
	}
	return wrapRows(r), nil
}

func (s classifyingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.s.ExecContext(ctx, args)
	return r, classify(err)
}

func (s classifyingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.s.QueryContext(ctx, args)
	if err != nil {
		return nil, classify(err)
	}
	return wrapRows(r), nil
}

// classifyingRows classifies the errors of a result being read (a read can
// meet an I/O error, or a lock, past its first row).
type classifyingRows struct{ r driver.Rows }

func wrapRows(r driver.Rows) driver.Rows { return classifyingRows{r} }

func (r classifyingRows) Columns() []string { return r.r.Columns() }
func (r classifyingRows) Close() error      { return classify(r.r.Close()) }

// Next passes io.EOF, the end of the rows, through as it is.
func (r classifyingRows) Next(dest []driver.Value) error { return classify(r.r.Next(dest)) }

func (r classifyingRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.r.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r classifyingRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.r.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r classifyingRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.r.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}
