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
//	go run ./bench/retrieval -backend postgres -postgres-url postgres://…
//
// With -backend postgres the documents are stored as the workspace stores
// them (postgres.Store.CreateDocument) and indexed by PostgreSQL's full-text
// search (postgres.Index), in a new schema of that database, dropped at the
// end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/bench/internal/report"
	"datachat/internal/extract"
	"datachat/internal/postgres"
	"datachat/internal/postgres/pgtest"
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
		backend  = flag.String("backend", "embedded", "index to measure: embedded (SQLite file + in-memory index) or postgres (PostgreSQL full-text search)")
		pgURL    = flag.String("postgres-url", os.Getenv("DATACHAT_TEST_POSTGRES_URL"), "database for -backend postgres (default $DATACHAT_TEST_POSTGRES_URL); the bench works in a new schema it drops at the end")
		pgKeep   = flag.Bool("postgres-keep", false, "keep the schema -backend postgres made (to study query plans), and print its name")
	)
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	docsDir, err := retrievaltest.SharedDocs()
	if err != nil {
		log.Fatalf("shared documents not found (../shared/data/docs beside the repository): %v", err)
	}
	questions, err := retrievaltest.LoadQuestions()
	if err != nil {
		log.Fatal(err)
	}

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
	var tg *target
	switch *backend {
	case "embedded":
		tg, err = openEmbedded(ctx, filepath.Join(*dir, "index.db"), emb)
	case "postgres":
		if *pgURL == "" {
			log.Fatal("-backend postgres needs -postgres-url (or DATACHAT_TEST_POSTGRES_URL)")
		}
		tg, err = openPostgres(ctx, *pgURL, emb, *pgKeep)
	default:
		log.Fatalf("-backend %q: want embedded or postgres", *backend)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer tg.close()
	// fatal drops the PostgreSQL schema before exiting.
	fatal := func(v ...any) {
		tg.close()
		log.Fatal(v...)
	}
	ix := tg.ix

	fmt.Printf("machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s; load average at start: %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), report.LoadAvg())
	ranking := "BM25"
	if *backend == "postgres" {
		ranking = "full text (ts_rank)"
	}
	mode := ranking + " only"
	if emb != nil {
		mode = fmt.Sprintf("hybrid (%s + %d-dim hashed vectors, RRF k=60)", ranking, *embedDim)
	}
	fmt.Printf("backend: %s; mode: %s\n\n", tg.name, mode)

	// 1. Extract and chunk the real documents.
	entries, err := os.ReadDir(docsDir)
	if err != nil {
		fatal(err)
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
			fatal(err)
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
	rng := mrand.New(mrand.NewPCG(1, 2))
	synth := synthesize(rng, sentences, headings, *nChunks, *perDoc)

	// 3. Index: the real documents, one search (which builds the
	// conversation's in-memory index, as a user's first question would), then
	// the synthetic documents, which are added to the database and to the
	// in-memory index. PostgreSQL: each document is stored, then indexed.
	const conv = "bench"
	start := time.Now()
	for i, d := range realDocs {
		if err := tg.add(ctx, conv, d, realChunks[i]); err != nil {
			fatal(err)
		}
	}
	if _, err := ix.Query(ctx, retrieval.Query{ConversationID: conv, Text: "warm up", TopK: 5}); err != nil {
		fatal(err)
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
		if err := tg.add(ctx, conv, s.doc, s.chunks); err != nil {
			fatal(err)
		}
	}
	addDur := time.Since(addStart)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	fmt.Printf("indexed %d synthetic chunks (%.1f MB of text) in %.1fs: %.2f MB/s, %.0f chunks/s (%s%s)\n",
		synthChunks, mb(synthBytes), addDur.Seconds(), mb(synthBytes)/addDur.Seconds(), float64(synthChunks)/addDur.Seconds(), tg.what, map[bool]string{true: " + embedding", false: ""}[emb != nil])
	if tg.storeDur > 0 {
		fmt.Printf("  of which storing (CreateDocument, COPY) %.1fs and indexing (Index.Add) %.1fs, over all documents\n", tg.storeDur.Seconds(), tg.indexDur.Seconds())
	}
	fmt.Printf("Go heap growth: %.0f MB for %d chunks\n", mb(int64(after.HeapAlloc)-int64(before.HeapAlloc)), synthChunks)
	for c := 0; c < *others; c++ {
		id := fmt.Sprintf("other-%d", c)
		for _, s := range synth[:max(1, len(synth)/10)] {
			// Document and chunk ids are unique across conversations in
			// the PostgreSQL store.
			d := *s.doc
			d.ID = id + "/" + d.ID
			chunks := make([]*datachat.Chunk, len(s.chunks))
			for i, ch := range s.chunks {
				cc := *ch
				cc.ID, cc.DocumentID = id+"/"+cc.ID, d.ID
				chunks[i] = &cc
			}
			if err := tg.add(ctx, id, &d, chunks); err != nil {
				fatal(err)
			}
		}
	}
	fmt.Printf("total indexing time %.1fs; conversation %q holds %d chunks", time.Since(start).Seconds(), conv, nReal+synthChunks)
	if *others > 0 {
		fmt.Printf("; %d other conversations hold %d chunks each", *others, max(1, len(synth)/10)**perDoc)
	}
	fmt.Println()
	fmt.Println(tg.size(ctx))

	// Cold start: a second Index on the same file builds the conversation's
	// in-memory index on its first search; on PostgreSQL, a new pool's first
	// search (connection, planning).
	{
		ix2, closeIx2, err := tg.reopen(ctx)
		if err != nil {
			fatal(err)
		}
		t0 := time.Now()
		if _, err := ix2.Query(ctx, retrieval.Query{ConversationID: conv, Text: questions[0].Question, TopK: 5}); err != nil {
			fatal(err)
		}
		fmt.Printf("cold start: first search of a second index took %.2fs (%s, %d chunks)\n", time.Since(t0).Seconds(), tg.coldWhat, nReal+synthChunks)
		closeIx2()
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
				fatal(err)
			}
			if r == 0 {
				asked++
				if slices.ContainsFunc(res.Sources, q.Answers) {
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
	fmt.Printf("load average at end: %s\n", report.LoadAvg())
	fmt.Printf("recall@5 of the labelled questions among %d chunks: %.3f (%d/%d)\n", nReal+synthChunks, float64(hits)/float64(asked), hits, asked)
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

func synthesize(rng *mrand.Rand, sentences, headings []string, n, perDoc int) []synthDoc {
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

// target is the index under measurement.
type target struct {
	name, what, coldWhat string
	ix                   retrieval.Backend
	// store, if set, stores a document before the index adds it, as the
	// workspace does for the PostgreSQL index.
	store              func(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) error
	storeDur, indexDur time.Duration
	reopen             func(ctx context.Context) (retrieval.Backend, func(), error)
	size               func(ctx context.Context) string
	close              func()
}

func (tg *target) add(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) error {
	if tg.store != nil {
		t0 := time.Now()
		if err := tg.store(ctx, conversationID, doc, chunks); err != nil {
			return err
		}
		tg.storeDur += time.Since(t0)
	}
	t0 := time.Now()
	err := tg.ix.Add(ctx, conversationID, doc, chunks)
	tg.indexDur += time.Since(t0)
	return err
}

func openEmbedded(ctx context.Context, path string, emb retrieval.Embedder) (*target, error) {
	ix, err := retrieval.Open(ctx, retrieval.Options{Path: path, Embedder: emb})
	if err != nil {
		return nil, err
	}
	return &target{
		name:     "embedded",
		what:     "SQLite + in-memory index",
		coldWhat: "builds the in-memory index",
		ix:       ix,
		reopen: func(ctx context.Context) (retrieval.Backend, func(), error) {
			ix2, err := retrieval.Open(ctx, retrieval.Options{Path: path, Embedder: emb})
			if err != nil {
				return nil, nil, err
			}
			return ix2, func() { ix2.Close() }, nil
		},
		size: func(context.Context) string {
			fi, err := os.Stat(path)
			if err != nil {
				return "index file: unknown size"
			}
			return fmt.Sprintf("index file: %.1f MB (plus WAL)", mb(fi.Size()))
		},
		close: func() { ix.Close() },
	}, nil
}

// openPostgres creates a schema in the database at dsn, migrates it and
// opens the store and index on it; close drops the schema unless keep.
func openPostgres(ctx context.Context, dsn string, emb retrieval.Embedder, keep bool) (*target, error) {
	if _, err := url.Parse(dsn); err != nil || !strings.HasPrefix(dsn, "postgres") {
		return nil, errors.New("-postgres-url: want a postgres:// URL")
	}
	schema, err := pgtest.NewSchema(ctx, dsn, "datachat_bench_")
	if err != nil {
		return nil, err
	}
	drop := func() {
		if keep {
			log.Printf("kept schema %s", schema.Name)
			return
		}
		if err := schema.Drop(context.Background()); err != nil {
			log.Print(err)
		}
	}
	dsn = schema.URL
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		drop()
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		drop()
		return nil, err
	}
	user, err := s.EnsureUser(ctx, "bench")
	if err != nil {
		s.Close()
		drop()
		return nil, err
	}
	convs := map[string]bool{}
	opts := postgres.IndexOptions{Embedder: emb}
	coldWhat := "a new connection pool"
	if emb != nil {
		coldWhat += " loading the conversation's vectors"
	}
	return &target{
		name:     "postgres",
		what:     "PostgreSQL: store + full-text index",
		coldWhat: coldWhat,
		ix:       postgres.NewIndex(s, opts),
		store: func(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) error {
			if !convs[conversationID] {
				if err := s.CreateConversation(ctx, &datachat.Conversation{ID: conversationID, UserID: user.ID}); err != nil {
					return err
				}
				convs[conversationID] = true
			}
			doc.ConversationID = conversationID
			return s.CreateDocument(ctx, doc, chunks)
		},
		reopen: func(ctx context.Context) (retrieval.Backend, func(), error) {
			s2, err := postgres.Open(ctx, dsn)
			if err != nil {
				return nil, nil, err
			}
			return postgres.NewIndex(s2, opts), func() { s2.Close() }, nil
		},
		size: func(ctx context.Context) string {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return "table sizes: " + err.Error()
			}
			defer conn.Close(ctx)
			var table, toast, gin, other int64
			err = conn.QueryRow(ctx, `SELECT pg_relation_size('chunks'), pg_total_relation_size('chunks') - pg_relation_size('chunks') - pg_indexes_size('chunks'),
				pg_relation_size('chunks_tsv'), pg_indexes_size('chunks') - pg_relation_size('chunks_tsv')`).Scan(&table, &toast, &gin, &other)
			if err != nil {
				return "table sizes: " + err.Error()
			}
			return fmt.Sprintf("chunks table: %.1f MB heap + %.1f MB TOAST; GIN index on tsv %.1f MB; other indexes %.1f MB", mb(table), mb(toast), mb(gin), mb(other))
		},
		close: func() {
			s.Close()
			drop()
		},
	}, nil
}
