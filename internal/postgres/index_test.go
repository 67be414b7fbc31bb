package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/extract"
	"datachat/internal/postgres"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/backendtest"
	"datachat/internal/retrieval/retrievaltest"
)

// docStore stores documents as the workspace does before indexing them,
// creating the conversation (and its user) when missing.
type docStore struct {
	s     *postgres.Store
	mu    sync.Mutex
	user  string
	convs map[string]bool
}

func newDocStore(t *testing.T, s *postgres.Store) *docStore {
	t.Helper()
	u, err := s.EnsureUser(t.Context(), "indexer")
	if err != nil {
		t.Fatalf("EnsureUser: %v", err)
	}
	return &docStore{s: s, user: u.ID, convs: map[string]bool{}}
}

// store stores doc and its chunks in the conversation, replacing a document
// of the same id. It reports failures with t.Errorf: the conformance suite
// calls it from goroutines.
func (ds *docStore) store(t *testing.T, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) {
	ctx := context.Background()
	ds.mu.Lock()
	if !ds.convs[conversationID] {
		err := ds.s.CreateConversation(ctx, &datachat.Conversation{ID: conversationID, UserID: ds.user})
		if err != nil && datachat.ErrorCode(err) != datachat.ECONFLICT {
			ds.mu.Unlock()
			t.Errorf("CreateConversation %s: %v", conversationID, err)
			return
		}
		ds.convs[conversationID] = true
	}
	ds.mu.Unlock()
	if err := ds.s.DeleteDocument(ctx, conversationID, doc.ID); err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("DeleteDocument %s: %v", doc.ID, err)
		return
	}
	doc.ConversationID = conversationID
	if err := ds.s.CreateDocument(ctx, doc, chunks); err != nil {
		t.Errorf("CreateDocument %s: %v", doc.ID, err)
	}
}

// add stores and indexes a document.
func (ds *docStore) add(t *testing.T, ix retrieval.Backend, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) {
	t.Helper()
	ds.store(t, conversationID, doc, chunks)
	if err := ix.Add(t.Context(), conversationID, doc, chunks); err != nil {
		t.Fatalf("Add %s: %v", doc.ID, err)
	}
}

func TestIndex(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	ds := newDocStore(t, s)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, emb retrieval.Embedder) retrieval.Backend {
			return postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb})
		},
		Store: ds.store,
	})
}

func search(t *testing.T, ix retrieval.Backend, conversationID, text string) *retrieval.Result {
	t.Helper()
	res, err := ix.Query(t.Context(), retrieval.Query{ConversationID: conversationID, Text: text})
	if err != nil {
		t.Fatalf("Query %q: %v", text, err)
	}
	return res
}

func ids(res *retrieval.Result) []string {
	out := []string{}
	for _, s := range res.Sources {
		out = append(out, s.ID)
	}
	return out
}

// TestIndexAcrossStores uses two pools on one schema, as two server
// processes on one database would: what one indexes or deletes, the other
// sees at once.
func TestIndexAcrossStores(t *testing.T) {
	dsn := newSchema(t)
	s1, s2 := mustOpen(t, dsn), mustOpen(t, dsn)
	ix1, ix2 := postgres.NewIndex(s1, postgres.IndexOptions{}), postgres.NewIndex(s2, postgres.IndexOptions{})
	ds := newDocStore(t, s1)
	doc, chunks := backendtest.TextDoc("lighthouse", nil, "The lighthouse keeper climbs the spiral stairs.")
	ds.add(t, ix1, "c1", doc, chunks)
	if got := ids(search(t, ix2, "c1", "lighthouse stairs")); !slices.Equal(got, []string{"lighthouse:0"}) {
		t.Fatalf("second process after the first added: got %v, want [lighthouse:0]", got)
	}
	if err := ix1.DeleteDocument(t.Context(), "c1", doc.ID); err != nil {
		t.Fatal(err)
	}
	if got := ids(search(t, ix2, "c1", "lighthouse stairs")); len(got) != 0 {
		t.Errorf("second process after the first deleted: got %v, want nothing", got)
	}
	// Indexed again by the second, deleted from the store by the first.
	if err := ix2.Add(t.Context(), "c1", doc, chunks); err != nil {
		t.Fatal(err)
	}
	if got := ids(search(t, ix1, "c1", "keeper")); len(got) != 1 {
		t.Errorf("first process after the second added: got %v, want one source", got)
	}
	if err := s1.DeleteDocument(t.Context(), "c1", doc.ID); err != nil {
		t.Fatal(err)
	}
	if err := ix1.DeleteDocument(t.Context(), "c1", doc.ID); err != nil {
		t.Errorf("DeleteDocument after the store deleted it: %v", err)
	}
	if got := ids(search(t, ix2, "c1", "keeper")); len(got) != 0 {
		t.Errorf("second process after the store deleted: got %v, want nothing", got)
	}
}

