package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"datachat"
	"datachat/internal/record"
)

// AppendAudit appends e to the audit log; see [datachat.Store].
func (s *Store) AppendAudit(ctx context.Context, e *datachat.AuditEvent) error {
	if err := record.FillAudit(e); err != nil {
		return err
	}
	if err := insertAudit(ctx, s.write, e); err != nil {
		return fmt.Errorf("append audit event: %w", err)
	}
	return nil
}

func insertAudit(ctx context.Context, q queryer, e *datachat.AuditEvent) error {
	_, err := q.ExecContext(ctx, `INSERT INTO audit_events (`+record.AuditColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, ts(e.Time), e.Kind, e.Outcome, e.UserID, e.UserName, e.Address, e.RequestID,
		e.ConversationID, e.Source, e.SQL, boolInt(e.SQLTruncated), e.RowCount, e.DurationMS, e.Error, e.Target, e.Detail)
	return err
}

// AuditEvents lists audit events, newest first; see [datachat.Store].
func (s *Store) AuditEvents(ctx context.Context, f datachat.AuditFilter) (*datachat.AuditPage, error) {
	q, err := record.CheckAuditFilter(f)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	for _, c := range []struct{ column, value string }{
		{"user_name", q.User}, {"source", q.Source}, {"kind", q.Kind}, {"outcome", q.Outcome},
	} {
		if c.value != "" {
			where = append(where, c.column+" = ?")
			args = append(args, c.value)
		}
	}
	if !q.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, ts(q.Since))
	}
	if !q.Until.IsZero() {
		where = append(where, "at < ?")
		args = append(args, ts(q.Until))
	}
	if q.After != nil {
		where = append(where, "(at, id) < (?, ?)")
		args = append(args, ts(q.After.Time), q.After.ID)
	}
	query := `SELECT ` + record.AuditColumns + ` FROM audit_events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY at DESC, id DESC LIMIT ?`
	args = append(args, q.Limit+1)
	list, err := queryAll(ctx, s.read, decode.AuditEvent, "list audit events", query, args...)
	if err != nil {
		return nil, err
	}
	return record.AuditPage(q, list), nil
}

// PruneAudit deletes the audit events older than before; see
// [datachat.Store]. The cutoff goes in audit_prune for the transaction, the
// one way past the trigger that refuses deletes.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	if err := record.CheckPrune(before, time.Now()); err != nil {
		return 0, err
	}
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
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
		return insertAudit(ctx, tx, record.PrunedEvent(n, before))
	})
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return n, nil
}
