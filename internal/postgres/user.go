package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
)

// EnsureUser returns the user with this name, creating it if needed.
func (s *Store) EnsureUser(ctx context.Context, name string) (*datachat.User, error) {
	if name == "" {
		return nil, datachat.Errorf(datachat.EINVALID, "user name is empty")
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

// Authenticate returns the user owning the unrevoked key with this hash and
// records its use (at most once a minute per key, to spare writes).
func (s *Store) Authenticate(ctx context.Context, hash string) (*datachat.User, error) {
	if hash == "" {
		return nil, datachat.Errorf(datachat.EUNAUTHORIZED, "invalid API key")
	}
	var (
		u        datachat.User
		keyID    string
		lastUsed *time.Time
	)
	err := s.pool.QueryRow(ctx, `
		SELECT u.id, u.name, u.created_at, k.id, k.last_used_at
		FROM api_keys k JOIN users u ON u.id = k.user_id
		WHERE k.hash = $1 AND k.revoked_at IS NULL`, hash).
		Scan(&u.ID, &u.Name, &u.CreatedAt, &keyID, &lastUsed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, datachat.Errorf(datachat.EUNAUTHORIZED, "invalid API key")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	t := record.Now()
	if record.RecordUse(lastUsed, t) {
		if _, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = $1 WHERE id = $2`, t, keyID); err != nil && !datachat.IsNoSpace(err) {
			// On a full disk the key still works, its use unrecorded.
			return nil, fmt.Errorf("authenticate: record use: %w", err)
		}
	}
	return &u, nil
}
