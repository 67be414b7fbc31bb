package retrieval

import (
	"os"
	"path/filepath"
	"testing"

	"datachat"
	sqlitedb "datachat/internal/sqlite"
)

// TestOpenIndexBeforeMigrations opens an index file made before the index
// had migrations (testdata/index-before-migrations.db: its tables, no
// schema_migrations; written by Open and Index.Add of commit 31a24b0, one
// document "doc-old" of conversation c1 with metadata year=2023 and one
// chunk): it opens, keeps its document and chunk, takes new ones, and records
// its schema as current.
func TestOpenIndexBeforeMigrations(t *testing.T) {
	ctx := t.Context()
	old, err := os.ReadFile("testdata/index-before-migrations.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "index.db")
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := func() error {
		write, read, err := sqlitedb.Pools(ctx, path)
		if err != nil {
			return err
		}
		defer write.Close()
		defer read.Close()
		return read.QueryRowContext(ctx,
			`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables)
	}(); err != nil {
		t.Fatalf("read the old index: %v", err)
	}
	if tables != 0 {
		t.Fatalf("the old index has schema_migrations: want a file from before migrations")
	}

	for round := range 2 { // the second Open finds nothing to migrate
		ix, err := Open(ctx, Options{Path: path})
		if err != nil {
			t.Fatalf("Open %d of an index from before migrations: %v", round+1, err)
		}
		pending, err := sqlitedb.PendingMigrations(ctx, ix.read, migrationFS)
		if err != nil {
			t.Fatalf("PendingMigrations: %v", err)
		}
		if len(pending) != 0 {
			t.Errorf("PendingMigrations after Open: got %v, want none", pending)
		}
		var version int
		if err := ix.read.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
			t.Fatalf("user_version: %v", err)
		}
		if version != 1 {
			t.Errorf("user_version: got %d, want 1", version)
		}
		docs, err := ix.Documents(ctx, "c1")
		if err != nil {
			t.Fatalf("Documents: %v", err)
		}
		want := []string{"doc-old"}
		if round == 1 {
			want = []string{"doc-2", "doc-old"}
		}
		if len(docs) != len(want) || docs[0] != want[0] || (len(want) == 2 && docs[1] != want[1]) {
			t.Errorf("Documents after Open %d: got %v, want %v", round+1, docs, want)
		}
		got, err := ix.Search(ctx, "c1", "warehouse inventory", 5, map[string]any{"year": "2023"})
		if err != nil {
			t.Fatalf("Search: %v", err)
		}
		if len(got) != 1 || got[0].ID != "chunk-old" {
			t.Errorf("Search of the old chunk: got %+v, want chunk-old alone", got)
		}
		if round == 0 {
			doc := &datachat.Document{ID: "doc-2", ConversationID: "c1", Name: "notes.txt"}
			if err := ix.Add(ctx, "c1", doc, []*datachat.Chunk{{ID: "chunk-2", DocumentID: "doc-2", Text: "Headcount stayed flat."}}); err != nil {
				t.Fatalf("Add to a migrated index: %v", err)
			}
		}
		if err := ix.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

// TestOpenNewIndexMigrates checks that a new index gets every migration.
func TestOpenNewIndexMigrates(t *testing.T) {
	ix := openTestIndex(t, nil)
	pending, err := sqlitedb.PendingMigrations(t.Context(), ix.read, migrationFS)
	if err != nil {
		t.Fatalf("PendingMigrations: %v", err)
	}
	if len(pending) != 0 {
		t.Errorf("PendingMigrations of a new index: got %v, want none", pending)
	}
	var applied int
	if err := ix.read.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatalf("count schema_migrations: %v", err)
	}
	if applied == 0 {
		t.Errorf("schema_migrations of a new index: got no row, want the applied migrations")
	}
}
