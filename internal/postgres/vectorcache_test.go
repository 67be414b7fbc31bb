package postgres_test

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"datachat/internal/postgres"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/backendtest"
	"datachat/internal/retrieval/retrievaltest"
)

// vectorQuery is a question with no word in any test document: full text
// finds nothing, so the sources are the vector ranking alone, every indexed
// chunk of a small conversation, and show what the cached vectors hold.
const vectorQuery = "qqxyzzy"

func searchTop(t *testing.T, ix retrieval.Backend, conversationID, text string, filters map[string]any) *retrieval.Result {
	t.Helper()
	res, err := ix.Query(t.Context(), retrieval.Query{ConversationID: conversationID, Text: text, TopK: retrieval.MaxTopK, Filters: filters})
	if err != nil {
		t.Fatalf("Query %q %v: %v", text, filters, err)
	}
	return res
}

// sortedIDs returns the sources' ids, sorted.
func sortedIDs(res *retrieval.Result) []string {
	out := ids(res)
	slices.Sort(out)
	return out
}

// twoProcesses opens two stores on one new schema, each with its index over
// one embedder, as two server processes would be.
func twoProcesses(t *testing.T) (s1, s2 *postgres.Store, ix1, ix2 *postgres.Index) {
	t.Helper()
	dsn := newSchema(t)
	s1, s2 = mustOpen(t, dsn), mustOpen(t, dsn)
	emb := &retrievaltest.HashEmbedder{Dim: 32}
	return s1, s2, postgres.NewIndex(s1, postgres.IndexOptions{Embedder: emb}), postgres.NewIndex(s2, postgres.IndexOptions{Embedder: emb})
}

// TestIndexCacheAcrossStores uses two pools on one schema with an embedder,
// as two server processes would: the first's cached vectors follow what the
// second adds and deletes.
func TestIndexCacheAcrossStores(t *testing.T) {
	s1, s2, ix1, ix2 := twoProcesses(t)
	ds1, ds2 := newDocStore(t, s1), newDocStore(t, s2)
	ds2.convs["c"] = true // created by the first

	a, achunks := backendtest.TextDoc("a", nil, "Kestrels hover over the meadow.", "Voles hide in the grass.")
	ds1.add(t, ix1, "c", a, achunks)
	res := searchTop(t, ix1, "c", vectorQuery, nil)
	if want := []string{"a:0", "a:1"}; !res.Hybrid || !slices.Equal(sortedIDs(res), want) {
		t.Fatalf("first process: hybrid %v, got %v, want %v", res.Hybrid, sortedIDs(res), want)
	}
	if !ix1.Cached()["c"] {
		t.Fatalf("first process caches %v, want c loaded", ix1.Cached())
	}

	b, bchunks := backendtest.TextDoc("b", nil, "Herons wade in the shallows.")
	ds2.add(t, ix2, "c", b, bchunks)
	if err := s2.DeleteDocument(t.Context(), "c", a.ID); err != nil {
		t.Fatal(err)
	}
	if err := ix2.DeleteDocument(t.Context(), "c", a.ID); err != nil {
		t.Fatal(err)
	}
	res = searchTop(t, ix1, "c", vectorQuery, nil)
	if want := []string{"b:0"}; !res.Hybrid || !slices.Equal(sortedIDs(res), want) {
		t.Errorf("first process after the second added b and deleted a: hybrid %v, got %v, want %v", res.Hybrid, sortedIDs(res), want)
	}
	if res := searchTop(t, ix1, "c", "herons", nil); !slices.Equal(ids(res), []string{"b:0"}) || res.Sources[0].Distance == nil {
		t.Errorf("first process, by text and vector: got %+v, want b:0 with a distance", res.Sources)
	}

	// The second deletes the conversation and makes one of the same id: the
	// first's cache (of b) must not be taken for it.
	if err := s2.DeleteConversation(t.Context(), ds2.user, "c"); err != nil {
		t.Fatal(err)
	}
	if err := ix2.DeleteConversation(t.Context(), "c"); err != nil {
		t.Errorf("DeleteConversation after the store deleted it: %v", err)
	}
	if res := searchTop(t, ix1, "c", vectorQuery, nil); len(res.Sources) != 0 {
		t.Errorf("first process after the conversation was deleted: got %v, want nothing", ids(res))
	}
	delete(ds2.convs, "c")
	d, dchunks := backendtest.TextDoc("d", nil, "Otters slide down the bank.")
	ds2.add(t, ix2, "c", d, dchunks)
	if res := searchTop(t, ix1, "c", vectorQuery, nil); !slices.Equal(sortedIDs(res), []string{"d:0"}) {
		t.Errorf("first process after the conversation was made again: got %v, want [d:0]", sortedIDs(res))
	}
}

