package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"datachat"
	"datachat/internal/record"
)

// Account returns the user with this id with their account.
func (s *Store) Account(ctx context.Context, userID string) (*datachat.Account, error) {
	return AccountWhere(ctx, s.read, s.d, "u.id = ?", userID)
}

// AccountByName returns the user with this name (compared exactly).
func (s *Store) AccountByName(ctx context.Context, name string) (*datachat.Account, error) {
	if record.Unstorable(name) {
		return nil, record.ErrNoUser
	}
	return AccountWhere(ctx, s.read, s.d, "u.name = ?", name)
}

// AccountWhere returns the one account in db matching where (an expression
// on users u with one parameter).
func AccountWhere(ctx context.Context, db DB, d Dialect, where string, arg any) (*datachat.Account, error) {
	a, err := d.Decode.Account(db.QueryRow(ctx, `SELECT `+record.AccountColumns+` FROM users u WHERE `+where, arg))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get account", record.ErrNoUser.Message)
	}
	return a, nil
}

// Accounts lists every user, by name (byte order).
func (s *Store) Accounts(ctx context.Context) ([]*datachat.Account, error) {
	return QueryAll(ctx, s.read, s.d.Decode.Account, "list accounts",
		`SELECT `+record.AccountColumns+` FROM users u ORDER BY u.name`+s.d.Bytewise)
}

// CreateAccount stores a new user with their role.
func (s *Store) CreateAccount(ctx context.Context, a *datachat.Account) error {
	if err := record.FillAccount(a); err != nil {
		return err
	}
	_, err := s.write.Exec(ctx, `
		INSERT INTO users (id, name, created_at, role, email, tokens_per_day) VALUES (?, ?, ?, ?, ?, ?)`,
		a.ID, a.Name, s.d.Time(a.CreatedAt), string(a.Role), a.Email, a.TokensPerDay)
	if s.d.Violation(err) == record.UniqueViolation {
		return record.NameTaken(a.Name)
	}
	return s.writeError(err, "create account", "", "")
}

// AdminChange reads a user's account in tx, a write transaction of d's
// engine, after [Dialect.LockAdmins], failing with LastAdmin(what) when the
// change would leave no active admin: leavesAdmin says whether the user
// stays an active admin after it.
func AdminChange(ctx context.Context, tx DB, d Dialect, userID, what string, leavesAdmin bool) (*datachat.Account, error) {
	if d.LockAdmins != nil {
		if err := d.LockAdmins(ctx, tx); err != nil {
			return nil, err
		}
	}
	a, err := AccountWhere(ctx, tx, d, "u.id = ?", userID)
	if err != nil {
		return nil, err
	}
	if a.Role != datachat.RoleAdmin || a.DisabledAt != nil || leavesAdmin {
		return a, nil
	}
	var others int
	if err := tx.QueryRow(ctx, `
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
	err := s.writeTx(ctx, func(tx DB) error {
		if _, err := AdminChange(ctx, tx, s.d, userID, "demote", role == datachat.RoleAdmin); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE users SET role = ? WHERE id = ?`, string(role), userID)
		return err
	})
	return record.Wrap("set role", err)
}

// SetTokensPerDay sets a user's own token budget.
func (s *Store) SetTokensPerDay(ctx context.Context, userID string, tokens *int64) error {
	if err := record.CheckTokensPerDay(tokens); err != nil {
		return err
	}
	n, err := s.write.Exec(ctx, `UPDATE users SET tokens_per_day = ? WHERE id = ?`, tokens, userID)
	return mustAffect(n, err, "set token budget", record.ErrNoUser.Message)
}

// DisableUser disables a user and deletes their sessions and invites, in one
// transaction; disabling a disabled user keeps the first time.
func (s *Store) DisableUser(ctx context.Context, userID string, now time.Time) error {
	err := s.writeTx(ctx, func(tx DB) error {
		if _, err := AdminChange(ctx, tx, s.d, userID, "disable", false); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?`,
			s.d.Time(now), userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM invites WHERE user_id = ?`, userID)
		return err
	})
	return record.Wrap("disable user", err)
}

