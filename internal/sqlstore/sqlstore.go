// Package sqlstore is the part of [datachat.Store] whose SQL is the same on
// SQLite and PostgreSQL, written once.
//
// An engine's store embeds a [Store] made with [New] over its connections
// ([DB]) and a [Dialect] saying what its SQL differs in, and defines itself
// the methods whose statements, transactions or locks are its own (SQLite's
// BEGIN IMMEDIATE, PostgreSQL's row and advisory locks, full-text search).
//
// Queries here are written with ? placeholders; an engine that numbers its
// parameters rewrites them with [Numbered].
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"datachat"
	"datachat/internal/record"
)

// DB is an engine's connection pool or transaction, as the shared methods
// use it. Its queries have ? placeholders.
type DB interface {
	// Exec runs a statement and returns how many rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query expected to return one row; its Scan fails
	// with an error that is [sql.ErrNoRows] when there is none.
	QueryRow(ctx context.Context, query string, args ...any) record.Scanner
	// Query runs a query returning rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Rows are the rows of a query: what *sql.Rows and pgx.Rows have in common.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Dialect is what an engine's SQL and values differ in, for the statements
// written here.
type Dialect struct {
	// Decode decodes rows, timestamps included.
	Decode record.Decoder
	// Time and NullTime bind a timestamp, and a nullable one, as stored.
	Time     func(time.Time) any
	NullTime func(*time.Time) any
	// Bool binds a boolean.
	Bool func(bool) any
	// Violation tells the constraint a failed write violated.
	Violation func(error) record.Violation
	// RowSeq is the column numbering a table's rows in insertion order.
	RowSeq string
	// Bytewise follows a text expression in ORDER BY so that it sorts by
	// bytes, as Go compares strings.
	Bytewise string
	// Greatest is the function returning the greater of two values.
	Greatest string
	// StringAgg is the aggregate concatenating strings with a separator,
	// in the ORDER BY its call gives.
	StringAgg string
	// Position is the function giving where a string is in another,
	// 1-based, 0 when it is not: position(haystack, needle).
	Position string
	// RecentMessages is a FROM item of the newest messages of a
	// conversation: its parameters are the conversation's id, then how many
	// (NoLimit for all).
	RecentMessages string
	// NoLimit is the RecentMessages limit that means all.
	NoLimit any
	// InsertParts inserts parts of a message in tx, numbered from first,
	// leaving those already there as they are.
	InsertParts func(ctx context.Context, tx DB, messageID string, first int, parts []datachat.Part) error
	// LockRows follows a query, in a write transaction, that reads rows the
	// transaction goes on to change, so that a concurrent change of them
	// waits for it: PostgreSQL's FOR UPDATE. SQLite needs none, its write
	// transactions holding the database's write lock from their BEGIN.
	LockRows string
	// LockConversation, if set, runs first in BeginTurn's transaction, so
	// that the turns of one conversation begin one at a time, and fails
	// with ENOTFOUND when there is no such conversation: PostgreSQL locks
	// its row FOR UPDATE. SQLite needs none.
	LockConversation func(ctx context.Context, tx DB, id string) error
	// LockAdmins, if set, runs first in a write transaction that counts the
	// admins before changing one, so that such transactions run one at a
	// time: PostgreSQL's advisory lock. SQLite needs none.
	LockAdmins func(ctx context.Context, tx DB) error
	// LockRequests, if set, runs first in TakeRequest's transaction, so
	// that the user's requests are counted one at a time: PostgreSQL locks
	// the user's rate_limiters row FOR UPDATE. SQLite needs none.
	LockRequests func(ctx context.Context, tx DB, userID string) error
}

// Engine is an engine's connections, as the shared methods use them.
type Engine struct {
	// Read runs queries; Write, statements that change data.
	Read, Write DB
	// ReadTx runs fn in a read-only transaction: its queries see one
	// snapshot.
	ReadTx func(ctx context.Context, fn func(tx DB) error) error
	// WriteTx runs fn in a write transaction, committed when fn returns nil.
	WriteTx func(ctx context.Context, fn func(tx DB) error) error
	// Touch runs fn, which records that a credential was used: in one write
	// transaction, or statement by statement where each statement holds its
	// row's lock only while it runs (so that none waits on a DisableUser).
	Touch func(ctx context.Context, fn func(db DB) error) error
}

// Store holds the methods of [datachat.Store] both engines share.
type Store struct {
	read, write     DB
	readTx, writeTx func(ctx context.Context, fn func(tx DB) error) error
	touch           func(ctx context.Context, fn func(db DB) error) error
	d               Dialect
}

// New returns the shared methods over e's connections, in d's SQL.
func New(e Engine, d Dialect) *Store {
	return &Store{read: e.Read, write: e.Write, readTx: e.ReadTx, writeTx: e.WriteTx, touch: e.Touch, d: d}
}

// numbered caches [Numbered]'s answers. Its keys are query texts written
// for it, which hold no values: a bounded set.
var numbered sync.Map

// Numbered returns query with its ? placeholders numbered $1, $2… in order,
// as PostgreSQL wants them; a ? in a quoted string or identifier stays.
// Only for queries written with ? placeholders: PostgreSQL's own ?
// operators would be taken for one.
func Numbered(query string) string {
	if q, ok := numbered.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	q := b.String()
	numbered.Store(query, q)
	return q
}

// QueryAll runs a query on db and decodes its rows into a list, empty rather
// than nil when there are none; what names the listing in the error.
func QueryAll[T any](ctx context.Context, db DB, decode func(record.Scanner) (T, error), what, query string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	list, err := Collect(rows, decode)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return list, nil
}

// Collect decodes every row of rows and closes them; the list is never nil.
func Collect[T any](rows Rows, decode func(record.Scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	list := []T{}
	for rows.Next() {
		v, err := decode(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return list, nil
}

// writeError is what a method returns for err, its write's error: see
// [record.WriteError].
func (s *Store) writeError(err error, op, notFound, conflict string) error {
	return record.WriteError(err, s.d.Violation(err), op, notFound, conflict)
}

// NotFoundIfNoRows turns sql.ErrNoRows (which pgx.ErrNoRows is too) into
// ENOTFOUND with msg and wraps any other error with op.
func NotFoundIfNoRows(err error, op, msg string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return datachat.Errorf(datachat.ENOTFOUND, "%s", msg)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// mustAffect returns ENOTFOUND with msg when a statement affected no row,
// and wraps its error with op.
func mustAffect(n int64, err error, op, msg string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		return datachat.Errorf(datachat.ENOTFOUND, "%s", msg)
	}
	return nil
}