// TestIndexAdd checks what the suite cannot: Add indexes only documents the
// store holds, in the conversation given.
func TestIndexAdd(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	ix := postgres.NewIndex(s, postgres.IndexOptions{Embedder: &retrievaltest.HashEmbedder{Dim: 32}})
	ds := newDocStore(t, s)
	doc, chunks := backendtest.TextDoc("owls", nil, "Owls hunt at night.")
	ds.store(t, "c1", doc, chunks)
	ds.store(t, "c2", &datachat.Document{ID: "other", Name: "other.txt"}, nil)

	if err := ix.Add(t.Context(), "c2", doc, chunks); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("Add to another conversation: got %v, want ENOTFOUND", err)
	}
	missing, _ := backendtest.TextDoc("missing", nil, "Never stored.")
	if err := ix.Add(t.Context(), "c1", missing, nil); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("Add of a document not stored: got %v, want ENOTFOUND", err)
	}
	if got := ids(search(t, ix, "c1", "owls")); len(got) != 0 {
		t.Errorf("before Add: got %v, want nothing (stored is not indexed)", got)
	}
	if err := ix.Add(t.Context(), "c2", &datachat.Document{ID: "other", Name: "other.txt"}, nil); err != nil {
		t.Errorf("Add of a document without chunks: %v", err)
	}
	if err := ix.Add(t.Context(), "c1", doc, chunks); err != nil {
		t.Fatal(err)
	}
	res := search(t, ix, "c1", "owls hunting")
	if !res.Hybrid || len(res.Sources) != 1 || res.Sources[0].Distance == nil {
		t.Fatalf("hybrid search: got %+v, want one source with a distance", res)
	}
	if d := *res.Sources[0].Distance; d < 0 || d > 1 {
		t.Errorf("distance = %v, want between 0 and 1 for similar texts", d)
	}
}

// hookEmbedder runs hook, once, before embedding.
type hookEmbedder struct {
	retrievaltest.HashEmbedder
	hook func()
}

func (e *hookEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if h := e.hook; h != nil {
		e.hook = nil
		h()
	}
	return e.HashEmbedder.Embed(ctx, texts)
}

// TestIndexAddReplaced: a document replaced in the store while Add embeds
// its chunks is not indexed with the old chunks' vectors.
func TestIndexAddReplaced(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	emb := &hookEmbedder{HashEmbedder: retrievaltest.HashEmbedder{Dim: 16}}
	ix := postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb})
	ds := newDocStore(t, s)
	doc, chunks := backendtest.TextDoc("notes", nil, "Old text about ferns.")
	ds.store(t, "c", doc, chunks)
	emb.hook = func() {
		doc2, chunks2 := backendtest.TextDoc("notes", nil, "New text about mosses.")
		ds.store(t, "c", doc2, chunks2)
	}
	if err := ix.Add(t.Context(), "c", doc, chunks); datachat.ErrorCode(err) != datachat.ECONFLICT {
		t.Errorf("Add while the document is replaced: got %v, want ECONFLICT", err)
	}
	if got := ids(search(t, ix, "c", "ferns mosses")); len(got) != 0 {
		t.Errorf("after the failed Add: got %v, want nothing", got)
	}
	if err := ix.Add(t.Context(), "c", doc, chunks); err != nil {
		t.Fatal(err)
	}
	if res := search(t, ix, "c", "ferns mosses"); len(res.Sources) != 1 || res.Sources[0].Text != "New text about mosses." {
		t.Errorf("after Add again: got %+v, want the new text", res.Sources)
	}
}

// TestIndexQuotedLexemes: words that PostgreSQL keeps whole, quotes
// included (URLs, paths), are quoted in the tsquery, not parsed.
func TestIndexQuotedLexemes(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	ix := postgres.NewIndex(s, postgres.IndexOptions{})
	ds := newDocStore(t, s)
	doc, chunks := backendtest.TextDoc("links", nil, `See http://example.com/o'neil?q=a\b for details.`, "Nothing here.")
	ds.add(t, ix, "c", doc, chunks)
	for _, tc := range []struct {
		q     string
		found bool
	}{
		{`http://example.com/o'neil?q=a`, true}, // the lexeme example.com/o'neil?q=a
		{`example.com/o'neil?q=a & !details:*`, true},
		{`o'neil`, false}, // words inside a URL are not lexemes of their own
		{`\' & '' \\ '\'`, false},
	} {
		res, err := ix.Query(t.Context(), retrieval.Query{ConversationID: "c", Text: tc.q})
		if err != nil {
			t.Errorf("query %q: %v", tc.q, err)
			continue
		}
		if got := ids(res); tc.found != slices.Equal(got, []string{"links:0"}) {
			t.Errorf("query %q: got %v, want found %v", tc.q, got, tc.found)
		}
	}
}

