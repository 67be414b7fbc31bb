// Command retrieval measures the retrieval index at scale: indexing speed
// (MB/s of chunk text) and query latency (p50/p95/p99) with ~100,000 chunks
// in one conversation, plus recall@5 of the labelled questions when the real
// documents are buried among the synthetic ones.
//
// The synthetic chunks are built from sentences of the real documents in
// ../shared/data/docs (shuffled, ~1,000 bytes each), so their vocabulary and
// term frequencies are those of real text.
//
//	go run ./bench/retrieval                    # BM25, 100,000 chunks
//	go run ./bench/retrieval -embed 256         # hybrid, hashed test embedder
//	go run ./bench/retrieval -chunks 20000 -rounds 3
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"datachat"
	"datachat/internal/extract"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/retrievaltest"
)

func main() {
	var (
		nChunks  = flag.Int("chunks", 100_000, "synthetic chunks to index besides the real documents")
		perDoc   = flag.Int("per-doc", 500, "synthetic chunks per synthetic document")
		rounds   = flag.Int("rounds", 5, "times each labelled question is asked")
		embedDim = flag.Int("embed", 0, "vector dimensions of the hashed test embedder; 0: BM25 only")
		dir      = flag.String("dir", "", "directory for the index file (default: a temporary one, removed at the end)")
		others   = flag.Int("other-conversations", 0, "extra conversations, each with a copy of -chunks/10 synthetic chunks, to measure scoping")
	)
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	docsDir, err := retrievaltest.SharedDocs()
	if err != nil {
		log.Fatalf("shared documents not found (../shared/data/docs beside the repository): %v", err)
	}
	root, _ := retrievaltest.RepoRoot()
	questions := loadQuestions(filepath.Join(root, "internal", "retrieval", "testdata", "eval.json"))

	if *dir == "" {
		d, err := os.MkdirTemp("", "retrieval-bench-*")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	var emb retrieval.Embedder
	if *embedDim > 0 {
		emb = &retrievaltest.HashEmbedder{Dim: *embedDim}
	}
	ix, err := retrieval.Open(ctx, retrieval.Options{Path: filepath.Join(*dir, "index.db"), Embedder: emb})
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()

	fmt.Printf("machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s; load average at start: %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadAvg())
	mode := "BM25 only"
	if emb != nil {
		mode = fmt.Sprintf("hybrid (BM25 + %d-dim hashed vectors, RRF k=60)", *embedDim)
	}
	fmt.Printf("mode: %s\n\n", mode)

	// 1. Extract and chunk the real documents.
	entries, err := os.ReadDir(docsDir)
	if err != nil {
		log.Fatal(err)
	}
	var (
		realDocs   []*datachat.Document
		realChunks [][]*datachat.Chunk
		inBytes    int64
		textBytes  int
		extractDur time.Duration
	)
	for _, e := range entries {
		f, err := os.Open(filepath.Join(docsDir, e.Name()))
		if err != nil {
			log.Fatal(err)
		}
		start := time.Now()
		ex, err := extract.Extract(ctx, f, e.Name(), 100<<20)
		extractDur += time.Since(start)
		f.Close()
		if err != nil {
			continue // the password-protected PDF
		}
		inBytes += ex.Bytes
		textBytes += ex.TextLen()
		doc := &datachat.Document{ID: e.Name(), Name: ex.Name, MediaType: ex.MediaType, Pages: ex.Pages}
		chunks := retrieval.Chunk(ex, doc.ID, retrieval.ChunkOptions{})
		realDocs = append(realDocs, doc)
		realChunks = append(realChunks, chunks)
	}
	nReal := 0
	for _, c := range realChunks {
		nReal += len(c)
	}
	fmt.Printf("real documents: %d files, %.1f MB in, %.2f MB of text, %d chunks; extraction %.2fs (%.1f MB/s of input)\n",
		len(realDocs), mb(inBytes), mb(int64(textBytes)), nReal, extractDur.Seconds(), mb(inBytes)/extractDur.Seconds())

	// 2. Synthetic chunks from the real sentences.
	sentences, headings := sentencePool(realChunks)
	rng := rand.New(rand.NewPCG(1, 2))
	synth := synthesize(rng, sentences, headings, *nChunks, *perDoc)

	// 3. Index: the real documents, one search (which builds the
	// conversation's in-memory index, as a user's first question would), then
	// the synthetic documents, which are added to the database and to the
	// in-memory index.
	const conv = "bench"
	start := time.Now()
	for i, d := range realDocs {
		if err := ix.Add(ctx, conv, d, realChunks[i]); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := ix.Search(ctx, conv, "warm up", 5, nil); err != nil {
		log.Fatal(err)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var synthBytes int64
	var synthChunks int
	addStart := time.Now()
	for _, s := range synth {
		for _, c := range s.chunks {
			synthBytes += int64(len(c.Text))
		}
		synthChunks += len(s.chunks)
		if err := ix.Add(ctx, conv, s.doc, s.chunks); err != nil {
			log.Fatal(err)
		}
	}
	addDur := time.Since(addStart)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	fmt.Printf("indexed %d synthetic chunks (%.1f MB of text) in %.1fs: %.2f MB/s, %.0f chunks/s (SQLite + in-memory index%s)\n",
		synthChunks, mb(synthBytes), addDur.Seconds(), mb(synthBytes)/addDur.Seconds(), float64(synthChunks)/addDur.Seconds(), map[bool]string{true: " + embedding", false: ""}[emb != nil])
	fmt.Printf("in-memory index growth: %.0f MB of Go heap for %d chunks\n", mb(int64(after.HeapAlloc)-int64(before.HeapAlloc)), synthChunks)
	for c := 0; c < *others; c++ {
		id := fmt.Sprintf("other-%d", c)
		for _, s := range synth[:max(1, len(synth)/10)] {
			d := *s.doc
			if err := ix.Add(ctx, id, &d, s.chunks); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Printf("total indexing time %.1fs; conversation %q holds %d chunks", time.Since(start).Seconds(), conv, nReal+synthChunks)
	if *others > 0 {
		fmt.Printf("; %d other conversations hold %d chunks each", *others, max(1, len(synth)/10)**perDoc)
	}
	fmt.Println()
	if fi, err := os.Stat(filepath.Join(*dir, "index.db")); err == nil {
		fmt.Printf("index file: %.1f MB (plus WAL)\n", mb(fi.Size()))
	}

	// Cold start: a second Index on the same file builds the conversation's
	// in-memory index on its first search.
	{
		ix2, err := retrieval.Open(ctx, retrieval.Options{Path: filepath.Join(*dir, "index.db"), Embedder: emb})
		if err != nil {
			log.Fatal(err)
		}
		t0 := time.Now()
		if _, err := ix2.Search(ctx, conv, questions[0].Question, 5, nil); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("cold start: first search after opening the file took %.2fs (builds the in-memory index of %d chunks)\n", time.Since(t0).Seconds(), nReal+synthChunks)
		ix2.Close()
	}

	// 4. Queries: the labelled questions, warm-up round first.
	var lat []time.Duration
	var hits, asked int
	var embedTotal time.Duration
	for r := 0; r <= *rounds; r++ {
		for _, q := range questions {
			t0 := time.Now()
			res, err := ix.Query(ctx, retrieval.Query{ConversationID: conv, Text: q.Question, TopK: 5})
			d := time.Since(t0)
			if err != nil {
				log.Fatal(err)
			}
			if r == 0 {
				asked++
				if slices.ContainsFunc(res.Sources, q.answers) {
					hits++
				}
				continue
			}
			lat = append(lat, d)
			embedTotal += res.Embedding
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("queries: %d (%d questions x %d rounds, after a warm-up round), top_k 5\n", len(lat), len(questions), *rounds)
	fmt.Printf("latency: p50 %s  p95 %s  p99 %s  max %s  mean %s (query embedding mean %s)\n",
		ms(pct(lat, 50)), ms(pct(lat, 95)), ms(pct(lat, 99)), ms(lat[len(lat)-1]), ms(mean(lat)), ms(embedTotal/time.Duration(max(1, len(lat)))))
	fmt.Printf("load average at end: %s\n", loadAvg())
	fmt.Printf("recall@5 of the labelled questions among %d chunks: %.3f (%d/%d)\n", nReal+synthChunks, float64(hits)/float64(asked), hits, asked)
}

type question struct {
	Question string `json:"question"`
	Document string `json:"document"`
	Pages    []int  `json:"pages"`
	Section  string `json:"section"`
	Contains string `json:"contains"`
}

func (q question) answers(s retrieval.Source) bool {
	if s.Metadata[retrieval.MetaDocument] != q.Document {
		return false
	}
	if len(q.Pages) > 0 {
		p, _ := s.Metadata[retrieval.MetaPage].(int)
		if !slices.Contains(q.Pages, p) {
			return false
		}
	}
	if q.Section != "" {
		sec, _ := s.Metadata[retrieval.MetaSection].(string)
		if !strings.Contains(strings.ToLower(sec), strings.ToLower(q.Section)) {
			return false
		}
	}
	return q.Contains == "" || strings.Contains(strings.ToLower(s.Text), strings.ToLower(q.Contains))
}

func loadQuestions(path string) []question {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var set struct {
		Questions []question `json:"questions"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		log.Fatal(err)
	}
	return set.Questions
}

// sentencePool splits the real chunks into sentences and collects headings.
func sentencePool(docs [][]*datachat.Chunk) (sentences, headings []string) {
	seen := map[string]bool{}
	for _, chunks := range docs {
		for _, c := range chunks {
			if c.Heading != "" && !seen[c.Heading] {
				seen[c.Heading] = true
				headings = append(headings, c.Heading)
			}
			text := strings.ReplaceAll(c.Text, "\n", " ")
			for _, s := range strings.SplitAfter(text, ". ") {
				if s = strings.TrimSpace(s); len(s) >= 20 {
					sentences = append(sentences, s)
				}
			}
		}
	}
	return sentences, headings
}

type synthDoc struct {
	doc    *datachat.Document
	chunks []*datachat.Chunk
}

func synthesize(rng *rand.Rand, sentences, headings []string, n, perDoc int) []synthDoc {
	var out []synthDoc
	for made := 0; made < n; {
		k := min(perDoc, n-made)
		id := fmt.Sprintf("synthetic-%05d", len(out))
		d := synthDoc{doc: &datachat.Document{ID: id, Name: id + ".txt", MediaType: extract.MediaText}}
		off := 0
		for i := 0; i < k; i++ {
			var sb strings.Builder
			for sb.Len() < 900 {
				if sb.Len() > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(sentences[rng.IntN(len(sentences))])
			}
			text := sb.String()
			c := &datachat.Chunk{ID: fmt.Sprintf("%s:%d", id, i), DocumentID: id, Seq: i, Start: off, End: off + len(text), Text: text}
			if rng.IntN(2) == 0 {
				c.Heading = headings[rng.IntN(len(headings))]
			} else {
				c.Page = 1 + i/3
			}
			off += len(text) + 2
			d.chunks = append(d.chunks, c)
		}
		out = append(out, d)
		made += k
	}
	return out
}

func pct(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[max(0, min(len(d)-1, i-1))]
}

func mean(d []time.Duration) time.Duration {
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(max(1, len(d)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func mb(n int64) float64 { return float64(n) / 1e6 }

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
