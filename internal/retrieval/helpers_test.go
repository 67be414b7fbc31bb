package retrieval

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"datachat"
	"datachat/internal/extract"
	"datachat/internal/retrieval/retrievaltest"
)

func sharedDocsDir(tb testing.TB) string { return retrievaltest.SharedDocsOrSkip(tb) }

func openTestIndex(tb testing.TB, emb Embedder) *Index {
	tb.Helper()
	ix, err := Open(context.Background(), Options{Path: filepath.Join(tb.TempDir(), "index.db"), Embedder: emb})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ix.Close() })
	return ix
}

// addFile extracts, chunks and indexes one file; the document id is its name.
func addFile(tb testing.TB, ix *Index, conversationID, path string, meta map[string]string) *datachat.Document {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	ex, err := extract.Extract(context.Background(), f, filepath.Base(path), 100<<20)
	if err != nil {
		tb.Fatalf("extract %s: %v", path, err)
	}
	doc := &datachat.Document{ID: filepath.Base(path), ConversationID: conversationID, Name: ex.Name, MediaType: ex.MediaType, Pages: ex.Pages, Metadata: meta}
	chunks := Chunk(ex, doc.ID, ChunkOptions{})
	doc.Chunks = len(chunks)
	if err := ix.Add(context.Background(), conversationID, doc, chunks); err != nil {
		tb.Fatalf("add %s: %v", path, err)
	}
	return doc
}

// extractableShared returns the shared documents' directory and the names of
// those that extract: all but the password-protected PDF.
func extractableShared(tb testing.TB) (dir string, names []string) {
	tb.Helper()
	dir = sharedDocsDir(tb)
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "libreoffice-writer-password.pdf" {
			names = append(names, e.Name())
		}
	}
	return dir, names
}

// addAllShared indexes every extractable shared document in the conversation.
func addAllShared(tb testing.TB, ix *Index, conversationID string) {
	tb.Helper()
	dir, names := extractableShared(tb)
	for _, name := range names {
		addFile(tb, ix, conversationID, filepath.Join(dir, name), nil)
	}
}
