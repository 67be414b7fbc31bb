package backendtest

import (
	"context"
	"math"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/retrievaltest"
)

// copyDocument checks a [retrieval.Copier]: a copy of a document indexed
// from it ranks in its conversation as the original does in its own,
// without one more text embedded; it stays searchable once the original is
// deleted; and a copy the original does not cover (a chunk it lacks) is
// embedded as Add would.
func (s *suite) copyDocument(t *testing.T) {
	emb := &retrievaltest.HashEmbedder{Dim: 64}
	b := s.h.New(t, emb)
	c, ok := b.(retrieval.Copier)
	if !ok {
		t.Skip("not a retrieval.Copier: a copy is indexed with Add, its chunks embedded again")
	}
	ctx := context.Background()
	from, to := s.conv("copy-from"), s.conv("copy-to")
	paras := []string{"Gentoo penguins build their nests of pebbles.", "Emperor penguins huddle together through the winter.", "Krill is what most penguins eat."}
	s.add(t, b, from, "birds", map[string]string{"team": "zoo"}, paras...)
	_, before := emb.Calls()

	copyOf := func(conv, id string, paras ...string) (*datachat.Document, []*datachat.Chunk) {
		doc, chunks := TextDoc(s.prefix+id, map[string]string{"team": "zoo"}, paras...)
		doc.Name, doc.ConversationID = "birds.txt", conv
		if s.h.Store != nil {
			s.h.Store(t, conv, doc, chunks)
		}
		return doc, chunks
	}
	doc, chunks := copyOf(to, "birds-copy", paras...)
	if err := c.CopyDocument(ctx, to, doc, chunks, from, s.prefix+"birds"); err != nil {
		t.Fatalf("CopyDocument: %v", err)
	}
	if _, after := emb.Calls(); after != before {
		t.Errorf("CopyDocument embedded %d texts, want none", after-before)
	}
	s.listed(t, b, to, "birds-copy")
	for _, q := range []string{"where do penguins nest", "winter huddle", "krill"} {
		orig, cp := s.search(t, b, from, q, 3, nil), s.search(t, b, to, q, 3, nil)
		if len(orig) == 0 || len(orig) != len(cp) {
			t.Fatalf("search %q: %d results in the original, %d in the copy", q, len(orig), len(cp))
		}
		for i := range orig {
			if cp[i].Text != orig[i].Text || math.Abs(cp[i].Score-orig[i].Score) > 1e-6 ||
				!strings.HasPrefix(cp[i].ID, s.prefix+"birds-copy:") || cp[i].Metadata[retrieval.MetaDocumentID] != doc.ID {
				t.Errorf("search %q, result %d: the copy's %s %q (%v) is not the original's %q (%v)", q, i, cp[i].ID, cp[i].Text, cp[i].Score, orig[i].Text, orig[i].Score)
			}
		}
	}

	// The copy does not need the original.
	if err := b.DeleteDocument(ctx, from, s.prefix+"birds"); err != nil {
		t.Fatal(err)
	}
	if got := s.search(t, b, to, "pebbles", 3, nil); len(got) == 0 || !strings.Contains(got[0].Text, "pebbles") {
		t.Errorf("the copy after the original is deleted: %v", s.ids(got))
	}

	// A copy with a chunk the original lacks (here: the original is gone)
	// is embedded, and found.
	s.add(t, b, from, "fish", nil, "Salmon swim upstream.")
	_, before = emb.Calls()
	doc, chunks = copyOf(to, "fish-copy", "Salmon swim upstream.", "Trout rest in pools.")
	if err := c.CopyDocument(ctx, to, doc, chunks, from, s.prefix+"fish"); err != nil {
		t.Fatalf("CopyDocument of a copy the original does not cover: %v", err)
	}
	if _, after := emb.Calls(); after-before != 2 {
		t.Errorf("CopyDocument of a copy the original does not cover embedded %d texts, want its 2", after-before)
	}
	if got := s.search(t, b, to, "trout pools", 1, nil); len(got) != 1 || got[0].ID != s.prefix+"fish-copy:1" {
		t.Errorf("the embedded copy: %v", s.ids(got))
	}
}
