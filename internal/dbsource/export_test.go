package dbsource

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// SetNow makes db read the time from now, so that a test can move past the
// role proof's TTL without waiting.
func SetNow(db *DB, now func() time.Time) {
	db.proofMu.Lock()
	defer db.proofMu.Unlock()
	db.now = now
}

// PgFunctionNames are the functions a PostgreSQL query may call, and
// PgTypeNames the types it may cast to (pgFunctions, pgTypes).
func PgFunctionNames() []string { return keys(pgFunctions) }

func PgTypeNames() []string { return keys(pgTypes) }

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// RawExec runs sql, unchecked, in the sandbox's transaction on a pooled
// connection of a PostgreSQL source, and returns the first value of its
// first row as text ("" if none): for tests of what the sandbox does around
// a statement, whatever the statement did.
func RawExec(ctx context.Context, db *DB, sql string) (string, error) {
	e := db.eng.(*pgEngine)
	t, err := e.begin(ctx)
	if err != nil {
		return "", err
	}
	defer t.end()
	rows, err := t.c.Query(ctx, sql)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	out := ""
	if rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return "", err
		}
		if len(vals) > 0 {
			out = fmt.Sprint(vals[0])
		}
	}
	rows.Close()
	return out, rows.Err()
}
