package sso

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat/internal/sso/ssotest"
	"datachat/internal/testlog"
)

const (
	clientID     = "datachat"
	clientSecret = "client-secret"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// rp is a relying party: a server on 127.0.0.1 that mounts a Handler as
// the server will, and answers a sign-in with the identity as JSON.
type rp struct {
	URL    string
	h      *Handler
	clock  *clock
	log    *testlog.Buffer
	seen   int          // how much of log wantRefused has read
	signed atomic.Int32 // OnIdentity calls
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newRP starts a relying party of provider p (registering its client there)
// with the config edits given.
func newRP(t *testing.T, p *ssotest.Provider, edit ...func(*Config)) *rp {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r := &rp{URL: srv.URL, clock: &clock{t: time.Now()}, log: &testlog.Buffer{}}
	c := Config{
		Issuer:       p.URL,
		ClientID:     clientID,
		ClientSecret: clientSecret,
		PublicURL:    srv.URL,
		Key:          testKey,
		Now:          r.clock.Now,
		Logger:       slog.New(slog.NewTextHandler(r.log, nil)),
		OnIdentity: func(w http.ResponseWriter, _ *http.Request, id Identity) {
			r.signed.Add(1)
			json.NewEncoder(w).Encode(id)
		},
	}
	for _, e := range edit {
		e(&c)
	}
	h, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	mux.HandleFunc("GET "+LoginPath, h.Login)
	mux.HandleFunc("GET "+CallbackPath, h.Callback)
	p.AddClient(ssotest.Client{ID: clientID, Secret: clientSecret, RedirectURIs: []string{srv.URL + CallbackPath}})
	return r
}

// browser is a person's browser: a cookie jar, redirects followed one at a
// time so that a test can step in between.
type browser struct {
	t   *testing.T
	jar *cookiejar.Jar
	c   *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, jar: jar, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// get requests u and returns the answer with its body read.
func (b *browser) get(u string) (*http.Response, []byte) {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// redirect requests u and returns where it redirects to.
func (b *browser) redirect(u string) string {
	b.t.Helper()
	resp, body := b.get(u)
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("GET %s: got %s %s, want a redirect", u, resp.Status, body)
	}
	return resp.Header.Get("Location")
}

// login starts a sign-in at r and returns the provider's authorization URL.
func (b *browser) login(r *rp) string {
	b.t.Helper()
	loc := b.redirect(r.URL + LoginPath)
	if strings.HasPrefix(loc, "/#") {
		b.t.Fatalf("login refused: %s", loc)
	}
	return loc
}

// authorize visits the provider and returns the callback URL it sends the
// browser back to.
func (b *browser) authorize(authURL string) string {
	b.t.Helper()
	return b.redirect(authURL)
}

// outcome is how a callback ended: an identity, or the refusal's message.
type outcome struct {
	id  *Identity
	msg string
}

func (b *browser) finish(callbackURL string) outcome {
	b.t.Helper()
	resp, body := b.get(callbackURL)
	return readOutcome(b.t, resp, body)
}

func readOutcome(t *testing.T, resp *http.Response, body []byte) outcome {
	t.Helper()
	switch resp.StatusCode {
	case http.StatusOK:
		var id Identity
		if err := json.Unmarshal(body, &id); err != nil {
			t.Fatal(err)
		}
		return outcome{id: &id}
	case http.StatusFound:
		return outcome{msg: signinError(t, resp.Header.Get("Location"))}
	}
	t.Fatalf("callback: got %s %s", resp.Status, body)
	return outcome{}
}

// signinError reads the message of a "/#signin-error=…" location.
func signinError(t *testing.T, loc string) string {
	t.Helper()
	esc, ok := strings.CutPrefix(loc, "/#signin-error=")
	if !ok {
		t.Fatalf("redirect to %q, want /#signin-error=…", loc)
	}
	msg, err := url.PathUnescape(esc)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func (b *browser) signIn(r *rp) outcome {
	b.t.Helper()
	return b.finish(b.authorize(b.login(r)))
}

// flowCookie returns the browser's flow cookie for r ("" if none).
func (b *browser) flowCookie(r *rp) string {
	u, _ := url.Parse(r.URL + CallbackPath)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == flowCookieName {
			return c.Value
		}
	}
	return ""
}

// getWithCookie requests u with only the given flow cookie, as a replaying
// or forging client would.
func getWithCookie(t *testing.T, u, cookie string) outcome {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: flowCookieName, Value: cookie})
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return readOutcome(t, resp, body)
}

// wantRefused checks that o is a refusal with msg, that r logged logged
// since the last check, and that no identity reached OnIdentity.
func (r *rp) wantRefused(t *testing.T, o outcome, msg, logged string) {
	t.Helper()
	if o.id != nil {
		t.Fatalf("signed in as %+v, want refused with %q", *o.id, msg)
	}
	if o.msg != msg {
		t.Errorf("message: got %q, want %q", o.msg, msg)
	}
	all := r.log.String()
	if log := all[r.seen:]; !strings.Contains(log, logged) {
		t.Errorf("log lacks %q:\n%s", logged, log)
	}
	r.seen = len(all)
	if n := r.signed.Load(); n != 0 {
		t.Errorf("OnIdentity called %d times", n)
	}
}

func wantSignedIn(t *testing.T, o outcome) Identity {
	t.Helper()
	if o.id == nil {
		t.Fatalf("refused with %q, want signed in", o.msg)
	}
	return *o.id
}

func TestSignIn(t *testing.T) {
	user := ssotest.DefaultUser
	with := func(edit func(*ssotest.User)) ssotest.User {
		u := user
		edit(&u)
		return u
	}
	for _, tc := range []struct {
		name  string
		user  ssotest.User
		cfg   func(*Config)
		admin bool
	}{
		{"member", with(func(u *ssotest.User) { u.Groups = []string{"staff"} }), adminGroup("datachat-admins"), false},
		{"admin by group", with(func(u *ssotest.User) { u.Groups = []string{"staff", "datachat-admins"} }), adminGroup("datachat-admins"), true},
		{"groups claim a single string", with(func(u *ssotest.User) { u.Claims = map[string]any{"groups": "datachat-admins"} }), adminGroup("datachat-admins"), true},
		{"group names match exactly", with(func(u *ssotest.User) {
			u.Groups = []string{"Datachat-Admins", "datachat-admins-old", " datachat-admins"}
		}), adminGroup("datachat-admins"), false},
		{"no groups claim", user, adminGroup("datachat-admins"), false},
		{"groups claim of another shape", with(func(u *ssotest.User) { u.Claims = map[string]any{"groups": map[string]any{"datachat-admins": true}} }), adminGroup("datachat-admins"), false},
		{"no admin group configured", with(func(u *ssotest.User) { u.Groups = []string{"datachat-admins"} }), nil, false},
		{"another groups claim", with(func(u *ssotest.User) { u.Claims = map[string]any{"roles": []string{"datachat-admins"}} }), func(c *Config) {
			c.AdminGroup, c.GroupsClaim = "datachat-admins", "roles"
		}, true},
		{"only the configured claim counts", with(func(u *ssotest.User) { u.Groups = []string{"datachat-admins"} }), func(c *Config) {
			c.AdminGroup, c.GroupsClaim = "datachat-admins", "roles"
		}, false},
		{"allowed domain, any case", with(func(u *ssotest.User) { u.Email = "Alice@EXAMPLE.com" }), domains("example.org", "Example.COM"), false},
		{"email_verified as a string", with(func(u *ssotest.User) { u.Claims = map[string]any{"email_verified": "true"} }), domains("example.com"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ssotest.Start(t)
			p.SetUser(tc.user)
			var edits []func(*Config)
			if tc.cfg != nil {
				edits = append(edits, tc.cfg)
			}
			r := newRP(t, p, edits...)
			b := newBrowser(t)
			id := wantSignedIn(t, b.signIn(r))
			want := Identity{
				Issuer: p.URL, Subject: tc.user.Subject, Email: tc.user.Email, EmailVerified: true,
				Name: tc.user.Name, Username: tc.user.PreferredUsername, Admin: tc.admin,
			}
			if id != want {
				t.Errorf("got %+v\nwant %+v", id, want)
			}
			if n := r.signed.Load(); n != 1 {
				t.Errorf("OnIdentity called %d times, want 1", n)
			}
			if c := b.flowCookie(r); c != "" {
				t.Errorf("the flow cookie is still set after the sign-in")
			}
		})
	}
}

func adminGroup(g string) func(*Config) { return func(c *Config) { c.AdminGroup = g } }

func domains(d ...string) func(*Config) { return func(c *Config) { c.AllowedDomains = d } }

// The authorization request asks for a code with PKCE S256, a state and a
// nonce, fresh for each sign-in; the flow travels in a sealed, HttpOnly,
// Lax, path-scoped cookie.
func TestLoginRequest(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	b := newBrowser(t)
	resp, _ := b.get(r.URL + LoginPath)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("got %s, Cache-Control %q", resp.Status, resp.Header.Get("Cache-Control"))
	}
	loc, _ := url.Parse(resp.Header.Get("Location"))
	q := loc.Query()
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != p.URL+"/authorize" {
		t.Errorf("redirect to %s, want the provider's authorization endpoint", got)
	}
	for k, want := range map[string]string{
		"response_type":         "code",
		"client_id":             clientID,
		"redirect_uri":          r.URL + CallbackPath,
		"scope":                 "openid email profile",
		"code_challenge_method": "S256",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	if len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 22 || len(q.Get("nonce")) < 22 || q.Get("state") == q.Get("nonce") {
		t.Errorf("challenge %q, state %q, nonce %q: want a S256 challenge and a random state and nonce", q.Get("code_challenge"), q.Get("state"), q.Get("nonce"))
	}
	next, _ := url.Parse(b.login(r))
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if next.Query().Get(k) == q.Get(k) {
			t.Errorf("%s is the same in two sign-ins", k)
		}
	}

	var c *http.Cookie
	for _, sc := range resp.Cookies() {
		if sc.Name == flowCookieName {
			c = sc
		}
	}
	if c == nil {
		t.Fatal("no flow cookie set")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != CallbackPath || c.MaxAge != 600 || c.Secure {
		t.Errorf("cookie %s: want HttpOnly, SameSite=Lax, Path=%s, Max-Age=600, not Secure on http", c, CallbackPath)
	}
	for _, k := range []string{"state", "nonce"} {
		if strings.Contains(c.Value, q.Get(k)) {
			t.Errorf("the cookie shows the %s in clear", k)
		}
	}
}

// Behind https the flow cookie is Secure, and so is its deletion.
func TestSecureCookie(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p, func(c *Config) { c.PublicURL = "https://chat.example.com" })
	for _, tc := range []struct {
		path string
		h    http.HandlerFunc
	}{{LoginPath, r.h.Login}, {CallbackPath, r.h.Callback}} {
		w := httptest.NewRecorder()
		tc.h(w, httptest.NewRequest("GET", tc.path, nil))
		sc := w.Result().Cookies()
		if len(sc) != 1 || !sc[0].Secure || sc[0].Name != flowCookieName {
			t.Errorf("%s: got cookies %v, want the flow cookie, Secure", tc.path, sc)
		}
	}
}

