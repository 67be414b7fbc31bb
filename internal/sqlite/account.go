package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// Every change that could leave the server without an active admin (SetRole,
// DisableUser, DeleteUser) counts the admins and changes the user in one
// BEGIN IMMEDIATE transaction, which holds the database's write lock: two
// such changes, from any processes, never both see the other's admin.

// DeleteUser removes a user; the foreign keys delete what they own, and
// their requests' counts go too.
func (s *Store) DeleteUser(ctx context.Context, userID string) error {
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := sqlstore.AdminChange(ctx, sqlDB{q: tx}, dialect, userID, "remove", false); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rate_limit_events WHERE user_id = ?`, userID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, userID)
		return err
	})
	return record.Wrap("delete user", err)
}

// CreateInvite stores an invite, replacing the user's earlier ones (so a
// user has one at most, expired or not).
func (s *Store) CreateInvite(ctx context.Context, inv *datachat.Invite) error {
	if err := record.FillInvite(inv); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM invites WHERE user_id = ?`, inv.UserID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO invites (id, user_id, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			inv.ID, inv.UserID, inv.Hash, ts(inv.CreatedAt), ts(inv.ExpiresAt))
		return writeError(err, "create invite", record.ErrNoUser.Message, "invite already exists")
	})
	return record.Wrap("create invite", err)
}

// UseInvite sets the password of the invite's user and deletes the invite
// and the user's sessions, in one transaction.
func (s *Store) UseInvite(ctx context.Context, hash, passwordHash string, now time.Time) (*datachat.Account, error) {
	if passwordHash == "" {
		return nil, datachat.Errorf(datachat.EINVALID, "password hash is empty")
	}
	if hash == "" {
		return nil, datachat.ErrInviteInvalid
	}
	var a *datachat.Account
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var userID string
		err := tx.QueryRowContext(ctx, `
			DELETE FROM invites
			WHERE hash = ? AND expires_at >= ? AND user_id IN (SELECT id FROM users WHERE disabled_at IS NULL)
			RETURNING user_id`, hash, ts(now)).Scan(&userID)
		if errors.Is(err, sql.ErrNoRows) {
			return datachat.ErrInviteInvalid
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, passwordHash, userID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
			return err
		}
		a, err = sqlstore.AccountWhere(ctx, sqlDB{q: tx}, dialect, "u.id = ?", userID)
		return err
	})
	if err != nil {
		return nil, record.Wrap("use invite", err)
	}
	return a, nil
}

// LinkIdentity records that id is userID's, keeping its newest email.
func (s *Store) LinkIdentity(ctx context.Context, userID string, id datachat.Identity) error {
	if err := record.CheckIdentity(id); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var owner string
		err := tx.QueryRowContext(ctx, `SELECT user_id FROM identities WHERE issuer = ? AND subject = ?`,
			id.Issuer, id.Subject).Scan(&owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `
				INSERT INTO identities (issuer, subject, user_id, email, created_at) VALUES (?, ?, ?, ?, ?)`,
				id.Issuer, id.Subject, userID, id.Email, ts(record.Now()))
			if err != nil {
				return writeError(err, "link identity", record.ErrNoUser.Message, "")
			}
		case err != nil:
			return err
		case owner != userID:
			return datachat.Errorf(datachat.ECONFLICT, "This single sign-on identity is another user's.")
		default:
			if _, err := tx.ExecContext(ctx, `UPDATE identities SET email = ? WHERE issuer = ? AND subject = ?`,
				id.Email, id.Issuer, id.Subject); err != nil {
				return err
			}
		}
		if id.Email == "" {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE users SET email = ? WHERE id = ?`, id.Email, userID)
		return err
	})
	return record.Wrap("link identity", err)
}

// CreateSession stores a session of an active user.
func (s *Store) CreateSession(ctx context.Context, sess *datachat.Session) error {
	if err := record.FillSession(sess); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var disabled *time.Time
		err := tx.QueryRowContext(ctx, `SELECT disabled_at FROM users WHERE id = ?`, sess.UserID).Scan(scanNullTime{&disabled})
		if err != nil {
			return notFoundIfNoRows(err, "create session", record.ErrNoUser.Message)
		}
		if disabled != nil {
			return datachat.ErrUserDisabled
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO sessions (id, user_id, hash, method, created_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?)`,
			sess.ID, sess.UserID, sess.Hash, sess.Method, ts(sess.CreatedAt), ts(sess.LastSeenAt))
		return writeError(err, "create session", record.ErrNoUser.Message, "session already exists")
	})
	return record.Wrap("create session", err)
}

// TakeAttempt admits one sign-in attempt under key if fewer than limit were
// admitted in the window (now-window, now], in one BEGIN IMMEDIATE
// transaction (exact across processes), deleting every attempt that has
// left its window.
func (s *Store) TakeAttempt(ctx context.Context, key string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	if limit <= 0 || window <= 0 {
		return true, 0, nil
	}
	now = record.Time(now)
	k := record.AttemptKey(key)
	var (
		ok    bool
		retry time.Duration
	)
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM auth_attempts WHERE until <= ?`, ts(now)); err != nil {
			return err
		}
		var err error
		ok, retry, err = sqlstore.SlidingWindow(ctx, sqlDB{q: tx}, dialect, `auth_attempts WHERE key = ?`, k, now, window, limit)
		if err != nil || !ok {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO auth_attempts (key, at, until) VALUES (?, ?, ?)`, k, ts(now), ts(now.Add(window)))
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("take attempt: %w", err)
	}
	return ok, retry, nil
}

// UsageByDay sums token usage per user and UTC day from since on, newest
// day first, then by user name.
func (s *Store) UsageByDay(ctx context.Context, since time.Time) ([]datachat.UsageDay, error) {
	// Stored times are UTC text: the day is their first ten characters.
	return sqlstore.QueryAll(ctx, sqlDB{q: s.read}, decode.UsageDay, "usage by day", `
		SELECT u.id, u.name, substr(t.created_at, 1, 10) || 'T00:00:00.000000Z' AS day,
			COUNT(*), SUM(t.input_tokens), SUM(t.output_tokens)
		FROM token_usage t JOIN users u ON u.id = t.user_id
		WHERE t.created_at >= ?
		GROUP BY u.id, day
		ORDER BY day DESC, u.name, u.id`, ts(since))
}
