// Package backendtest is the conformance suite every [retrieval.Backend]
// passes: the embedded index, PostgreSQL full-text search and Chroma. It
// checks what a user of datachat sees: answers scoped to their conversation,
// deletes that stick, filters that mean the same everywhere, sources shaped
// alike, hostile queries answered rather than failed, and nothing searchable
// after a failed add.
package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/retrievaltest"
)

// Harness is a backend under test.
type Harness struct {
	// New returns a backend over empty state that embeds with emb. emb is nil
	// only when VectorsOnly is false.
	New func(t *testing.T, emb retrieval.Embedder) retrieval.Backend
	// Store, if set, is called before every Add (also from other goroutines,
	// so it must not call t.Fatal) with what the workspace would have stored
	// first (PostgreSQL indexes the chunks the store holds). It
	// must make the conversation exist and store the document and chunks,
	// replacing a document of the same id.
	Store func(t *testing.T, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk)
	// VectorsOnly says the backend ranks by vectors alone (Chroma): the suite
	// always gives it an embedder and checks no full-text-only behaviour.
	VectorsOnly bool
}

// Run runs the suite. Conversation ids are unique per run, so backends that
// keep state outside the test (a shared database or server) can be reused.
func Run(t *testing.T, h Harness) {
	prefix := fmt.Sprintf("bt%d-", time.Now().UnixNano())
	s := &suite{h: h, prefix: prefix}
	t.Run("ScopesAndDeletes", s.scopesAndDeletes)
	t.Run("SourceShape", s.sourceShape)
	t.Run("Filters", s.filters)
	t.Run("HostileQueries", s.hostileQueries)
	t.Run("FailedAddLeavesNothing", s.failedAdd)
	t.Run("Concurrent", s.concurrent)
	t.Run("CopyDocument", s.copyDocument)
}

type suite struct {
	h      Harness
	prefix string
}

func (s *suite) conv(name string) string { return s.prefix + name }

func (s *suite) open(t *testing.T) (retrieval.Backend, *retrievaltest.HashEmbedder) {
	t.Helper()
	emb := &retrievaltest.HashEmbedder{Dim: 64}
	if !s.h.VectorsOnly {
		return s.h.New(t, nil), emb
	}
	return s.h.New(t, emb), emb
}

// TextDoc makes a document of paragraphs, one chunk each, the paragraph i on
// page i+1. The document id is id, its name id+".txt".
func TextDoc(id string, meta map[string]string, paras ...string) (*datachat.Document, []*datachat.Chunk) {
	doc := &datachat.Document{ID: id, Name: id + ".txt", MediaType: "text/plain", Metadata: meta, Pages: len(paras)}
	var chunks []*datachat.Chunk
	off := 0
	for i, p := range paras {
		chunks = append(chunks, &datachat.Chunk{ID: fmt.Sprintf("%s:%d", id, i), DocumentID: id, Seq: i, Page: i + 1, Start: off, End: off + len(p), Text: p})
		off += len(p) + 2
	}
	doc.Chunks = len(chunks)
	return doc, chunks
}

func (s *suite) add(t *testing.T, b retrieval.Backend, conv, id string, meta map[string]string, paras ...string) {
	t.Helper()
	doc, chunks := TextDoc(s.prefix+id, meta, paras...)
	doc.Name = id + ".txt"
	doc.ConversationID = conv
	if s.h.Store != nil {
		s.h.Store(t, conv, doc, chunks)
	}
	if err := b.Add(context.Background(), conv, doc, chunks); err != nil {
		t.Fatalf("add %s: %v", id, err)
	}
}

func (s *suite) search(t *testing.T, b retrieval.Backend, conv, q string, topK int, filters map[string]any) []retrieval.Source {
	t.Helper()
	res, err := b.Query(context.Background(), retrieval.Query{ConversationID: conv, Text: q, TopK: topK, Filters: filters})
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	if res.Sources == nil {
		t.Fatalf("search %q: Sources is nil, want an empty list", q)
	}
	return res.Sources
}

// ids returns the sources' ids without the run's prefix.
func (s *suite) ids(srcs []retrieval.Source) []string {
	out := []string{}
	for _, src := range srcs {
		out = append(out, strings.TrimPrefix(src.ID, s.prefix))
	}
	return out
}

