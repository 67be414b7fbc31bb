package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/retrieval"
)

var _ retrieval.Copier = (*Index)(nil)

// errNoVectors says the document copied has not every chunk embedded: its
// copy is indexed as Add indexes one.
var errNoVectors = errors.New("the document copied has chunks without vectors")

// CopyDocument makes the chunks of doc, a stored copy of the document
// fromDocumentID ([Store.CopyShared] stored it), searchable in the
// conversation, as Add does, with the embedding of the chunk of the same
// seq of the document it copies: the chunks are not embedded again. When
// that document is gone or has a chunk without an embedding (or the index
// has no Embedder), it is Add. chunks is not read.
func (ix *Index) CopyDocument(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk, _ string, fromDocumentID string) error {
	if ix.embedder == nil {
		return ix.Add(ctx, conversationID, doc, chunks)
	}
	if err := retrieval.CheckDocument(conversationID, doc); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, ix.pool, func(tx pgx.Tx) error {
		name, _, err := lockDocument(ctx, tx, conversationID, doc.ID)
		if err != nil {
			return err
		}
		// Every chunk of the copy has its original, embedded.
		var missing bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chunks n WHERE n.document_id = $1 AND NOT EXISTS (
				SELECT 1 FROM chunks o WHERE o.document_id = $2 AND o.seq = n.seq AND o.embedding IS NOT NULL))`,
			doc.ID, fromDocumentID).Scan(&missing); err != nil {
			return err
		}
		if missing {
			return errNoVectors
		}
		if err := lockLexemes(ctx, tx, conversationID); err != nil {
			return err
		}
		if err := applyLexemes(ctx, tx, conversationID, doc.ID, -1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE chunks n SET tsv = chunk_tsvector(n.text, n.heading, $3), embedding = (
				SELECT o.embedding FROM chunks o WHERE o.document_id = $2 AND o.seq = n.seq AND o.embedding IS NOT NULL
				ORDER BY o.row_seq LIMIT 1)
			WHERE n.document_id = $1`, doc.ID, fromDocumentID, name); err != nil {
			return err
		}
		if err := applyLexemes(ctx, tx, conversationID, doc.ID, 1); err != nil {
			return err
		}
		return bumpVersion(ctx, tx, conversationID)
	})
	ix.dropCached(conversationID)
	if errors.Is(err, errNoVectors) {
		return ix.Add(ctx, conversationID, doc, chunks)
	}
	if err != nil {
		return fmt.Errorf("index document %q: %w", doc.Name, err)
	}
	return nil
}
