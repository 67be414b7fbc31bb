package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	_, err := s.pool.Exec(ctx, `
		INSERT INTO confirmations (id, conversation_id, message_id, call_id, action, parameters, explanation,
			status, note, state, created_at, resolved_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		c.ID, c.ConversationID, messageID, c.CallID, c.Action, record.RawJSON(c.Parameters), c.Explanation,
		c.Status, c.Note, record.RawJSON(c.State), c.CreatedAt, c.ResolvedAt)
	return writeError(err, "create confirmation", "conversation or message not found", "confirmation already exists")
}

// PendingConfirmation returns the conversation's pending confirmation (the
// latest, should there be several); ENOTFOUND if there is none.
func (s *Store) PendingConfirmation(ctx context.Context, conversationID string) (*datachat.Confirmation, error) {
	c, err := decode.Confirmation(s.pool.QueryRow(ctx, `SELECT `+record.ConfirmationColumns+` FROM confirmations
		WHERE conversation_id = $1 AND status = 'pending'
		ORDER BY created_at DESC, row_seq DESC LIMIT 1`, conversationID))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get pending confirmation", "no pending confirmation")
	}
	return c, nil
}

// ResolveConfirmation moves a pending confirmation to status, approved or
// declined (else EINVALID); ECONFLICT if it was already resolved, ENOTFOUND if
// it does not exist. Of concurrent calls exactly one succeeds: the UPDATE
// re-checks status = 'pending' once the row lock is released.
func (s *Store) ResolveConfirmation(ctx context.Context, id, status, note string) (*datachat.Confirmation, error) {
	if err := record.CheckResolution(status); err != nil {
		return nil, err
	}
	c, err := decode.Confirmation(s.pool.QueryRow(ctx, `
		UPDATE confirmations SET status = $1, note = $2, resolved_at = $3
		WHERE id = $4 AND status = 'pending'
		RETURNING `+record.ConfirmationColumns, status, note, record.Now(), id))
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("resolve confirmation: %w", err)
	}
	var cur string
	err = s.pool.QueryRow(ctx, `SELECT status FROM confirmations WHERE id = $1`, id).Scan(&cur)
	if err != nil {
		return nil, notFoundIfNoRows(err, "resolve confirmation", "confirmation not found")
	}
	return nil, datachat.Errorf(datachat.ECONFLICT, "confirmation already %s", cur)
}
