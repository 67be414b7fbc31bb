package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"datachat"
)

// The admin API, under /api/admin/: users (invite, reset, disable, enable,
// role, token budget, remove), every API key (keys.go), database sources'
// grants (grants.go), usage per user and day, and the audit log (audit.go). Every route is
// wrapped in admin, which refuses members with 403. Each change is recorded
// in the audit log with the admin as its actor.

// userByName returns the account of the user named in the route.
func (s *Server) userByName(r *http.Request) (*datachat.Account, error) {
	name := r.PathValue("name")
	err := datachat.CheckUserName(name)
	var a *datachat.Account
	if err == nil {
		a, err = s.Store.AccountByName(r.Context(), name)
	} else {
		err = datachat.Errorf(datachat.ENOTFOUND, "no user may have this name")
	}
	if datachat.ErrorCode(err) == datachat.ENOTFOUND {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "No user named %q.", datachat.AuditLine(name, 100))
	}
	return a, err
}

// listUsers is GET /api/admin/users.
func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.Accounts(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, "users", list)
}

// newInvite makes a new invite for the user — replacing their unused ones —
// and returns its URL, whose fragment holds the token (a fragment never
// reaches a server's log), and when it expires.
func (s *Server) newInvite(r *http.Request, userID string) (string, time.Time, error) {
	token := randomToken()
	inv := &datachat.Invite{UserID: userID, Hash: datachat.HashAPIKey(token), ExpiresAt: time.Now().Add(datachat.InviteTTL)}
	if err := s.Store.CreateInvite(r.Context(), inv); err != nil {
		return "", time.Time{}, err
	}
	return s.publicOrigin(r) + "/#invite=" + token, inv.ExpiresAt, nil
}

// voidInvites makes the user's unused invites unusable: it replaces them
// with one whose token nobody has.
func (s *Server) voidInvites(ctx context.Context, userID string) error {
	return s.Store.CreateInvite(ctx, &datachat.Invite{UserID: userID, Hash: datachat.HashAPIKey(randomToken()), ExpiresAt: time.Now().Add(time.Minute)})
}

// newUserRequest is POST /api/admin/users's body.
type newUserRequest struct {
	Name string        `json:"name"`
	Role datachat.Role `json:"role"`
}

// createUser is POST /api/admin/users: a new user, and the invite URL where
// they set their password (shown to the admin once).
func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	var req newUserRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if req.Role == "" {
		req.Role = datachat.RoleMember
	}
	if !req.Role.Valid() {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "Unknown role %q: want %s or %s.", datachat.AuditLine(string(req.Role), 40), datachat.RoleAdmin, datachat.RoleMember))
		return
	}
	if err := datachat.CheckUserName(req.Name); err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	a := &datachat.Account{User: datachat.User{Name: req.Name}, Role: req.Role}
	if err := s.Store.CreateAccount(ctx, a); err != nil {
		if datachat.ErrorCode(err) == datachat.ECONFLICT {
			err = datachat.WrapError(datachat.ECONFLICT, fmt.Sprintf("A user named %q exists already.", req.Name), err)
		}
		s.error(w, r, err)
		return
	}
	link, expires, err := s.newInvite(r, a.ID)
	if err == nil {
		err = s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserInvited, Outcome: datachat.AuditOK, Target: a.Name,
			Detail: fmt.Sprintf("role %s; the invite expires %s", a.Role, expires.UTC().Format(time.RFC3339))},
			func(ctx context.Context) error { return s.Store.DeleteUser(ctx, a.ID) })
	} else if derr := s.Store.DeleteUser(context.WithoutCancel(ctx), a.ID); derr != nil {
		s.logger(r).Error("a user whose invite could not be made could not be removed either", slog.String("user", a.Name), slog.String("error", derr.Error()))
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"user": a, "invite_url": link, "expires_at": expires})
}

// resetUser is POST /api/admin/users/{name}/reset: a new invite, with which
// the user sets a new password (their earlier invites stop working; their
// password and sessions hold until the new one is used).
func (s *Server) resetUser(w http.ResponseWriter, r *http.Request) {
	a, err := s.userByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	link, expires, err := s.newInvite(r, a.ID)
	if err == nil {
		err = s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserReset, Outcome: datachat.AuditOK, Target: a.Name,
			Detail: "a new invite, expires " + expires.UTC().Format(time.RFC3339)},
			func(ctx context.Context) error { return s.voidInvites(ctx, a.ID) })
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"invite_url": link, "expires_at": expires})
}

// errSelf refuses an admin's change to their own account that would lock
// them out.
func errSelf(what string) error {
	return datachat.Errorf(datachat.ECONFLICT, "You cannot %s your own account: ask another administrator to.", what)
}