// TestIndexQueryEmbedding: a failing query embedding, or one of other
// dimensions than the indexed vectors, falls back to full text.
func TestIndexQueryEmbedding(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	emb := &retrievaltest.HashEmbedder{Dim: 64}
	ix := postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb})
	ds := newDocStore(t, s)
	doc, chunks := backendtest.TextDoc("tides", nil, "Tides follow the moon.", "Waves break on the shore.")
	ds.add(t, ix, "c", doc, chunks)

	emb.Fail.Store(true)
	res := search(t, ix, "c", "moon")
	emb.Fail.Store(false)
	if res.Hybrid || !slices.Equal(ids(res), []string{"tides:0"}) || res.Sources[0].Distance != nil {
		t.Errorf("with a failing embedder: hybrid %v, got %v, want full text [tides:0]", res.Hybrid, ids(res))
	}
	other := postgres.NewIndex(s, postgres.IndexOptions{Embedder: &retrievaltest.HashEmbedder{Dim: 16}})
	res = search(t, other, "c", "moon")
	if res.Hybrid || !slices.Equal(ids(res), []string{"tides:0"}) {
		t.Errorf("query vector of other dimensions: hybrid %v, got %v, want full text [tides:0]", res.Hybrid, ids(res))
	}
	if res.Embedding <= 0 || res.Retrieval <= 0 {
		t.Errorf("timings: embedding %v, retrieval %v, want both set", res.Embedding, res.Retrieval)
	}
	res = search(t, ix, "c", "moon")
	if !res.Hybrid || len(res.Sources) != 2 || ids(res)[0] != "tides:0" {
		t.Errorf("hybrid: hybrid %v, got %v, want both chunks, tides:0 first", res.Hybrid, ids(res))
	}
}

// TestIndexMigrateExisting migrates a schema holding chunks from 0002 to the
// current one: the chunks become searchable by full text.
func TestIndexMigrateExisting(t *testing.T) {
	s := mustOpenAt(t, newSchema(t), "0002_message_lease.sql")
	ds := newDocStore(t, s)
	doc, chunks := backendtest.TextDoc("old", map[string]string{"year": "2020"}, "Glaciers carve valleys slowly.", "Rivers deposit silt.")
	doc.Name = "geology-notes.md"
	ds.store(t, "c", doc, chunks)
	if t.Failed() {
		t.FailNow()
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate to the current schema: %v", err)
	}
	ix := postgres.NewIndex(s, postgres.IndexOptions{})
	if got := ids(search(t, ix, "c", "glacier valley")); !slices.Equal(got, []string{"old:0"}) {
		t.Errorf("after migrating: got %v, want [old:0]", got)
	}
	// The document name is indexed too, its punctuation read as spaces.
	if got := ids(search(t, ix, "c", "geology")); len(got) != 2 {
		t.Errorf("search by document name: got %v, want both chunks", got)
	}
}

// TestIndexRecall measures recall@5 of the labelled questions over all shared
// documents in one conversation, for full text alone and hybrid with the
// hashed test embedder, as internal/retrieval's TestRecall does for the
// embedded index.
func TestIndexRecall(t *testing.T) {
	dir := retrievaltest.SharedDocsOrSkip(t)
	questions, err := retrievaltest.LoadQuestions()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		doc    *datachat.Document
		chunks []*datachat.Chunk
	}
	var files []file
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		ex, err := extract.Extract(t.Context(), f, e.Name(), 100<<20)
		f.Close()
		if err != nil {
			continue // the password-protected PDF
		}
		doc := &datachat.Document{Name: ex.Name, MediaType: ex.MediaType, Pages: ex.Pages}
		files = append(files, file{doc, retrieval.Chunk(ex, "", retrieval.ChunkOptions{})})
	}

	s := mustOpen(t, newSchema(t))
	ds := newDocStore(t, s)
	for _, tc := range []struct {
		name string
		emb  retrieval.Embedder
		want float64
	}{
		{"fulltext", nil, 0.8},
		{"hybrid", &retrievaltest.HashEmbedder{Dim: 256}, 0.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := postgres.NewIndex(s, postgres.IndexOptions{Embedder: tc.emb})
			conv := "eval-" + tc.name
			for _, f := range files {
				doc := *f.doc
				chunks := make([]*datachat.Chunk, len(f.chunks))
				for i, c := range f.chunks {
					cc := *c
					cc.ID = ""
					chunks[i] = &cc
				}
				ds.add(t, ix, conv, &doc, chunks)
			}
			hits, mrr := 0, 0.0
			for _, q := range questions {
				res, err := ix.Query(t.Context(), retrieval.Query{ConversationID: conv, Text: q.Question, TopK: 5})
				if err != nil {
					t.Fatalf("Query %q: %v", q.Question, err)
				}
				if i := slices.IndexFunc(res.Sources, q.Answers); i >= 0 {
					hits++
					mrr += 1 / float64(i+1)
				} else {
					t.Logf("  missed: %s", q.Question)
				}
			}
			n := float64(len(questions))
			r := float64(hits) / n
			t.Logf("recall@5 %s: %.3f (%d/%d), MRR@5 %.3f", tc.name, r, hits, len(questions), mrr/n)
			if r < tc.want {
				t.Errorf("recall@5 = %.3f, want >= %.2f", r, tc.want)
			}
		})
	}
}
