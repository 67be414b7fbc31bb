package retrieval

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"datachat"
)

// Source is one retrieved chunk, as answers cite it (datachat.Source).
//
// Metadata holds "document" (the file name), "document_id", "page" (the PDF
// page number, or null for formats without pages), "section" (the heading
// path, when the chunk is under a heading), "chunk" (its sequence number in the
// document), and then the document's own metadata (keys that clash with the
// ones above are left out).
//
// Score is higher for better matches. With full-text search alone it is the
// BM25 relevance (k1 = 1.2, b = 0.75) and Distance is null.
// With vectors it is the reciprocal-rank-fusion score, Σ 1/(60+rank) over the
// BM25 and vector rankings, and Distance is the cosine distance (1 − cosine
// similarity) between the query's and the chunk's embeddings.
type Source = datachat.Source

// Metadata keys that every [Source] has; filters on them match the chunk.
const (
	MetaDocument   = "document"
	MetaDocumentID = "document_id"
	MetaPage       = "page"
	MetaSection    = "section"
	MetaChunk      = "chunk"
)

// ReservedKey reports whether k is one of the metadata keys every source has,
// which a document's own metadata cannot take.
func ReservedKey(k string) bool {
	switch k {
	case MetaDocument, MetaDocumentID, MetaPage, MetaSection, MetaChunk:
		return true
	}
	return false
}

// Search limits.
const (
	DefaultTopK = datachat.DefaultTopK
	MaxTopK     = datachat.MaxTopK
	// MaxQueryTerms caps the words of a query that are searched for.
	MaxQueryTerms = 64
	// rrfK is the constant of reciprocal rank fusion.
	rrfK = 60
)

// Query is a search: the conversation, the user's text, how many results
// (0: [DefaultTopK]) and optional metadata filters (see [CheckFilters]).
type Query struct {
	ConversationID string
	Text           string
	TopK           int
	Filters        map[string]any
}

// Result is what [Index.Query] found, with the time it took: Embedding for
// the query's embedding (0 without an Embedder), Retrieval for the rest.
type Result struct {
	Sources   []Source
	Embedding time.Duration
	Retrieval time.Duration
	// Hybrid says whether vectors took part in the ranking.
	Hybrid bool
}

// Search returns the topK chunks of the conversation that best match query,
// best first. See [Index.Query].
func (ix *Index) Search(ctx context.Context, conversationID, query string, topK int, filters map[string]any) ([]Source, error) {
	res, err := ix.Query(ctx, Query{ConversationID: conversationID, Text: query, TopK: topK, Filters: filters})
	if err != nil {
		return nil, err
	}
	return res.Sources, nil
}

// Query runs a search. The user's text is only ever split into words (no
// query syntax): lower-cased, diacritics folded, English stop words dropped,
// Porter-stemmed, exactly as the chunks were indexed. A chunk matches if it
// has any of them, ranked by BM25 over its text, heading path and document
// name (the last two at half weight); a query of stop words alone matches
// nothing.
// With an Embedder the query is also embedded and the two rankings are fused
// (RRF, k=60), so the nearest chunks are returned even when they share no word
// with the query; if the embedding fails, the search falls back to BM25 and
// logs a warning. Filters restrict the chunks as [CheckFilters] describes; they are
// not checked against an allow-list here.
//
// Errors: EINVALID for an empty query, topK above [MaxTopK] or malformed
// filters; others are internal.
func (ix *Index) Query(ctx context.Context, q Query) (*Result, error) {
	topK, f, err := Prepare(q)
	if err != nil {
		return nil, err
	}
	res := &Result{Sources: []Source{}}

	var qvec []float32
	if ix.embedder != nil {
		if qvec, res.Embedding, err = EmbedQuery(ctx, ix.embedder, ix.log, q.Text); err != nil {
			return nil, err
		}
	}

	rs := time.Now()
	defer func() { res.Retrieval = time.Since(rs) }()

	docs, err := ix.matchDocuments(ctx, q.ConversationID, f)
	if err != nil {
		return nil, err
	}
	if docs != nil && len(docs) == 0 || f.Pages != nil && len(f.Pages) == 0 {
		return res, nil
	}
	ci, err := ix.cache.get(ctx, ix.read, q.ConversationID)
	if err != nil {
		return nil, err
	}
	terms := queryTerms(q.Text)

	ci.mu.RLock()
	keep := f.keeper(ci, docs)
	n := topK
	if qvec != nil {
		n = max(50, topK*5)
	}
	var ranked []hit
	textHits := ci.text.search(terms, n, keep)
	switch {
	case qvec != nil && ci.vec.dim == len(qvec):
		res.Hybrid = true
		ranked = fuse(textHits, ci.vec.search(qvec, n, keep), topK)
	case qvec != nil && ci.vec.dim != 0:
		ix.log.WarnContext(ctx, "query embedding and indexed vectors differ in dimensions; searching full text only",
			slog.Int("query_dim", len(qvec)), slog.Int("index_dim", ci.vec.dim))
		ranked = textHits[:min(topK, len(textHits))]
	default:
		ranked = textHits[:min(topK, len(textHits))]
	}
	rowids := make([]int64, len(ranked))
	var dists []*float64
	if res.Hybrid {
		dists = make([]*float64, len(ranked))
	}
	for i, h := range ranked {
		rowids[i] = ci.rowids[h.idx]
		if res.Hybrid {
			if d, ok := ci.vec.distance(h.idx, qvec); ok {
				dists[i] = &d
			}
		}
	}
	ci.mu.RUnlock()

	if len(ranked) == 0 {
		return res, nil
	}
	srcs, err := ix.load(ctx, q.ConversationID, rowids, ranked, dists)
	if err != nil {
		return nil, err
	}
	res.Sources = srcs
	return res, nil
}

