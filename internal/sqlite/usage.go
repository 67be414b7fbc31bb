package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// TakeRequest admits one request for the user if fewer than limit were
// admitted in the window (now-window, now], and records it. The check and the
// insert run in one BEGIN IMMEDIATE transaction, which holds the database's
// write lock: exact across goroutines and processes. When refused it returns
// how long until the oldest counted request leaves the window. A limit or
// window of zero or less turns the limit off: every request is admitted and
// nothing is recorded.
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`DELETE FROM rate_limit_events WHERE user_id = ? AND at <= ?`, userID, ts(start)); err != nil {
			return err
		}
		var err error
		ok, retry, err = sqlstore.SlidingWindow(ctx, sqlDB{tx}, dialect, `rate_limit_events WHERE user_id = ?`, userID, now, window, limit)
		if err != nil || !ok {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO rate_limit_events (user_id, at) VALUES (?, ?)`, userID, ts(now))
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("take request: %w", err)
	}
	return ok, retry, nil
}
