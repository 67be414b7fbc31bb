package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"datachat"
	"datachat/internal/record"
)

// CreateDocument stores a document and its chunks in one transaction, filling
// in their IDs, the chunks' DocumentID, and d.Chunks when zero; ENOTFOUND if
// the conversation does not exist.
func (s *Store) CreateDocument(ctx context.Context, d *datachat.Document, chunks []*datachat.Chunk) error {
	meta, err := record.FillDocument(d, chunks)
	if err != nil {
		return fmt.Errorf("create document: %w", err)
	}
	err = s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO documents (id, conversation_id, name, media_type, pages, chunks, bytes, metadata, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, d.ConversationID, d.Name, d.MediaType, d.Pages, d.Chunks, d.Bytes, meta, ts(d.CreatedAt))
		if err != nil || len(chunks) == 0 {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `
			INSERT INTO chunks (id, document_id, seq, page, heading, start_pos, end_pos, text)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, c := range chunks {
			if _, err := stmt.ExecContext(ctx, c.ID, c.DocumentID, c.Seq, c.Page, c.Heading, c.Start, c.End, c.Text); err != nil {
				return err
			}
		}
		return nil
	})
	return writeError(err, "create document", "conversation not found", "document or chunk already exists")
}
