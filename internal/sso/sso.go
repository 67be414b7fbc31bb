// Package sso signs people in through an OpenID Connect provider (Google,
// Microsoft Entra ID, Okta, Keycloak, Authentik, …): the authorization code
// flow with PKCE (S256), state and nonce, through the standard
// github.com/coreos/go-oidc and golang.org/x/oauth2. It keeps no users and no
// sessions; the server does, in [Config.OnIdentity].
//
// When DATACHAT_OIDC_ISSUER is set the server builds one [Handler] with [New]
// and mounts its two handlers:
//
//	mux.HandleFunc("GET "+sso.LoginPath, h.Login)
//	mux.HandleFunc("GET "+sso.CallbackPath, h.Callback)
//
// The page's sign-in button is a link to LoginPath. [Handler.Login] sends the
// browser to the provider, which sends it back to CallbackPath;
// [Handler.Callback] checks that answer, verifies the ID token and hands the
// [Identity] to OnIdentity, which finds or creates the user, starts the
// session and redirects to "/". Between the two, the flow's state, nonce and
// PKCE verifier live in a sealed cookie that only CallbackPath receives.
//
// Every refusal redirects the browser to "/#signin-error=MESSAGE"
// ([RefuseSignIn]), a sentence a person can act on, and logs the detail; a
// provider's own error text never reaches the page. Both handlers are
// top-level navigations of the browser (the provider redirects it), so a
// redirect back to the page, which shows the message, serves a person better
// than a JSON body would; the fragment keeps the message out of server logs.
package sso

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// The paths the server mounts the handlers at. The provider must have
// PublicURL+CallbackPath registered as a redirect URI of the client.
const (
	LoginPath    = "/api/auth/oidc/login"
	CallbackPath = "/api/auth/oidc/callback"
)

// Config configures a [Handler]. Issuer, ClientID, ClientSecret, PublicURL,
// Key and OnIdentity are required.
type Config struct {
	// Issuer is DATACHAT_OIDC_ISSUER, exactly as the provider's discovery
	// document names it (a trailing slash matters).
	Issuer       string
	ClientID     string // DATACHAT_OIDC_CLIENT_ID
	ClientSecret string // DATACHAT_OIDC_CLIENT_SECRET
	// PublicURL is DATACHAT_PUBLIC_URL, the origin people open, such as
	// https://chat.example.com. The redirect URI is PublicURL+CallbackPath,
	// and the flow cookie is Secure when PublicURL is https. It is not taken
	// from the request's Host, which the client chooses.
	PublicURL string
	// AllowedDomains (DATACHAT_OIDC_ALLOWED_DOMAINS), when not empty, admits
	// only people whose email is verified by the provider and whose domain
	// is one of these, compared without case; a subdomain must be listed
	// itself.
	AllowedDomains []string
	// AdminGroup (DATACHAT_OIDC_ADMIN_GROUP), when set, makes
	// [Identity.Admin] true for people whose GroupsClaim
	// (DATACHAT_OIDC_GROUPS_CLAIM, default "groups") in the ID token holds
	// this exact value. The claim is a top-level one, a list of strings or a
	// single string.
	AdminGroup  string
	GroupsClaim string
	// Key is the server's 32-byte secret key (DATACHAT_SECRET_KEY or
	// secret.key). The flow cookie is sealed with a key derived from it for
	// this use alone.
	Key []byte
	// OnIdentity is called with the verified identity of each sign-in; it
	// answers the request (typically: find or create the user by Issuer and
	// Subject, set the session cookie, redirect to "/"; or [RefuseSignIn]).
	OnIdentity func(w http.ResponseWriter, r *http.Request, id Identity)

	// HTTPClient makes the requests to the provider; nil means a client
	// with a 10-second timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger     // nil: slog.Default()
	Now        func() time.Time // nil: time.Now; tests move it
}

// Identity is the person a provider signed in. A user is the pair (Issuer,
// Subject): find users by it, never by Email, which a person may change at
// the provider and which some providers do not verify.
type Identity struct {
	Issuer  string
	Subject string
	Email   string // "" when the provider did not share it
	// EmailVerified reports that the provider says it checked Email; always
	// true when AllowedDomains is set.
	EmailVerified bool
	Name          string // the "name" claim; may be ""
	Username      string // the "preferred_username" claim; may be ""
	// Admin reports that AdminGroup is set and among the person's groups.
	Admin bool
}

// flowTTL is how long a sign-in may take between Login and Callback.
const flowTTL = 10 * time.Minute