func TestRefused(t *testing.T) {
	user := ssotest.DefaultUser
	with := func(edit func(*ssotest.User)) *ssotest.User {
		u := user
		edit(&u)
		return &u
	}
	for _, tc := range []struct {
		name   string
		bad    ssotest.Misbehavior
		user   *ssotest.User
		cfg    func(*Config)
		msg    string
		logged string
	}{
		{name: "wrong issuer", bad: ssotest.Misbehavior{Issuer: "https://evil.example"}, msg: msgInvalid, logged: "id token issued by a different provider"},
		{name: "expired token", bad: ssotest.Misbehavior{Expired: true}, msg: msgExpired, logged: "token is expired"},
		{name: "wrong nonce", bad: ssotest.Misbehavior{Nonce: "forged-nonce"}, msg: msgInvalid, logged: `nonce \"forged-nonce\" is not this flow's`},
		{name: "wrong audience", bad: ssotest.Misbehavior{Audience: []string{"another-app"}}, msg: msgInvalid, logged: "expected audience"},
		{name: "several audiences, no azp", bad: ssotest.Misbehavior{Audience: []string{clientID, "another-app"}}, msg: msgInvalid, logged: "not to this client"},
		{name: "azp of another client", bad: ssotest.Misbehavior{AZP: "another-app"}, msg: msgInvalid, logged: "not to this client"},
		{name: "alg none", bad: ssotest.Misbehavior{Unsigned: true}, msg: msgInvalid, logged: "malformed jwt"},
		{name: "unknown key", bad: ssotest.Misbehavior{UnknownKey: true}, msg: msgInvalid, logged: "failed to verify signature"},
		{name: "HS256 with the public key", bad: ssotest.Misbehavior{HMAC: true}, msg: msgInvalid, logged: "malformed jwt"},
		{name: "no ID token", bad: ssotest.Misbehavior{NoIDToken: true}, msg: msgInvalid, logged: "no id_token"},
		{name: "no subject", user: with(func(u *ssotest.User) { u.Subject = "" }), msg: msgInvalid, logged: "no subject"},
		{name: "provider error access_denied", bad: ssotest.Misbehavior{AuthorizeError: "access_denied"}, msg: msgCancelled, logged: "access_denied"},
		{name: "provider error server_error", bad: ssotest.Misbehavior{AuthorizeError: "server_error"}, msg: msgProviderRefused, logged: "server_error"},
		{name: "token endpoint refuses", bad: ssotest.Misbehavior{TokenError: "invalid_grant"}, msg: msgExchange, logged: "invalid_grant"},
		{name: "answer from another issuer (mix-up)", bad: ssotest.Misbehavior{AuthorizeIssuer: "https://evil.example"}, msg: msgInvalid, logged: "iss parameter"},
		{name: "wrong client secret", cfg: func(c *Config) { c.ClientSecret = "guess" }, msg: msgMisconfigured, logged: "invalid_client"},
		{name: "disallowed domain", user: with(func(u *ssotest.User) { u.Email = "mallory@evil.com" }), cfg: domains("example.com"), msg: domainMessage("evil.com"), logged: "not in an allowed domain"},
		{name: "allowed domain as a prefix", user: with(func(u *ssotest.User) { u.Email = "mallory@example.com.evil.com" }), cfg: domains("example.com"), msg: domainMessage("example.com.evil.com"), logged: "not in an allowed domain"},
		{name: "allowed domain as a suffix", user: with(func(u *ssotest.User) { u.Email = "mallory@evilexample.com" }), cfg: domains("example.com"), msg: domainMessage("evilexample.com"), logged: "not in an allowed domain"},
		{name: "subdomain not listed", user: with(func(u *ssotest.User) { u.Email = "mallory@dev.example.com" }), cfg: domains("example.com"), msg: domainMessage("dev.example.com"), logged: "not in an allowed domain"},
		{name: "two at signs", user: with(func(u *ssotest.User) { u.Email = "alice@example.com@evil.com" }), cfg: domains("example.com"), msg: domainMessage("evil.com"), logged: "not in an allowed domain"},
		{name: "unverified email", user: with(func(u *ssotest.User) { u.EmailVerified = false }), cfg: domains("example.com"), msg: msgUnverified, logged: "email_verified is false"},
		{name: "email_verified missing", user: with(func(u *ssotest.User) { u.Claims = map[string]any{"email_verified": nil} }), cfg: domains("example.com"), msg: msgUnverified, logged: "email_verified is missing"},
		{name: "email_verified not a boolean", user: with(func(u *ssotest.User) { u.Claims = map[string]any{"email_verified": 1} }), cfg: domains("example.com"), msg: msgUnverified, logged: "email_verified is 1"},
		{name: "unverified email in a disallowed domain", user: with(func(u *ssotest.User) { u.Email, u.EmailVerified = "mallory@evil.com", false }), cfg: domains("example.com"), msg: msgUnverified, logged: "email_verified is false"},
		{name: "no email", user: with(func(u *ssotest.User) { u.Email = "" }), cfg: domains("example.com"), msg: msgNoEmail, logged: "no email"},
		{name: "email without a domain", user: with(func(u *ssotest.User) { u.Email = "example.com" }), cfg: domains("example.com"), msg: msgNoEmail, logged: "no email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ssotest.Start(t)
			p.Misbehave(tc.bad)
			if tc.user != nil {
				p.SetUser(*tc.user)
			}
			var edits []func(*Config)
			if tc.cfg != nil {
				edits = append(edits, tc.cfg)
			}
			r := newRP(t, p, edits...)
			b := newBrowser(t)
			r.wantRefused(t, b.signIn(r), tc.msg, tc.logged)
			if b.flowCookie(r) != "" {
				t.Error("the flow cookie is still set after a refusal")
			}
			if tc.bad.AuthorizeError != "" && !strings.Contains(r.log.String(), "<b>detail</b> for the client's log only") {
				t.Error("the provider's error_description is not in the log")
			}
		})
	}
}

