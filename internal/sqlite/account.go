package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
)

// Every change that could leave the server without an active admin (SetRole,
// DisableUser, DeleteUser) counts the admins and changes the user in one
// BEGIN IMMEDIATE transaction, which holds the database's write lock: two
// such changes, from any processes, never both see the other's admin.

// Account returns the user with this id with their account.
func (s *Store) Account(ctx context.Context, userID string) (*datachat.Account, error) {
	return accountWhere(ctx, s.read, "u.id = ?", userID)
}

// AccountByName returns the user with this name (compared exactly).
func (s *Store) AccountByName(ctx context.Context, name string) (*datachat.Account, error) {
	if record.Unstorable(name) {
		return nil, record.ErrNoUser
	}
	return accountWhere(ctx, s.read, "u.name = ?", name)
}

// accountWhere returns the one account matching where (an expression on
// users u with one parameter).
func accountWhere(ctx context.Context, q queryer, where string, arg any) (*datachat.Account, error) {
	a, err := decode.Account(q.QueryRowContext(ctx, `SELECT `+record.AccountColumns+` FROM users u WHERE `+where, arg))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get account", record.ErrNoUser.Message)
	}
	return a, nil
}

// Accounts lists every user, by name (byte order).
func (s *Store) Accounts(ctx context.Context) ([]*datachat.Account, error) {
	return queryAll(ctx, s.read, decode.Account, "list accounts",
		`SELECT `+record.AccountColumns+` FROM users u ORDER BY u.name`)
}

// CreateAccount stores a new user with their role.
func (s *Store) CreateAccount(ctx context.Context, a *datachat.Account) error {
	if err := record.FillAccount(a); err != nil {
		return err
	}
	_, err := s.write.ExecContext(ctx, `
		INSERT INTO users (id, name, created_at, role, email, tokens_per_day) VALUES (?, ?, ?, ?, ?, ?)`,
		a.ID, a.Name, ts(a.CreatedAt), string(a.Role), a.Email, a.TokensPerDay)
	if violation(err) == record.UniqueViolation {
		return record.NameTaken(a.Name)
	}
	return writeError(err, "create account", "", "")
}

// lockedAccount reads a user's account in tx, a write transaction, failing
// with LastAdmin(what) when the change would leave no active admin:
// leavesAdmin says whether the user stays an active admin after it.
func lockedAccount(ctx context.Context, tx *sql.Tx, userID, what string, leavesAdmin bool) (*datachat.Account, error) {
	a, err := accountWhere(ctx, tx, "u.id = ?", userID)
	if err != nil {
		return nil, err
	}
	if a.Role != datachat.RoleAdmin || a.DisabledAt != nil || leavesAdmin {
		return a, nil
	}
	var others int
	if err := tx.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL AND id <> ?`, userID).Scan(&others); err != nil {
		return nil, err
	}
	if others == 0 {
		return nil, record.LastAdmin(what, a.Name)
	}
	return a, nil
}

// SetRole changes a user's role, refusing to demote the last active admin.
func (s *Store) SetRole(ctx context.Context, userID string, role datachat.Role) error {
	if err := record.CheckRole(role); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := lockedAccount(ctx, tx, userID, "demote", role == datachat.RoleAdmin); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE users SET role = ? WHERE id = ?`, string(role), userID)
		return err
	})
	return record.Wrap("set role", err)
}

// SetTokensPerDay sets a user's own token budget.
func (s *Store) SetTokensPerDay(ctx context.Context, userID string, tokens *int64) error {
	if err := record.CheckTokensPerDay(tokens); err != nil {
		return err
	}
	res, err := s.write.ExecContext(ctx, `UPDATE users SET tokens_per_day = ? WHERE id = ?`, tokens, userID)
	if err != nil {
		return fmt.Errorf("set token budget: %w", err)
	}
	return mustAffect(res, "set token budget", record.ErrNoUser.Message)
}

// DisableUser disables a user and deletes their sessions and invites, in one
// transaction; disabling a disabled user keeps the first time.
func (s *Store) DisableUser(ctx context.Context, userID string, now time.Time) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := lockedAccount(ctx, tx, userID, "disable", false); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?`,
			ts(now), userID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM invites WHERE user_id = ?`, userID)
		return err
	})
	return record.Wrap("disable user", err)
}

// EnableUser enables a disabled user.
func (s *Store) EnableUser(ctx context.Context, userID string) error {
	res, err := s.write.ExecContext(ctx, `UPDATE users SET disabled_at = NULL WHERE id = ?`, userID)
	if err != nil {
		return fmt.Errorf("enable user: %w", err)
	}
	return mustAffect(res, "enable user", record.ErrNoUser.Message)
}

// DeleteUser removes a user; the foreign keys delete what they own, and
// their requests' counts go too.
func (s *Store) DeleteUser(ctx context.Context, userID string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := lockedAccount(ctx, tx, userID, "remove", false); err != nil {
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
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
		a, err = accountWhere(ctx, tx, "u.id = ?", userID)
		return err
	})
	if err != nil {
		return nil, record.Wrap("use invite", err)
	}
	return a, nil
}

