package datachat

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Kinds of [AuditEvent]: the security-relevant events the audit log keeps,
// one record each. A new kind is a constant here and an entry in
// [AuditKinds]; the stores keep any kind that list names.
const (
	AuditSignIn        = "sign_in"        // a sign-in: ok, or refused (Detail says why)
	AuditKeyCreated    = "key.created"    // Target: the key's id
	AuditKeyRevoked    = "key.revoked"    // Target: the key's id
	AuditUserInvited   = "user.invited"   // Target: the user's name
	AuditUserDisabled  = "user.disabled"  // Target: the user's name
	AuditUserReset     = "user.reset"     // Target: the user's name (a new invite)
	AuditUserRemoved   = "user.removed"   // Target: the user's name
	AuditUserChanged   = "user.changed"   // enabled again, role or token budget changed (Detail: what changed)
	AuditSourceAdded   = "source.added"   // Source and Target: the source's name
	AuditSourceChanged = "source.changed" // its URL or tables changed
	AuditSourceGranted = "source.granted" // whom it is granted to changed (Detail: from and to)
	AuditSourceRemoved = "source.removed"
	AuditSourceQuery   = "source.query"  // one statement on a database source
	AuditShareCreated  = "share.created" // Target: the share's id
	AuditShareRevoked  = "share.revoked"
	AuditPruned        = "audit.pruned" // events older than the retention deleted (Detail: how many)
)

// AuditKinds are the kinds the audit log keeps, in the order they are listed
// to people.
var AuditKinds = []string{
	AuditSignIn,
	AuditKeyCreated, AuditKeyRevoked,
	AuditUserInvited, AuditUserDisabled, AuditUserReset, AuditUserRemoved, AuditUserChanged,
	AuditSourceAdded, AuditSourceChanged, AuditSourceGranted, AuditSourceRemoved, AuditSourceQuery,
	AuditShareCreated, AuditShareRevoked,
	AuditPruned,
}

// Outcomes of an [AuditEvent].
const (
	AuditOK      = "ok"
	AuditRefused = "refused" // a rule said no: the sandbox, a grant, a password
	AuditFailed  = "failed"  // it could not be done: an error, a source that does not answer
)

// Bounds of what an [AuditEvent] keeps. SQL text is kept whole up to
// AuditSQLMax bytes (longer text is cut at a character boundary and
// SQLTruncated set); every other text field up to AuditTextMax.
const (
	AuditSQLMax  = 64 << 10
	AuditTextMax = 4 << 10
)

// A page of [AuditStore.AuditEvents] holds AuditPageDefault events unless the
// filter asks for another Limit, and never more than AuditPageMax.
const (
	AuditPageDefault = 100
	AuditPageMax     = 1000
)