// A code is used once: presented again in another browser's flow, the
// provider refuses it.
func TestReplayedCode(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	b1 := newBrowser(t)
	cb1 := b1.authorize(b1.login(r))
	wantSignedIn(t, b1.finish(cb1))
	r.signed.Store(0)

	b2 := newBrowser(t)
	cb2 := b2.authorize(b2.login(r))
	r.wantRefused(t, b2.finish(withParam(t, cb2, "code", param(t, cb1, "code"))), msgExchange, "code already used")
}

// A code stolen before its use (from a log, a Referer) cannot be redeemed
// in another flow: its PKCE challenge is the first flow's.
func TestCodeInjection(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	victim := newBrowser(t)
	stolen := param(t, victim.authorize(victim.login(r)), "code")

	attacker := newBrowser(t)
	cb := attacker.authorize(attacker.login(r))
	r.wantRefused(t, attacker.finish(withParam(t, cb, "code", stolen)), msgExchange, "PKCE code_verifier does not match")
}

// A code the provider issued to another client is refused by the provider.
func TestCodeForAnotherClient(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	p.AddClient(ssotest.Client{ID: "other-app", Secret: "other", RedirectURIs: []string{r.URL + CallbackPath}})
	b := newBrowser(t)
	cb := b.authorize(withParam(t, b.login(r), "client_id", "other-app"))
	r.wantRefused(t, b.finish(cb), msgExchange, "code was issued to another client")
}

