package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// TakeRequest admits one request for the user if fewer than limit were
// admitted in the window (now-window, now], and records it. The count and the
// insert run in one transaction holding the user's rate_limiters row FOR
// UPDATE: exact across goroutines and processes. When refused it returns how
// long until the oldest counted request leaves the window. A limit or window
// of zero or less turns the limit off: every request is admitted and nothing
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx,
			`INSERT INTO rate_limiters (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`SELECT 1 FROM rate_limiters WHERE user_id = $1 FOR UPDATE`, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx,
			`DELETE FROM rate_limit_events WHERE user_id = $1 AND at <= $2`, userID, start); err != nil {
			return err
		}
		var err error
		ok, retry, err = sqlstore.SlidingWindow(ctx, pgDB{tx}, dialect, `rate_limit_events WHERE user_id = ?`, userID, now, window, limit)
		if err != nil || !ok {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO rate_limit_events (user_id, at) VALUES ($1, $2)`, userID, now)
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("take request: %w", err)
	}
	return ok, retry, nil
}
