package postgres

import (
	"context"
	"fmt"

	"datachat"
	"datachat/internal/record"
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
	live, err := record.ReadLive(rows, "true")
	if err != nil {
		return nil, fmt.Errorf("check credentials: %w", err)
	}
	return record.Revocations(creds, live), nil
}