// A finished flow's cookie and callback URL, replayed while the cookie is
// still valid, are refused before the code reaches the provider, one after
// another or many at once.
func TestReplayedState(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	b := newBrowser(t)
	cb := b.authorize(b.login(r))
	cookie := b.flowCookie(r)
	wantSignedIn(t, b.finish(cb))
	r.signed.Store(0)
	r.wantRefused(t, getWithCookie(t, cb, cookie), msgReplayed, "state was used already")
	if n := p.TokenRequests(); n != 1 {
		t.Errorf("the provider had %d token requests, want 1", n)
	}

	// The same flow sent n times at once signs in once.
	cb = b.authorize(b.login(r))
	cookie = b.flowCookie(r)
	const n = 8
	outcomes := make(chan outcome, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { outcomes <- getWithCookie(t, cb, cookie) })
	}
	wg.Wait()
	close(outcomes)
	var ok, replayed int
	for o := range outcomes {
		switch {
		case o.id != nil:
			ok++
		case o.msg == msgReplayed:
			replayed++
		default:
			t.Errorf("refused with %q", o.msg)
		}
	}
	if ok != 1 || replayed != n-1 {
		t.Errorf("%d signed in and %d refused as replayed, want 1 and %d", ok, replayed, n-1)
	}
	if got := p.TokenRequests(); got != 2 {
		t.Errorf("the provider had %d token requests, want 2", got)
	}
}