// Handler runs the sign-in flow. Its methods are safe for concurrent use.
type Handler struct {
	c        Config
	aead     cipher.AEAD
	redirect string // PublicURL + CallbackPath
	secure   bool   // the flow cookie is Secure
	client   *http.Client
	used     *usedStates
	log      *slog.Logger

	mu sync.Mutex
	rp *relyingParty // nil until the provider's discovery document is read
}

// relyingParty is what discovery gives: the provider's endpoints and keys.
type relyingParty struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// New checks c and returns its Handler. It makes no request: the provider's
// discovery document is read on the first sign-in (or by [Handler.Discover])
// and kept, so the server starts while the provider is down.
func New(c Config) (*Handler, error) {
	if c.Issuer == "" || c.ClientID == "" || c.ClientSecret == "" {
		return nil, errors.New("sso: Issuer, ClientID and ClientSecret are required")
	}
	if c.OnIdentity == nil {
		return nil, errors.New("sso: OnIdentity is required")
	}
	pub, err := url.Parse(c.PublicURL)
	if err != nil || (pub.Scheme != "http" && pub.Scheme != "https") || pub.Host == "" || strings.Trim(pub.Path, "/") != "" || pub.RawQuery != "" || pub.Fragment != "" {
		return nil, fmt.Errorf("sso: PublicURL %q: want an origin such as https://chat.example.com", c.PublicURL)
	}
	aead, err := newSealer(c.Key)
	if err != nil {
		return nil, err
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = "groups"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.AllowedDomains = slices.Clone(c.AllowedDomains)
	for i, d := range c.AllowedDomains {
		c.AllowedDomains[i] = strings.ToLower(d)
	}
	h := &Handler{
		c:        c,
		aead:     aead,
		redirect: pub.Scheme + "://" + pub.Host + CallbackPath,
		secure:   pub.Scheme == "https",
		client:   c.HTTPClient,
		used:     newUsedStates(maxUsedStates),
		log:      c.Logger,
	}
	if h.client == nil {
		h.client = &http.Client{Timeout: 10 * time.Second}
	}
	return h, nil
}

// Discover reads the provider's discovery document unless it was read
// already. The server may call it at start to warn early of a wrong issuer
// or an unreachable provider; Login calls it too.
func (h *Handler) Discover(ctx context.Context) error {
	_, err := h.relyingParty(ctx)
	return err
}

func (h *Handler) relyingParty(ctx context.Context) (*relyingParty, error) {
	h.mu.Lock()
	rp := h.rp
	h.mu.Unlock()
	if rp != nil {
		return rp, nil
	}
	// Not under the lock: a slow provider must not queue every sign-in
	// behind one request. Two discoveries at once both succeed; one is kept.
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, h.client), h.c.Issuer)
	if err != nil {
		return nil, err
	}
	ep := p.Endpoint()
	// client_secret_basic is the default of OpenID Connect Discovery; oauth2's
	// own default, trying one way then the other, would send a code twice.
	ep.AuthStyle = oauth2.AuthStyleInHeader
	var meta struct {
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := p.Claims(&meta); err == nil && len(meta.AuthMethods) > 0 &&
		!slices.Contains(meta.AuthMethods, "client_secret_basic") && slices.Contains(meta.AuthMethods, "client_secret_post") {
		ep.AuthStyle = oauth2.AuthStyleInParams
	}
	rp = &relyingParty{
		oauth: oauth2.Config{
			ClientID:     h.c.ClientID,
			ClientSecret: h.c.ClientSecret,
			Endpoint:     ep,
			RedirectURL:  h.redirect,
			Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
		},
		// Keys are fetched when first needed and again when a token names
		// a key the set lacks (the provider rotated its keys).
		verifier: p.VerifierContext(oidc.ClientContext(context.Background(), h.client), &oidc.Config{
			ClientID: h.c.ClientID,
			Now:      h.c.Now,
		}),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rp == nil {
		h.rp = rp
	}
	return h.rp, nil
}

// Login starts a sign-in: it sets the flow cookie and redirects the browser
// to the provider's authorization endpoint.
func (h *Handler) Login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	rp, err := h.relyingParty(r.Context())
	if err != nil {
		msg := msgUnreachable
		if _, ok := errors.AsType[*oidc.IssuerMismatchError](err); ok {
			msg = msgMisconfigured
		}
		h.refuse(w, r, msg, "read the provider's discovery document", err)
		return
	}
	f := flow{
		State:    rand.Text(),
		Nonce:    rand.Text(),
		Verifier: oauth2.GenerateVerifier(),
		Expires:  h.c.Now().Add(flowTTL).Unix(),
	}
	http.SetCookie(w, h.flowCookie(h.seal(f), int(flowTTL/time.Second)))
	http.Redirect(w, r, rp.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusFound)
}

