package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
)

// CreateDocument stores a document and its chunks in one transaction, filling
// in their IDs, the chunks' DocumentID, and d.Chunks when zero; ENOTFOUND if
// the conversation does not exist. Chunks are written with COPY.
func (s *Store) CreateDocument(ctx context.Context, d *datachat.Document, chunks []*datachat.Chunk) error {
	meta, err := record.FillDocument(d, chunks)
	if err != nil {
		return fmt.Errorf("create document: %w", err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO documents (id, conversation_id, name, media_type, pages, chunks, bytes, metadata, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			d.ID, d.ConversationID, d.Name, d.MediaType, d.Pages, d.Chunks, d.Bytes, meta, d.CreatedAt)
		if err != nil || len(chunks) == 0 {
			return err
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"chunks"},
			[]string{"id", "document_id", "seq", "page", "heading", "start_pos", "end_pos", "text"},
			pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
				c := chunks[i]
				return []any{c.ID, c.DocumentID, c.Seq, c.Page, c.Heading, c.Start, c.End, c.Text}, nil
			}))
		return err
	})
	return writeError(err, "create document", "conversation not found", "document or chunk already exists")
}
