// Package sqlitetest gives tests and benchmarks a real SQLite store: a file in
// a temporary directory, migrated, closed when the test ends.
package sqlitetest

import (
	"path/filepath"
	"testing"

	"datachat"
	"datachat/internal/sqlite"
)

// Open returns a migrated store in tb's temporary directory, closed at the
// end of tb.
func Open(tb testing.TB) *sqlite.Store {
	tb.Helper()
	ctx := tb.Context()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "test.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return st
}

// Conversation returns the user named name, created if need be, and a new
// conversation of theirs.
func Conversation(tb testing.TB, st datachat.Store, name string) (*datachat.User, *datachat.Conversation) {
	tb.Helper()
	u, err := st.EnsureUser(tb.Context(), name)
	if err != nil {
		tb.Fatal(err)
	}
	c := &datachat.Conversation{UserID: u.ID}
	if err := st.CreateConversation(tb.Context(), c); err != nil {
		tb.Fatal(err)
	}
	return u, c
}