// Login CSRF: an attacker's callback URL (their state and code) opened in a
// victim's browser signs the victim into nothing.
func TestLoginCSRF(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	attacker := newBrowser(t)
	cb := attacker.authorize(attacker.login(r))

	t.Run("victim signing in", func(t *testing.T) {
		victim := newBrowser(t)
		victim.authorize(victim.login(r))
		r.wantRefused(t, victim.finish(cb), msgNotThisBrowser, "state parameter does not match")
	})
	t.Run("victim not signing in", func(t *testing.T) {
		r.wantRefused(t, newBrowser(t).finish(cb), msgFlowLost, "no flow cookie")
	})
	t.Run("no state", func(t *testing.T) {
		victim := newBrowser(t)
		own := victim.authorize(victim.login(r))
		r.wantRefused(t, victim.finish(withParam(t, own, "state", "")), msgNotThisBrowser, "state parameter does not match")
	})
	t.Run("forged error", func(t *testing.T) {
		victim := newBrowser(t)
		victim.login(r)
		r.wantRefused(t, victim.finish(r.URL+CallbackPath+"?error=access_denied&state=guess"), msgNotThisBrowser, "state parameter does not match")
	})
	// The refusals spent nothing of the attacker's own flow.
	wantSignedIn(t, attacker.finish(cb))
}

