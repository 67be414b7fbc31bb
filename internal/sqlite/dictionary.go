package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"datachat"
	"datachat/internal/record"
)

// UpdateDictionary changes the notes of a user's conversation and the
// descriptions of its datasets in one transaction; ENOTFOUND if the
// conversation is not the user's, EINVALID (changing nothing) when d names
// tables or columns it lacks.
func (s *Store) UpdateDictionary(ctx context.Context, userID, conversationID string, d datachat.Dictionary) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM conversations WHERE id = ? AND user_id = ?`,
			conversationID, userID).Scan(&one); err != nil {
			return notFoundIfNoRows(err, "update dictionary", "conversation not found")
		}
		if len(d.Datasets) > 0 {
			rows, err := tx.QueryContext(ctx, `SELECT `+datasetColumns+` FROM datasets WHERE conversation_id = ?`, conversationID)
			if err != nil {
				return err
			}
			var datasets []*datachat.Dataset
			for rows.Next() {
				ds, err := scanDataset(rows)
				if err != nil {
					rows.Close()
					return err
				}
				datasets = append(datasets, ds)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			resolved, err := d.Resolve(datasets)
			if err != nil {
				return err
			}
			for _, ds := range datasets {
				dd, ok := resolved.Datasets[ds.Name]
				if !ok {
					continue
				}
				desc, cols := dd.Apply(ds.Description, ds.ColumnDescriptions())
				descs, err := record.Descriptions(cols)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE datasets SET description = ?, column_descriptions = ? WHERE id = ?`,
					desc, descs, ds.ID); err != nil {
					return err
				}
			}
		} else if _, err := d.Resolve(nil); err != nil {
			return err // the notes' length
		}
		if d.Notes != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE conversations SET notes = ? WHERE id = ?`,
				strings.TrimSpace(*d.Notes), conversationID); err != nil {
				return err
			}
		}
		return nil
	})
	switch code := datachat.ErrorCode(err); {
	case err == nil:
		return nil
	case code != datachat.EINTERNAL:
		return err
	default:
		return fmt.Errorf("update dictionary: %w", err)
	}
}

// SaveExample stores a user's verified example, replacing the one of the
// same tool call; ENOTFOUND if the user does not exist.
func (s *Store) SaveExample(ctx context.Context, e *datachat.Example) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if e.ID == "" {
		e.ID = record.NewID()
	}
	record.FillTime(&e.CreatedAt)
	if e.Tables == nil {
		e.Tables = []datachat.TableSignature{}
	}
	tables, err := record.JSON(e.Tables)
	if err != nil {
		return fmt.Errorf("save example: %w", err)
	}
	// The partial index is the conflict target: an example marked outside
	// an answer (no message) is always new.
	err = s.write.QueryRowContext(ctx, `
		INSERT INTO examples (id, user_id, question, query, verdict, tables, conversation_id, message_id, call_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (user_id, message_id, call_id) WHERE message_id <> '' DO UPDATE SET
			question = excluded.question, query = excluded.query, verdict = excluded.verdict,
			tables = excluded.tables, conversation_id = excluded.conversation_id, created_at = excluded.created_at
		RETURNING id`,
		e.ID, e.UserID, e.Question, e.SQL, e.Verdict, tables, e.ConversationID, e.MessageID, e.CallID, ts(e.CreatedAt)).Scan(&e.ID)
	return writeError(err, "save example", "user not found", "example already exists")
}

// Examples lists a user's verified examples, newest first.
func (s *Store) Examples(ctx context.Context, userID string) ([]*datachat.Example, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT id, user_id, question, query, verdict, tables, conversation_id, message_id, call_id, created_at
		FROM examples WHERE user_id = ? ORDER BY created_at DESC, rowid DESC`, userID)
	if err != nil {
		return nil, fmt.Errorf("list examples: %w", err)
	}
	defer rows.Close()
	list := []*datachat.Example{}
	for rows.Next() {
		var e datachat.Example
		if err := rows.Scan(&e.ID, &e.UserID, &e.Question, &e.SQL, &e.Verdict, scanJSON{&e.Tables},
			&e.ConversationID, &e.MessageID, &e.CallID, scanTime{&e.CreatedAt}); err != nil {
			return nil, fmt.Errorf("list examples: %w", err)
		}
		list = append(list, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list examples: %w", err)
	}
	return list, nil
}

// DeleteExample deletes a user's example; ENOTFOUND if there is none.
func (s *Store) DeleteExample(ctx context.Context, userID, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM examples WHERE id = ? AND user_id = ?`, id, userID)
	if err != nil {
		return fmt.Errorf("delete example: %w", err)
	}
	return mustAffect(res, "delete example", "example not found")
}