// PasswordHash returns the user of this name and their password hash.
func (s *Store) PasswordHash(ctx context.Context, name string) (*datachat.Account, string, error) {
	if record.Unstorable(name) {
		return nil, "", record.ErrNoUser
	}
	var hash string
	a, err := decode.Account(record.Also(s.read.QueryRowContext(ctx,
		`SELECT `+record.AccountColumns+`, u.password_hash FROM users u WHERE u.name = ?`, name), &hash))
	if err != nil {
		return nil, "", notFoundIfNoRows(err, "get password hash", record.ErrNoUser.Message)
	}
	return a, hash, nil
}

// AccountByIdentity returns the user single sign-on knows by id.
func (s *Store) AccountByIdentity(ctx context.Context, id datachat.Identity) (*datachat.Account, error) {
	if record.Unstorable(id.Issuer) || record.Unstorable(id.Subject) {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "no user has this identity")
	}
	a, err := decode.Account(s.read.QueryRowContext(ctx, `
		SELECT `+record.AccountColumns+` FROM identities idn JOIN users u ON u.id = idn.user_id
		WHERE idn.issuer = ? AND idn.subject = ?`, id.Issuer, id.Subject))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get account by identity", "no user has this identity")
	}
	return a, nil
}

// LinkIdentity records that id is userID's, keeping its newest email.
func (s *Store) LinkIdentity(ctx context.Context, userID string, id datachat.Identity) error {
	if err := record.CheckIdentity(id); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
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

// AuthenticateSession returns the user of the session with this hash, and
// records its use at most once a minute, to spare the writer.
func (s *Store) AuthenticateSession(ctx context.Context, hash string, now time.Time, idle time.Duration) (*datachat.Account, datachat.Credential, error) {
	if hash == "" {
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	now = record.Time(now)
	var (
		id       string
		lastSeen time.Time
	)
	a, err := decode.Account(record.Also(s.read.QueryRowContext(ctx, `
		SELECT `+record.AccountColumns+`, s.id, s.last_seen_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.hash = ?`, hash), &id, scanTime{&lastSeen}))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	if err != nil {
		return nil, datachat.Credential{}, fmt.Errorf("authenticate session: %w", err)
	}
	if a.DisabledAt != nil {
		return nil, datachat.Credential{}, datachat.ErrUserDisabled
	}
	if record.IdledOut(lastSeen, now, idle) {
		// Unless a request at the same time used it again.
		if _, err := s.write.ExecContext(ctx, `DELETE FROM sessions WHERE id = ? AND last_seen_at < ?`,
			id, ts(now.Add(-idle))); err != nil && !datachat.IsNoSpace(err) {
			return nil, datachat.Credential{}, fmt.Errorf("authenticate session: end idle session: %w", err)
		}
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	if record.RecordUse(&lastSeen, now) {
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?`,
				ts(now), id, ts(now)); err != nil {
				return err
			}
			return seen(ctx, tx, a.ID, now)
		})
		if err != nil && !datachat.IsNoSpace(err) {
			// On a full disk the session still works, its use unrecorded:
			// the user must be able to delete what fills it.
			return nil, datachat.Credential{}, fmt.Errorf("authenticate session: record use: %w", err)
		}
		if err == nil {
			a.LastSeenAt = &now
		}
	}
	return a, datachat.Credential{Kind: datachat.CredentialSession, ID: id, UserID: a.ID}, nil
}

// seen records in tx that the user was seen at now, unless later already.
func seen(ctx context.Context, q queryer, userID string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE users SET last_seen_at = ? WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at < ?)`,
		ts(now), userID, ts(now))
	return err
}

// DeleteSession deletes a session; one already gone is not an error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.write.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
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
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM auth_attempts WHERE until <= ?`, ts(now)); err != nil {
			return err
		}
		var err error
		ok, retry, err = slidingWindow(ctx, tx, `auth_attempts WHERE key = ?`, k, now, window, limit)
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

// slidingWindow counts the rows of from (a table and a condition on key)
// in the window (now-window, now] and says whether one more may be
// admitted, or else how long until a slot frees: when enough of the oldest
// counted rows leave the window for the count to drop below limit.
func slidingWindow(ctx context.Context, tx *sql.Tx, from, key string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	start := now.Add(-window)
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+from+` AND at > ?`, key, ts(start)).Scan(&n); err != nil {
		return false, 0, err
	}
	if n < limit {
		return true, 0, nil
	}
	var oldest time.Time
	if err := tx.QueryRowContext(ctx, `SELECT at FROM `+from+` AND at > ? ORDER BY at LIMIT 1 OFFSET ?`,
		key, ts(start), n-limit).Scan(scanTime{&oldest}); err != nil {
		return false, 0, err
	}
	return false, oldest.Add(window).Sub(now), nil
}

// UsageByDay sums token usage per user and UTC day from since on, newest
// day first, then by user name.
func (s *Store) UsageByDay(ctx context.Context, since time.Time) ([]datachat.UsageDay, error) {
	// Stored times are UTC text: the day is their first ten characters.
	return queryAll(ctx, s.read, decode.UsageDay, "usage by day", `
		SELECT u.id, u.name, substr(t.created_at, 1, 10) || 'T00:00:00.000000Z' AS day,
			COUNT(*), SUM(t.input_tokens), SUM(t.output_tokens)
		FROM token_usage t JOIN users u ON u.id = t.user_id
		WHERE t.created_at >= ?
		GROUP BY u.id, day
		ORDER BY day DESC, u.name, u.id`, ts(since))
}