// A missing, altered, foreign or expired flow cookie ends the sign-in.
func TestFlowCookie(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	other := newRP(t, ssotest.Start(t), func(c *Config) { c.Key = []byte("another key, 32 bytes long......") })

	t.Run("missing", func(t *testing.T) {
		b := newBrowser(t)
		cb := b.authorize(b.login(r))
		r.wantRefused(t, getWithCookie(t, cb, ""), msgFlowLost, "no flow cookie")
	})
	t.Run("altered", func(t *testing.T) {
		b := newBrowser(t)
		cb := b.authorize(b.login(r))
		c := []byte(b.flowCookie(r))
		if c[len(c)/2] == 'A' {
			c[len(c)/2] = 'B'
		} else {
			c[len(c)/2] = 'A'
		}
		r.wantRefused(t, getWithCookie(t, cb, string(c)), msgFlowLost, "or was altered")
	})
	t.Run("garbage", func(t *testing.T) {
		b := newBrowser(t)
		cb := b.authorize(b.login(r))
		r.wantRefused(t, getWithCookie(t, cb, "not*base64"), msgFlowLost, "malformed")
	})
	t.Run("sealed by another server", func(t *testing.T) {
		// A flow of a server with another key, state and all, presented
		// here: the state would match, the seal does not.
		b := newBrowser(t)
		cb := b.authorize(b.login(other))
		forged := strings.Replace(cb, other.URL, r.URL, 1)
		r.wantRefused(t, getWithCookie(t, forged, b.flowCookie(other)), msgFlowLost, "not sealed by this server's key")
	})
	t.Run("sealed with the server's key itself", func(t *testing.T) {
		// Another use of the server's key (database source URLs are sealed
		// with it) cannot make a flow: the cookie's key is derived from it.
		b := newBrowser(t)
		cb := b.authorize(b.login(r))
		block, _ := aes.NewCipher(testKey)
		aead, _ := cipher.NewGCM(block)
		plain, _ := json.Marshal(flow{State: param(t, cb, "state"), Nonce: "n", Verifier: "v", Expires: r.clock.Now().Add(time.Minute).Unix()})
		nonce := make([]byte, aead.NonceSize())
		forged := base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, flowAD))
		r.wantRefused(t, getWithCookie(t, cb, forged), msgFlowLost, "not sealed by this server's key")
	})
	t.Run("expired", func(t *testing.T) {
		b := newBrowser(t)
		cb := b.authorize(b.login(r))
		r.clock.Advance(flowTTL)
		r.wantRefused(t, b.finish(cb), msgFlowLost, "the flow expired 0 s ago")
	})
	t.Run("just in time", func(t *testing.T) {
		b := newBrowser(t)
		cb := b.authorize(b.login(r))
		r.clock.Advance(flowTTL - time.Second)
		wantSignedIn(t, b.finish(cb))
	})
}

// The provider cannot be reached when the first sign-in starts: Login says
// so and sets no cookie. The server keeps no failed discovery: once the
// provider answers, sign-in works.
func TestProviderUnreachableAtStart(t *testing.T) {
	down := ssotest.Start(t)
	down.Close()
	r := newRP(t, down)
	b := newBrowser(t)
	resp, _ := b.get(r.URL + LoginPath)
	if got := signinError(t, resp.Header.Get("Location")); got != msgUnreachable {
		t.Errorf("got %q, want %q", got, msgUnreachable)
	}
	if len(resp.Cookies()) != 0 {
		t.Errorf("cookies set: %v", resp.Cookies())
	}
	if !strings.Contains(r.log.String(), "connection refused") {
		t.Errorf("log lacks the cause:\n%s", r.log.String())
	}

	p := ssotest.Start(t)
	r = newRP(t, p)
	p.Misbehave(ssotest.Misbehavior{Unavailable: true})
	resp, _ = b.get(r.URL + LoginPath)
	if got := signinError(t, resp.Header.Get("Location")); got != msgUnreachable {
		t.Errorf("got %q, want %q", got, msgUnreachable)
	}
	if err := r.h.Discover(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Discover: got %v, want the 503", err)
	}
	p.Misbehave(ssotest.Misbehavior{})
	wantSignedIn(t, b.signIn(r))
}

// The provider goes away between the authorization and the callback.
func TestProviderUnreachableAtCallback(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	b := newBrowser(t)
	cb := b.authorize(b.login(r))
	p.Close()
	r.wantRefused(t, b.finish(cb), msgUnreachable, "connection refused")
}

func TestProviderFailsAtCallback(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	b := newBrowser(t)
	cb := b.authorize(b.login(r))
	p.Misbehave(ssotest.Misbehavior{Unavailable: true})
	r.wantRefused(t, b.finish(cb), msgUnreachable, "503")
}