func (s *suite) scopesAndDeletes(t *testing.T) {
	b, _ := s.open(t)
	a, bb, c := s.conv("a"), s.conv("b"), s.conv("c")
	s.add(t, b, a, "fruit", map[string]string{"author": "Ann"}, "Apples and pears grow on trees in the orchard.", "Bananas are yellow and curved.")
	s.add(t, b, a, "veg", nil, "Carrots are orange roots.", "Potatoes grow underground in fields.")
	s.add(t, b, bb, "fruit2", nil, "Bananas in conversation b are yellow too.")

	if got := s.ids(s.search(t, b, a, "which fruit is yellow? bananas", 1, nil)); !slices.Equal(got, []string{"fruit:1"}) {
		t.Errorf("search a = %v, want [fruit:1]", got)
	}
	if got := s.ids(s.search(t, b, bb, "bananas yellow", 5, nil)); !slices.Equal(got, []string{"fruit2:0"}) {
		t.Errorf("search b = %v, want only b's own chunk", got)
	}
	if got := s.search(t, b, c, "bananas", 5, nil); len(got) != 0 {
		t.Errorf("search in an empty conversation = %v", s.ids(got))
	}
	s.listed(t, b, a, "fruit", "veg")
	s.listed(t, b, c)
	if got := s.search(t, b, a, "bananas apples carrots potatoes", 2, nil); len(got) != 2 {
		t.Errorf("top_k 2 gave %d sources", len(got))
	}
	if got := s.search(t, b, a, "bananas apples carrots potatoes", 50, nil); len(got) > 4 {
		t.Errorf("top_k 50 gave %d sources from 4 chunks", len(got))
	}

	if err := b.DeleteDocument(context.Background(), a, s.prefix+"fruit"); err != nil {
		t.Fatal(err)
	}
	for _, src := range s.search(t, b, a, "bananas apples yellow", 5, nil) {
		if strings.HasPrefix(src.ID, s.prefix+"fruit:") {
			t.Errorf("after delete, found %s", src.ID)
		}
	}
	if got := s.ids(s.search(t, b, bb, "bananas", 5, nil)); !slices.Equal(got, []string{"fruit2:0"}) {
		t.Errorf("deleting a's document touched b: %v", got)
	}
	// Adding a document again replaces its chunks.
	s.add(t, b, a, "veg", nil, "Leeks only now.")
	got := s.search(t, b, a, "carrots potatoes leeks", 5, nil)
	if !slices.Equal(s.ids(got), []string{"veg:0"}) || got[0].Text != "Leeks only now." {
		t.Errorf("after replace: %v", s.ids(got))
	}
	s.listed(t, b, a, "veg")
	if err := b.DeleteConversation(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	s.listed(t, b, a)
	s.listed(t, b, bb, "fruit2")
	if got := s.search(t, b, a, "leeks", 5, nil); len(got) != 0 {
		t.Errorf("after deleting the conversation: %v", s.ids(got))
	}
	if got := s.search(t, b, bb, "bananas", 5, nil); len(got) != 1 {
		t.Errorf("deleting conversation a touched b: %v", s.ids(got))
	}
	// Deleting what is not there is not an error.
	if err := b.DeleteDocument(context.Background(), s.conv("zzz"), "nope"); err != nil {
		t.Errorf("delete a missing document: %v", err)
	}
	if err := b.DeleteConversation(context.Background(), s.conv("zzz")); err != nil {
		t.Errorf("delete a missing conversation: %v", err)
	}
}

// listed checks the documents the backend lists for a conversation.
func (s *suite) listed(t *testing.T, b retrieval.Backend, conv string, want ...string) {
	t.Helper()
	got, err := b.Documents(context.Background(), conv)
	if err != nil {
		t.Fatalf("documents of %s: %v", conv, err)
	}
	var ids []string
	for _, id := range got {
		ids = append(ids, strings.TrimPrefix(id, s.prefix))
	}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("documents of %s = %v, want %v", strings.TrimPrefix(conv, s.prefix), ids, want)
	}
}

