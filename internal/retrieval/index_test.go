package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/retrieval/retrievaltest"
)

// textDoc makes a document of paragraphs, one chunk each.
func textDoc(id string, meta map[string]string, paras ...string) (*datachat.Document, []*datachat.Chunk) {
	doc := &datachat.Document{ID: id, Name: id + ".txt", MediaType: "text/plain", Metadata: meta}
	var chunks []*datachat.Chunk
	off := 0
	for i, p := range paras {
		chunks = append(chunks, &datachat.Chunk{ID: fmt.Sprintf("%s:%d", id, i), DocumentID: id, Seq: i, Page: i + 1, Start: off, End: off + len(p), Text: p})
		off += len(p) + 2
	}
	return doc, chunks
}

func mustAdd(t testing.TB, ix *Index, conv string, doc *datachat.Document, chunks []*datachat.Chunk) {
	t.Helper()
	if err := ix.Add(context.Background(), conv, doc, chunks); err != nil {
		t.Fatal(err)
	}
}

func ids(srcs []Source) []string {
	var out []string
	for _, s := range srcs {
		out = append(out, s.ID)
	}
	return out
}

func search(t testing.TB, ix *Index, conv, q string, filters map[string]any) []Source {
	t.Helper()
	srcs, err := ix.Search(context.Background(), conv, q, 5, filters)
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	return srcs
}

func TestIndexScopesAndDeletes(t *testing.T) {
	ix := openTestIndex(t, nil)
	addText(t, ix, "a", "fruit", map[string]string{"author": "Ann"}, "Apples and pears grow on trees.", "Bananas are yellow and curved.")
	addText(t, ix, "a", "veg", nil, "Carrots are orange roots.", "Potatoes grow underground.")
	addText(t, ix, "b", "fruit", nil, "Bananas in conversation b.")

	if got := ids(search(t, ix, "a", "which fruit is yellow? bananas", nil)); len(got) == 0 || got[0] != "fruit:1" {
		t.Errorf("search a = %v, want fruit:1 first", got)
	}
	if got := ids(search(t, ix, "b", "bananas", nil)); !slices.Equal(got, []string{"fruit:0"}) {
		t.Errorf("search b = %v, want [fruit:0] (conversation b's own)", got)
	}
	if got := search(t, ix, "c", "bananas", nil); len(got) != 0 {
		t.Errorf("search in an empty conversation = %v", ids(got))
	}

	// Words are stemmed: "grows" finds "grow".
	if got := ids(search(t, ix, "a", "grows", nil)); len(got) != 2 {
		t.Errorf("search grows = %v, want 2 chunks", got)
	}

	if err := ix.DeleteDocument(context.Background(), "a", "fruit"); err != nil {
		t.Fatal(err)
	}
	if got := search(t, ix, "a", "bananas apples", nil); len(got) != 0 {
		t.Errorf("after delete: %v", ids(got))
	}
	if got := search(t, ix, "b", "bananas", nil); len(got) != 1 {
		t.Errorf("deleting a's document touched b: %v", ids(got))
	}
	// Re-adding a document replaces its chunks.
	addText(t, ix, "a", "veg", nil, "Leeks only now.")
	if got := search(t, ix, "a", "carrots potatoes leeks", nil); !slices.Equal(ids(got), []string{"veg:0"}) || got[0].Text != "Leeks only now." {
		t.Errorf("after replace: %v", ids(got))
	}
	if err := ix.DeleteConversation(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := search(t, ix, "a", "leeks", nil); len(got) != 0 {
		t.Errorf("after deleting the conversation: %v", ids(got))
	}
	if got := search(t, ix, "b", "bananas", nil); len(got) != 1 {
		t.Errorf("deleting conversation a touched b: %v", ids(got))
	}
	// Deleting what is not there is not an error.
	if err := ix.DeleteDocument(context.Background(), "zzz", "nope"); err != nil {
		t.Error(err)
	}
}

func addText(t testing.TB, ix *Index, conv, id string, meta map[string]string, paras ...string) {
	t.Helper()
	doc, chunks := textDoc(id, meta, paras...)
	mustAdd(t, ix, conv, doc, chunks)
}

func TestSourceJSON(t *testing.T) {
	ix := openTestIndex(t, nil)
	doc, chunks := textDoc("report", map[string]string{"author": "Ann", "page": "ignored"}, "Quarterly revenue grew by nine percent.")
	chunks[0].Heading = "Results" + HeadingSeparator + "Revenue"
	mustAdd(t, ix, "c", doc, chunks)
	srcs := search(t, ix, "c", "revenue", nil)
	if len(srcs) != 1 {
		t.Fatalf("got %d sources", len(srcs))
	}
	b, err := json.Marshal(srcs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"distance", "id", "metadata", "score", "text"}) {
		t.Errorf("keys = %v", keys)
	}
	if m["distance"] != nil || m["id"] != "report:0" || m["score"].(float64) <= 0 {
		t.Errorf("source = %s", b)
	}
	md := m["metadata"].(map[string]any)
	want := map[string]any{"document": "report.txt", "document_id": "report", "page": float64(1), "section": "Results > Revenue", "chunk": float64(0), "author": "Ann"}
	for k, v := range want {
		if md[k] != v {
			t.Errorf("metadata[%q] = %v, want %v", k, md[k], v)
		}
	}
	if len(md) != len(want) {
		t.Errorf("metadata = %v, want %v", md, want)
	}

	// A document without pages has "page": null.
	mustAdd(t, ix, "c", &datachat.Document{ID: "md", Name: "notes.md"}, []*datachat.Chunk{{ID: "md:0", Text: "Meeting notes about hiring."}})
	srcs = search(t, ix, "c", "hiring", nil)
	b, _ = json.Marshal(srcs[0].Metadata)
	if !strings.Contains(string(b), `"page":null`) {
		t.Errorf("metadata = %s, want page null", b)
	}
}

