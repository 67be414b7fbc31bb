// Package record is the form both SQL stores (internal/sqlite and
// internal/postgres) give what they record: ids are UUIDv7, time-ordered;
// timestamps are UTC truncated to the microsecond, PostgreSQL's precision, so
// that a value reads back as it was written from either store; JSON columns
// are bound as text, and a dataset's column descriptions are kept apart from
// its columns. It also holds what the stores do alike around their SQL: what
// a Create method checks and fills in ([FillConfirmation]…), how a row
// decodes into a record ([Decoder]), how a conversation's messages are put
// together ([Thread]) and which error a failed write returns ([WriteError]).
package record

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"datachat"
)

// NewID returns a new UUIDv7, time-ordered.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// Now returns the current time as it is stored.
func Now() time.Time { return Time(time.Now()) }

// Time returns t as it is stored: UTC, truncated to the microsecond.
func Time(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// FillTime sets a zero *t to now and normalises any other.
func FillTime(t *time.Time) {
	if t.IsZero() {
		*t = Now()
		return
	}
	*t = Time(*t)
}

// TimePtr normalises a nullable time.
func TimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	n := Time(*t)
	return &n
}

// FillCreated gives a new row its id, when *id is empty, and its creation
// time as stored: a zero *created is now.
func FillCreated(id *string, created *time.Time) {
	if *id == "" {
		*id = NewID()
	}
	FillTime(created)
}

// Fill is FillCreated for a row with an update time too: a zero *updated is
// *created.
func Fill(id *string, created, updated *time.Time) {
	FillCreated(id, created)
	if updated.IsZero() {
		*updated = *created
	}
	FillTime(updated)
}

// JSON marshals v for a JSON column (TEXT in SQLite, jsonb in PostgreSQL).
func JSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// WithoutDescriptions returns cols without their descriptions, which are
// stored apart (column_descriptions), so that changing one rewrites only
// them.
func WithoutDescriptions(cols []datachat.Column) []datachat.Column {
	out := make([]datachat.Column, len(cols))
	for i, c := range cols {
		c.Description = ""
		out[i] = c
	}
	return out
}

// Descriptions binds column descriptions as a JSON object, NULL when there
// are none.
func Descriptions(descs map[string]string) (any, error) {
	if len(descs) == 0 {
		return nil, nil
	}
	return JSON(descs)
}

// ListJSON binds a list (a message's sources, an answer's number checks) to
// a JSON column, NULL when it is empty.
func ListJSON[T any](list []T) (any, error) {
	if len(list) == 0 {
		return nil, nil
	}
	return JSON(list)
}

// NonNil returns list, or an empty slice for nil: lists the stores return are
// never nil, and JSON arrays they store are "[]", never "null".
func NonNil[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}

// Violation is the constraint a failed write violated, as a store's driver
// reports it.
type Violation int

const (
	NoViolation         Violation = iota
	ForeignKeyViolation           // a row refers to a parent that does not exist
	UniqueViolation               // a UNIQUE or PRIMARY KEY
)

// WriteError is the error a store method returns for err, the error of its
// write, which violated v: nil for nil; ENOTFOUND with notFound for a foreign
// key and ECONFLICT with conflict for a unique key, each when its message is
// set; else err wrapped with op.
func WriteError(err error, v Violation, op, notFound, conflict string) error {
	switch {
	case err == nil:
		return nil
	case v == ForeignKeyViolation && notFound != "":
		return datachat.Errorf(datachat.ENOTFOUND, "%s", notFound)
	case v == UniqueViolation && conflict != "":
		return datachat.Errorf(datachat.ECONFLICT, "%s", conflict)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Wrap returns err as a store method does when err may come from inside its
// transaction: nil for nil, an error with a code (EINVALID, ENOTFOUND,
// ECONFLICT…) as it is, any other wrapped with op.
func Wrap(op string, err error) error {
	if err == nil || datachat.ErrorCode(err) != datachat.EINTERNAL {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Also is sc with extra scan destinations after those its caller gives: a
// row of a decoder's columns followed by more.
func Also(sc Scanner, extra ...any) Scanner { return also{sc, extra} }

type also struct {
	sc    Scanner
	extra []any
}

func (a also) Scan(dest ...any) error { return a.sc.Scan(append(dest, a.extra...)...) }
