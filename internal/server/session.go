package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"datachat"
	"datachat/internal/password"
)

// Sign-in in the browser. POST /api/auth/login (a password), POST
// /api/auth/invite (an invite's token and a new password) and single
// sign-on (oidc.go) start a session: the store keeps the SHA-256 of a random
// token, and the browser the token in the cookie sessionCookieName —
// HttpOnly, SameSite=Lax, Path=/, Secure over TLS or when DATACHAT_PUBLIC_URL
// is https. Every route that takes an API key also takes the cookie, except
// /v1, /mcp and /metrics (keyAuth, openaiAuth). A request made with the
// cookie is a browser's, and so is checked for where it comes from: a
// state-changing one by Go's http.CrossOriginProtection, a WebSocket by its
// Origin header (checkCookieOrigin). A request with an API key is not a
// cookie request: a page on another site cannot send the key's header.

// sessionCookieName is the session's cookie.
const sessionCookieName = "datachat_session"

// How a request was authenticated, as GET /api/me's "auth" says.
const (
	methodPassword = "password"
	methodOIDC     = "oidc"
	methodAPIKey   = "api_key"
)

// A session cookie's value is its sign-in method's mark and a random 32-byte
// token in base64url: "p." or "o." and 43 characters. The store keeps the
// SHA-256 of the whole value (datachat.HashAPIKey), so the mark cannot be
// changed without the session being lost; it tells GET /api/me how the
// session was started, which the store's credential does not say.
var sessionMarks = map[string]string{methodPassword: "p.", methodOIDC: "o."}

const sessionValueLen = 2 + 43

// defaultSessionIdle is how long an unused session lasts when Config does
// not say (DATACHAT_SESSION_IDLE).
const defaultSessionIdle = 7 * 24 * time.Hour

// newSessionValue returns a new session cookie value for method.
func newSessionValue(method string) string {
	return sessionMarks[method] + randomToken()
}

// randomToken returns 32 random bytes in base64url without padding: a
// session's or an invite's secret.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validToken reports whether t has the shape of randomToken's output.
func validToken(t string) bool {
	if len(t) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(t)
	return err == nil && len(b) == 32
}

// sessionMethod returns the sign-in method of a session cookie value, or ""
// for a value no session can have.
func sessionMethod(v string) string {
	if len(v) != sessionValueLen || !validToken(v[2:]) {
		return ""
	}
	for m, mark := range sessionMarks {
		if v[:2] == mark {
			return m
		}
	}
	return ""
}

// sessionCookieOf returns the request's session cookie value, "" if none.
func sessionCookieOf(r *http.Request) string {
	c, err := r.Cookie(sessionCookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// signedIn is who made an authenticated request, and how.
type signedIn struct {
	user    *datachat.User
	account *datachat.Account // nil until account reads it (a key's request)
	cred    datachat.Credential
	method  string // methodPassword, methodOIDC or methodAPIKey
}

// signedInFrom returns who made the request of ctx; nil outside auth.
func signedInFrom(ctx context.Context) *signedIn {
	w, _ := ctx.Value(signedInKey).(*signedIn)
	return w
}

// account returns the account of the request's user, read from the store
// the first time for a request made with an API key. A user removed since
// the request was authenticated is refused as disabled.
func (s *Server) account(r *http.Request) (*datachat.Account, error) {
	who := signedInFrom(r.Context())
	if who == nil {
		return nil, datachat.Errorf(datachat.EUNAUTHORIZED, "Not signed in.")
	}
	if who.account == nil {
		a, err := s.Store.Account(r.Context(), who.user.ID)
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return nil, datachat.ErrUserDisabled
		}
		if err != nil {
			return nil, err
		}
		who.account = a
	}
	return who.account, nil
}

// sessionIdle is how long an unused session lasts.
func (s *Server) sessionIdle() time.Duration {
	if s.cfg.SessionIdle > 0 {
		return s.cfg.SessionIdle
	}
	return defaultSessionIdle
}

// sessionCookie is the session cookie holding value; a negative maxAge
// deletes it. It lasts in the browser as long as the session may stay
// unused, and every request made with it sets it again (authenticateSession),
// so that the browser keeps it as long as the store does.
func (s *Server) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     sessionCookieName,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   r.TLS != nil || strings.HasPrefix(s.cfg.PublicURL, "https://"),
		SameSite: http.SameSiteLaxMode,
	}
}

func (s *Server) setSessionCookie(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, s.sessionCookie(r, value, int(s.sessionIdle()/time.Second)))
}

func (s *Server) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, s.sessionCookie(r, "", -1))
}

