package chroma_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chroma"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/retrievaltest"
)

// benchDoc makes a document of n chunks of about 120 words drawn from a
// fixed vocabulary, each on its own page.
func benchDoc(r *rand.Rand, id string, n int, vocab []string) (*datachat.Document, []*datachat.Chunk) {
	doc := &datachat.Document{ID: id, Name: id + ".txt", Metadata: map[string]string{"group": fmt.Sprint(r.IntN(10))}}
	chunks := make([]*datachat.Chunk, n)
	var sb strings.Builder
	for i := range chunks {
		sb.Reset()
		for range 120 {
			sb.WriteString(vocab[r.IntN(len(vocab))])
			sb.WriteByte(' ')
		}
		chunks[i] = &datachat.Chunk{ID: fmt.Sprintf("%s:%d", id, i), DocumentID: id, Seq: i, Page: i + 1, Text: sb.String()}
	}
	return doc, chunks
}

func benchVocab(r *rand.Rand) []string {
	vocab := make([]string, 3000)
	for i := range vocab {
		b := make([]byte, 4+r.IntN(6))
		for j := range b {
			b[j] = byte('a' + r.IntN(26))
		}
		vocab[i] = string(b)
	}
	return vocab
}

// BenchmarkQuery measures Query (embedding the question with the 256-dim
// HashEmbedder, Chroma's round trip and the mapping) over one conversation
// of 10,000 chunks, and reports the 50th and 95th percentile latencies.
//
//	go test -run '^$' -bench Query -benchtime 500x ./internal/chroma/
func BenchmarkQuery(b *testing.B) {
	const docs, perDoc = 100, 100
	c := newClient(b, chroma.Options{Embedder: &retrievaltest.HashEmbedder{Dim: 256}})
	ctx := context.Background()
	conv := convID("bench-query")
	b.Cleanup(func() { c.DeleteConversation(context.Background(), conv) })
	r := rand.New(rand.NewPCG(1, 2))
	vocab := benchVocab(r)
	start := time.Now()
	for d := range docs {
		doc, chunks := benchDoc(r, fmt.Sprintf("doc%d", d), perDoc, vocab)
		if err := c.Add(ctx, conv, doc, chunks); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("indexed %d chunks in %s", docs*perDoc, time.Since(start).Round(time.Millisecond))
	questions := make([]string, 64)
	for i := range questions {
		var q []string
		for range 8 {
			q = append(q, vocab[r.IntN(len(vocab))])
		}
		questions[i] = strings.Join(q, " ")
	}
	for _, bc := range []struct {
		name    string
		topK    int
		filters map[string]any
	}{
		{"top5", 5, nil},
		{"top50", 50, nil},
		{"top5-filtered", 5, map[string]any{"group": []string{"1", "2"}, "page": []any{"1", "2", "3", "4", "5"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var lat, ret []time.Duration
			i := 0
			for b.Loop() {
				res, err := c.Query(ctx, retrieval.Query{ConversationID: conv, Text: questions[i%len(questions)], TopK: bc.topK, Filters: bc.filters})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Sources) == 0 {
					b.Fatal("no sources")
				}
				lat = append(lat, res.Embedding+res.Retrieval)
				ret = append(ret, res.Retrieval)
				i++
			}
			reportPercentiles(b, "", lat)
			reportPercentiles(b, "chroma-", ret)
		})
	}
}

func reportPercentiles(b *testing.B, prefix string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), prefix+"p50-ms")
	b.ReportMetric(at(0.95), prefix+"p95-ms")
}

// BenchmarkAdd measures Add of 100-chunk documents (256-dim vectors) into
// one conversation and reports chunks per second.
//
//	go test -run '^$' -bench Add -benchtime 50x ./internal/chroma/
func BenchmarkAdd(b *testing.B) {
	const perDoc = 100
	c := newClient(b, chroma.Options{Embedder: &retrievaltest.HashEmbedder{Dim: 256}})
	ctx := context.Background()
	conv := convID("bench-add")
	b.Cleanup(func() { c.DeleteConversation(context.Background(), conv) })
	r := rand.New(rand.NewPCG(3, 4))
	vocab := benchVocab(r)
	n := 0
	for b.Loop() {
		b.StopTimer()
		doc, chunks := benchDoc(r, fmt.Sprintf("doc%d", n), perDoc, vocab)
		b.StartTimer()
		if err := c.Add(ctx, conv, doc, chunks); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n*perDoc)/b.Elapsed().Seconds(), "chunks/s")
}
