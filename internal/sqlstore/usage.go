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

// TakeRequest admits one request for the user if fewer than limit were
// admitted in the window (now-window, now], and records it. The count and
// the insert run in one write transaction, after [Dialect.LockRequests]:
// exact across goroutines and processes. When refused it returns how long
// until the oldest counted request leaves the window. A limit or window of
// zero or less turns the limit off: every request is admitted and nothing
// is recorded.
func (s *Store) TakeRequest(ctx context.Context, userID string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	if limit <= 0 || window <= 0 {
		return true, 0, nil
	}
	now = record.Time(now)
	start := now.Add(-window)
	var (
		ok    bool
		retry time.Duration
	)
	err := s.writeTx(ctx, func(tx DB) error {
		if s.d.LockRequests != nil {
			if err := s.d.LockRequests(ctx, tx, userID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx,
			`DELETE FROM rate_limit_events WHERE user_id = ? AND at <= ?`, userID, s.d.Time(start)); err != nil {
			return err
		}
		var err error
		ok, retry, err = SlidingWindow(ctx, tx, s.d, `rate_limit_events WHERE user_id = ?`, userID, now, window, limit)
		if err != nil || !ok {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO rate_limit_events (user_id, at) VALUES (?, ?)`, userID, s.d.Time(now))
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("take request: %w", err)
	}
	return ok, retry, nil
}