// load fetches the chunks of hits, in order, as sources.
func (ix *Index) load(ctx context.Context, conversationID string, rowids []int64, hits []hit, dists []*float64) ([]Source, error) {
	args := make([]any, 0, len(rowids)+1)
	args = append(args, conversationID)
	for _, id := range rowids {
		args = append(args, id)
	}
	tx, err := ix.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	rows, err := tx.QueryContext(ctx, `SELECT c.rowid, c.id, c.document_id, c.seq, c.page, c.heading, c.text, d.name
		FROM chunks c JOIN documents d ON d.conversation_id = c.conversation_id AND d.id = c.document_id
		WHERE +c.conversation_id = ? AND c.rowid IN (`+placeholders(len(hits))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	byRow := make(map[int64]*Source, len(hits))
	docIDs := map[string][]*Source{}
	for rows.Next() {
		var (
			rowid           int64
			id, docID, head string
			text, name      string
			seq, page       int
		)
		if err := rows.Scan(&rowid, &id, &docID, &seq, &page, &head, &text, &name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load chunks: %w", err)
		}
		md := SourceMetadata(name, docID, page, head, seq, nil)
		s := &Source{ID: id, Text: text, Metadata: md}
		byRow[rowid] = s
		docIDs[docID] = append(docIDs[docID], s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	if len(docIDs) > 0 {
		args := []any{conversationID}
		ids := make([]string, 0, len(docIDs))
		for id := range docIDs {
			ids = append(ids, id)
			args = append(args, id)
		}
		rows, err := tx.QueryContext(ctx, `SELECT document_id, key, value FROM document_metadata
			WHERE conversation_id = ? AND document_id IN (`+placeholders(len(ids))+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("load document metadata: %w", err)
		}
		for rows.Next() {
			var docID, k, v string
			if err := rows.Scan(&docID, &k, &v); err != nil {
				rows.Close()
				return nil, fmt.Errorf("load document metadata: %w", err)
			}
			if ReservedKey(k) {
				continue
			}
			for _, s := range docIDs[docID] {
				s.Metadata[k] = v
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load document metadata: %w", err)
		}
	}
	out := make([]Source, 0, len(hits))
	for i, h := range hits {
		s, ok := byRow[rowids[i]]
		if !ok { // deleted meanwhile
			continue
		}
		s.Score = h.score
		if dists != nil {
			s.Distance = dists[i]
		}
		out = append(out, *s)
	}
	return out, nil
}

// fuse merges two rankings by reciprocal rank fusion and keeps the best n.
func fuse(a, b []hit, n int) []hit {
	scores := make(map[int]float64, len(a)+len(b))
	for _, list := range [][]hit{a, b} {
		for rank, h := range list {
			scores[h.idx] += 1 / float64(rrfK+rank+1)
		}
	}
	out := make([]hit, 0, len(scores))
	for c, s := range scores {
		out = append(out, hit{idx: c, tie: int64(c), score: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].better(out[j]) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// stopWords are common English words that carry no topic: they are neither
// indexed nor searched for.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for w := range strings.FieldsSeq(`a about above after again against all am an and any are aren as at be because been
		before being below between both but by can could did didn do does doesn doing don down during each few for from
		further had has have having he her here hers herself him himself his how i if in into is isn it its itself just
		me more most my myself no nor not now of off on once only or other our ours ourselves out over own same she should
		so some such than that the their theirs them themselves then there these they this those through to too under
		until up very was wasn we were weren what when where which while who whom why will with would you your yours
		yourself yourselves s t d ll m re ve also tell please`) {
		m[w] = true
	}
	return m
}()

// parsePage reads a page filter value.
func parsePage(s string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	return n, err == nil && n > 0
}
