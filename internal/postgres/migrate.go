package postgres

import (
	"context"
	"embed"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"datachat/internal/migrate"
	"datachat/internal/record"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// migrations returns the embedded migration file names, in the order they
// apply.
func migrations() ([]string, error) { return migrate.Names(migrationFS) }

// migrateLockKey is the advisory lock serialising Migrate across processes.
const migrateLockKey = 0x6461746163686174 // "datachat"

// Migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own transaction, in name order. It is safe to
// run concurrently from several processes: each transaction holds an advisory
// lock and skips a file another process applied first.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateOnly(ctx, nil)
}

// migrateTo is [Store.Migrate] stopping after the migration named last.
func (s *Store) migrateTo(ctx context.Context, last string) error {
	names, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if !slices.Contains(names, last) {
		return fmt.Errorf("migrate: no migration %s", last)
	}
	return s.migrateOnly(ctx, func(name string) bool { return name <= last })
}

// migrateOnly is [Store.Migrate] applying only the migrations keep keeps
// (nil: all of them).
func (s *Store) migrateOnly(ctx context.Context, keep func(name string) bool) error {
	names, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if keep != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !keep(n) })
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    text PRIMARY KEY,
			applied_at timestamptz NOT NULL
		)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, name := range names {
		err := s.tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
				return err
			}
			var applied bool
			if err := tx.QueryRow(ctx,
				`SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, name).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			body, err := migrationFS.ReadFile("migration/" + name)
			if err != nil {
				return err
			}
			// Without arguments Exec uses the simple protocol, which runs
			// every statement of the file.
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, name, record.Now())
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
	var exists bool
	if err := s.pool.QueryRow(ctx,
		`SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	if !exists {
		return names, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	return migrate.Pending(names, applied), nil
}
