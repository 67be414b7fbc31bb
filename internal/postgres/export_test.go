package postgres

import "context"

// MigrateTo applies the migrations up to and including last, as an older
// release would have, for testing a later migration on existing data.
func (s *Store) MigrateTo(ctx context.Context, last string) error { return s.migrateTo(ctx, last) }

// MigrateWithout applies every migration but skip, as the release before
// skip was added would have (its later-numbered migrations included).
func (s *Store) MigrateWithout(ctx context.Context, skip string) error {
	return s.migrateOnly(ctx, func(name string) bool { return name != skip })
}

// Cached returns the conversations whose vectors the index holds, each with
// whether they are loaded (false: over the budget, ranked in SQL).
func (ix *Index) Cached() map[string]bool {
	out := map[string]bool{}
	if ix.cache == nil {
		return out
	}
	ix.cache.mu.Lock()
	defer ix.cache.mu.Unlock()
	for id, e := range ix.cache.entries {
		out[id] = !e.vs.tooBig
	}
	return out
}

// Loads returns how many times the index read a conversation's vectors.
func (ix *Index) Loads() int64 {
	if ix.cache == nil {
		return 0
	}
	return ix.cache.loads.Load()
}
