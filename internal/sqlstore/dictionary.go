package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"datachat"
	"datachat/internal/record"
)

// UpdateDictionary changes the notes of a user's conversation, the
// descriptions of its datasets and its semantic layer in one transaction;
// ENOTFOUND if the conversation is not the user's, EINVALID (changing
// nothing) when d names tables or columns it lacks.
func (s *Store) UpdateDictionary(ctx context.Context, userID, conversationID string, d datachat.Dictionary) error {
	err := s.writeTx(ctx, func(tx DB) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM conversations WHERE id = ? AND user_id = ?`+s.d.LockRows,
			conversationID, userID).Scan(&one); err != nil {
			return NotFoundIfNoRows(err, "update dictionary", "conversation not found")
		}
		var datasets []*datachat.Dataset
		layer := record.ChangesLayer(d)
		if len(d.Datasets) > 0 || layer {
			rows, err := tx.Query(ctx, `SELECT `+record.DatasetColumns+` FROM datasets WHERE conversation_id = ?`+s.d.LockRows, conversationID)
			if err != nil {
				return err
			}
			if datasets, err = Collect(rows, s.d.Decode.Dataset); err != nil {
				return err
			}
		}
		changes, resolved, err := record.Changes(d, datasets)
		if err != nil {
			return err
		}
		if layer {
			var stored string
			err := tx.QueryRow(ctx, `SELECT layer FROM semantic_layers WHERE conversation_id = ?`, conversationID).Scan(&stored)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			text, err := record.ApplyLayer(stored, resolved, datasets)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO semantic_layers (conversation_id, layer) VALUES (?, ?)
				ON CONFLICT (conversation_id) DO UPDATE SET layer = excluded.layer`, conversationID, text); err != nil {
				return err
			}
		}
		for _, c := range changes {
			if _, err := tx.Exec(ctx, `UPDATE datasets SET description = ?, column_descriptions = ? WHERE id = ?`,
				c.Description, c.Columns, c.DatasetID); err != nil {
				return err
			}
		}
		if d.Notes != nil {
			if _, err := tx.Exec(ctx, `UPDATE conversations SET notes = ? WHERE id = ?`,
				strings.TrimSpace(*d.Notes), conversationID); err != nil {
				return err
			}
		}
		return nil
	})
	return record.Wrap("update dictionary", err)
}

// SaveExample stores a user's verified example, replacing the one of the
// same tool call; ENOTFOUND if the user does not exist.
func (s *Store) SaveExample(ctx context.Context, e *datachat.Example) error {
	tables, err := record.FillExample(e)
	if err != nil {
		return err
	}
	// The partial index is the conflict target: an example marked outside
	// an answer (no message) is always new.
	err = s.write.QueryRow(ctx, `
		INSERT INTO examples (id, user_id, question, query, verdict, tables, conversation_id, message_id, call_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (user_id, message_id, call_id) WHERE message_id <> '' DO UPDATE SET
			question = excluded.question, query = excluded.query, verdict = excluded.verdict,
			tables = excluded.tables, conversation_id = excluded.conversation_id, created_at = excluded.created_at
		RETURNING id`,
		e.ID, e.UserID, e.Question, e.SQL, e.Verdict, tables, e.ConversationID, e.MessageID, e.CallID, s.d.Time(e.CreatedAt)).Scan(&e.ID)
	return s.writeError(err, "save example", "user not found", "example already exists")
}

// Examples lists a user's verified examples, newest first.
func (s *Store) Examples(ctx context.Context, userID string) ([]*datachat.Example, error) {
	return QueryAll(ctx, s.read, s.d.Decode.Example, "list examples", `
		SELECT id, user_id, question, query, verdict, tables, conversation_id, message_id, call_id, created_at
		FROM examples WHERE user_id = ? ORDER BY created_at DESC, `+s.d.RowSeq+` DESC`, userID)
}

// DeleteExample deletes a user's example; ENOTFOUND if there is none.
func (s *Store) DeleteExample(ctx context.Context, userID, id string) error {
	n, err := s.write.Exec(ctx, `DELETE FROM examples WHERE id = ? AND user_id = ?`, id, userID)
	return mustAffect(n, err, "delete example", "example not found")
}

// SemanticLayer returns the semantic layer of a conversation's dictionary:
// an empty one when it has none.
func (s *Store) SemanticLayer(ctx context.Context, conversationID string) (*datachat.SemanticLayer, error) {
	var stored string
	err := s.read.QueryRow(ctx, `SELECT layer FROM semantic_layers WHERE conversation_id = ?`, conversationID).Scan(&stored)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, record.Wrap("read semantic layer", err)
	}
	return record.Layer(stored)
}
