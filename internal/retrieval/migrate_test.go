package retrieval

import (
	"os"
	"path/filepath"
	"testing"

	"datachat"
	sqlitedb "datachat/internal/sqlite"
)

// TestOpenIndexBeforeMigrations opens an index file as Open created it before
// the index had migrations (testdata/schema-before-migrations.sql, no
// schema_migrations): it opens, keeps its documents and chunks, takes new
// ones, and records its schema as current.
func TestOpenIndexBeforeMigrations(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "index.db")
	schema, err := os.ReadFile("testdata/schema-before-migrations.sql")
	if err != nil {
		t.Fatal(err)
	}
	write, read, err := sqlitedb.Pools(ctx, path)
	if err != nil {
		t.Fatalf("Pools: %v", err)
	}
	for _, q := range []string{
		string(schema),
		`INSERT INTO documents (conversation_id, id, name, media_type) VALUES ('c1', 'doc-1', 'report.pdf', 'application/pdf')`,
		`INSERT INTO document_metadata (conversation_id, document_id, key, value) VALUES ('c1', 'doc-1', 'year', '2024')`,
		`INSERT INTO chunks (conversation_id, document_id, id, seq, page, heading, start_offset, end_offset, text)
			VALUES ('c1', 'doc-1', 'chunk-1', 0, 1, 'Revenue', 0, 40, 'Quarterly revenue grew by twelve percent.')`,
	} {
		if _, err := write.ExecContext(ctx, q); err != nil {
			t.Fatalf("build the old index: %v", err)
		}
	}
	read.Close()
	write.Close()

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
		want := []string{"doc-1"}
		if round == 1 {
			want = []string{"doc-1", "doc-2"}
		}
		if len(docs) != len(want) || docs[0] != want[0] || (len(want) == 2 && docs[1] != want[1]) {
			t.Errorf("Documents after Open %d: got %v, want %v", round+1, docs, want)
		}
		got, err := ix.Search(ctx, "c1", "quarterly revenue", 5, map[string]any{"year": "2024"})
		if err != nil {
			t.Fatalf("Search: %v", err)
		}
		if len(got) != 1 || got[0].ID != "chunk-1" {
			t.Errorf("Search of the old chunk: got %+v, want chunk-1 alone", got)
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