// authenticateSession authenticates a request by its session cookie value:
// the request must come from datachat's own page (checkCookieOrigin), and
// the session must be live. A cookie that no longer authenticates is
// deleted from the browser.
func (s *Server) authenticateSession(w http.ResponseWriter, r *http.Request, value string) (signedIn, error) {
	if err := s.checkCookieOrigin(r); err != nil {
		return signedIn{}, err
	}
	method := sessionMethod(value)
	if method == "" {
		s.clearSessionCookie(w, r)
		return signedIn{}, datachat.ErrSessionEnded
	}
	a, cred, err := s.Store.AuthenticateSession(r.Context(), datachat.HashAPIKey(value), time.Now(), s.sessionIdle())
	if err != nil {
		if datachat.ErrorCode(err) != datachat.EUNAUTHORIZED {
			return signedIn{}, err
		}
		s.clearSessionCookie(w, r)
		if !isError(err, datachat.ErrUserDisabled) {
			err = datachat.ErrSessionEnded
		}
		return signedIn{}, err
	}
	s.setSessionCookie(w, r, value)
	return signedIn{user: &a.User, account: a, cred: cred, method: method}, nil
}

// checkCookieOrigin refuses (403) a request made with the session cookie
// from another site: a state-changing request that http.CrossOriginProtection
// refuses (it trusts DATACHAT_PUBLIC_URL besides the request's own host), and
// a WebSocket whose Origin is not the server's own (a WebSocket is opened
// with a GET, which CrossOriginProtection lets through, and browsers send
// the cookie with it from any site of the same registrable domain).
func (s *Server) checkCookieOrigin(r *http.Request) error {
	if isWebSocket(r) {
		origin := r.Header.Get("Origin")
		if origin == "" || !s.ownOrigin(r, origin) {
			return datachat.Errorf(datachat.EFORBIDDEN, "This WebSocket was opened from %s, not from datachat's own page, so your sign-in does not reach it. Open datachat at its own address.", originText(origin))
		}
		return nil
	}
	if err := s.crossOrigin.Check(r); err != nil {
		return datachat.Errorf(datachat.EFORBIDDEN, "This request came from another site (%s), so your sign-in does not reach it: datachat takes requests made with its sign-in cookie only from its own page. Scripts send an API key instead.", originText(r.Header.Get("Origin")))
	}
	return nil
}