func (s *suite) sourceShape(t *testing.T) {
	b, _ := s.open(t)
	conv := s.conv("shape")
	doc, chunks := TextDoc(s.prefix+"report", map[string]string{"author": "Ann", "page": "ignored"},
		"Quarterly revenue grew by nine percent.", "Headcount stayed flat.")
	doc.Name = "report.pdf"
	doc.ConversationID = conv
	chunks[0].Heading = "Results" + retrieval.HeadingSeparator + "Revenue"
	chunks[1].Page = 0
	if s.h.Store != nil {
		s.h.Store(t, conv, doc, chunks)
	}
	if err := b.Add(context.Background(), conv, doc, chunks); err != nil {
		t.Fatal(err)
	}
	srcs := s.search(t, b, conv, "quarterly revenue", 1, nil)
	if len(srcs) != 1 {
		t.Fatalf("got %d sources", len(srcs))
	}
	src := srcs[0]
	if src.ID != s.prefix+"report:0" || src.Text != "Quarterly revenue grew by nine percent." || !(src.Score > 0) {
		t.Errorf("source = %+v", src)
	}
	want := map[string]any{
		"document": "report.pdf", "document_id": s.prefix + "report", "page": float64(1),
		"section": "Results" + retrieval.HeadingSeparator + "Revenue", "chunk": float64(0), "author": "Ann",
	}
	var got struct {
		ID       string         `json:"id"`
		Text     string         `json:"text"`
		Score    *float64       `json:"score"`
		Distance any            `json:"distance"`
		Metadata map[string]any `json:"metadata"`
	}
	raw, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Score == nil {
		t.Errorf("JSON %s has no score", raw)
	}
	for k, v := range want {
		if got.Metadata[k] != v {
			t.Errorf("metadata[%q] = %#v, want %#v (JSON %s)", k, got.Metadata[k], v, raw)
		}
	}
	if len(got.Metadata) != len(want) {
		t.Errorf("metadata has keys %v, want exactly %v", keys(got.Metadata), keys(want))
	}
	if s.h.VectorsOnly {
		if d, ok := got.Distance.(float64); !ok || d < 0 || d > 2 {
			t.Errorf("vector backend: distance = %#v, want a cosine distance", got.Distance)
		}
	}
	// A chunk without a page has page null; without a heading, no section.
	srcs = s.search(t, b, conv, "headcount flat", 1, nil)
	if len(srcs) != 1 || srcs[0].ID != s.prefix+"report:1" {
		t.Fatalf("headcount: %v", s.ids(srcs))
	}
	raw, _ = json.Marshal(srcs[0].Metadata)
	if !strings.Contains(string(raw), `"page":null`) || strings.Contains(string(raw), `"section"`) {
		t.Errorf("metadata = %s, want page null and no section", raw)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (s *suite) filters(t *testing.T) {
	b, _ := s.open(t)
	conv := s.conv("filters")
	s.add(t, b, conv, "q1", map[string]string{"year": "2023", "team": "red"}, "Sales rose in spring.", "Sales fell in autumn.")
	s.add(t, b, conv, "q2", map[string]string{"year": "2024", "team": "blue"}, "Sales rose again.")
	p := s.prefix
	for _, tc := range []struct {
		filters map[string]any
		want    []string
	}{
		{nil, []string{"q1:0", "q1:1", "q2:0"}},
		{map[string]any{"document": "q1.txt"}, []string{"q1:0", "q1:1"}},
		{map[string]any{"document_id": []any{p + "q2", "zzz"}}, []string{"q2:0"}},
		{map[string]any{"year": "2024"}, []string{"q2:0"}},
		{map[string]any{"year": []string{"2023", "2024"}, "team": "red"}, []string{"q1:0", "q1:1"}},
		{map[string]any{"page": "2"}, []string{"q1:1"}},
		{map[string]any{"page": float64(1), "year": "2023"}, []string{"q1:0"}},
		{map[string]any{"page": "x"}, []string{}},
		{map[string]any{"year": "1999"}, []string{}},
		{map[string]any{"missing": "x"}, []string{}},
		{map[string]any{"section": "nowhere"}, []string{}},
	} {
		got := s.ids(s.search(t, b, conv, "sales rose fell", 10, tc.filters))
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("filters %v: got %v, want %v", tc.filters, got, tc.want)
		}
	}
	for _, bad := range []map[string]any{
		{"year": map[string]any{"$gt": 1}},
		{"year": []any{"a", []any{"b"}}},
		{"year": []any{}},
		{"chunk": "1"},
	} {
		_, err := b.Query(context.Background(), retrieval.Query{ConversationID: conv, Text: "sales", Filters: bad})
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("filters %v: got %v, want EINVALID", bad, err)
		}
	}
}

