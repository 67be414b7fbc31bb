package sqlstore

import (
	"context"

	"datachat"
	"datachat/internal/record"
)

// CreateConfirmation stores c, pending unless c.Status says otherwise;
// ENOTFOUND if its conversation (or its message, when set) does not exist.
func (s *Store) CreateConfirmation(ctx context.Context, c *datachat.Confirmation) error {
	if err := record.FillConfirmation(c); err != nil {
		return err
	}
	var messageID *string
	if c.MessageID != "" {
		messageID = &c.MessageID
	}
	_, err := s.write.Exec(ctx, `
		INSERT INTO confirmations (id, conversation_id, message_id, call_id, action, parameters, explanation,
			status, note, state, created_at, resolved_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.ConversationID, messageID, c.CallID, c.Action, record.RawJSON(c.Parameters), c.Explanation,
		c.Status, c.Note, record.RawJSON(c.State), s.d.Time(c.CreatedAt), s.d.NullTime(c.ResolvedAt))
	return s.writeError(err, "create confirmation", "conversation or message not found", "confirmation already exists")
}

// PendingConfirmation returns the conversation's pending confirmation (the
// latest, should there be several); ENOTFOUND if there is none.
func (s *Store) PendingConfirmation(ctx context.Context, conversationID string) (*datachat.Confirmation, error) {
	c, err := s.d.Decode.Confirmation(s.read.QueryRow(ctx, `SELECT `+record.ConfirmationColumns+` FROM confirmations
		WHERE conversation_id = ? AND status = 'pending'
		ORDER BY created_at DESC, `+s.d.RowSeq+` DESC LIMIT 1`, conversationID))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get pending confirmation", "no pending confirmation")
	}
	return c, nil
}
