package retrieval

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"datachat"
)

// BenchmarkSearch measures one search over the shared documents plus
// synthetic chunks made of their sentences (b.N searches over the labelled
// questions). The 100,000-chunk figures come from bench/retrieval.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{0, 20_000} {
		b.Run(fmt.Sprintf("synthetic=%d", n), func(b *testing.B) {
			ix := openTestIndex(b, nil)
			addAllShared(b, ix, "bench")
			addSynthetic(b, ix, "bench", n)
			qs := loadEval(b)
			ctx := context.Background()
			if _, err := ix.Search(ctx, "bench", qs[0].Question, 5, nil); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := ix.Search(ctx, "bench", qs[i%len(qs)].Question, 5, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// addSynthetic indexes n chunks made of random sentences of the conversation's
// chunks, in documents of 500 chunks.
func addSynthetic(tb testing.TB, ix *Index, conversationID string, n int) {
	tb.Helper()
	if n == 0 {
		return
	}
	rows, err := ix.read.Query(`SELECT text FROM chunks WHERE conversation_id = ?`, conversationID)
	if err != nil {
		tb.Fatal(err)
	}
	var sentences []string
	for rows.Next() {
		var t string
		rows.Scan(&t)
		for _, s := range strings.SplitAfter(strings.ReplaceAll(t, "\n", " "), ". ") {
			if len(s) > 20 {
				sentences = append(sentences, s)
			}
		}
	}
	rows.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for d := 0; d*500 < n; d++ {
		id := fmt.Sprintf("synthetic-%d", d)
		var chunks []*datachat.Chunk
		for i := 0; i < 500 && d*500+i < n; i++ {
			var sb strings.Builder
			for sb.Len() < 900 {
				sb.WriteString(sentences[rng.IntN(len(sentences))])
			}
			chunks = append(chunks, &datachat.Chunk{ID: fmt.Sprintf("%s:%d", id, i), Seq: i, Page: 1 + i/3, Text: sb.String()})
		}
		if err := ix.Add(context.Background(), conversationID, &datachat.Document{ID: id, Name: id + ".txt"}, chunks); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkBuild measures building a conversation's in-memory index from the
// database (the first search after start-up).
func BenchmarkBuild(b *testing.B) {
	ix := openTestIndex(b, nil)
	addAllShared(b, ix, "bench")
	addSynthetic(b, ix, "bench", 20_000)
	var bytes int64
	ix.read.QueryRow(`SELECT sum(length(text)) FROM chunks`).Scan(&bytes)
	b.SetBytes(bytes)
	b.ResetTimer()
	for b.Loop() {
		if _, err := loadConvIndex(context.Background(), ix.read, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVectorSearch measures the brute-force scan of 100,000 vectors of
// 256 dimensions.
func BenchmarkVectorSearch(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, dim = 100_000, 256
	var vi vectorIndex
	v := make([]float32, dim)
	for range n {
		for j := range v {
			v[j] = rng.Float32() - 0.5
		}
		vi.add(normalize(v))
	}
	for j := range v {
		v[j] = rng.Float32() - 0.5
	}
	q := normalize(v)
	b.ResetTimer()
	for b.Loop() {
		if len(vi.search(q, 50, nil)) != 50 {
			b.Fatal("short")
		}
	}
}