// TestIndexCacheDeletedDocument: a document deleted from the store, before
// and after the index, never comes back from cached vectors, nor when it is
// stored again and not indexed.
func TestIndexCacheDeletedDocument(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	ix := postgres.NewIndex(s, postgres.IndexOptions{Embedder: &retrievaltest.HashEmbedder{Dim: 32}})
	ds := newDocStore(t, s)
	a, achunks := backendtest.TextDoc("a", nil, "Kestrels hover over the meadow.")
	b, bchunks := backendtest.TextDoc("b", nil, "Herons wade in the shallows.")
	ds.add(t, ix, "c", a, achunks)
	ds.add(t, ix, "c", b, bchunks)
	if got := sortedIDs(searchTop(t, ix, "c", vectorQuery, nil)); !slices.Equal(got, []string{"a:0", "b:0"}) {
		t.Fatalf("before deleting: got %v, want [a:0 b:0]", got)
	}
	if err := s.DeleteDocument(t.Context(), "c", a.ID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{vectorQuery, "kestrels meadow"} {
		if got := ids(searchTop(t, ix, "c", q, nil)); slices.Contains(got, "a:0") {
			t.Errorf("%q after the store deleted a: got %v, want no a:0", q, got)
		}
	}
	if err := ix.DeleteDocument(t.Context(), "c", a.ID); err != nil {
		t.Fatal(err)
	}
	// Stored again, same chunk ids, not indexed.
	ds.store(t, "c", a, achunks)
	for _, q := range []string{vectorQuery, "kestrels meadow"} {
		if got := ids(searchTop(t, ix, "c", q, nil)); !slices.Equal(got, []string{"b:0"}) {
			t.Errorf("%q after deleting a and storing it again: got %v, want [b:0]", q, got)
		}
	}
}

// TestIndexCacheBudget: the least recently searched conversation is evicted
// for another, and a conversation over the whole budget is ranked in SQL,
// with the results of a search without a cache.
func TestIndexCacheBudget(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	emb := &retrievaltest.HashEmbedder{Dim: 64}
	// A chunk of 64 dimensions is estimated at 4·64 + 120 bytes before
	// loading: 10 chunks fit in 5,000 bytes, 10 more do not, 20 are over.
	ix := postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb, CacheBytes: 5000})
	uncached := postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb, CacheBytes: -1})
	ds := newDocStore(t, s)
	paras := func(n int, what string) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("Paragraph %d of the %s notes, on birds and rivers.", i, what))
		}
		return out
	}
	d1, c1 := backendtest.TextDoc("one", nil, paras(10, "first")...)
	d2, c2 := backendtest.TextDoc("two", nil, paras(10, "second")...)
	d3, c3 := backendtest.TextDoc("big", nil, paras(20, "third")...)
	ds.add(t, ix, "c1", d1, c1)
	ds.add(t, ix, "c2", d2, c2)
	ds.add(t, ix, "c3", d3, c3)

	searchTop(t, ix, "c1", "birds", nil)
	if got, want := ix.Cached(), map[string]bool{"c1": true}; !maps.Equal(got, want) {
		t.Fatalf("after searching c1: cached %v, want %v", got, want)
	}
	searchTop(t, ix, "c2", "birds", nil)
	if got, want := ix.Cached(), map[string]bool{"c2": true}; !maps.Equal(got, want) {
		t.Errorf("after searching c2: cached %v, want %v (c1 evicted)", got, want)
	}
	for _, q := range []string{"birds", "third notes", vectorQuery} {
		got, want := searchTop(t, ix, "c3", q, nil), searchTop(t, uncached, "c3", q, nil)
		if !got.Hybrid || !slices.Equal(ids(got), ids(want)) {
			t.Errorf("%q in a conversation over the budget: hybrid %v, got %v, want %v", q, got.Hybrid, ids(got), ids(want))
		}
	}
	if got, want := ix.Cached(), map[string]bool{"c2": true, "c3": false}; !maps.Equal(got, want) {
		t.Errorf("after searching c3: cached %v, want %v (c3 over the budget, not loaded)", got, want)
	}
	if n := ix.Loads(); n != 3 {
		t.Errorf("loads = %d, want 3 (c3 known to be over the budget after the first)", n)
	}
}

