package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// PruneAudit deletes the audit events older than before; see
// [datachat.Store]. The cutoff goes in audit_prune for the transaction, the
// one way past the trigger that refuses deletes.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	if err := record.CheckPrune(before, time.Now()); err != nil {
		return 0, err
	}
	var n int64
	err := s.writeTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_prune (before) VALUES (?)`, ts(before)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM audit_events WHERE at < ?`, ts(before))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM audit_prune`); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		return sqlstore.InsertAudit(ctx, sqlDB{q: tx}, dialect, record.PrunedEvent(n, before))
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
