// Package migrate holds what the SQLite and PostgreSQL stores' schema
// migrations have in common: the order of the embedded files and which of them
// a database has yet to apply. Each store applies them with its own SQL, under
// its own lock; internal/sqlite's ApplyMigrations gives the retrieval index its
// schema the same way.
package migrate

import (
	"io/fs"
	"slices"
)

// Names returns the names of the *.sql files in fsys's migration directory, in
// the order they apply (by name: 0001_init.sql, 0002_….sql, …).
func Names(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, "migration/*.sql")
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		names[i] = n[len("migration/"):]
	}
	slices.Sort(names)
	return names, nil
}

// Pending returns the names, in order, that applied does not hold: the
// migrations a database has yet to apply (empty, not nil, when none).
func Pending(names, applied []string) []string {
	pending := []string{}
	for _, n := range names {
		if !slices.Contains(applied, n) {
			pending = append(pending, n)
		}
	}
	return pending
}
