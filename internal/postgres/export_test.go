package postgres

import "context"

// MigrateTo applies the migrations up to and including last, as an older
// release would have, for testing a later migration on existing data.
func (s *Store) MigrateTo(ctx context.Context, last string) error { return s.migrateTo(ctx, last) }
