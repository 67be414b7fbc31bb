package retrieval

import (
	"context"
	"fmt"

	"datachat"
)

// Copier is a [Backend] that can index a copy of a document from the
// document it copies, keeping its chunks' vectors rather than embedding
// them again: a conversation copied from a shared one is searchable at
// once, without a call to the embedding provider. A Backend that is not
// one indexes a copy with Add.
type Copier interface {
	// CopyDocument indexes doc, with its chunks, in conversationID, as Add
	// does, taking each chunk's vector from the chunk of the same Seq of
	// the document fromDocumentID in fromConversationID. When that document
	// has not every one of them indexed with a vector (and the backend
	// embeds), it embeds them as Add does.
	CopyDocument(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk, fromConversationID, fromDocumentID string) error
}

var _ Copier = (*Index)(nil)

// CopyDocument indexes a copy of a document with the vectors of the
// document it copies.
func (ix *Index) CopyDocument(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk, fromConversationID, fromDocumentID string) error {
	if ix.embedder == nil || len(chunks) == 0 {
		return ix.Add(ctx, conversationID, doc, chunks)
	}
	if err := CheckDocument(conversationID, doc); err != nil {
		return err
	}
	vecs, err := ix.vectorsBySeq(ctx, fromConversationID, fromDocumentID, chunks)
	if err != nil {
		return fmt.Errorf("index document %q: %w", doc.Name, err)
	}
	if vecs == nil {
		return ix.Add(ctx, conversationID, doc, chunks)
	}
	return ix.add(ctx, conversationID, doc, chunks, vecs)
}

// vectorsBySeq returns the vector of each chunk of the document (in order),
// from the chunk of the same Seq in the index, or nil when one has none.
func (ix *Index) vectorsBySeq(ctx context.Context, conversationID, documentID string, chunks []*datachat.Chunk) ([][]float32, error) {
	rows, err := ix.read.QueryContext(ctx, `SELECT seq, vector FROM chunks WHERE conversation_id = ? AND document_id = ?`,
		conversationID, documentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	bySeq := map[int][]float32{}
	for rows.Next() {
		var seq int
		var blob []byte
		if err := rows.Scan(&seq, &blob); err != nil {
			return nil, err
		}
		if len(blob) > 0 {
			bySeq[seq] = decodeVector(blob)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	vecs := make([][]float32, len(chunks))
	for i, c := range chunks {
		v, ok := bySeq[c.Seq]
		if !ok || (i > 0 && len(v) != len(vecs[0])) {
			return nil, nil
		}
		vecs[i] = v
	}
	return vecs, nil
}