// isSelf reports whether a is the request's own user.
func isSelf(r *http.Request, a *datachat.Account) bool {
	u := UserFrom(r.Context())
	return u != nil && u.ID == a.ID
}

// disableUser is POST /api/admin/users/{name}/disable: the user's sessions
// are deleted and their keys stop working; their requests and WebSockets in
// this process end at once, in others within the check interval.
func (s *Server) disableUser(w http.ResponseWriter, r *http.Request) {
	a, err := s.userByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if isSelf(r, a) {
		s.error(w, r, errSelf("disable"))
		return
	}
	if a.DisabledAt != nil {
		s.writeUser(w, r, a.ID)
		return
	}
	ctx := r.Context()
	if err := s.Store.DisableUser(ctx, a.ID, time.Now()); err != nil {
		s.error(w, r, err)
		return
	}
	s.RevokeUser(a.ID, datachat.ErrUserDisabled)
	s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserDisabled, Outcome: datachat.AuditOK, Target: a.Name,
		Detail: "sessions ended, keys stopped"}, nil)
	s.writeUser(w, r, a.ID)
}

// enableUser is POST /api/admin/users/{name}/enable: the user's keys work
// again; they sign in anew.
func (s *Server) enableUser(w http.ResponseWriter, r *http.Request) {
	a, err := s.userByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	if a.DisabledAt != nil {
		if err := s.Store.EnableUser(ctx, a.ID); err != nil {
			s.error(w, r, err)
			return
		}
		disabledAt := *a.DisabledAt
		err := s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserChanged, Outcome: datachat.AuditOK, Target: a.Name,
			Detail: "enabled; disabled since " + disabledAt.UTC().Format(time.RFC3339)},
			func(ctx context.Context) error { return s.Store.DisableUser(ctx, a.ID, disabledAt) })
		if err != nil {
			s.error(w, r, err)
			return
		}
	}
	s.writeUser(w, r, a.ID)
}

