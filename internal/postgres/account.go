package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// How the account methods hold together across processes, in READ
// COMMITTED:
//   - A change that could leave the server without an active admin
//     (SetRole, DisableUser, DeleteUser) takes the advisory lock adminLockKey
//     for its transaction and only then counts the admins: such changes run
//     one at a time, each seeing the last one's outcome, so two admins
//     demoting each other cannot both succeed.
//   - Whatever changes a user together with their invites or sessions locks
//     the user's row first (UPDATE, or SELECT … FOR NO KEY UPDATE / FOR
//     SHARE), then the invites or sessions: one order, so no deadlock, and a
//     session cannot be created beside a DisableUser that would miss it.

// adminLockKey is the advisory lock of the changes that count admins.
const adminLockKey = 0x6461746163686164 // "datachad"

// attemptLockClass is the first key of the two-key advisory locks under
// which TakeAttempt counts one key's attempts (the second is the key's
// hash); the two-key locks are apart from the one-key ones.
const attemptLockClass = 0x64617461 // "data"

// DeleteUser removes a user; the foreign keys delete what they own, and
// their requests' counts go too.
func (s *Store) DeleteUser(ctx context.Context, userID string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := sqlstore.AdminChange(ctx, pgDB{tx}, dialect, userID, "remove", false); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM rate_limit_events WHERE user_id = $1`, userID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM rate_limiters WHERE user_id = $1`, userID)
		return err
	})
	return record.Wrap("delete user", err)
}

// lockUser locks the user's row against changes until tx ends, and
// returns when they were disabled (nil: active); ENOTFOUND when there is no
// such user.
func lockUser(ctx context.Context, tx pgx.Tx, userID, lock string) (*time.Time, error) {
	var disabled *time.Time
	err := tx.QueryRow(ctx, `SELECT disabled_at FROM users WHERE id = $1 `+lock, userID).Scan(&disabled)
	if err != nil {
		return nil, sqlstore.NotFoundIfNoRows(err, "lock user", record.ErrNoUser.Message)
	}
	return disabled, nil
}

// CreateInvite stores an invite, replacing the user's earlier ones (so a
// user has one at most, expired or not).
func (s *Store) CreateInvite(ctx context.Context, inv *datachat.Invite) error {
	if err := record.FillInvite(inv); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := lockUser(ctx, tx, inv.UserID, "FOR NO KEY UPDATE"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM invites WHERE user_id = $1`, inv.UserID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO invites (id, user_id, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			inv.ID, inv.UserID, inv.Hash, inv.CreatedAt, inv.ExpiresAt)
		return writeError(err, "create invite", record.ErrNoUser.Message, "invite already exists")
	})
	return record.Wrap("create invite", err)
}

// UseInvite sets the password of the invite's user and deletes the invite
// and the user's sessions, in one transaction that locks the user first:
// of two uses of one token, the second finds it gone.
func (s *Store) UseInvite(ctx context.Context, hash, passwordHash string, now time.Time) (*datachat.Account, error) {
	if passwordHash == "" {
		return nil, datachat.Errorf(datachat.EINVALID, "password hash is empty")
	}
	if hash == "" {
		return nil, datachat.ErrInviteInvalid
	}
	var a *datachat.Account
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var userID string
		err := tx.QueryRow(ctx, `SELECT user_id FROM invites WHERE hash = $1`, hash).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return datachat.ErrInviteInvalid
		}
		if err != nil {
			return err
		}
		disabled, err := lockUser(ctx, tx, userID, "FOR NO KEY UPDATE")
		if datachat.ErrorCode(err) == datachat.ENOTFOUND || disabled != nil {
			return datachat.ErrInviteInvalid
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM invites WHERE hash = $1 AND user_id = $2 AND expires_at >= $3`,
			hash, userID, record.Time(now))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return datachat.ErrInviteInvalid
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET password_hash = $1 WHERE id = $2`, passwordHash, userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
			return err
		}
		a, err = sqlstore.AccountWhere(ctx, pgDB{tx}, dialect, "u.id = ?", userID)
		return err
	})
	if err != nil {
		return nil, record.Wrap("use invite", err)
	}
	return a, nil
}

// LinkIdentity records that id is userID's, keeping its newest email. Of
// two links of one identity at once, the second waits for the first and
// finds it.
func (s *Store) LinkIdentity(ctx context.Context, userID string, id datachat.Identity) error {
	if err := record.CheckIdentity(id); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := lockUser(ctx, tx, userID, "FOR NO KEY UPDATE"); err != nil {
			return err
		}
		var owner string
		err := tx.QueryRow(ctx, `
			INSERT INTO identities (issuer, subject, user_id, email, created_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (issuer, subject) DO UPDATE SET email = CASE
				WHEN identities.user_id = EXCLUDED.user_id THEN EXCLUDED.email ELSE identities.email END
			RETURNING user_id`,
			id.Issuer, id.Subject, userID, id.Email, record.Now()).Scan(&owner)
		if err != nil {
			return err
		}
		if owner != userID {
			return datachat.Errorf(datachat.ECONFLICT, "This single sign-on identity is another user's.")
		}
		if id.Email == "" {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE users SET email = $1 WHERE id = $2`, id.Email, userID)
		return err
	})
	return record.Wrap("link identity", err)
}

