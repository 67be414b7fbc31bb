package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/record"
)

// AppendAudit appends e to the audit log; see [datachat.Store].
func (s *Store) AppendAudit(ctx context.Context, e *datachat.AuditEvent) error {
	if err := record.FillAudit(e); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, insertAuditSQL, auditArgs(e)...); err != nil {
		return fmt.Errorf("append audit event: %w", err)
	}
	return nil
}

const insertAuditSQL = `INSERT INTO audit_events (` + record.AuditColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`

func auditArgs(e *datachat.AuditEvent) []any {
	return []any{e.ID, e.Time, e.Kind, e.Outcome, e.UserID, e.UserName, e.Address, e.RequestID,
		e.ConversationID, e.Source, e.SQL, e.SQLTruncated, e.RowCount, e.DurationMS, e.Error, e.Target, e.Detail}
}

// AuditEvents lists audit events, newest first; see [datachat.Store].
func (s *Store) AuditEvents(ctx context.Context, f datachat.AuditFilter) (*datachat.AuditPage, error) {
	q, err := record.CheckAuditFilter(f)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, c := range []struct{ column, value string }{
		{"user_name", q.User}, {"source", q.Source}, {"kind", q.Kind}, {"outcome", q.Outcome},
	} {
		if c.value != "" {
			where = append(where, c.column+" = "+arg(c.value))
		}
	}
	if !q.Since.IsZero() {
		where = append(where, "at >= "+arg(q.Since))
	}
	if !q.Until.IsZero() {
		where = append(where, "at < "+arg(q.Until))
	}
	if q.After != nil {
		where = append(where, "(at, id) < ("+arg(q.After.Time)+", "+arg(q.After.ID)+")")
	}
	query := `SELECT ` + record.AuditColumns + ` FROM audit_events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY at DESC, id DESC LIMIT ` + arg(q.Limit+1)
	list, err := queryAll(ctx, s.pool, decode.AuditEvent, "list audit events", query, args...)
	if err != nil {
		return nil, err
	}
	return record.AuditPage(q, list), nil
}

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
		_, err = tx.Exec(ctx, insertAuditSQL, auditArgs(record.PrunedEvent(n, before))...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
