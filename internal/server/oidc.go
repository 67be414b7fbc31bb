package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"datachat"
	"datachat/internal/sso"
)

// ssoLoginPath is where the page's single sign-on button leads.
const ssoLoginPath = sso.LoginPath

// EnableSSO turns single sign-on on (DATACHAT_OIDC_ISSUER): it mounts
// internal/sso's login and callback at sso.LoginPath and sso.CallbackPath,
// with the server's own OnIdentity (signInIdentity), and GET
// /api/auth/methods offers it. c is sso's configuration but for OnIdentity,
// which this sets; a nil c.Logger is the server's. Call it before Serve,
// once.
func (s *Server) EnableSSO(c sso.Config) error {
	if s.sso != nil {
		return errors.New("single sign-on is on already")
	}
	c.OnIdentity = s.signInIdentity
	if c.Logger == nil {
		c.Logger = s.Logger
	}
	h, err := sso.New(c)
	if err != nil {
		return err
	}
	s.sso, s.ssoRoles = h, c.AdminGroup != ""
	s.mux.HandleFunc("GET "+sso.LoginPath, h.Login)
	s.mux.HandleFunc("GET "+sso.CallbackPath, s.auditedCallback(h.Callback))
	return nil
}

// ssoRecordedKey marks a callback whose sign-in signInIdentity recorded in
// the audit log, so that auditedCallback does not record it again.
type ssoRecordedKey struct{}

// auditedCallback records in the audit log each single sign-on that
// internal/sso refuses before it reaches signInIdentity (a wrong issuer, an
// expired token, a replayed code, a domain not allowed…): sso answers those
// with a redirect to "/#signin-error=MESSAGE", whose message is the reason
// recorded (sso logs the detail).
func (s *Server) auditedCallback(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		recorded := new(bool)
		rw := &locationWriter{ResponseWriter: w}
		next(rw, r.WithContext(context.WithValue(r.Context(), ssoRecordedKey{}, recorded)))
		msg, ok := strings.CutPrefix(rw.location, "/#signin-error=")
		if *recorded || !ok {
			return
		}
		if m, err := url.QueryUnescape(msg); err == nil {
			msg = m
		}
		s.record(r, &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditRefused,
			Detail: "method oidc; " + msg}, nil)
	}
}

// locationWriter notes the Location of a redirect as it is written.
type locationWriter struct {
	http.ResponseWriter
	location string
}

func (w *locationWriter) WriteHeader(code int) {
	if code >= 300 && code < 400 {
		w.location = w.Header().Get("Location")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *locationWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// errSSOFailed is what a person sees when their verified sign-in could not
// be completed here (the store failed).
const errSSOFailed = "Your sign-in could not be completed on this server. Try again in a minute; if it goes on, tell the server's administrator."

// signInIdentity is sso's OnIdentity: the person the provider verified is
// found by their identity (issuer and subject, never name or email) or
// given a new account; their role follows the admin group at each sign-in
// when DATACHAT_OIDC_ADMIN_GROUP is set; a disabled user is refused; a
// session (method oidc) starts and the browser goes to the page.
func (s *Server) signInIdentity(w http.ResponseWriter, r *http.Request, id sso.Identity) {
	ctx := r.Context()
	if p, ok := ctx.Value(ssoRecordedKey{}).(*bool); ok {
		*p = true // every way out below records the sign-in
	}
	ident := datachat.Identity{Issuer: id.Issuer, Subject: id.Subject, Email: id.Email}
	fail := func(a *datachat.Account, reason string, err error) {
		s.logger(r).Error("single sign-on could not be completed", slog.String("step", reason), slog.String("error", err.Error()))
		e := &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditFailed, UserName: id.Username,
			Detail: "method oidc; " + reason + ": " + datachat.ErrorMessage(err)}
		if a != nil {
			e.UserID, e.UserName = a.ID, a.Name
		}
		s.record(r, e, nil)
		msg := errSSOFailed
		if c := datachat.ErrorCode(err); c != datachat.EINTERNAL && c != "" {
			msg = datachat.ErrorMessage(err)
		}
		sso.RefuseSignIn(w, r, msg)
	}
	a, err := s.Store.AccountByIdentity(ctx, ident)
	switch {
	case datachat.ErrorCode(err) == datachat.ENOTFOUND:
		a, err = s.createSSOAccount(r, id)
		if err != nil {
			fail(nil, "create the account", err)
			return
		}
	case err != nil:
		fail(nil, "find the account", err)
		return
	default:
		// The provider's email may have changed since: the account keeps
		// the newest.
		if err := s.Store.LinkIdentity(ctx, a.ID, ident); err != nil {
			fail(a, "update the identity", err)
			return
		}
		if id.Email != "" {
			a.Email = id.Email
		}
	}
	if a.DisabledAt != nil {
		s.record(r, &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditRefused, UserID: a.ID, UserName: a.Name,
			Detail: "method oidc; the user is disabled"}, nil)
		sso.RefuseSignIn(w, r, datachat.ErrUserDisabled.Message)
		return
	}
	if s.ssoRoles {
		s.followAdminGroup(r, a, id.Admin)
	}
	if err := s.startSession(w, r, a, methodOIDC, "issuer "+id.Issuer); err != nil {
		msg := errSSOFailed
		if isError(err, datachat.ErrUserDisabled) {
			msg = datachat.ErrUserDisabled.Message // disabled as the session was made
		}
		s.logger(r).Error("single sign-on: the session could not be started", slog.String("error", err.Error()))
		sso.RefuseSignIn(w, r, msg)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusFound)
}