// Callback ends a sign-in: it checks the provider's answer against the flow
// cookie (clearing the cookie whatever happens: a flow is used once),
// exchanges the code with the PKCE verifier, verifies the ID token, applies
// AllowedDomains and AdminGroup, and calls OnIdentity.
func (h *Handler) Callback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.SetCookie(w, h.flowCookie("", -1))
	q := r.URL.Query()

	// Nothing in the query is believed before its state matches this
	// browser's flow: a callback URL from another browser (login CSRF) or a
	// forged error stops here.
	f, err := h.openFlow(r)
	if err != nil {
		h.refuse(w, r, msgFlowLost, "flow cookie", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		h.refuse(w, r, msgNotThisBrowser, "state", errors.New("the state parameter does not match the flow cookie's"))
		return
	}
	switch err := h.used.add(f.State, f.Expires, h.c.Now().Unix()); {
	case errors.Is(err, errStateFull):
		h.refuse(w, r, msgBusy, "state", err)
		return
	case err != nil:
		h.refuse(w, r, msgReplayed, "state", err)
		return
	}
	if e := q.Get("error"); e != "" {
		msg := msgProviderRefused
		if e == "access_denied" {
			msg = msgCancelled
		}
		h.refuse(w, r, msg, "provider answered with an error", fmt.Errorf("%s: %s", e, q.Get("error_description")))
		return
	}
	// RFC 9207: a provider that names itself in the answer must be ours
	// (against mix-up with another provider).
	if q.Has("iss") && q.Get("iss") != h.c.Issuer {
		h.refuse(w, r, msgInvalid, "iss parameter", fmt.Errorf("the answer comes from issuer %q, want %q", q.Get("iss"), h.c.Issuer))
		return
	}
	code := q.Get("code")
	if code == "" {
		h.refuse(w, r, msgIncomplete, "code", errors.New("the answer has no code"))
		return
	}
	rp, err := h.relyingParty(r.Context())
	if err != nil {
		h.refuse(w, r, msgUnreachable, "read the provider's discovery document", err)
		return
	}
	tok, err := rp.oauth.Exchange(oidc.ClientContext(r.Context(), h.client), code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		msg := msgUnreachable
		if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
			switch {
			case re.ErrorCode == "invalid_client":
				msg = msgMisconfigured
			case re.Response != nil && re.Response.StatusCode < 500:
				msg = msgExchange
			}
		}
		h.refuse(w, r, msg, "exchange the code", err)
		return
	}
	id, msg, err := h.identity(r.Context(), rp, tok, f.Nonce)
	if err != nil {
		h.refuse(w, r, msg, "ID token", err)
		return
	}
	h.c.OnIdentity(w, r, id)
}

