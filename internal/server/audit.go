package server

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"datachat"
)

// withAuditOrigin puts in the request's context where it comes from — the
// address of the connection's peer (a reverse proxy in front of datachat
// shows as itself: X-Forwarded-For is not trusted) and the request id — for
// the audit records of what it does (datachat.WithAuditOrigin). It goes
// inside withRequestID.
func (s *Server) withAuditOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(datachat.WithAuditOrigin(r.Context(), remoteAddress(r), RequestID(r.Context()))))
	})
}

// errNotAdmin is a member's answer on an admin route.
var errNotAdmin = datachat.Errorf(datachat.EFORBIDDEN, "Only an administrator may do this.")

// admin lets only administrators (datachat.RoleAdmin) through to h; anyone
// else signed in is refused with 403. The role is read as the request is
// served: a user demoted a moment ago is refused. It goes inside auth.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, err := s.account(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		if a.Role != datachat.RoleAdmin {
			s.error(w, r, errNotAdmin)
			return
		}
		h(w, r)
	}
}

// auditWait bounds how long an audit record may take to write; it is
// written even when the request's context ended.
const auditWait = 10 * time.Second

// record appends e to the audit log: the request's user is its actor unless
// e names one, and its address and request id are the request's. When the
// record cannot be written: with undo, what e records is undone and the
// error to answer says so (fail closed: a change no record accounts for
// must not stand); without it (a refusal, or a change that takes access
// away, which must stand) the event is logged and nil returned.
func (s *Server) record(r *http.Request, e *datachat.AuditEvent, undo func(context.Context) error) error {
	ctx := r.Context()
	e.Address, e.RequestID = datachat.AuditOrigin(ctx)
	if u := UserFrom(ctx); u != nil && e.UserID == "" && e.UserName == "" {
		e.UserID, e.UserName = u.ID, u.Name
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWait)
	defer cancel()
	err := s.Store.AppendAudit(actx, e)
	if err == nil {
		return nil
	}
	log := s.logger(r).With(slog.String("kind", e.Kind), slog.String("outcome", e.Outcome), slog.String("user", e.UserName),
		slog.String("target", e.Target), slog.String("detail", e.Detail), slog.String("error", err.Error()))
	if undo == nil {
		log.Error("audit log: an event could not be recorded")
		return nil
	}
	if uerr := undo(actx); uerr != nil {
		log.Error("audit log: an event could not be recorded, and undoing it failed", slog.String("undo_error", uerr.Error()))
		return datachat.WrapError(datachat.EBUSY, "This was done, but the audit log could not record it, and undoing it failed. Tell the server's administrator.", err)
	}
	log.Error("audit log: an event could not be recorded; it was undone")
	return datachat.WrapError(datachat.EBUSY, "This was not done: every such change is recorded in the audit log, and its record could not be written. Try again in a few seconds; if it goes on, tell the server's administrator.", err)
}

// auditParams are the query parameters of GET /api/admin/audit.
var auditParams = []string{"user", "source", "kind", "outcome", "since", "until", "cursor", "limit"}

// listAudit is GET /api/admin/audit: one page of the audit log, newest
// first, filtered by ?user=NAME (who acted), source, kind, outcome, since
// and until (an RFC 3339 time, a date, or how long ago: 36h, 7d), limit
// (default 100, at most 1000) and cursor (next_cursor of the page before):
// {"events": [...], "next_cursor"?}.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	f, err := auditFilter(r, time.Now())
	if err != nil {
		s.error(w, r, err)
		return
	}
	page, err := s.Store.AuditEvents(r.Context(), f)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// auditFilter reads GET /api/admin/audit's query: EINVALID for a parameter
// it does not take, one given twice, or a value it cannot read.
func auditFilter(r *http.Request, now time.Time) (datachat.AuditFilter, error) {
	var f datachat.AuditFilter
	q := r.URL.Query()
	for k, vs := range q {
		if !slices.Contains(auditParams, k) {
			return f, datachat.Errorf(datachat.EINVALID, "Unknown parameter %q: the audit log is filtered by %s.", datachat.AuditLine(k, 40), strings.Join(auditParams, ", "))
		}
		if len(vs) > 1 {
			return f, datachat.Errorf(datachat.EINVALID, "Parameter %s is given %d times: give it once.", k, len(vs))
		}
	}
	f.User, f.Source, f.Kind, f.Outcome, f.Cursor = q.Get("user"), q.Get("source"), q.Get("kind"), q.Get("outcome"), q.Get("cursor")
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(b.name); v != "" {
			t, err := datachat.ParseAuditTime(v, now)
			if err != nil {
				return f, datachat.Errorf(datachat.EINVALID, "%s: %s", b.name, datachat.ErrorMessage(err))
			}
			*b.t = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, datachat.Errorf(datachat.EINVALID, "limit %q: want a number of events from 1 to %d.", datachat.AuditLine(v, 40), datachat.AuditPageMax)
		}
		f.Limit = n
	}
	return f, nil
}