// followAdminGroup gives a the role the provider's admin group says, and
// records the change. The last active admin is not demoted (the store
// refuses it; the sign-in goes on as admin and the log says why).
func (s *Server) followAdminGroup(r *http.Request, a *datachat.Account, admin bool) {
	want := datachat.RoleMember
	if admin {
		want = datachat.RoleAdmin
	}
	if a.Role == want {
		return
	}
	if err := s.Store.SetRole(r.Context(), a.ID, want); err != nil {
		s.logger(r).Warn("single sign-on: the role the admin group gives was not set", slog.String("user", a.Name),
			slog.String("role", string(want)), slog.String("error", err.Error()))
		return
	}
	old := a.Role
	a.Role = want
	s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserChanged, Outcome: datachat.AuditOK, UserID: a.ID, UserName: a.Name, Target: a.Name,
		Detail: fmt.Sprintf("role %s → %s, as the provider's admin group says at sign-in", old, want)}, nil)
}

// maxNameTries bounds the names tried for a new account (NAME, NAME-2, …)
// before one with a random suffix.
const maxNameTries = 50

// createSSOAccount makes the account of a person's first single sign-on:
// named after their preferred_username or their email's local part, made
// unique, an admin when the admin group says so, and linked to their
// identity. Two first sign-ins of one person at once make one account: the
// one whose link comes second removes its account and takes the other's.
func (s *Server) createSSOAccount(r *http.Request, id sso.Identity) (*datachat.Account, error) {
	ctx := r.Context()
	role := datachat.RoleMember
	if id.Admin {
		role = datachat.RoleAdmin
	}
	base := ssoName(id)
	// A name a source is granted to is taken too: a grant made to an
	// earlier user of the name (since removed) must not pass to a newcomer.
	sources, err := s.Store.DBSources(ctx)
	if err != nil {
		return nil, err
	}
	granted := func(name string) bool {
		return slices.ContainsFunc(sources, func(d *datachat.DBSource) bool { return slices.Contains(d.Users, name) })
	}
	var a *datachat.Account
	for i := 1; ; i++ {
		name := base
		switch {
		case i > maxNameTries:
			name = base + "-" + randomToken()[:6]
		case i > 1:
			name = base + "-" + strconv.Itoa(i)
		}
		if granted(name) && i <= maxNameTries {
			continue
		}
		a = &datachat.Account{User: datachat.User{Name: name}, Role: role, Email: id.Email}
		err := s.Store.CreateAccount(ctx, a)
		if err == nil {
			break
		}
		if datachat.ErrorCode(err) != datachat.ECONFLICT || i > maxNameTries {
			return nil, err
		}
	}
	ident := datachat.Identity{Issuer: id.Issuer, Subject: id.Subject, Email: id.Email}
	if err := s.Store.LinkIdentity(ctx, a.ID, ident); err != nil {
		if derr := s.Store.DeleteUser(context.WithoutCancel(ctx), a.ID); derr != nil {
			s.logger(r).Error("single sign-on: an account not linked could not be removed", slog.String("user", a.Name), slog.String("error", derr.Error()))
		}
		if datachat.ErrorCode(err) == datachat.ECONFLICT {
			return s.Store.AccountByIdentity(ctx, ident)
		}
		return nil, err
	}
	err = s.record(r, &datachat.AuditEvent{Kind: datachat.AuditUserInvited, Outcome: datachat.AuditOK, UserID: a.ID, UserName: a.Name, Target: a.Name,
		Detail: fmt.Sprintf("created at their first single sign-on (issuer %s), role %s", id.Issuer, role)},
		func(ctx context.Context) error { return s.Store.DeleteUser(ctx, a.ID) })
	if err != nil {
		return nil, err
	}
	return a, nil
}

// ssoName is the name a new single sign-on account is given: the
// provider's preferred_username, else the local part of the email, else
// "user"; control characters and surrounding space removed, cut to leave
// room for a suffix.
func ssoName(id sso.Identity) string {
	name := id.Username
	if name == "" {
		name, _, _ = strings.Cut(id.Email, "@")
	}
	name = strings.TrimFunc(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, name), unicode.IsSpace)
	const room = datachat.MaxUserNameBytes - 16
	for len(name) > room {
		_, size := utf8.DecodeLastRuneInString(name)
		name = strings.TrimRightFunc(name[:len(name)-size], unicode.IsSpace)
	}
	if datachat.CheckUserName(name) != nil {
		return "user"
	}
	return name
}
