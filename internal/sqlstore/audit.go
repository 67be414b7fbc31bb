package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"datachat"
	"datachat/internal/record"
)

// AppendAudit appends e to the audit log; see [datachat.Store].
func (s *Store) AppendAudit(ctx context.Context, e *datachat.AuditEvent) error {
	if err := record.FillAudit(e); err != nil {
		return err
	}
	if err := InsertAudit(ctx, s.write, s.d, e); err != nil {
		return fmt.Errorf("append audit event: %w", err)
	}
	return nil
}

// InsertAudit inserts e, filled, into the audit log of db, a pool or a
// transaction of d's engine (an engine's PruneAudit logs the pruning with it).
func InsertAudit(ctx context.Context, db DB, d Dialect, e *datachat.AuditEvent) error {
	_, err := db.Exec(ctx, `INSERT INTO audit_events (`+record.AuditColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, d.Time(e.Time), e.Kind, e.Outcome, e.UserID, e.UserName, e.Address, e.RequestID,
		e.ConversationID, e.Source, e.SQL, d.Bool(e.SQLTruncated), e.RowCount, e.DurationMS, e.Error, e.Target, e.Detail)
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
		args = append(args, s.d.Time(q.Since))
	}
	if !q.Until.IsZero() {
		where = append(where, "at < ?")
		args = append(args, s.d.Time(q.Until))
	}
	if q.After != nil {
		where = append(where, "(at, id) < (?, ?)")
		args = append(args, s.d.Time(q.After.Time), q.After.ID)
	}
	query := `SELECT ` + record.AuditColumns + ` FROM audit_events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY at DESC, id DESC LIMIT ?`
	args = append(args, q.Limit+1)
	list, err := QueryAll(ctx, s.read, s.d.Decode.AuditEvent, "list audit events", query, args...)
	if err != nil {
		return nil, err
	}
	return record.AuditPage(q, list), nil
}
