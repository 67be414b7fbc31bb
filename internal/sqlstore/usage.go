package sqlstore

import (
	"context"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
)

// RecordUsage stores the token usage of one turn; ENOTFOUND if the user does
// not exist. Usage is kept when its conversation is deleted.
func (s *Store) RecordUsage(ctx context.Context, u *datachat.Usage) error {
	record.FillUsage(u)
	_, err := s.write.Exec(ctx, `
		INSERT INTO token_usage (id, user_id, conversation_id, message_id, provider, model,
			input_tokens, output_tokens, success, estimated, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.UserID, u.ConversationID, u.MessageID, u.Provider, u.Model,
		u.InputTokens, u.OutputTokens, s.d.Bool(u.Success), s.d.Bool(u.Estimated), s.d.Time(u.CreatedAt))
	return s.writeError(err, "record usage", "user not found", "usage already recorded")
}

// TokensSince sums a user's input and output tokens recorded at or after since.
func (s *Store) TokensSince(ctx context.Context, userID string, since time.Time) (int64, error) {
	var n int64
	err := s.read.QueryRow(ctx, `
		SELECT CAST(COALESCE(SUM(input_tokens + output_tokens), 0) AS BIGINT) FROM token_usage
		WHERE user_id = ? AND created_at >= ?`, userID, s.d.Time(since)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sum tokens: %w", err)
	}
	return n, nil
}
