package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"datachat/internal/migrate"
	"datachat/internal/record"
)

//go:embed migration/*.sql
var migrationFS embed.FS

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    TEXT PRIMARY KEY,
	applied_at TEXT NOT NULL
)`

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own transaction, in name order. It is safe to
// run concurrently from several processes: each file is applied under the
// database's write lock and skipped if another process applied it first.
func (s *Store) Migrate(ctx context.Context) error {
	return ApplyMigrations(ctx, s.write, migrationFS)
}

// PendingMigrations returns the names of the embedded migrations that
// [Store.Migrate] would apply; none means the schema is current.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	return PendingMigrations(ctx, s.read, migrationFS)
}

// ApplyMigrations applies the migrations of fsys (migration/*.sql, see
// [migrate.Names]) that the database of write, a writer pool from [Pools],
// has not recorded in its schema_migrations: each in its own transaction, in
// name order, skipped if another process applied it first. Every SQLite file
// of datachat (the store's, the retrieval index's) gets its schema this way.
func ApplyMigrations(ctx context.Context, write *sql.DB, fsys fs.FS) error {
	names, err := migrate.Names(fsys)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := write.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, name := range names {
		err := inTx(ctx, write, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx,
				`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			body, err := fs.ReadFile(fsys, "migration/"+name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, name, ts(record.Now()))
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	return nil
}

// PendingMigrations returns the names of fsys's migrations that
// [ApplyMigrations] would apply to the database of read.
func PendingMigrations(ctx context.Context, read *sql.DB, fsys fs.FS) ([]string, error) {
	names, err := migrate.Names(fsys)
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	var exists int
	if err := read.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	if exists == 0 {
		return names, nil
	}
	rows, err := read.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	defer rows.Close()
	var applied []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("pending migrations: %w", err)
		}
		applied = append(applied, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	return migrate.Pending(names, applied), nil
}
