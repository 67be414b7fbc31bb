package retrieval

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"datachat"
)

// Backend is a document index a workspace searches: the embedded [Index]
// (the default), PostgreSQL's own full-text search (postgres.Index, shared by
// every server process on one database) or a Chroma server (chroma.Client).
// All return the same [Source] objects for the same [Query], and all take
// [Query.Filters] with the meaning [CheckFilters] documents. The conformance
// suite in internal/retrieval/backendtest runs against each.
type Backend interface {
	// Add indexes the chunks of doc in the conversation, replacing any chunks
	// the document had. If it fails, nothing of the document is searchable.
	Add(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) error
	// DeleteDocument removes a document's chunks. Deleting a document that is
	// not indexed is not an error.
	DeleteDocument(ctx context.Context, conversationID, documentID string) error
	// DeleteConversation removes every document of the conversation.
	DeleteConversation(ctx context.Context, conversationID string) error
	// Query searches one conversation's chunks, best first.
	Query(ctx context.Context, q Query) (*Result, error)
	// Documents returns the ids of the conversation's indexed documents, so
	// that documents the store has and the index lacks (a lost index file, a
	// switch of backend) can be indexed again.
	Documents(ctx context.Context, conversationID string) ([]string, error)
}

var _ Backend = (*Index)(nil)

// Prepare validates a query as every backend must: a query that is not empty,
// TopK at most [MaxTopK] (0 means [DefaultTopK]) and well-formed filters. It
// returns the number of results wanted and the parsed filters.
//
// Errors: EINVALID naming what is wrong.
func Prepare(q Query) (topK int, f Filters, err error) {
	if strings.TrimSpace(q.Text) == "" {
		return 0, Filters{}, datachat.Errorf(datachat.EINVALID, "query is required")
	}
	if q.ConversationID == "" {
		return 0, Filters{}, datachat.Errorf(datachat.EINVALID, "conversation id is required")
	}
	topK = q.TopK
	switch {
	case topK <= 0:
		topK = DefaultTopK
	case topK > MaxTopK:
		return 0, Filters{}, datachat.Errorf(datachat.EINVALID, "top_k must be between 1 and %d", MaxTopK)
	}
	f, err = ParseFilters(q.Filters)
	if err != nil {
		return 0, Filters{}, err
	}
	return topK, f, nil
}

// CheckDocument validates the arguments of [Backend.Add].
//
// Errors: EINVALID for a missing conversation id, document id or name.
func CheckDocument(conversationID string, doc *datachat.Document) error {
	switch {
	case conversationID == "":
		return datachat.Errorf(datachat.EINVALID, "conversation id is required")
	case doc == nil || doc.ID == "":
		return datachat.Errorf(datachat.EINVALID, "document id is required")
	case doc.Name == "":
		return datachat.Errorf(datachat.EINVALID, "document name is required")
	}
	return nil
}

// ChunkID is the id of a chunk: its own, or "<document id>:<seq>".
func ChunkID(documentID string, c *datachat.Chunk) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("%s:%d", documentID, c.Seq)
}

// SourceMetadata builds a source's metadata as every backend reports it: the
// reserved keys ([MetaDocument], [MetaDocumentID], [MetaPage] — null when
// page is 0 —, [MetaSection] when heading is set, [MetaChunk]) and then the
// document's own metadata, leaving out keys that clash with the reserved ones.
func SourceMetadata(name, documentID string, page int, heading string, seq int, docMeta map[string]string) map[string]any {
	md := make(map[string]any, 5+len(docMeta))
	for k, v := range docMeta {
		if !ReservedKey(k) {
			md[k] = v
		}
	}
	md[MetaDocument] = name
	md[MetaDocumentID] = documentID
	md[MetaPage] = nil
	if page > 0 {
		md[MetaPage] = page
	}
	if heading != "" {
		md[MetaSection] = heading
	}
	md[MetaChunk] = seq
	return md
}

// EmbedChunks embeds the chunks' texts (each prefixed with its heading path,
// as [Index] does) in batches of [EmbedBatch], and returns unit vectors.
// Errors: the embedder's, or one saying its answer has the wrong shape.
func EmbedChunks(ctx context.Context, e Embedder, chunks []*datachat.Chunk) ([][]float32, error) {
	vecs := make([][]float32, 0, len(chunks))
	dim := 0
	for i := 0; i < len(chunks); i += EmbedBatch {
		batch := chunks[i:min(i+EmbedBatch, len(chunks))]
		texts := make([]string, len(batch))
		for j, c := range batch {
			texts[j] = embedText(c)
		}
		out, err := e.Embed(ctx, texts)
		if err != nil {
			return nil, err
		}
		if len(out) != len(texts) {
			return nil, fmt.Errorf("embedder returned %d vectors for %d texts", len(out), len(texts))
		}
		for _, v := range out {
			if len(v) == 0 || dim != 0 && len(v) != dim {
				return nil, fmt.Errorf("embedder returned vectors of %d and %d dimensions", dim, len(v))
			}
			dim = len(v)
			vecs = append(vecs, normalize(v))
		}
	}
	return vecs, nil
}

// EmbedQuery embeds a query's text with e and returns its unit vector and how
// long the embedding took. If the embedding fails or has the wrong shape it
// logs a warning to log and returns a nil vector, so that the search falls
// back to full text; the only error is ctx's, once it is done.
func EmbedQuery(ctx context.Context, e Embedder, log *slog.Logger, text string) ([]float32, time.Duration, error) {
	start := time.Now()
	out, err := e.Embed(ctx, []string{text})
	took := time.Since(start)
	switch {
	case ctx.Err() != nil:
		return nil, took, ctx.Err()
	case err != nil:
		log.WarnContext(ctx, "query embedding failed; searching full text only", slog.Any("error", err))
	case len(out) != 1 || len(out[0]) == 0:
		log.WarnContext(ctx, "query embedding failed; searching full text only", slog.Int("vectors", len(out)))
	default:
		return normalize(out[0]), took, nil
	}
	return nil, took, nil
}

// Normalize returns v scaled to unit length (v itself if it is all zeros), so
// that the dot product of two vectors is their cosine similarity.
func Normalize(v []float32) []float32 { return normalize(v) }

// Ranked is an id with its reciprocal-rank-fusion score.
type Ranked struct {
	ID    string
	Score float64
}

// Fuse merges rankings of ids (best first) by reciprocal rank fusion,
// Σ 1/(60+rank), and returns the best n. Ties keep the order of first
// appearance, so the result is deterministic.
func Fuse(n int, rankings ...[]string) []Ranked {
	scores := map[string]float64{}
	var order []string
	for _, list := range rankings {
		for rank, id := range list {
			if _, seen := scores[id]; !seen {
				order = append(order, id)
			}
			scores[id] += 1 / float64(rrfK+rank+1)
		}
	}
	out := make([]Ranked, len(order))
	for i, id := range order {
		out[i] = Ranked{ID: id, Score: scores[id]}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out[:min(n, len(out))]
}
