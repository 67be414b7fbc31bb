package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"datachat/internal/migrate"
	"datachat/internal/record"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// migrations returns the embedded migration file names, in the order they
// apply.
func migrations() ([]string, error) { return migrate.Names(migrationFS) }

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    TEXT PRIMARY KEY,
	applied_at TEXT NOT NULL
)`

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own transaction, in name order. It is safe to
// run concurrently from several processes: each file is applied under the
// database's write lock and skipped if another process applied it first.
func (s *Store) Migrate(ctx context.Context) error {
	names, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := s.write.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, name := range names {
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx,
				`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			body, err := migrationFS.ReadFile("migration/" + name)
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

// PendingMigrations returns the names of the embedded migrations that
// [Store.Migrate] would apply; none means the schema is current.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	names, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	var exists int
	if err := s.read.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	if exists == 0 {
		return names, nil
	}
	rows, err := s.read.QueryContext(ctx, `SELECT version FROM schema_migrations`)
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
