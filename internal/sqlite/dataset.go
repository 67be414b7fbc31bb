package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"datachat"
	"datachat/internal/record"
)

// CreateDataset stores d; ENOTFOUND if the conversation does not exist,
// ECONFLICT if it already has a dataset with d's Name.
func (s *Store) CreateDataset(ctx context.Context, d *datachat.Dataset) error {
	cols, err := record.FillDataset(d)
	if err != nil {
		return fmt.Errorf("create dataset: %w", err)
	}
	_, err = s.write.ExecContext(ctx, `
		INSERT INTO datasets (id, conversation_id, name, source, format, path, columns, row_count, bytes, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.ConversationID, d.Name, d.Source, d.Format, d.Path, cols, d.RowCount, d.Bytes, ts(d.CreatedAt))
	return writeError(err, "create dataset", "conversation not found", fmt.Sprintf("a dataset named %q already exists in this conversation", d.Name))
}

// Datasets lists a conversation's datasets in the order they were added.
func (s *Store) Datasets(ctx context.Context, conversationID string) ([]*datachat.Dataset, error) {
	return queryAll(ctx, s.read, decode.Dataset, "list datasets", `SELECT `+record.DatasetColumns+` FROM datasets
		WHERE conversation_id = ? ORDER BY created_at, rowid`, conversationID)
}

// Dataset returns a dataset of the conversation; ENOTFOUND if there is none.
func (s *Store) Dataset(ctx context.Context, conversationID, id string) (*datachat.Dataset, error) {
	d, err := decode.Dataset(s.read.QueryRowContext(ctx, `SELECT `+record.DatasetColumns+` FROM datasets
		WHERE id = ? AND conversation_id = ?`, id, conversationID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get dataset", "dataset not found")
	}
	return d, nil
}

// DeleteDataset deletes a dataset of the conversation; ENOTFOUND if there is none.
func (s *Store) DeleteDataset(ctx context.Context, conversationID, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM datasets WHERE id = ? AND conversation_id = ?`, id, conversationID)
	if err != nil {
		return fmt.Errorf("delete dataset: %w", err)
	}
	return mustAffect(res, "delete dataset", "dataset not found")
}

// CreateDocument stores a document and its chunks in one transaction, filling
// in their IDs, the chunks' DocumentID, and d.Chunks when zero; ENOTFOUND if
// the conversation does not exist.
func (s *Store) CreateDocument(ctx context.Context, d *datachat.Document, chunks []*datachat.Chunk) error {
	meta, err := record.FillDocument(d, chunks)
	if err != nil {
		return fmt.Errorf("create document: %w", err)
	}
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
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

// Documents lists a conversation's documents in the order they were added.
func (s *Store) Documents(ctx context.Context, conversationID string) ([]*datachat.Document, error) {
	return queryAll(ctx, s.read, decode.Document, "list documents", `SELECT `+record.DocumentColumns+` FROM documents
		WHERE conversation_id = ? ORDER BY created_at, rowid`, conversationID)
}

// HasDocuments reports whether the conversation has any document.
func (s *Store) HasDocuments(ctx context.Context, conversationID string) (bool, error) {
	var has bool
	if err := s.read.QueryRowContext(ctx,
		`SELECT EXISTS (SELECT 1 FROM documents WHERE conversation_id = ?)`, conversationID).Scan(&has); err != nil {
		return false, fmt.Errorf("has documents: %w", err)
	}
	return has, nil
}

// Document returns a document of the conversation; ENOTFOUND if there is none.
func (s *Store) Document(ctx context.Context, conversationID, id string) (*datachat.Document, error) {
	d, err := decode.Document(s.read.QueryRowContext(ctx, `SELECT `+record.DocumentColumns+` FROM documents
		WHERE id = ? AND conversation_id = ?`, id, conversationID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get document", "document not found")
	}
	return d, nil
}

// Chunks returns every chunk of a conversation's documents, document by
// document in the order they were added, each document's chunks by Seq.
func (s *Store) Chunks(ctx context.Context, conversationID string) ([]*datachat.Chunk, error) {
	return queryAll(ctx, s.read, decode.Chunk, "list chunks", `
		SELECT c.id, c.document_id, c.seq, c.page, c.heading, c.start_pos, c.end_pos, c.text
		FROM chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = ?
		ORDER BY d.created_at, d.rowid, c.seq, c.rowid`, conversationID)
}

// DeleteDocument deletes a document of the conversation and its chunks;
// ENOTFOUND if there is none.
func (s *Store) DeleteDocument(ctx context.Context, conversationID, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM documents WHERE id = ? AND conversation_id = ?`, id, conversationID)
	if err != nil {
		return fmt.Errorf("delete document: %w", err)
	}
	return mustAffect(res, "delete document", "document not found")
}