// writeUser answers {"user": ACCOUNT} with the user as stored now.
func (s *Server) writeUser(w http.ResponseWriter, r *http.Request, userID string) {
	a, err := s.Store.Account(r.Context(), userID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": a})
}

// patchUserRequest is PATCH /api/admin/users/{name}'s body: each field
// given is changed. TokensPerDay is raw to tell null (the server's budget)
// from absent.
type patchUserRequest struct {
	Role         *datachat.Role  `json:"role"`
	TokensPerDay json.RawMessage `json:"tokens_per_day"`
}

// patchUser is PATCH /api/admin/users/{name}: the user's role and own token
// budget (a number of tokens a day, 0 for none, null for the server's
// DATACHAT_TOKENS_PER_DAY). A role takes effect with the user's next
// request.
func (s *Server) patchUser(w http.ResponseWriter, r *http.Request) {
	var req patchUserRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	var tokens *int64
	if req.TokensPerDay != nil && string(req.TokensPerDay) != "null" {
		n, err := strconv.ParseInt(string(req.TokensPerDay), 10, 64)
		if err != nil || n < 0 {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "tokens_per_day %s: want a whole number of tokens a day (0 for no limit), or null for the server's budget.", datachat.AuditLine(string(req.TokensPerDay), 40)))
			return
		}
		tokens = &n
	}
	if req.Role == nil && req.TokensPerDay == nil {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Nothing to change: give "role" and/or "tokens_per_day".`))
		return
	}
	if req.Role != nil && !req.Role.Valid() {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "Unknown role %q: want %s or %s.", datachat.AuditLine(string(*req.Role), 40), datachat.RoleAdmin, datachat.RoleMember))
		return
	}
	a, err := s.userByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	var changes []string
	var undo []func(context.Context) error
	if req.Role != nil && *req.Role != a.Role {
		if err := s.Store.SetRole(ctx, a.ID, *req.Role); err != nil {
			s.error(w, r, err)
			return
		}
		old := a.Role
		changes = append(changes, fmt.Sprintf("role %s → %s", old, *req.Role))
		undo = append(undo, func(ctx context.Context) error { return s.Store.SetRole(ctx, a.ID, old) })
	}
	if req.TokensPerDay != nil && budgetText(a.TokensPerDay) != budgetText(tokens) {
		if err := s.Store.SetTokensPerDay(ctx, a.ID, tokens); err != nil {
			s.undo(r, undo)
			s.error(w, r, err)
			return
		}
		old := a.TokensPerDay
		changes = append(changes, fmt.Sprintf("token budget %s → %s", budgetText(old), budgetText(tokens)))
		undo = append(undo, func(ctx context.Context) error { return s.Store.SetTokensPerDay(ctx, a.ID, old) })
	}
	if len(changes) > 0 {
		err := s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserChanged, Outcome: datachat.AuditOK, Target: a.Name,
			Detail: strings.Join(changes, "; ")},
			func(ctx context.Context) error { return s.undoAll(ctx, undo) })
		if err != nil {
			s.error(w, r, err)
			return
		}
	}
	s.writeUser(w, r, a.ID)
}

// budgetText says a token budget for the audit log.
func budgetText(n *int64) string {
	switch {
	case n == nil:
		return "the server's"
	case *n == 0:
		return "none"
	}
	return fmt.Sprintf("%d a day", *n)
}

// undoAll runs undo functions, the last first, and returns the first error.
func (s *Server) undoAll(ctx context.Context, undo []func(context.Context) error) error {
	var first error
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// undo undoes the changes of a request that failed half way, logging what
// it cannot.
func (s *Server) undo(r *http.Request, undo []func(context.Context) error) {
	if err := s.undoAll(context.WithoutCancel(r.Context()), undo); err != nil {
		s.logger(r).Error("a change that failed half way could not be undone", slog.String("error", err.Error()))
	}
}

// removeUser is DELETE /api/admin/users/{name}: the user and everything
// they own are deleted (the audit log keeps its records); their requests
// and WebSockets end.
func (s *Server) removeUser(w http.ResponseWriter, r *http.Request) {
	a, err := s.userByName(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if isSelf(r, a) {
		s.error(w, r, errSelf("remove"))
		return
	}
	if err := s.deleteUser(r.Context(), a.ID); err != nil {
		s.error(w, r, err)
		return
	}
	s.RevokeUser(a.ID, datachat.ErrUserDisabled)
	s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserRemoved, Outcome: datachat.AuditOK, Target: a.Name,
		Detail: "removed with their conversations, keys and sessions"}, nil)
	s.ungrant(r, a.Name)
	w.WriteHeader(http.StatusNoContent)
}

// ungrant takes a removed user's name out of the sources granted to it by
// name, so that a later user of the same name does not inherit the grants;
// each change is recorded. A source from DATACHAT_SOURCES is left to its
// file (serve would put the name back), and logged.
func (s *Server) ungrant(r *http.Request, name string) {
	ctx := context.WithoutCancel(r.Context())
	list, err := s.Store.DBSources(ctx)
	if err != nil {
		s.logger(r).Error("a removed user's name could not be taken out of the sources' grants", slog.String("user", name), slog.String("error", err.Error()))
		return
	}
	for _, old := range list {
		if !slices.Contains(old.Users, name) {
			continue
		}
		if old.Origin == datachat.OriginConfig {
			s.logger(r).Warn("a removed user is still named in the grant of a source from DATACHAT_SOURCES: take the name out of the file",
				slog.String("user", name), slog.String("source", old.Name))
			continue
		}
		def := *old
		def.Users = slices.DeleteFunc(slices.Clone(old.Users), func(u string) bool { return u == name })
		if err := s.Store.UpdateDBSource(ctx, &def); err != nil {
			s.logger(r).Error("a removed user's name could not be taken out of a source's grant", slog.String("user", name),
				slog.String("source", old.Name), slog.String("error", err.Error()))
			continue
		}
		s.record(r, &datachat.AuditEvent{Kind: datachat.AuditSourceGranted, Outcome: datachat.AuditOK, Source: old.Name, Target: old.Name,
			Detail: grantText(old) + " → " + grantText(&def) + ", as user " + name + " was removed"}, nil)
	}
}

// deleteUser removes a user with everything they own: their datasets'
// files and index entries too, through the workspace when there is one.
func (s *Server) deleteUser(ctx context.Context, userID string) error {
	if s.Workspace != nil {
		return s.Workspace.DeleteUser(ctx, userID)
	}
	return s.Store.DeleteUser(ctx, userID)
}

// maxUsageDays bounds GET /api/admin/usage's days.
const maxUsageDays = 366

// listUsage is GET /api/admin/usage?days=N: tokens used per user and UTC
// day over the last N days, today included (default 30), newest day first.
func (s *Server) listUsage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k, vs := range q {
		if k != "days" {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "Unknown parameter %q: usage takes days.", datachat.AuditLine(k, 40)))
			return
		}
		if len(vs) > 1 {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "Parameter days is given %d times: give it once.", len(vs)))
			return
		}
	}
	days := 30
	if v := q.Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxUsageDays {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "days %q: want a number of days from 1 to %d.", datachat.AuditLine(v, 40), maxUsageDays))
			return
		}
		days = n
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	list, err := s.Store.UsageByDay(r.Context(), today.AddDate(0, 0, 1-days))
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, "usage", list)
}
