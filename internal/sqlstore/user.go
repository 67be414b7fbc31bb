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

// CreateAPIKey stores k; ENOTFOUND if its user does not exist, ECONFLICT if a
// key with the same hash does.
func (s *Store) CreateAPIKey(ctx context.Context, k *datachat.APIKey) error {
	if err := record.FillAPIKey(k); err != nil {
		return err
	}
	_, err := s.write.Exec(ctx, `
		INSERT INTO api_keys (id, user_id, prefix, hash, created_at, last_used_at, revoked_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.UserID, k.Prefix, k.Hash, s.d.Time(k.CreatedAt), s.d.NullTime(k.LastUsedAt), s.d.NullTime(k.RevokedAt))
	return s.writeError(err, "create API key", "user not found", "API key already exists")
}

// APIKeys lists every key, revoked ones included, oldest first.
func (s *Store) APIKeys(ctx context.Context) ([]*datachat.APIKey, error) {
	return QueryAll(ctx, s.read, s.d.Decode.APIKey, "list API keys", `
		SELECT k.id, k.user_id, u.name, k.prefix, k.hash, k.created_at, k.last_used_at, k.revoked_at
		FROM api_keys k JOIN users u ON u.id = k.user_id
		ORDER BY k.created_at, k.`+s.d.RowSeq)
}

// CountAPIKeys counts keys that are not revoked.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.read.QueryRow(ctx, `SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count API keys: %w", err)
	}
	return n, nil
}

// RevokeAPIKey revokes a key; revoking a revoked key changes nothing.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) error {
	n, err := s.write.Exec(ctx,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, s.d.Time(record.Now()), id)
	return mustAffect(n, err, "revoke API key", "API key not found")
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
	err := s.read.QueryRow(ctx, `
		SELECT u.id, u.name, u.created_at, k.id, k.last_used_at, u.disabled_at IS NOT NULL
		FROM api_keys k JOIN users u ON u.id = k.user_id
		WHERE k.hash = ? AND k.revoked_at IS NULL`, hash).
		Scan(&u.ID, &u.Name, s.d.Decode.Time(&u.CreatedAt), &keyID, s.d.Decode.NullTime(&lastUsed), &disabled)
	if errors.Is(err, sql.ErrNoRows) {
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
		err := s.touch(ctx, func(db DB) error {
			if err := Seen(ctx, db, s.d, u.ID, t); err != nil {
				return err
			}
			_, err := db.Exec(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, s.d.Time(t), keyID)
			return err
		})
		if err != nil && !datachat.IsNoSpace(err) {
			// On a full disk the key still works, its use unrecorded: the
			// user must be able to delete what fills it.
			return nil, datachat.Credential{}, fmt.Errorf("authenticate: record use: %w", err)
		}
	}
	return &u, datachat.Credential{Kind: datachat.CredentialAPIKey, ID: keyID, UserID: u.ID}, nil
}
