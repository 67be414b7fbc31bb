package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/internal/record"
	"datachat/internal/sqlstore"
)

// PruneAudit deletes the audit events older than before; see
// [datachat.Store]. The cutoff is set for the transaction alone
// (set_config's is_local), the one way past the trigger that refuses
// deletes.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	if err := record.CheckPrune(before, time.Now()); err != nil {
		return 0, err
	}
	before = record.Time(before)
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('datachat.audit_prune_before', $1, true)`,
			before.Format(time.RFC3339Nano)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM audit_events WHERE at < $1`, before)
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n == 0 {
			return nil
		}
		return sqlstore.InsertAudit(ctx, pgDB{tx}, dialect, record.PrunedEvent(n, before))
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
