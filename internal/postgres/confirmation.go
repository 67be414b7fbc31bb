package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// ResolveConfirmation moves a pending confirmation to status, approved or
// declined (else EINVALID); ECONFLICT if it was already resolved, ENOTFOUND if
// it does not exist. Of concurrent calls exactly one succeeds: the UPDATE
// re-checks status = 'pending' once the row lock is released.
func (s *Store) ResolveConfirmation(ctx context.Context, id, status, note string) (*datachat.Confirmation, error) {
	if err := record.CheckResolution(status); err != nil {
		return nil, err
	}
	c, err := decode.Confirmation(s.pool.QueryRow(ctx, `
		UPDATE confirmations SET status = $1, note = $2, resolved_at = $3
		WHERE id = $4 AND status = 'pending'
		RETURNING `+record.ConfirmationColumns, status, note, record.Now(), id))
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("resolve confirmation: %w", err)
	}
	var cur string
	err = s.pool.QueryRow(ctx, `SELECT status FROM confirmations WHERE id = $1`, id).Scan(&cur)
	if err != nil {
		return nil, sqlstore.NotFoundIfNoRows(err, "resolve confirmation", "confirmation not found")
	}
	return nil, datachat.Errorf(datachat.ECONFLICT, "confirmation already %s", cur)
}
