package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"datachat"
	"datachat/internal/record"
)

// CreateConfirmation stores c, pending unless c.Status says otherwise;
// ENOTFOUND if its conversation (or its message, when set) does not exist.
func (s *Store) CreateConfirmation(ctx context.Context, c *datachat.Confirmation) error {
	if err := record.FillConfirmation(c); err != nil {
		return err
	}
	var messageID any
	if c.MessageID != "" {
		messageID = c.MessageID
	}
	_, err := s.write.ExecContext(ctx, `
		INSERT INTO confirmations (id, conversation_id, message_id, call_id, action, parameters, explanation,
			status, note, state, created_at, resolved_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.ConversationID, messageID, c.CallID, c.Action, record.RawJSON(c.Parameters), c.Explanation,
		c.Status, c.Note, record.RawJSON(c.State), ts(c.CreatedAt), tsPtr(c.ResolvedAt))
	return writeError(err, "create confirmation", "conversation or message not found", "confirmation already exists")
}

// PendingConfirmation returns the conversation's pending confirmation (the
// latest, should there be several); ENOTFOUND if there is none.
func (s *Store) PendingConfirmation(ctx context.Context, conversationID string) (*datachat.Confirmation, error) {
	c, err := decode.Confirmation(s.read.QueryRowContext(ctx, `SELECT `+record.ConfirmationColumns+` FROM confirmations
		WHERE conversation_id = ? AND status = 'pending'
		ORDER BY created_at DESC, rowid DESC LIMIT 1`, conversationID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get pending confirmation", "no pending confirmation")
	}
	return c, nil
}

// ResolveConfirmation moves a pending confirmation to status, approved or
// declined (else EINVALID); ECONFLICT if it was already resolved, ENOTFOUND if
// it does not exist.
func (s *Store) ResolveConfirmation(ctx context.Context, id, status, note string) (*datachat.Confirmation, error) {
	if err := record.CheckResolution(status); err != nil {
		return nil, err
	}
	var c *datachat.Confirmation
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		c, err = decode.Confirmation(tx.QueryRowContext(ctx, `
			UPDATE confirmations SET status = ?, note = ?, resolved_at = ?
			WHERE id = ? AND status = 'pending'
			RETURNING `+record.ConfirmationColumns, status, note, ts(record.Now()), id))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var cur string
		err = tx.QueryRowContext(ctx, `SELECT status FROM confirmations WHERE id = ?`, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return datachat.Errorf(datachat.ENOTFOUND, "confirmation not found")
		}
		if err != nil {
			return err
		}
		return datachat.Errorf(datachat.ECONFLICT, "confirmation already %s", cur)
	})
	if err != nil {
		return nil, record.Wrap("resolve confirmation", err)
	}
	return c, nil
}