// TestIndexCacheMatchesSQL: vectors ranked in memory give the sources,
// scores and distances of vectors ranked in SQL, filters included.
func TestIndexCacheMatchesSQL(t *testing.T) {
	s := mustOpen(t, newSchema(t))
	emb := &retrievaltest.HashEmbedder{Dim: 48}
	cached := postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb})
	inSQL := postgres.NewIndex(s, postgres.IndexOptions{Embedder: emb, CacheBytes: -1})
	ds := newDocStore(t, s)
	fruit, fchunks := backendtest.TextDoc("fruit", map[string]string{"author": "Ann", "year": "2020"},
		"Apples and pears grow on trees in the orchard.", "Bananas are yellow and curved.", "Cherries ripen in early summer.")
	veg, vchunks := backendtest.TextDoc("veg", map[string]string{"author": "Bob"},
		"Carrots grow underground.", "Leeks and onions are alliums.", "Kale survives the frost.")
	vchunks[1].Heading, vchunks[2].Heading = "Winter", "Winter"
	// A copy of veg's first chunk, added first: equal vectors, ranked by
	// row_seq.
	dup, dchunks := backendtest.TextDoc("dup", nil, "Carrots grow underground.")
	ds.add(t, cached, "c", fruit, fchunks)
	ds.store(t, "c", veg, vchunks)
	ds.add(t, cached, "c", dup, dchunks)
	if err := cached.Add(t.Context(), "c", veg, vchunks); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		q       string
		filters map[string]any
	}{
		{"apples grow", nil},
		{"carrots", nil},
		{"carrots", map[string]any{"page": 1}},
		{vectorQuery, nil},
		{"grow", map[string]any{"document": "veg.txt"}},
		{"grow", map[string]any{"document_id": []any{"fruit", "nope"}}},
		{vectorQuery, map[string]any{"author": "Ann"}},
		{"winter frost", map[string]any{"section": "Winter"}},
		{vectorQuery, map[string]any{"page": []any{1, "3"}}},
		{"grow", map[string]any{"author": "Bob", "page": 1}},
		{"grow", map[string]any{"year": "1999"}},
		{vectorQuery, map[string]any{"section": "Nowhere"}},
	} {
		got, want := searchTop(t, cached, "c", tc.q, tc.filters), searchTop(t, inSQL, "c", tc.q, tc.filters)
		if got.Hybrid != want.Hybrid || len(got.Sources) != len(want.Sources) {
			t.Errorf("%q %v: hybrid %v, got %v, want hybrid %v, %v", tc.q, tc.filters, got.Hybrid, ids(got), want.Hybrid, ids(want))
			continue
		}
		for i, g := range got.Sources {
			w := want.Sources[i]
			if g.ID != w.ID || g.Score != w.Score || (g.Distance == nil) != (w.Distance == nil) ||
				g.Distance != nil && *g.Distance != *w.Distance {
				t.Errorf("%q %v: source %d: got %s score %v distance %s, want %s score %v distance %s",
					tc.q, tc.filters, i, g.ID, g.Score, distance(g), w.ID, w.Score, distance(w))
			}
		}
	}
	if !cached.Cached()["c"] {
		t.Errorf("cached %v, want c loaded", cached.Cached())
	}
}

func distance(s retrieval.Source) string {
	if s.Distance == nil {
		return "none"
	}
	return fmt.Sprint(*s.Distance)
}

// TestIndexCacheConcurrent searches from two processes while documents are
// added (run with -race): no search fails, concurrent searches of a cold
// conversation share one load, and once the adds are done every document is
// found.
func TestIndexCacheConcurrent(t *testing.T) {
	s1, _, ix1, ix2 := twoProcesses(t)
	ds := newDocStore(t, s1)
	first, fchunks := backendtest.TextDoc("d0", nil, "Swifts sleep on the wing.")
	ds.add(t, ix1, "c", first, fchunks)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := ix2.Query(t.Context(), retrieval.Query{ConversationID: "c", Text: "swifts"}); err != nil {
				t.Errorf("Query: %v", err)
			}
		})
	}
	wg.Wait()
	if n := ix2.Loads(); n != 1 {
		t.Errorf("8 concurrent searches of a cold conversation loaded it %d times, want 1", n)
	}

	const docs = 12
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := 1; i <= docs; i++ {
			doc, chunks := backendtest.TextDoc(fmt.Sprintf("d%d", i), nil, fmt.Sprintf("Note %d: swifts nest under roofs.", i))
			ds.store(t, "c", doc, chunks)
			if err := ix1.Add(t.Context(), "c", doc, chunks); err != nil {
				t.Errorf("Add %s: %v", doc.ID, err)
			}
		}
	})
	for _, ix := range []*postgres.Index{ix1, ix2, ix1, ix2} {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := ix.Query(t.Context(), retrieval.Query{ConversationID: "c", Text: "swifts roofs", TopK: retrieval.MaxTopK})
				if err != nil {
					t.Errorf("Query: %v", err)
					return
				}
				if !res.Hybrid {
					t.Errorf("Query: not hybrid")
					return
				}
			}
		})
	}
	wg.Wait()
	for _, ix := range []*postgres.Index{ix1, ix2} {
		if got := searchTop(t, ix, "c", vectorQuery, nil); len(got.Sources) != docs+1 {
			t.Errorf("after the adds: got %d sources %v, want %d", len(got.Sources), sortedIDs(got), docs+1)
		}
	}
}