// EnableUser enables a disabled user.
func (s *Store) EnableUser(ctx context.Context, userID string) error {
	n, err := s.write.Exec(ctx, `UPDATE users SET disabled_at = NULL WHERE id = ?`, userID)
	return mustAffect(n, err, "enable user", record.ErrNoUser.Message)
}

// PasswordHash returns the user of this name and their password hash.
func (s *Store) PasswordHash(ctx context.Context, name string) (*datachat.Account, string, error) {
	if record.Unstorable(name) {
		return nil, "", record.ErrNoUser
	}
	var hash string
	a, err := s.d.Decode.Account(record.Also(s.read.QueryRow(ctx,
		`SELECT `+record.AccountColumns+`, u.password_hash FROM users u WHERE u.name = ?`, name), &hash))
	if err != nil {
		return nil, "", NotFoundIfNoRows(err, "get password hash", record.ErrNoUser.Message)
	}
	return a, hash, nil
}

// AccountByIdentity returns the user single sign-on knows by id.
func (s *Store) AccountByIdentity(ctx context.Context, id datachat.Identity) (*datachat.Account, error) {
	if record.Unstorable(id.Issuer) || record.Unstorable(id.Subject) {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "no user has this identity")
	}
	a, err := s.d.Decode.Account(s.read.QueryRow(ctx, `
		SELECT `+record.AccountColumns+` FROM identities idn JOIN users u ON u.id = idn.user_id
		WHERE idn.issuer = ? AND idn.subject = ?`, id.Issuer, id.Subject))
	if err != nil {
		return nil, NotFoundIfNoRows(err, "get account by identity", "no user has this identity")
	}
	return a, nil
}

// AuthenticateSession returns the user of the session with this hash, and
// records its use at most once a minute, to spare writes.
func (s *Store) AuthenticateSession(ctx context.Context, hash string, now time.Time, idle time.Duration) (*datachat.Account, datachat.Credential, error) {
	if hash == "" {
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	now = record.Time(now)
	var (
		id       string
		lastSeen time.Time
	)
	a, err := s.d.Decode.Account(record.Also(s.read.QueryRow(ctx, `
		SELECT `+record.AccountColumns+`, s.id, s.last_seen_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.hash = ?`, hash), &id, s.d.Decode.Time(&lastSeen)))
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
		if _, err := s.write.Exec(ctx, `DELETE FROM sessions WHERE id = ? AND last_seen_at < ?`,
			id, s.d.Time(now.Add(-idle))); err != nil && !datachat.IsNoSpace(err) {
			return nil, datachat.Credential{}, fmt.Errorf("authenticate session: end idle session: %w", err)
		}
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	if record.RecordUse(&lastSeen, now) {
		err := s.touch(ctx, func(db DB) error {
			if err := Seen(ctx, db, s.d, a.ID, now); err != nil {
				return err
			}
			_, err := db.Exec(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?`,
				s.d.Time(now), id, s.d.Time(now))
			return err
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

// Seen records in db, d's engine's, that the user was seen at now, unless
// later already.
func Seen(ctx context.Context, db DB, d Dialect, userID string, now time.Time) error {
	_, err := db.Exec(ctx, `UPDATE users SET last_seen_at = ? WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at < ?)`,
		d.Time(now), userID, d.Time(now))
	return err
}

// DeleteSession deletes a session; one already gone is not an error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.write.Exec(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// SlidingWindow counts the rows of from (a table and a condition on key,
// its one parameter) in tx, a transaction of d's engine, in the window
// (now-window, now] and says whether one more may be admitted, or else how
// long until a slot frees: when enough of the oldest counted rows leave the
// window for the count to drop below limit.
func SlidingWindow(ctx context.Context, tx DB, d Dialect, from, key string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	start := now.Add(-window)
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM `+from+` AND at > ?`, key, d.Time(start)).Scan(&n); err != nil {
		return false, 0, err
	}
	if n < limit {
		return true, 0, nil
	}
	var oldest time.Time
	if err := tx.QueryRow(ctx, `SELECT at FROM `+from+` AND at > ? ORDER BY at LIMIT 1 OFFSET ?`,
		key, d.Time(start), n-limit).Scan(d.Decode.Time(&oldest)); err != nil {
		return false, 0, err
	}
	return false, oldest.Add(window).Sub(now), nil
}
