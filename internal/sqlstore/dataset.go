package sqlstore

import (
	"context"
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
	_, err = s.write.Exec(ctx, `
		INSERT INTO datasets (id, conversation_id, name, source, format, path, columns, row_count, bytes, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.ConversationID, d.Name, d.Source, d.Format, d.Path, cols, d.RowCount, d.Bytes, s.d.Time(d.CreatedAt))
	return s.writeError(err, "create dataset", "conversation not found", fmt.Sprintf("a dataset named %q already exists in this conversation", d.Name))
}

// Datasets lists a conversation's datasets in the order they were added.
func (s *Store) Datasets(ctx context.Context, conversationID string) ([]*datachat.Dataset, error) {
	return QueryAll(ctx, s.read, s.d.Decode.Dataset, "list datasets", `SELECT `+record.DatasetColumns+` FROM datasets
		WHERE conversation_id = ? ORDER BY created_at, `+s.d.RowSeq, conversationID)
}

// Dataset returns a dataset of the conversation; ENOTFOUND if there is none.
func (s *Store) Dataset(ctx context.Context, conversationID, id string) (*datachat.Dataset, error) {
	d, err := s.d.Decode.Dataset(s.read.QueryRow(ctx, `SELECT `+record.DatasetColumns+` FROM datasets
		WHERE id = ? AND conversation_id = ?`, id, conversationID))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get dataset", "dataset not found")
	}
	return d, nil
}

// DeleteDataset deletes a dataset of the conversation; ENOTFOUND if there is none.
func (s *Store) DeleteDataset(ctx context.Context, conversationID, id string) error {
	n, err := s.write.Exec(ctx, `DELETE FROM datasets WHERE id = ? AND conversation_id = ?`, id, conversationID)
	return mustAffect(n, err, "delete dataset", "dataset not found")
}

// Documents lists a conversation's documents in the order they were added.
func (s *Store) Documents(ctx context.Context, conversationID string) ([]*datachat.Document, error) {
	return QueryAll(ctx, s.read, s.d.Decode.Document, "list documents", `SELECT `+record.DocumentColumns+` FROM documents
		WHERE conversation_id = ? ORDER BY created_at, `+s.d.RowSeq, conversationID)
}

// HasDocuments reports whether the conversation has any document.
func (s *Store) HasDocuments(ctx context.Context, conversationID string) (bool, error) {
	var has bool
	if err := s.read.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM documents WHERE conversation_id = ?)`, conversationID).Scan(&has); err != nil {
		return false, fmt.Errorf("has documents: %w", err)
	}
	return has, nil
}

// Document returns a document of the conversation; ENOTFOUND if there is none.
func (s *Store) Document(ctx context.Context, conversationID, id string) (*datachat.Document, error) {
	d, err := s.d.Decode.Document(s.read.QueryRow(ctx, `SELECT `+record.DocumentColumns+` FROM documents
		WHERE id = ? AND conversation_id = ?`, id, conversationID))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get document", "document not found")
	}
	return d, nil
}

// Chunks returns every chunk of a conversation's documents, document by
// document in the order they were added, each document's chunks by Seq.
func (s *Store) Chunks(ctx context.Context, conversationID string) ([]*datachat.Chunk, error) {
	return QueryAll(ctx, s.read, s.d.Decode.Chunk, "list chunks", `
		SELECT c.id, c.document_id, c.seq, c.page, c.heading, c.start_pos, c.end_pos, c.text
		FROM chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = ?
		ORDER BY d.created_at, d.`+s.d.RowSeq+`, c.seq, c.`+s.d.RowSeq, conversationID)
}

// DeleteDocument deletes a document of the conversation and its chunks;
// ENOTFOUND if there is none.
func (s *Store) DeleteDocument(ctx context.Context, conversationID, id string) error {
	n, err := s.write.Exec(ctx, `DELETE FROM documents WHERE id = ? AND conversation_id = ?`, id, conversationID)
	return mustAffect(n, err, "delete document", "document not found")
}
