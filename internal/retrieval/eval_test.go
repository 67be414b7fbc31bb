package retrieval

import (
	"context"
	"slices"
	"testing"

	"datachat/internal/retrieval/retrievaltest"
)

func loadEval(tb testing.TB) []retrievaltest.Question {
	tb.Helper()
	qs, err := retrievaltest.LoadQuestions()
	if err != nil {
		tb.Fatal(err)
	}
	return qs
}

// recallAt returns the share of questions with an answering chunk in the
// top k, the mean reciprocal rank of the first answering chunk, and the
// questions missed.
func recallAt(tb testing.TB, ix *Index, conversationID string, qs []retrievaltest.Question, k int) (recall, mrr float64, missed []string) {
	tb.Helper()
	hits := 0
	for _, q := range qs {
		srcs, err := ix.Search(context.Background(), conversationID, q.Question, k, nil)
		if err != nil {
			tb.Fatalf("search %q: %v", q.Question, err)
		}
		if i := slices.IndexFunc(srcs, q.Answers); i >= 0 {
			hits++
			mrr += 1 / float64(i+1)
		} else {
			missed = append(missed, q.Question)
		}
	}
	return float64(hits) / float64(len(qs)), mrr / float64(len(qs)), missed
}

// TestRecall measures recall@5 on the labelled questions, over all shared
// documents indexed in one conversation, for BM25 alone and for hybrid
// search with the hashed test embedder.
func TestRecall(t *testing.T) {
	qs := loadEval(t)
	if len(qs) < 30 {
		t.Fatalf("got %d labelled questions, want at least 30", len(qs))
	}
	for _, tc := range []struct {
		name string
		emb  Embedder
		want float64
	}{
		{"bm25", nil, 0.8},
		{"hybrid", &retrievaltest.HashEmbedder{Dim: 512}, 0.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := openTestIndex(t, tc.emb)
			addAllShared(t, ix, "eval")
			r, mrr, missed := recallAt(t, ix, "eval", qs, 5)
			t.Logf("recall@5 %s: %.3f, MRR@5 %.3f over %d questions", tc.name, r, mrr, len(qs))
			for _, m := range missed {
				t.Logf("  missed: %s", m)
			}
			if r < tc.want {
				t.Errorf("recall@5 = %.3f, want >= %.2f", r, tc.want)
			}
		})
	}
}
