package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"datachat"
	"datachat/internal/record"
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

// querier is what the pool and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Account returns the user with this id with their account.
func (s *Store) Account(ctx context.Context, userID string) (*datachat.Account, error) {
	return accountWhere(ctx, s.pool, "u.id = $1", userID)
}

// AccountByName returns the user with this name (compared exactly).
func (s *Store) AccountByName(ctx context.Context, name string) (*datachat.Account, error) {
	if record.Unstorable(name) {
		return nil, record.ErrNoUser
	}
	return accountWhere(ctx, s.pool, "u.name = $1", name)
}

// accountWhere returns the one account matching where (an expression on
// users u with one parameter).
func accountWhere(ctx context.Context, q querier, where string, arg any) (*datachat.Account, error) {
	a, err := decode.Account(q.QueryRow(ctx, `SELECT `+record.AccountColumns+` FROM users u WHERE `+where, arg))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get account", record.ErrNoUser.Message)
	}
	return a, nil
}

// Accounts lists every user, by name (byte order, as SQLite sorts).
func (s *Store) Accounts(ctx context.Context) ([]*datachat.Account, error) {
	return queryAll(ctx, s.pool, decode.Account, "list accounts",
		`SELECT `+record.AccountColumns+` FROM users u ORDER BY u.name COLLATE "C"`)
}

// CreateAccount stores a new user with their role.
func (s *Store) CreateAccount(ctx context.Context, a *datachat.Account) error {
	if err := record.FillAccount(a); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO users (id, name, created_at, role, email, tokens_per_day) VALUES ($1, $2, $3, $4, $5, $6)`,
		a.ID, a.Name, a.CreatedAt, string(a.Role), a.Email, a.TokensPerDay)
	if violation(err) == record.UniqueViolation {
		return record.NameTaken(a.Name)
	}
	return writeError(err, "create account", "", "")
}

// adminChange takes the admin lock in tx and reads the user's account,
// failing with LastAdmin(what) when the change would leave no active admin:
// leavesAdmin says whether the user stays an active admin after it.
func adminChange(ctx context.Context, tx pgx.Tx, userID, what string, leavesAdmin bool) (*datachat.Account, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(adminLockKey)); err != nil {
		return nil, err
	}
	a, err := accountWhere(ctx, tx, "u.id = $1", userID)
	if err != nil {
		return nil, err
	}
	if a.Role != datachat.RoleAdmin || a.DisabledAt != nil || leavesAdmin {
		return a, nil
	}
	var others int
	if err := tx.QueryRow(ctx, `
		SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL AND id <> $1`, userID).Scan(&others); err != nil {
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := adminChange(ctx, tx, userID, "demote", role == datachat.RoleAdmin); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE users SET role = $1 WHERE id = $2`, string(role), userID)
		return err
	})
	return record.Wrap("set role", err)
}

// SetTokensPerDay sets a user's own token budget.
func (s *Store) SetTokensPerDay(ctx context.Context, userID string, tokens *int64) error {
	if err := record.CheckTokensPerDay(tokens); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE users SET tokens_per_day = $1 WHERE id = $2`, tokens, userID)
	if err != nil {
		return fmt.Errorf("set token budget: %w", err)
	}
	return mustAffect(tag, record.ErrNoUser.Message)
}

// DisableUser disables a user and deletes their sessions and invites, in one
// transaction; disabling a disabled user keeps the first time.
func (s *Store) DisableUser(ctx context.Context, userID string, now time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := adminChange(ctx, tx, userID, "disable", false); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET disabled_at = COALESCE(disabled_at, $1) WHERE id = $2`,
			record.Time(now), userID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM invites WHERE user_id = $1`, userID)
		return err
	})
	return record.Wrap("disable user", err)
}

// EnableUser enables a disabled user.
func (s *Store) EnableUser(ctx context.Context, userID string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET disabled_at = NULL WHERE id = $1`, userID)
	if err != nil {
		return fmt.Errorf("enable user: %w", err)
	}
	return mustAffect(tag, record.ErrNoUser.Message)
}