// DATACHAT_OIDC_ISSUER must be the issuer exactly as the provider names it.
func TestIssuerMismatch(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p, func(c *Config) { c.Issuer = p.URL + "/" })
	resp, _ := newBrowser(t).get(r.URL + LoginPath)
	if got := signinError(t, resp.Header.Get("Location")); got != msgMisconfigured {
		t.Errorf("got %q, want %q", got, msgMisconfigured)
	}
	if !strings.Contains(r.log.String(), "did not match the issuer") {
		t.Errorf("log lacks the cause:\n%s", r.log.String())
	}
}

// A provider that takes the client's secret only in the form is sent it
// there; one that announces Basic gets Basic.
func TestClientAuthentication(t *testing.T) {
	for _, method := range []string{"client_secret_post", "client_secret_basic"} {
		t.Run(method, func(t *testing.T) {
			p := ssotest.Start(t)
			p.SetAuthMethods(method)
			r := newRP(t, p)
			wantSignedIn(t, newBrowser(t).signIn(r))
			if n := p.TokenRequests(); n != 1 {
				t.Errorf("%d token requests, want 1", n)
			}
		})
	}
}

// After the provider rotates its key, tokens signed by the new key verify:
// the key set is fetched again.
func TestKeyRotation(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	wantSignedIn(t, newBrowser(t).signIn(r))
	p.RotateKey()
	wantSignedIn(t, newBrowser(t).signIn(r))
}

// Many people sign in at once.
func TestConcurrentSignIns(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	const n = 8
	outcomes := make(chan outcome, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { outcomes <- newBrowser(t).signIn(r) })
	}
	wg.Wait()
	close(outcomes)
	for o := range outcomes {
		wantSignedIn(t, o)
	}
	if n := r.signed.Load(); n != 8 {
		t.Errorf("OnIdentity called %d times, want 8", n)
	}
}

func TestNew(t *testing.T) {
	good := Config{
		Issuer: "https://id.example.com", ClientID: "c", ClientSecret: "s", PublicURL: "https://chat.example.com",
		Key: make([]byte, 32), OnIdentity: func(http.ResponseWriter, *http.Request, Identity) {},
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no issuer", func(c *Config) { c.Issuer = "" }, "Issuer, ClientID and ClientSecret are required"},
		{"no client", func(c *Config) { c.ClientID = "" }, "Issuer, ClientID and ClientSecret are required"},
		{"no secret", func(c *Config) { c.ClientSecret = "" }, "Issuer, ClientID and ClientSecret are required"},
		{"no OnIdentity", func(c *Config) { c.OnIdentity = nil }, "OnIdentity is required"},
		{"short key", func(c *Config) { c.Key = make([]byte, 16) }, "want 32 bytes, got 16"},
		{"no public URL", func(c *Config) { c.PublicURL = "" }, "want an origin"},
		{"public URL with a path", func(c *Config) { c.PublicURL = "https://example.com/chat" }, "want an origin"},
		{"public URL with a query", func(c *Config) { c.PublicURL = "https://example.com/?a=b" }, "want an origin"},
		{"public URL not http", func(c *Config) { c.PublicURL = "ftp://example.com" }, "want an origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			_, err := New(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	c := good
	c.PublicURL = "https://chat.example.com/"
	h, err := New(c)
	if err != nil || h.redirect != "https://chat.example.com"+CallbackPath {
		t.Errorf("a trailing slash: got %v, redirect %q", err, h.redirect)
	}
}

// The message survives the fragment: no character the page would read as
// a separator, and it decodes back.
func TestRefuseSignIn(t *testing.T) {
	msg := `Accounts at a&b=c+d #e "f" may not sign in. 100% sure?`
	w := httptest.NewRecorder()
	RefuseSignIn(w, httptest.NewRequest("GET", CallbackPath, nil), msg)
	loc := w.Header().Get("Location")
	if w.Code != http.StatusFound || strings.ContainsAny(strings.TrimPrefix(loc, "/#signin-error="), "&=+# \"") {
		t.Fatalf("got %d %q", w.Code, loc)
	}
	if got := signinError(t, loc); got != msg {
		t.Errorf("got %q, want %q", got, msg)
	}
}

func param(t *testing.T, u, k string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Query().Get(k)
}

func withParam(t *testing.T, u, k, v string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(k, v)
	p.RawQuery = q.Encode()
	return p.String()
}