func TestFilters(t *testing.T) {
	ix := openTestIndex(t, nil)
	addText(t, ix, "f", "q1", map[string]string{"year": "2023", "team": "red"}, "Sales rose in spring.", "Sales fell in autumn.")
	addText(t, ix, "f", "q2", map[string]string{"year": "2024", "team": "blue"}, "Sales rose again.")
	for _, tc := range []struct {
		filters map[string]any
		want    []string
	}{
		{nil, []string{"q1:0", "q1:1", "q2:0"}},
		{map[string]any{"document": "q1.txt"}, []string{"q1:0", "q1:1"}},
		{map[string]any{"document_id": []any{"q2", "zzz"}}, []string{"q2:0"}},
		{map[string]any{"year": "2024"}, []string{"q2:0"}},
		{map[string]any{"year": []string{"2023", "2024"}, "team": "red"}, []string{"q1:0", "q1:1"}},
		{map[string]any{"page": "2"}, []string{"q1:1"}},
		{map[string]any{"page": float64(1), "year": "2023"}, []string{"q1:0"}},
		{map[string]any{"page": "x"}, nil},
		{map[string]any{"year": "1999"}, nil},
		{map[string]any{"missing": "x"}, nil},
	} {
		got := ids(search(t, ix, "f", "sales", tc.filters))
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("filters %v: got %v, want %v", tc.filters, got, tc.want)
		}
	}
	// Vectors honour filters too.
	hix := openTestIndex(t, &retrievaltest.HashEmbedder{Dim: 64})
	addText(t, hix, "f", "q1", map[string]string{"year": "2023"}, "Sales rose in spring.", "Sales fell in autumn.")
	addText(t, hix, "f", "q2", map[string]string{"year": "2024"}, "Sales rose again.")
	if got := ids(search(t, hix, "f", "sales", map[string]any{"year": "2024"})); !slices.Equal(got, []string{"q2:0"}) {
		t.Errorf("hybrid with filter: %v", got)
	}

	for _, bad := range []map[string]any{
		{"year": map[string]any{"$gt": 1}},
		{"year": []any{"a", []any{"b"}}},
		{"year": []any{}},
		{"chunk": "1"},
	} {
		_, err := ix.Search(context.Background(), "f", "sales", 5, bad)
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("filters %v: got %v, want EINVALID", bad, err)
		}
	}
}

