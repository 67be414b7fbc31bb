// Package postgres implements [datachat.Store] on PostgreSQL through pgx
// (pgxpool).
//
// Tables live in the first schema of the connection's search_path, so one
// database can hold several datachat instances (or test runs), each with
// ?search_path=NAME in its URL. Open a store with [Open], then bring its
// schema up to date with [Store.Migrate]; [Store.PendingMigrations] reports
// what Migrate would apply. [Index] searches the documents the store holds
// (a retrieval.Backend), shared by every process on the database.
//
// The methods whose SQL is SQLite's too are [sqlstore.Store]'s, in
// PostgreSQL's [sqlstore.Dialect]; this package has those that are
// PostgreSQL's alone.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

var _ datachat.Store = (*Store)(nil)

// Store is a [datachat.Store] on a PostgreSQL database. It is safe for
// concurrent use.
type Store struct {
	*sqlstore.Store // the methods whose SQL is SQLite's too

	pool *db
}

// Open connects to the database at url (postgres://… or a key=value DSN;
// pool settings such as pool_max_conns are accepted) and checks that it
// answers. It does not migrate: call [Store.Migrate].
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The error can quote the URL, password included: leave it out.
		return nil, errors.New("open postgres: invalid database URL")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A database that does not answer (a host down, packets dropped)
		// fails a request in seconds, as unavailable, rather than holding
		// it for the operating system's minutes-long connect timeout.
		// connect_timeout in the URL overrides it.
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		// Scan timestamps in UTC, whatever the session's time zone.
		conn.TypeMap().RegisterType(&pgtype.Type{
			Name:  "timestamptz",
			OID:   pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC},
		})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	s := &Store{pool: &db{pool}}
	// One snapshot for all the queries.
	readOnly := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	s.Store = sqlstore.New(sqlstore.Engine{
		Read:  pgDB{s.pool},
		Write: pgDB{s.pool},
		ReadTx: func(ctx context.Context, fn func(sqlstore.DB) error) error {
			return pgx.BeginTxFunc(ctx, s.pool, readOnly, func(tx pgx.Tx) error { return fn(pgDB{tx}) })
		},
		WriteTx: func(ctx context.Context, fn func(sqlstore.DB) error) error {
			return s.tx(ctx, func(tx pgx.Tx) error { return fn(pgDB{tx}) })
		},
		// Statement by statement: each holds one row's lock only while it
		// runs, so that none waits on a DisableUser.
		Touch: func(ctx context.Context, fn func(sqlstore.DB) error) error { return fn(pgDB{s.pool}) },
	}, dialect)
	return s, nil
}

// dialect is how PostgreSQL's SQL and values differ from SQLite's.
var dialect = sqlstore.Dialect{
	Decode:    decode,
	Time:      func(t time.Time) any { return record.Time(t) },
	NullTime:  func(t *time.Time) any { return t },
	Bool:      func(b bool) any { return b },
	Violation: violation,
	RowSeq:    "row_seq",
	Bytewise:  ` COLLATE "C"`,
	Greatest:  "GREATEST",
	StringAgg: "string_agg",
	Position:  "strpos",
	RecentMessages: `(SELECT * FROM messages WHERE conversation_id = ?
		ORDER BY created_at DESC, row_seq DESC LIMIT ?) recent`,
	NoLimit:     nil, // LIMIT NULL
	InsertParts: insertParts,
	LockRows:    ` FOR UPDATE`,
	LockConversation: func(ctx context.Context, tx sqlstore.DB, id string) error {
		if err := tx.QueryRow(ctx, `SELECT id FROM conversations WHERE id = ? FOR UPDATE`, id).Scan(&id); err != nil {
			return sqlstore.NotFoundIfNoRows(err, "lock conversation", "conversation not found")
		}
		return nil
	},
	LockAdmins: func(ctx context.Context, tx sqlstore.DB) error {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(adminLockKey))
		return err
	},
	LockRequests: func(ctx context.Context, tx sqlstore.DB, userID string) error {
		if _, err := tx.Exec(ctx,
			`INSERT INTO rate_limiters (user_id) VALUES (?) ON CONFLICT (user_id) DO NOTHING`, userID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT 1 FROM rate_limiters WHERE user_id = ? FOR UPDATE`, userID)
		return err
	},
}

// pgDB is the pool or a transaction as the shared methods use it: their ?
// placeholders numbered.
type pgDB struct{ q querier }

// querier is what the pool and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (d pgDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.q.Exec(ctx, sqlstore.Numbered(query), args...)
	return tag.RowsAffected(), err
}

func (d pgDB) QueryRow(ctx context.Context, query string, args ...any) record.Scanner {
	return d.q.QueryRow(ctx, sqlstore.Numbered(query), args...)
}

func (d pgDB) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := d.q.Query(ctx, sqlstore.Numbered(query), args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// defaultConnectTimeout bounds a connection attempt when the URL sets no
// connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// Close closes the pool, waiting for connections in use to be released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// tx runs fn in a transaction, committed when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// decode decodes rows into records; pgx scans timestamptz into time.Time.
var decode = record.Decoder{
	Time:     func(p *time.Time) any { return p },
	NullTime: func(p **time.Time) any { return p },
}

// rowTo adapts a record decoder to pgx.CollectRows.
func rowTo[T any](decode func(record.Scanner) (T, error)) pgx.RowToFunc[T] {
	return func(row pgx.CollectableRow) (T, error) { return decode(row) }
}

// queryAll runs a query on pool (errors classified) and decodes its rows into a list, empty
// rather than nil when there are none; what names the listing in the error.
func queryAll[T any](ctx context.Context, pool *db, decode func(record.Scanner) (T, error), what, query string, args ...any) ([]T, error) {
	rows, err := pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	list, err := pgx.CollectRows(rows, rowTo(decode))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return record.NonNil(list), nil
}

// PostgreSQL error codes (SQLSTATE).
const (
	foreignKeyViolation = "23503"
	uniqueViolation     = "23505"
)

func sqlState(err error) string {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// writeError is what a method returns for err, its write's error: see
// [record.WriteError].
func writeError(err error, op, notFound, conflict string) error {
	return record.WriteError(err, violation(err), op, notFound, conflict)
}

// violation tells the constraint err violated, by its SQLSTATE.
func violation(err error) record.Violation {
	switch sqlState(err) {
	case foreignKeyViolation:
		return record.ForeignKeyViolation
	case uniqueViolation:
		return record.UniqueViolation
	}
	return record.NoViolation
}
