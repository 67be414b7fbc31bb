package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"datachat"
	"datachat/internal/record"
)

// ResolveConfirmation moves a pending confirmation to status, approved or
// declined (else EINVALID); ECONFLICT if it was already resolved, ENOTFOUND if
// it does not exist.
func (s *Store) ResolveConfirmation(ctx context.Context, id, status, note string) (*datachat.Confirmation, error) {
	if err := record.CheckResolution(status); err != nil {
		return nil, err
	}
	var c *datachat.Confirmation
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		c, err = decode.Confirmation(tx.QueryRowContext(ctx, `
			UPDATE confirmations SET status = ?, note = ?, resolved_at = ?
			WHERE id = ? AND status = 'pending'
			RETURNING `+record.ConfirmationColumns, status, note, ts(record.Now()), id))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var cur string
		err = tx.QueryRowContext(ctx, `SELECT status FROM confirmations WHERE id = ?`, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return datachat.Errorf(datachat.ENOTFOUND, "confirmation not found")
		}
		if err != nil {
			return err
		}
		return datachat.Errorf(datachat.ECONFLICT, "confirmation already %s", cur)
	})
	if err != nil {
		return nil, record.Wrap("resolve confirmation", err)
	}
	return c, nil
}