func TestCheckFilters(t *testing.T) {
	allowed := []string{"document", "year"}
	if err := CheckFilters(map[string]any{"document": "a.pdf", "year": []any{"2023"}}, allowed); err != nil {
		t.Errorf("allowed filters: %v", err)
	}
	if err := CheckFilters(nil, nil); err != nil {
		t.Errorf("no filters: %v", err)
	}
	err := CheckFilters(map[string]any{"year": "2023", "secret": "x"}, allowed)
	if datachat.ErrorCode(err) != datachat.EINVALID || datachat.ErrorMessage(err) != `Metadata filter key "secret" is not allowed; allowed keys: document, year.` {
		t.Errorf("got %v", err)
	}
	err = CheckFilters(map[string]any{"year": "2023"}, nil)
	if datachat.ErrorMessage(err) != `Metadata filter key "year" is not allowed: no filter keys are enabled (CHAT_ALLOWED_METADATA_KEYS).` {
		t.Errorf("empty allow-list: got %v", err)
	}
	if err := CheckFilters(map[string]any{"year": 2023.0, "document": []any{"a.pdf", 7.0}}, allowed); err != nil {
		t.Errorf("numbers are taken as their text: %v", err)
	}
	err = CheckFilters(map[string]any{"year": 3.5i}, allowed)
	if datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("bad value: got %v", err)
	}
}

func TestHostileQueries(t *testing.T) {
	ix := openTestIndex(t, nil)
	addText(t, ix, "h", "d", nil, `He said "NEAR(x y)" OR col:value * and ^start`, "Plain words here.")
	for _, q := range []string{
		`"`, `*`, `NEAR(`, `OR OR`, `col:`, `text: heading:`, `)(`, `"unterminated`, `a AND`, `NOT`, `^`, `-`, `+`,
		`'; DROP TABLE chunks; --`, `\x00`, "\u200b", `{text}: x`, `near(x y)`, strings.Repeat("word ", 5000), "数据 données 🚀",
	} {
		res, err := ix.Query(context.Background(), Query{ConversationID: "h", Text: q})
		if err != nil {
			t.Errorf("query %.40q: %v", q, err)
			continue
		}
		for _, s := range res.Sources {
			if s.ID == "" || s.Text == "" {
				t.Errorf("query %.40q: bad source %+v", q, s)
			}
		}
	}
	if got := ids(search(t, ix, "h", `NEAR(x`, nil)); !slices.Equal(got, []string{"d:0"}) {
		t.Errorf("NEAR( as words: %v", got)
	}
	for _, q := range []string{"", "   ", "\n\t"} {
		_, err := ix.Search(context.Background(), "h", q, 5, nil)
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("query %q: got %v, want EINVALID", q, err)
		}
	}
	if _, err := ix.Search(context.Background(), "h", "words", MaxTopK+1, nil); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("top_k %d: got %v, want EINVALID", MaxTopK+1, err)
	}
	if got := search(t, ix, "h", "words", nil); len(got) != 1 {
		t.Errorf("top_k 0 (default): %v", ids(got))
	}
}