// AuditEvent is one record of the audit log: who did what, when, from where
// and how it ended. The log is append-only: a record is never changed, and
// leaves the log only when it is older than the retention
// (DATACHAT_AUDIT_DAYS, [AuditStore.PruneAudit]).
//
// The actor is UserID and UserName (the name as it was then; both empty for
// the command line and for serve's own start-up, whose Detail says so) and
// Address, the remote IP address of the request when there was one. A query
// on a database source (AuditSourceQuery) fills ConversationID, Source, SQL,
// RowCount (rows returned; nil when it failed), DurationMS and Error; other
// kinds name what they acted on in Target (a key's id, a user's name, a
// source's name — also in Source, so that the source filter finds them —, a
// share's id) with a short Detail.
type AuditEvent struct {
	ID       string    `json:"id"`
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Outcome  string    `json:"outcome"`
	UserID   string    `json:"user_id,omitempty"`
	UserName string    `json:"user,omitempty"`
	Address  string    `json:"address,omitempty"`
	// RequestID is the X-Request-ID of the HTTP request the event came
	// from: the server's log says more under it.
	RequestID string `json:"request_id,omitempty"`

	ConversationID string  `json:"conversation_id,omitempty"`
	Source         string  `json:"source,omitempty"`
	SQL            string  `json:"sql,omitempty"`
	SQLTruncated   bool    `json:"sql_truncated,omitempty"`
	RowCount       *int64  `json:"row_count,omitempty"`
	DurationMS     float64 `json:"duration_ms,omitempty"`
	Error          string  `json:"error,omitempty"`

	Target string `json:"target,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// AuditFilter chooses the events [AuditStore.AuditEvents] lists. Empty fields do
// not filter; the others must all match, exactly.
type AuditFilter struct {
	User    string // the actor's name
	Source  string
	Kind    string // one of AuditKinds
	Outcome string
	Since   time.Time // events at or after; zero: from the first
	Until   time.Time // events before; zero: up to now
	// Cursor continues a listing: the Next of the page before. It is
	// opaque; one not made by a store is EINVALID.
	Cursor string
	Limit  int // 0: AuditPageDefault; at most AuditPageMax
}

// AuditPage is one page of audit events, newest first. Next, when not
// empty, is the Cursor of the page after (older events).
type AuditPage struct {
	Events []*AuditEvent `json:"events"`
	Next   string        `json:"next_cursor,omitempty"`
}

// Check refuses (EINVALID) an event the log cannot keep: an unknown kind or
// outcome.
func (e *AuditEvent) Check() error {
	if !slices.Contains(AuditKinds, e.Kind) {
		return Errorf(EINVALID, "unknown audit event kind %q", e.Kind)
	}
	switch e.Outcome {
	case AuditOK, AuditRefused, AuditFailed:
		return nil
	}
	return Errorf(EINVALID, "unknown audit event outcome %q: want %s, %s or %s", e.Outcome, AuditOK, AuditRefused, AuditFailed)
}

// Clean gives e's text the form the log keeps, the same in every store:
// valid UTF-8 with NUL and each byte that is not UTF-8 replaced by U+FFFD
// (PostgreSQL's text holds neither); SQL cut to AuditSQLMax bytes, marking
// SQLTruncated; every other field cut to AuditTextMax. Other control
// characters are kept: whoever prints a record one line at a time escapes
// them ([AuditLine]).
func (e *AuditEvent) Clean() {
	var cut bool
	e.SQL, cut = auditText(e.SQL, AuditSQLMax)
	e.SQLTruncated = e.SQLTruncated || cut
	for _, p := range []*string{&e.UserID, &e.UserName, &e.Address, &e.RequestID, &e.ConversationID,
		&e.Source, &e.Error, &e.Target, &e.Detail} {
		*p, _ = auditText(*p, AuditTextMax)
	}
}

// auditText returns s as valid UTF-8 without NUL, at most max bytes, cut at
// a character boundary, and whether it was cut.
func auditText(s string, max int) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= max {
		return s, false
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// AuditLine returns s on one line, as a terminal shows it safely: each run of
// white space (Unicode's, line separators included) is one space, and every
// other control character (an escape
// sequence that would drive the terminal, a carriage return that would
// overwrite the line) is written as \uXXXX. At most max characters are kept
// (0: all), the last one an ellipsis when s was longer.
func AuditLine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		if unsafeInLine(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if max > 0 && utf8.RuneCountInString(out) > max {
		r := []rune(out)
		return string(r[:max-1]) + "…"
	}
	return out
}

// unsafeInLine reports whether r would change how a terminal shows the
// rest of a line: a control character (C0, DEL, C1 such as CSI) or a
// bidirectional mark or override that reorders the text after it.
func unsafeInLine(r rune) bool {
	return unicode.IsControl(r) || (r >= 0x200e && r <= 0x200f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// ParseAuditTime reads a bound of an audit listing (--since, --until,
// ?since=): an RFC 3339 time (2025-03-04T05:06:07Z), a date (2025-03-04,
// midnight UTC), or a duration back from now — a Go duration (90m, 36h) or
// a number of days (7d).
func ParseAuditTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 100*366 {
			return now.AddDate(0, 0, -n), nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, Errorf(EINVALID, "%q is not a time: want an RFC 3339 time (2025-03-04T05:06:07Z), a date (2025-03-04), or how long ago (36h, 7d)", s)
}

// auditOrigin is where the request an event comes from was made.
type auditOrigin struct{ address, requestID string }

type auditOriginKey struct{}

// WithAuditOrigin returns ctx carrying the remote address and request id of
// the HTTP request it serves, which the audit records of what the request
// does (a query on a database source) keep.
func WithAuditOrigin(ctx context.Context, address, requestID string) context.Context {
	return context.WithValue(ctx, auditOriginKey{}, auditOrigin{address, requestID})
}

// AuditOrigin returns what [WithAuditOrigin] set, or empty strings.
func AuditOrigin(ctx context.Context) (address, requestID string) {
	o, _ := ctx.Value(auditOriginKey{}).(auditOrigin)
	return o.address, o.requestID
}
