package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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
	u, err := s.userByName(ctx, s.read, name)
	if err == nil || datachat.ErrorCode(err) != datachat.ENOTFOUND {
		return u, err
	}
	err = s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO users (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			record.NewID(), name, ts(record.Now()))
		if err != nil {
			return err
		}
		u, err = s.userByName(ctx, tx, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure user %q: %w", name, err)
	}
	return u, nil
}

func (s *Store) userByName(ctx context.Context, q queryer, name string) (*datachat.User, error) {
	var u datachat.User
	err := q.QueryRowContext(ctx, `SELECT id, name, created_at FROM users WHERE name = ?`, name).
		Scan(&u.ID, &u.Name, scanTime{&u.CreatedAt})
	if err != nil {
		return nil, notFoundIfNoRows(err, "get user", "user not found")
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
	var lists [3]string
	for i, l := range [][]string{ids.Users, ids.APIKeys, ids.Sessions} {
		b, err := json.Marshal(l)
		if err != nil {
			return nil, fmt.Errorf("check credentials: %w", err)
		}
		lists[i] = string(b)
	}
	// One statement text whatever the count, so it stays prepared.
	rows, err := s.read.QueryContext(ctx, `
		SELECT 'user', id, disabled_at IS NULL FROM users
		WHERE id IN (SELECT value FROM json_each(?))
		UNION ALL
		SELECT 'api_key', id, user_id FROM api_keys
		WHERE id IN (SELECT value FROM json_each(?)) AND revoked_at IS NULL
		UNION ALL
		SELECT 'session', id, user_id FROM sessions
		WHERE id IN (SELECT value FROM json_each(?))`, lists[0], lists[1], lists[2])
	if err != nil {
		return nil, fmt.Errorf("check credentials: %w", err)
	}
	defer rows.Close()
	live, err := record.ReadLive(rows, "1")
	if err != nil {
		return nil, fmt.Errorf("check credentials: %w", err)
	}
	return record.Revocations(creds, live), nil
}