func TestHybrid(t *testing.T) {
	emb := &retrievaltest.HashEmbedder{Dim: 128}
	ix := openTestIndex(t, emb)
	addText(t, ix, "v", "d", nil, "The cat sat on the mat.", "Dogs bark at night.", "Interest rates rose sharply.")
	res, err := ix.Query(context.Background(), Query{ConversationID: "v", Text: "cats sitting", TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Hybrid || len(res.Sources) == 0 || res.Sources[0].ID != "d:0" {
		t.Fatalf("hybrid %v, sources %v", res.Hybrid, ids(res.Sources))
	}
	for _, s := range res.Sources {
		if s.Distance == nil || *s.Distance < 0 || *s.Distance > 2 {
			t.Errorf("%s: distance %v", s.ID, s.Distance)
		}
		if s.Score <= 0 || s.Score > 2.0/(rrfK+1) {
			t.Errorf("%s: RRF score %v", s.ID, s.Score)
		}
	}
	// A failing embedder at search time falls back to full text.
	emb.Fail.Store(true)
	res, err = ix.Query(context.Background(), Query{ConversationID: "v", Text: "dogs"})
	if err != nil || res.Hybrid || len(res.Sources) != 1 || res.Sources[0].Distance != nil {
		t.Errorf("fallback: %v hybrid=%v %v", err, res != nil && res.Hybrid, res)
	}
	// … and at indexing time fails the whole document.
	err = ix.Add(context.Background(), "v", &datachat.Document{ID: "e", Name: "e.txt"}, []*datachat.Chunk{{Text: "never indexed"}})
	if !errors.Is(err, retrievaltest.ErrEmbed) {
		t.Errorf("add with a failing embedder: %v", err)
	}
	emb.Fail.Store(false)
	if got := ids(search(t, ix, "v", "never indexed", nil)); slices.Contains(got, "e:0") {
		t.Errorf("half-indexed document found: %v", got)
	}
	calls, texts := emb.Calls()
	if calls == 0 || texts == 0 {
		t.Errorf("embedder calls %d texts %d", calls, texts)
	}
}

func TestPersistenceAndCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	ctx := context.Background()
	ix, err := Open(ctx, Options{Path: path, CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		conv := fmt.Sprint("conv", i)
		addText(t, ix, conv, "d", nil, fmt.Sprintf("Conversation number %d talks about topic%d.", i, i))
		if got := search(t, ix, conv, fmt.Sprint("topic", i), nil); len(got) != 1 {
			t.Errorf("%s: %v", conv, ids(got))
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for i := range 3 {
		conv := fmt.Sprint("conv", i)
		if got := search(t, ix, conv, fmt.Sprint("topic", i), nil); len(got) != 1 || got[0].Metadata[MetaDocumentID] != "d" {
			t.Errorf("after reopening, %s: %v", conv, ids(got))
		}
	}
	// Adding to a cached conversation is seen at once.
	addText(t, ix, "conv0", "e", nil, "A later document about zebras.")
	if got := ids(search(t, ix, "conv0", "zebras", nil)); !slices.Equal(got, []string{"e:0"}) {
		t.Errorf("after adding to a cached conversation: %v", got)
	}
}

func TestOpenRefusesMemory(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=memory"} {
		if _, err := Open(context.Background(), Options{Path: p}); err == nil {
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// TestConcurrentSearchWhileAdding runs searches while documents are added
// and deleted (run with -race).
func TestConcurrentSearchWhileAdding(t *testing.T) {
	ix := openTestIndex(t, &retrievaltest.HashEmbedder{Dim: 32})
	ctx := context.Background()
	addText(t, ix, "r", "seed", nil, "Initial text about rivers.")
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if _, err := ix.Search(ctx, "r", fmt.Sprintf("rivers lakes %d", i+w), 5, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 30 {
		id := fmt.Sprint("doc", i)
		addText(t, ix, "r", id, nil, fmt.Sprintf("Lakes and rivers, part %d.", i), "More water words.")
		if i%7 == 6 {
			if err := ix.DeleteDocument(ctx, "r", fmt.Sprint("doc", i-3)); err != nil {
				t.Error(err)
			}
		}
	}
	close(done)
	wg.Wait()
	got := search(t, ix, "r", "part 29", nil)
	if len(got) == 0 || got[0].ID != "doc29:0" {
		t.Errorf("after the writes: %v", ids(got))
	}
	// The index agrees with a fresh build from the database.
	ci, err := ix.cache.get(ctx, ix.read, "r")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := loadConvIndex(ctx, ix.read, "r")
	if err != nil {
		t.Fatal(err)
	}
	ci.mu.RLock()
	n := len(ci.rowids)
	ci.mu.RUnlock()
	if n != len(fresh.rowids) {
		t.Errorf("cached index has %d chunks, the database %d", n, len(fresh.rowids))
	}
}