// CreateSession stores a session of an active user, holding the user's row
// against a DisableUser until it is stored.
func (s *Store) CreateSession(ctx context.Context, sess *datachat.Session) error {
	if err := record.FillSession(sess); err != nil {
		return err
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		disabled, err := lockUser(ctx, tx, sess.UserID, "FOR SHARE")
		if err != nil {
			return err
		}
		if disabled != nil {
			return datachat.ErrUserDisabled
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO sessions (id, user_id, hash, method, created_at, last_seen_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			sess.ID, sess.UserID, sess.Hash, sess.Method, sess.CreatedAt, sess.LastSeenAt)
		return writeError(err, "create session", record.ErrNoUser.Message, "session already exists")
	})
	return record.Wrap("create session", err)
}

// TakeAttempt admits one sign-in attempt under key if fewer than limit were
// admitted in the window (now-window, now]: the key's attempts are counted
// and the new one stored under an advisory lock of the key's hash, exact
// across processes. Attempts that left their window are deleted first, in
// a statement of their own that skips any another process is deleting.
func (s *Store) TakeAttempt(ctx context.Context, key string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	if limit <= 0 || window <= 0 {
		return true, 0, nil
	}
	now = record.Time(now)
	k := record.AttemptKey(key)
	if _, err := s.pool.Exec(ctx, `
		DELETE FROM auth_attempts WHERE id IN (SELECT id FROM auth_attempts WHERE until <= $1 FOR UPDATE SKIP LOCKED)`,
		now); err != nil {
		return false, 0, fmt.Errorf("take attempt: %w", err)
	}
	var (
		ok    bool
		retry time.Duration
	)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(attemptLockClass), k); err != nil {
			return err
		}
		var err error
		ok, retry, err = sqlstore.SlidingWindow(ctx, pgDB{tx}, dialect, `auth_attempts WHERE key = ?`, k, now, window, limit)
		if err != nil || !ok {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO auth_attempts (key, at, until) VALUES ($1, $2, $3)`, k, now, now.Add(window))
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
	list, err := queryAll(ctx, s.pool, decode.UsageDay, "usage by day", `
		SELECT u.id, u.name, date_trunc('day', t.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS day,
			COUNT(*), SUM(t.input_tokens)::bigint, SUM(t.output_tokens)::bigint
		FROM token_usage t JOIN users u ON u.id = t.user_id
		WHERE t.created_at >= $1
		GROUP BY u.id, u.name, day
		ORDER BY day DESC, u.name COLLATE "C", u.id`, record.Time(since))
	return list, err
}