// ownOrigin reports whether origin is the server's own: that of the
// request's Host (as http.CrossOriginProtection compares it, without the
// scheme, which a proxy in front may change) or DATACHAT_PUBLIC_URL.
func (s *Server) ownOrigin(r *http.Request, origin string) bool {
	if s.cfg.PublicURL != "" && strings.EqualFold(origin, s.cfg.PublicURL) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

func originText(origin string) string {
	if origin == "" {
		return "a page that did not say where it was"
	}
	return fmt.Sprintf("%q", datachat.AuditLine(origin, 100))
}

// isWebSocket reports whether r asks for a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// publicOrigin is where people open datachat: DATACHAT_PUBLIC_URL, else the
// origin the request was made to.
func (s *Server) publicOrigin(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// remoteAddress is the address of the connection's peer, as the audit log
// keeps it (a reverse proxy in front of datachat shows as itself).
func remoteAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// me is GET /api/me's answer, and the user in a sign-in's.
type me struct {
	ID    string        `json:"id"`
	Name  string        `json:"name"`
	Role  datachat.Role `json:"role"`
	Auth  string        `json:"auth"`
	Email string        `json:"email,omitempty"`
}

func meOf(a *datachat.Account, method string) me {
	return me{ID: a.ID, Name: a.Name, Role: a.Role, Auth: method, Email: a.Email}
}

// getMe is GET /api/me: who the request is signed in as, and how.
func (s *Server) getMe(w http.ResponseWriter, r *http.Request) {
	a, err := s.account(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, meOf(a, signedInFrom(r.Context()).method))
}

// authMethods is GET /api/auth/methods: how people may sign in here.
func (s *Server) authMethods(w http.ResponseWriter, r *http.Request) {
	m := map[string]any{"password": true, "oidc": s.sso != nil}
	if s.sso != nil {
		m["oidc_login"] = ssoLoginPath
	}
	writeJSON(w, http.StatusOK, m)
}

// The sign-in limits: attempts (password sign-ins and invites) admitted per
// user name and per address in signInWindow, unless Config says otherwise.
const (
	signInWindow            = 15 * time.Minute
	defaultSignInPerUser    = 10
	defaultSignInPerAddress = 50
)

func limitOf(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0 // TakeAttempt admits everything
	}
	return n
}

// takeSignIn admits one sign-in attempt from addr for the user name (""
// for an invite, which counts for its address only), or refuses it with
// rate_limited saying when to try again.
func (s *Server) takeSignIn(ctx context.Context, name, addr string) error {
	keys := []struct {
		key   string
		limit int
	}{{"sign-in address " + addr, limitOf(s.cfg.SignInPerAddress, defaultSignInPerAddress)}}
	if name != "" {
		keys = append(keys, struct {
			key   string
			limit int
		}{"sign-in user " + name, limitOf(s.cfg.SignInPerUser, defaultSignInPerUser)})
	}
	for _, k := range keys {
		ok, after, err := s.Store.TakeAttempt(ctx, k.key, time.Now(), signInWindow, k.limit)
		if err != nil {
			return err
		}
		if !ok {
			return errTooManySignIns(after)
		}
	}
	return nil
}

func errTooManySignIns(after time.Duration) error {
	after = max(after, time.Second)
	minutes := int((after + time.Minute - 1) / time.Minute)
	unit := "minutes"
	if minutes == 1 {
		unit = "minute"
	}
	return &datachat.Error{
		Code:       datachat.ERATELIMIT,
		Message:    fmt.Sprintf("Too many sign-in attempts; try again in %d %s.", minutes, unit),
		RetryAfter: after,
	}
}

// errWrongPassword answers every failed password sign-in alike: an unknown
// user, a user without a password and a wrong password.
var errWrongPassword = datachat.Errorf(datachat.EUNAUTHORIZED, "Wrong user name or password.")

// loginRequest is POST /api/auth/login's body.
type loginRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// login is POST /api/auth/login: a password sign-in. It answers the same
// for an unknown user, a user without a password and a wrong password, in
// about the same time (a dummy password is hashed when there is no hash to
// check); a disabled user hears so only with the right password. Attempts
// are limited per user name and per address (takeSignIn).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.checkSignInOrigin(r); err != nil {
		s.error(w, r, err)
		return
	}
	var req loginRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if req.User == "" || req.Password == "" {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Give your user name and password: {"user": "…", "password": "…"}.`))
		return
	}
	if len(req.Password) > password.MaxBytes {
		// No password this long can be set (password.Validate): the
		// refusal says nothing of the user, and costs no hashing.
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "A password is at most %d bytes; this one is %d.", password.MaxBytes, len(req.Password)))
		return
	}
	ctx := r.Context()
	if err := s.takeSignIn(ctx, req.User, remoteAddress(r)); err != nil {
		if datachat.ErrorCode(err) == datachat.ERATELIMIT {
			s.logger(r).Warn("sign-in refused: too many attempts", slog.String("user", datachat.AuditLine(req.User, 100)), slog.String("address", remoteAddress(r)))
		}
		s.error(w, r, err)
		return
	}
	refuse := func(a *datachat.Account, reason string, answer error) {
		e := &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditRefused, UserName: req.User,
			Detail: "method password; " + reason}
		if a != nil {
			e.UserID, e.UserName = a.ID, a.Name
		}
		s.record(r, e, nil)
		s.error(w, r, answer)
	}
	var a *datachat.Account
	var hash string
	err := datachat.CheckUserName(req.User)
	if err == nil {
		a, hash, err = s.Store.PasswordHash(ctx, req.User)
	} else {
		err = datachat.Errorf(datachat.ENOTFOUND, "no user may have this name") // nor be looked up (a NUL, say)
	}
	switch {
	case datachat.ErrorCode(err) == datachat.ENOTFOUND:
		password.CheckDummy(req.Password)
		refuse(nil, "no such user", errWrongPassword)
		return
	case err != nil:
		s.error(w, r, err)
		return
	case hash == "":
		password.CheckDummy(req.Password)
		refuse(a, "the user has no password (an invite was never used)", errWrongPassword)
		return
	}
	ok, err := password.Check(hash, req.Password)
	if err != nil {
		s.error(w, r, fmt.Errorf("check the password of user %s: %w", a.ID, err))
		return
	}
	if !ok {
		refuse(a, "wrong password", errWrongPassword)
		return
	}
	if a.DisabledAt != nil {
		refuse(a, "the user is disabled", datachat.ErrUserDisabled)
		return
	}
	if err := s.startSession(w, r, a, methodPassword, ""); err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": meOf(a, methodPassword)})
}

// inviteRequest is POST /api/auth/invite's body.
type inviteRequest struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

// useInvite is POST /api/auth/invite: the person an invite was made for
// sets their password and is signed in. The user's other sessions end (a
// password change signs out everywhere), here at once and in other
// processes within the check interval.
func (s *Server) useInvite(w http.ResponseWriter, r *http.Request) {
	if err := s.checkSignInOrigin(r); err != nil {
		s.error(w, r, err)
		return
	}
	var req inviteRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if err := password.Validate(req.Password); err != nil {
		msg := err.Error() // the rule, in words for the person
		if datachat.ErrorCode(err) != datachat.EINTERNAL {
			msg = datachat.ErrorMessage(err)
		}
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "%s", msg))
		return
	}
	ctx := r.Context()
	if err := s.takeSignIn(ctx, "", remoteAddress(r)); err != nil {
		s.error(w, r, err)
		return
	}
	refuse := func() {
		s.record(r, &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditRefused,
			Detail: "method invite; the invite link is invalid, used or expired"}, nil)
		s.error(w, r, datachat.ErrInviteInvalid)
	}
	if !validToken(req.Token) {
		refuse()
		return
	}
	hash, err := password.Hash(req.Password)
	if err != nil {
		s.error(w, r, fmt.Errorf("hash a password: %w", err))
		return
	}
	a, err := s.Store.UseInvite(ctx, datachat.HashAPIKey(req.Token), hash, time.Now())
	if datachat.ErrorCode(err) == datachat.EUNAUTHORIZED {
		refuse()
		return
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	// The store deleted the user's sessions: their requests and WebSockets
	// in this process end now (their API keys still hold).
	s.live.revokeUserKind(a.ID, datachat.CredentialSession, datachat.ErrSessionEnded)
	if err := s.startSession(w, r, a, methodPassword, "set a password with an invite"); err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": meOf(a, methodPassword)})
}

// checkSignInOrigin refuses a sign-in, an invite or a sign-out posted from
// another site: signing a browser in to an attacker's account, or out of
// its own, is as much an attack as a change made in the user's name.
func (s *Server) checkSignInOrigin(r *http.Request) error {
	if err := s.crossOrigin.Check(r); err != nil {
		return datachat.Errorf(datachat.EFORBIDDEN, "This sign-in came from another site (%s) and was refused: sign in on datachat's own page.", originText(r.Header.Get("Origin")))
	}
	return nil
}

// startSession signs a (checked) to the request's browser by method: it ends
// the session the browser had, if any — a session is never taken over by a
// sign-in, whoever's it was —, stores a new one, records the sign-in in the
// audit log (the session is deleted again if the record cannot be written)
// and sets the cookie. detail adds to the record.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, a *datachat.Account, method, detail string) error {
	ctx := r.Context()
	if old := sessionCookieOf(r); sessionMethod(old) != "" {
		if _, cred, err := s.Store.AuthenticateSession(ctx, datachat.HashAPIKey(old), time.Now(), s.sessionIdle()); err == nil {
			if err := s.Store.DeleteSession(ctx, cred.ID); err != nil {
				return err
			}
			s.Revoke(cred, datachat.ErrSessionEnded)
		}
	}
	value := newSessionValue(method)
	sess := &datachat.Session{UserID: a.ID, Hash: datachat.HashAPIKey(value), Method: method}
	if err := s.Store.CreateSession(ctx, sess); err != nil {
		return err
	}
	d := "method " + method
	if detail != "" {
		d += "; " + detail
	}
	err := s.record(r, &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserID: a.ID, UserName: a.Name, Detail: d},
		func(ctx context.Context) error { return s.Store.DeleteSession(ctx, sess.ID) })
	if err != nil {
		return err
	}
	s.setSessionCookie(w, r, value)
	return nil
}

// logout is POST /api/auth/logout: the browser's session is deleted, its
// requests and WebSockets end at once, and the cookie is cleared. Without a
// live session it only clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.checkSignInOrigin(r); err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	if v := sessionCookieOf(r); sessionMethod(v) != "" {
		_, cred, err := s.Store.AuthenticateSession(ctx, datachat.HashAPIKey(v), time.Now(), s.sessionIdle())
		switch {
		case err == nil:
			if err := s.Store.DeleteSession(ctx, cred.ID); err != nil {
				s.error(w, r, err) // the cookie stays: it still signs in
				return
			}
			s.Revoke(cred, datachat.ErrSessionEnded)
		case datachat.ErrorCode(err) != datachat.EUNAUTHORIZED:
			s.error(w, r, err)
			return
		}
	}
	s.clearSessionCookie(w, r)
	w.WriteHeader(http.StatusNoContent)
}