// DeleteUser removes a user; the foreign keys delete what they own, and
// their requests' counts go too.
func (s *Store) DeleteUser(ctx context.Context, userID string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := adminChange(ctx, tx, userID, "remove", false); err != nil {
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
		return nil, notFoundIfNoRows(err, "lock user", record.ErrNoUser.Message)
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
		a, err = accountWhere(ctx, tx, "u.id = $1", userID)
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
	a, err := decode.Account(record.Also(s.pool.QueryRow(ctx,
		`SELECT `+record.AccountColumns+`, u.password_hash FROM users u WHERE u.name = $1`, name), &hash))
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
	a, err := decode.Account(s.pool.QueryRow(ctx, `
		SELECT `+record.AccountColumns+` FROM identities idn JOIN users u ON u.id = idn.user_id
		WHERE idn.issuer = $1 AND idn.subject = $2`, id.Issuer, id.Subject))
	if err != nil {
		return nil, notFoundIfNoRows(err, "get account by identity", "no user has this identity")
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

// AuthenticateSession returns the user of the session with this hash, and
// records its use at most once a minute.
func (s *Store) AuthenticateSession(ctx context.Context, hash string, now time.Time, idle time.Duration) (*datachat.Account, datachat.Credential, error) {
	if hash == "" {
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	now = record.Time(now)
	var (
		id       string
		lastSeen time.Time
	)
	a, err := decode.Account(record.Also(s.pool.QueryRow(ctx, `
		SELECT `+record.AccountColumns+`, s.id, s.last_seen_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.hash = $1`, hash), &id, &lastSeen))
	if errors.Is(err, pgx.ErrNoRows) {
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
		if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1 AND last_seen_at < $2`,
			id, now.Add(-idle)); err != nil && !datachat.IsNoSpace(err) {
			return nil, datachat.Credential{}, fmt.Errorf("authenticate session: end idle session: %w", err)
		}
		return nil, datachat.Credential{}, datachat.ErrSessionEnded
	}
	if record.RecordUse(&lastSeen, now) {
		// Two statements, not a transaction: each holds one row's lock
		// only while it runs, so neither waits on a DisableUser.
		err := seen(ctx, s.pool, a.ID, now)
		if err == nil {
			_, err = s.pool.Exec(ctx, `UPDATE sessions SET last_seen_at = $1 WHERE id = $2 AND last_seen_at < $1`, now, id)
		}
		if err != nil && !datachat.IsNoSpace(err) {
			// On a full disk the session still works, its use unrecorded.
			return nil, datachat.Credential{}, fmt.Errorf("authenticate session: record use: %w", err)
		}
		if err == nil {
			a.LastSeenAt = &now
		}
	}
	return a, datachat.Credential{Kind: datachat.CredentialSession, ID: id, UserID: a.ID}, nil
}

// seen records that the user was seen at now, unless later already.
func seen(ctx context.Context, q querier, userID string, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE users SET last_seen_at = $1 WHERE id = $2 AND (last_seen_at IS NULL OR last_seen_at < $1)`,
		now, userID)
	return err
}

// DeleteSession deletes a session; one already gone is not an error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
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
		ok, retry, err = slidingWindow(ctx, tx, `auth_attempts WHERE key = $1`, k, now, window, limit)
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

// slidingWindow counts the rows of from (a table and a condition on key,
// $1) in the window (now-window, now] and says whether one more may be
// admitted, or else how long until a slot frees: when enough of the oldest
// counted rows leave the window for the count to drop below limit.
func slidingWindow(ctx context.Context, tx pgx.Tx, from, key string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	start := now.Add(-window)
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM `+from+` AND at > $2`, key, start).Scan(&n); err != nil {
		return false, 0, err
	}
	if n < limit {
		return true, 0, nil
	}
	var oldest time.Time
	if err := tx.QueryRow(ctx, `SELECT at FROM `+from+` AND at > $2 ORDER BY at LIMIT 1 OFFSET $3`,
		key, start, n-limit).Scan(&oldest); err != nil {
		return false, 0, err
	}
	return false, oldest.Add(window).Sub(now), nil
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
