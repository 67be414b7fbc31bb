package record

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"datachat"
)

// FillAudit checks an audit event (EINVALID for an unknown kind or outcome),
// cleans its text ([datachat.AuditEvent.Clean]) and gives it its id and
// time.
func FillAudit(e *datachat.AuditEvent) error {
	if err := e.Check(); err != nil {
		return err
	}
	e.Clean()
	FillCreated(&e.ID, &e.Time)
	return nil
}

// AuditColumns are the columns of audit_events, in the order
// [Decoder.AuditEvent] reads them and the stores insert them.
const AuditColumns = `id, at, kind, outcome, user_id, user_name, address, request_id,
	conversation_id, source, sql_text, sql_truncated, row_count, duration_ms, error, target, detail`

// AuditEvent decodes a row of [AuditColumns].
func (dc Decoder) AuditEvent(sc Scanner) (*datachat.AuditEvent, error) {
	var e datachat.AuditEvent
	err := sc.Scan(&e.ID, dc.Time(&e.Time), &e.Kind, &e.Outcome, &e.UserID, &e.UserName, &e.Address, &e.RequestID,
		&e.ConversationID, &e.Source, &e.SQL, &e.SQLTruncated, &e.RowCount, &e.DurationMS, &e.Error, &e.Target, &e.Detail)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// AuditQuery is an [datachat.AuditFilter] checked, as both stores run it:
// Limit within bounds, and After, the position its cursor continues from
// (nil: the newest event).
type AuditQuery struct {
	datachat.AuditFilter
	After *AuditCursor
}

// AuditCursor is a position in the audit log, newest first: the time and id
// of the last event of a page; the next page holds the events before it in
// (time, id) order.
type AuditCursor struct {
	Time time.Time
	ID   string
}

// String encodes c as the opaque cursor clients pass back.
func (c AuditCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Time.UnixMicro(), 10) + " " + c.ID))
}

// errCursor refuses a cursor no store made.
var errCursor = datachat.Errorf(datachat.EINVALID, "The cursor is not one this server gave: pass back next_cursor of the page before, unchanged, or leave it out for the newest events.")

// parseAuditCursor decodes a cursor made by [AuditCursor.String].
func parseAuditCursor(s string) (*AuditCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 200 {
		return nil, errCursor
	}
	us, id, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return nil, errCursor
	}
	return &AuditCursor{Time: time.UnixMicro(n).UTC(), ID: id}, nil
}

// CheckAuditFilter checks f (EINVALID for an unknown kind or outcome, a
// Since after Until, a cursor no store made), bounds its Limit, and gives
// its times and its user and source names the form the log keeps them in.
func CheckAuditFilter(f datachat.AuditFilter) (AuditQuery, error) {
	q := AuditQuery{AuditFilter: f}
	// Values are compared with what the log keeps: cleaned alike.
	clean := datachat.AuditEvent{UserName: f.User, Source: f.Source}
	clean.Clean()
	q.User, q.Source = clean.UserName, clean.Source
	if f.Kind != "" {
		if err := (&datachat.AuditEvent{Kind: f.Kind, Outcome: datachat.AuditOK}).Check(); err != nil {
			return q, datachat.Errorf(datachat.EINVALID, "Unknown audit event kind %q: want one of %s.", f.Kind, strings.Join(datachat.AuditKinds, ", "))
		}
	}
	switch f.Outcome {
	case "", datachat.AuditOK, datachat.AuditRefused, datachat.AuditFailed:
	default:
		return q, datachat.Errorf(datachat.EINVALID, "Unknown audit event outcome %q: want %s, %s or %s.", f.Outcome, datachat.AuditOK, datachat.AuditRefused, datachat.AuditFailed)
	}
	if !f.Since.IsZero() {
		q.Since = Time(f.Since)
	}
	if !f.Until.IsZero() {
		q.Until = Time(f.Until)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Since.After(q.Until) {
		return q, datachat.Errorf(datachat.EINVALID, "The time range is empty: since (%s) is after until (%s).", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	switch {
	case f.Limit < 0:
		return q, datachat.Errorf(datachat.EINVALID, "limit %d: want 1 to %d.", f.Limit, datachat.AuditPageMax)
	case f.Limit == 0:
		q.Limit = datachat.AuditPageDefault
	case f.Limit > datachat.AuditPageMax:
		q.Limit = datachat.AuditPageMax
	}
	if f.Cursor != "" {
		c, err := parseAuditCursor(f.Cursor)
		if err != nil {
			return q, err
		}
		q.After = c
	}
	return q, nil
}

// AuditPage makes the page of a query that read up to q.Limit+1 events:
// q.Limit of them, and a cursor when there were more.
func AuditPage(q AuditQuery, events []*datachat.AuditEvent) *datachat.AuditPage {
	p := &datachat.AuditPage{Events: NonNil(events)}
	if len(events) > q.Limit {
		p.Events = events[:q.Limit]
		last := p.Events[len(p.Events)-1]
		p.Next = AuditCursor{Time: last.Time, ID: last.ID}.String()
	}
	return p
}

// CheckPrune refuses (EINVALID) pruning up to a time later than now: the
// events still within any retention would go.
func CheckPrune(before, now time.Time) error {
	if before.After(now) {
		return datachat.Errorf(datachat.EINVALID, "prune the audit log before %s: that is later than now", before.Format(time.RFC3339))
	}
	return nil
}

// PrunedEvent is the record of a prune that deleted n events older than
// before.
func PrunedEvent(n int64, before time.Time) *datachat.AuditEvent {
	events := "events"
	if n == 1 {
		events = "event"
	}
	e := &datachat.AuditEvent{Kind: datachat.AuditPruned, Outcome: datachat.AuditOK,
		Detail: fmt.Sprintf("%d %s before %s deleted (DATACHAT_AUDIT_DAYS)", n, events, Time(before).Format(time.RFC3339))}
	FillAudit(e) // a known kind and outcome: it cannot fail
	return e
}
