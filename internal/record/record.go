// Package record is the form both SQL stores (internal/sqlite and
// internal/postgres) give what they record: ids are UUIDv7, time-ordered, and
// timestamps are UTC truncated to the microsecond, PostgreSQL's precision, so
// that a value reads back as it was written from either store.
package record

import (
	"time"

	"github.com/google/uuid"
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

// Fill gives a new row its id, when *id is empty, and its times as stored: a
// zero *created is now, and a zero *updated is *created.
func Fill(id *string, created, updated *time.Time) {
	if *id == "" {
		*id = NewID()
	}
	FillTime(created)
	if updated.IsZero() {
		*updated = *created
	}
	FillTime(updated)
}