func (s *suite) hostileQueries(t *testing.T) {
	b, _ := s.open(t)
	conv := s.conv("hostile")
	s.add(t, b, conv, "d", nil, `He said "NEAR(x y)" OR col:value * and ^start`, "Plain words here.")
	for _, q := range []string{
		`"`, `*`, `NEAR(`, `OR OR`, `col:`, `text: heading:`, `)(`, `"unterminated`, `a AND`, `NOT`, `^`, `-`, `+`,
		`'; DROP TABLE chunks; --`, `\x00`, "\x00", "\u200b", `{text}: x`, `near(x y)`, `a & b | !c <-> d`, `':*`, `$contains`,
		`{"$ne": ""}`, strings.Repeat("word ", 5000), "数据 données 🚀", "\xff\xfe invalid utf-8",
	} {
		res, err := b.Query(context.Background(), retrieval.Query{ConversationID: conv, Text: q})
		if strings.TrimSpace(q) == "" {
			continue
		}
		if err != nil {
			t.Errorf("query %.40q: %v", q, err)
			continue
		}
		for _, src := range res.Sources {
			if src.ID == "" || src.Text == "" {
				t.Errorf("query %.40q: bad source %+v", q, src)
			}
		}
	}
	if !s.h.VectorsOnly {
		if got := s.ids(s.search(t, b, conv, `NEAR(x`, 5, nil)); !slices.Equal(got, []string{"d:0"}) {
			t.Errorf("NEAR( as words: %v", got)
		}
	}
	for _, q := range []string{"", "   ", "\n\t"} {
		_, err := b.Query(context.Background(), retrieval.Query{ConversationID: conv, Text: q})
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("query %q: got %v, want EINVALID", q, err)
		}
	}
	_, err := b.Query(context.Background(), retrieval.Query{ConversationID: conv, Text: "words", TopK: retrieval.MaxTopK + 1})
	if datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("top_k %d: got %v, want EINVALID", retrieval.MaxTopK+1, err)
	}
	if got := s.search(t, b, conv, "plain words", 0, nil); len(got) == 0 || got[0].ID != s.prefix+"d:1" {
		t.Errorf("top_k 0 (default): %v", s.ids(got))
	}
}

func (s *suite) failedAdd(t *testing.T) {
	emb := &retrievaltest.HashEmbedder{Dim: 64}
	b := s.h.New(t, emb)
	conv := s.conv("failed")
	s.add(t, b, conv, "ok", nil, "Dogs bark at night.")
	emb.Fail.Store(true)
	doc, chunks := TextDoc(s.prefix+"bad", nil, "never indexed bark")
	doc.ConversationID = conv
	if s.h.Store != nil {
		s.h.Store(t, conv, doc, chunks)
	}
	err := b.Add(context.Background(), conv, doc, chunks)
	if !errors.Is(err, retrievaltest.ErrEmbed) {
		t.Errorf("add with a failing embedder: got %v, want the embedder's error", err)
	}
	// A failed re-add leaves nothing of the document either, not even the
	// earlier version.
	emb.Fail.Store(false)
	s.add(t, b, conv, "again", nil, "Foxes bark at dawn.")
	emb.Fail.Store(true)
	doc, chunks = TextDoc(s.prefix+"again", nil, "Foxes bark at dusk.")
	doc.ConversationID = conv
	if s.h.Store != nil {
		s.h.Store(t, conv, doc, chunks)
	}
	if err := b.Add(context.Background(), conv, doc, chunks); !errors.Is(err, retrievaltest.ErrEmbed) {
		t.Errorf("re-add with a failing embedder: got %v, want the embedder's error", err)
	}
	emb.Fail.Store(false)
	for _, src := range s.search(t, b, conv, "never indexed bark foxes", 5, nil) {
		if strings.HasPrefix(src.ID, s.prefix+"bad:") || strings.HasPrefix(src.ID, s.prefix+"again:") {
			t.Errorf("document of a failed add found: %s", src.ID)
		}
	}
	if calls, texts := emb.Calls(); calls == 0 || texts == 0 {
		t.Errorf("embedder calls %d texts %d", calls, texts)
	}
	for _, bad := range []*datachat.Document{nil, {Name: "x.txt"}, {ID: "x"}} {
		if err := b.Add(context.Background(), conv, bad, nil); datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("add %+v: got %v, want EINVALID", bad, err)
		}
	}
}

// concurrent searches while documents are added; run with -race.
func (s *suite) concurrent(t *testing.T) {
	b, _ := s.open(t)
	conv := s.conv("concurrent")
	s.add(t, b, conv, "seed", nil, "Seed text about rivers.")
	const writers, readers, docs = 1, 4, 8
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, readers+writers)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range docs {
			id := fmt.Sprintf("river%d", i)
			doc, chunks := TextDoc(s.prefix+id, nil, fmt.Sprintf("River number %d flows to the sea.", i))
			doc.ConversationID = conv
			if s.h.Store != nil {
				s.h.Store(t, conv, doc, chunks)
			}
			if err := b.Add(ctx, conv, doc, chunks); err != nil {
				errc <- err
				return
			}
		}
	}()
	for range readers {
		go func() {
			for i := 0; i < 200 && ctx.Err() == nil; i++ {
				select {
				case <-done:
					errc <- nil
					return
				default:
				}
				if _, err := b.Query(ctx, retrieval.Query{ConversationID: conv, Text: "rivers flow"}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range readers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if got := s.search(t, b, conv, "river flows sea", 50, nil); len(got) != docs+1 {
		t.Errorf("after %d adds: %d sources, want %d", docs, len(got), docs+1)
	}
}
