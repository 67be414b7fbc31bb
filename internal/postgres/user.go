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

// EnsureUser returns the user with this name, creating it, a member, if
// needed.
func (s *Store) EnsureUser(ctx context.Context, name string) (*datachat.User, error) {
	if err := datachat.CheckUserName(name); err != nil {
		return nil, err
	}
	var u datachat.User
	// The no-op update makes RETURNING give the existing row too.
	err := s.pool.QueryRow(ctx, `
		INSERT INTO users (id, name, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
		RETURNING id, name, created_at`, record.NewID(), name, record.Now()).
		Scan(&u.ID, &u.Name, &u.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("ensure user %q: %w", name, err)
	}
	return &u, nil
}

// CreateAPIKey stores k; ENOTFOUND if its user does not exist, ECONFLICT if a
// key with the same hash does.
func (s *Store) CreateAPIKey(ctx context.Context, k *datachat.APIKey) error {
	if err := record.FillAPIKey(k); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO api_keys (id, user_id, prefix, hash, created_at, last_used_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.UserID, k.Prefix, k.Hash, k.CreatedAt, k.LastUsedAt, k.RevokedAt)
	return writeError(err, "create API key", "user not found", "API key already exists")
}

// APIKeys lists every key, revoked ones included, oldest first.
func (s *Store) APIKeys(ctx context.Context) ([]*datachat.APIKey, error) {
	return queryAll(ctx, s.pool, decode.APIKey, "list API keys", `
		SELECT k.id, k.user_id, u.name, k.prefix, k.hash, k.created_at, k.last_used_at, k.revoked_at
		FROM api_keys k JOIN users u ON u.id = k.user_id
		ORDER BY k.created_at, k.row_seq`)
}

// CountAPIKeys counts keys that are not revoked.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count API keys: %w", err)
	}
	return n, nil
}

// RevokeAPIKey revokes a key; revoking a revoked key changes nothing.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, record.Now(), id)
	if err != nil {
		return fmt.Errorf("revoke API key: %w", err)
	}
	return mustAffect(tag, "API key not found")
}

// Authenticate returns the user owning the unrevoked key with this hash, and
// the key as a credential, and records its use and the user's (at most once
// a minute per key, to spare writes); a disabled user's key is refused.
func (s *Store) Authenticate(ctx context.Context, hash string) (*datachat.User, datachat.Credential, error) {
	if hash == "" {
		return nil, datachat.Credential{}, datachat.Errorf(datachat.EUNAUTHORIZED, "invalid API key")
	}
	var (
		u        datachat.User
		keyID    string
		lastUsed *time.Time
		disabled bool
	)
	err := s.pool.QueryRow(ctx, `
		SELECT u.id, u.name, u.created_at, k.id, k.last_used_at, u.disabled_at IS NOT NULL
		FROM api_keys k JOIN users u ON u.id = k.user_id
		WHERE k.hash = $1 AND k.revoked_at IS NULL`, hash).
		Scan(&u.ID, &u.Name, &u.CreatedAt, &keyID, &lastUsed, &disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, datachat.Credential{}, datachat.Errorf(datachat.EUNAUTHORIZED, "invalid API key")
	}
	if err != nil {
		return nil, datachat.Credential{}, fmt.Errorf("authenticate: %w", err)
	}
	if disabled {
		return nil, datachat.Credential{}, datachat.ErrUserDisabled
	}
	t := record.Now()
	if record.RecordUse(lastUsed, t) {
		// Two statements, each holding one row's lock only while it runs.
		err := sqlstore.Seen(ctx, pgDB{s.pool}, dialect, u.ID, t)
		if err == nil {
			_, err = s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = $1 WHERE id = $2`, t, keyID)
		}
		if err != nil && !datachat.IsNoSpace(err) {
			// On a full disk the key still works, its use unrecorded.
			return nil, datachat.Credential{}, fmt.Errorf("authenticate: record use: %w", err)
		}
	}
	return &u, datachat.Credential{Kind: datachat.CredentialAPIKey, ID: keyID, UserID: u.ID}, nil
}

// RevokedCredentials returns those of creds that no longer authenticate, with
// why, in one statement (one snapshot) however many there are: the users'
// state, the keys not revoked and the sessions there are, of those named.
func (s *Store) RevokedCredentials(ctx context.Context, creds []datachat.Credential) ([]datachat.Revocation, error) {
	ids, err := record.SplitCredentials(creds)
	if err != nil || len(creds) == 0 {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT 'user', id, (disabled_at IS NULL)::text FROM users WHERE id = ANY($1)
		UNION ALL
		SELECT 'api_key', id, user_id FROM api_keys WHERE id = ANY($2) AND revoked_at IS NULL
		UNION ALL
		SELECT 'session', id, user_id FROM sessions WHERE id = ANY($3)`, ids.Users, ids.APIKeys, ids.Sessions)
	if err != nil {
		return nil, fmt.Errorf("check credentials: %w", err)
	}
	defer rows.Close()
	live := record.NewLive()
	for rows.Next() {
		var kind, id, value string
		if err := rows.Scan(&kind, &id, &value); err != nil {
			return nil, fmt.Errorf("check credentials: %w", err)
		}
		switch kind {
		case "user":
			live.Users[id] = value == "true"
		case "api_key":
			live.APIKeys[id] = value
		default:
			live.Sessions[id] = value
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check credentials: %w", err)
	}
	return record.Revocations(creds, live), nil
}