// identity verifies the ID token of tok and applies the domain and group
// rules. On failure it returns the message for the person and the detail.
func (h *Handler) identity(ctx context.Context, rp *relyingParty, tok *oauth2.Token, nonce string) (Identity, string, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, msgInvalid, errors.New("the token response has no id_token")
	}
	// Verify checks the signature against the provider's keys (asymmetric
	// algorithms the provider announces; never "none"), the issuer, the
	// audience and the expiry, by Config.Now.
	t, err := rp.verifier.Verify(ctx, raw)
	if err != nil {
		if _, ok := errors.AsType[*oidc.TokenExpiredError](err); ok {
			return Identity{}, msgExpired, err
		}
		return Identity{}, msgInvalid, err
	}
	if subtle.ConstantTimeCompare([]byte(t.Nonce), []byte(nonce)) != 1 {
		return Identity{}, msgInvalid, fmt.Errorf("the nonce %q is not this flow's", t.Nonce)
	}
	if t.Subject == "" {
		return Identity{}, msgInvalid, errors.New("the ID token has no subject")
	}
	var c struct {
		AZP               string          `json:"azp"`
		Email             string          `json:"email"`
		EmailVerified     json.RawMessage `json:"email_verified"`
		Name              string          `json:"name"`
		PreferredUsername string          `json:"preferred_username"`
	}
	if err := t.Claims(&c); err != nil {
		return Identity{}, msgInvalid, err
	}
	// OpenID Connect Core 3.1.3.7: with several audiences the token must
	// name us as its authorized party; when it names one, it must be us.
	if (len(t.Audience) > 1 || c.AZP != "") && c.AZP != h.c.ClientID {
		return Identity{}, msgInvalid, fmt.Errorf("the token was issued to %q (audience %q), not to this client", c.AZP, t.Audience)
	}
	id := Identity{
		Issuer:        t.Issuer,
		Subject:       t.Subject,
		Email:         c.Email,
		EmailVerified: isTrue(c.EmailVerified),
		Name:          c.Name,
		Username:      c.PreferredUsername,
	}
	if len(h.c.AllowedDomains) > 0 {
		// An email the provider did not verify, or did not say it verified,
		// may belong to someone else: its domain proves nothing.
		at := strings.LastIndexByte(id.Email, '@')
		switch {
		case at < 0:
			return Identity{}, msgNoEmail, fmt.Errorf("the ID token has no email address (email %q), and DATACHAT_OIDC_ALLOWED_DOMAINS is set", id.Email)
		case !id.EmailVerified:
			return Identity{}, msgUnverified, fmt.Errorf("email %q: email_verified is %s", id.Email, orMissing(c.EmailVerified))
		case !slices.Contains(h.c.AllowedDomains, strings.ToLower(id.Email[at+1:])):
			return Identity{}, domainMessage(id.Email[at+1:]), fmt.Errorf("email %q is not in an allowed domain (%s)", id.Email, strings.Join(h.c.AllowedDomains, ", "))
		}
	}
	if h.c.AdminGroup != "" {
		var all map[string]json.RawMessage
		if err := t.Claims(&all); err != nil {
			return Identity{}, msgInvalid, err
		}
		id.Admin = slices.Contains(groups(all[h.c.GroupsClaim]), h.c.AdminGroup)
	}
	return id, "", nil
}

// isTrue reads email_verified: a JSON true, or the string "true" that some
// providers send.
func isTrue(raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	return v == true || v == "true"
}

func orMissing(raw json.RawMessage) string {
	if raw == nil {
		return "missing"
	}
	return string(raw)
}

// groups reads a groups claim: a list of strings or one string.
func groups(raw json.RawMessage) []string {
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	return nil
}

// The messages a person sees. Each says what happened and what to do.
const (
	msgUnreachable     = "The sign-in provider cannot be reached. Try again in a minute, or sign in with your password."
	msgMisconfigured   = "Single sign-on is not set up correctly on this server. Ask your administrator to check the DATACHAT_OIDC_ settings."
	msgFlowLost        = "This sign-in has expired or was started in another browser. Sign in again."
	msgNotThisBrowser  = "This sign-in was not started in this browser, so it was refused. Sign in again."
	msgReplayed        = "This sign-in was already used. Sign in again."
	msgBusy            = "Too many sign-ins are in progress. Try again in a few minutes."
	msgCancelled       = "Sign-in was cancelled at the sign-in provider."
	msgProviderRefused = "The sign-in provider refused the sign-in. Try again, or ask your administrator."
	msgIncomplete      = "The sign-in provider's answer is incomplete. Sign in again."
	msgExchange        = "The sign-in provider did not accept this sign-in. Sign in again."
	msgInvalid         = "The sign-in provider's answer could not be verified, so you were not signed in. Sign in again; if this repeats, ask your administrator."
	msgExpired         = "The sign-in provider's answer has expired. Sign in again; if this repeats, the server's clock may be wrong."
	msgNoEmail         = "The sign-in provider did not share your email address, which this server needs. Ask your administrator."
	msgUnverified      = "Your email address is not verified at the sign-in provider. Verify it there, then sign in again."
)

func domainMessage(domain string) string {
	return fmt.Sprintf("Accounts at %s may not sign in to this server. Sign in with an account of your organization.", domain)
}

// refuse logs why a sign-in failed and sends the person to the page with msg.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, msg, step string, err error) {
	h.log.Warn("oidc sign-in refused", slog.String("step", step), slog.String("error", err.Error()), slog.String("message", msg))
	RefuseSignIn(w, r, msg)
}

// RefuseSignIn redirects the browser to the page with msg in the fragment,
// "/#signin-error=MESSAGE", where the page shows it. OnIdentity may use it
// to refuse a person too (a disabled user, say).
func RefuseSignIn(w http.ResponseWriter, r *http.Request, msg string) {
	// QueryEscape, then %20 for spaces: decodeURIComponent and
	// URLSearchParams then both read the message back.
	http.Redirect(w, r, "/#signin-error="+strings.ReplaceAll(url.QueryEscape(msg), "+", "%20"), http.StatusFound)
}
