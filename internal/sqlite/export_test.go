package sqlite

import (
	"context"
	"testing/fstest"

	"datachat/internal/migrate"
)

// MigrateWithout applies every migration but skip, as the release before
// skip was added would have (its later-numbered migrations included).
func (s *Store) MigrateWithout(ctx context.Context, skip string) error {
	names, err := migrate.Names(migrationFS)
	if err != nil {
		return err
	}
	fsys := fstest.MapFS{}
	for _, n := range names {
		if n == skip {
			continue
		}
		b, err := migrationFS.ReadFile("migration/" + n)
		if err != nil {
			return err
		}
		fsys["migration/"+n] = &fstest.MapFile{Data: b}
	}
	return ApplyMigrations(ctx, s.write, fsys)
}
