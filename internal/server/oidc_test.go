package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/sso"
	"datachat/internal/sso/ssotest"
)

// ssoServer is a test server with single sign-on through p, configured by
// edit.
func ssoServer(t *testing.T, p *ssotest.Provider, edit ...func(*sso.Config)) *testServer {
	t.Helper()
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.PublicURL = selfURL })
	c := sso.Config{Issuer: p.URL, ClientID: "datachat", ClientSecret: "s3cret", PublicURL: ts.cfg.PublicURL,
		Key: []byte("0123456789abcdef0123456789abcdef")}
	for _, e := range edit {
		e(&c)
	}
	if err := ts.EnableSSO(c); err != nil {
		t.Fatal(err)
	}
	p.AddClient(ssotest.Client{ID: "datachat", Secret: "s3cret", RedirectURIs: []string{ts.URL + sso.CallbackPath}})
	return ts
}

// navigate requests an absolute URL as a browser's top-level navigation
// and returns where it redirects to.
func (b *browser) navigate(u string) string {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("GET %s: %s, want a redirect", u, resp.Status)
	}
	return resp.Header.Get("Location")
}

// ssoFlow runs a sign-in up to the provider's answer: it returns the
// callback URL and the flow cookie the browser holds for it.
func (b *browser) ssoFlow() (callback, flow string) {
	b.t.Helper()
	auth := b.navigate(b.ts.URL + sso.LoginPath)
	if strings.HasPrefix(auth, "/") {
		b.t.Fatalf("login refused: %s", auth)
	}
	callback = b.navigate(auth)
	u, _ := url.Parse(callback)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == "datachat_oidc_flow" {
			flow = c.Value
		}
	}
	return callback, flow
}

// ssoSignIn signs in through the provider and returns where the server
// sent the browser at the end: "/" signed in, or "/#signin-error=…" with
// the message (returned unescaped).
func (b *browser) ssoSignIn() (loc, msg string) {
	b.t.Helper()
	callback, _ := b.ssoFlow()
	loc = b.navigate(callback)
	if m, ok := strings.CutPrefix(loc, "/#signin-error="); ok {
		msg, _ = url.PathUnescape(m)
	}
	return loc, msg
}

// TestSSOSignIn: a person's first single sign-on creates their account —
// named after their preferred_username, made unique (alice exists) — and
// signs them in with a session whose cookie works on the API and the
// WebSocket; the next sign-in finds the same account, whatever their email
// became; a person without a username is named after their email.
func TestSSOSignIn(t *testing.T) {
	p := ssotest.Start(t)
	ts := ssoServer(t, p)
	if st, body := ts.withCookie(t, "GET", "/api/auth/methods", "", ""); st != 200 ||
		strings.TrimSpace(body) != `{"oidc":true,"oidc_login":"/api/auth/oidc/login","password":true}` {
		t.Errorf("methods: %d %s", st, body)
	}
	b := ts.browser(t)
	if loc, msg := b.ssoSignIn(); loc != "/" {
		t.Fatalf("sign-in: %s (%s)", loc, msg)
	}
	st, m := b.me()
	if st != 200 || m.Name != "alice-2" || m.Auth != "oidc" || m.Email != "alice@example.com" || m.Role != datachat.RoleMember {
		t.Fatalf("/api/me: %d %+v", st, m)
	}
	if !strings.HasPrefix(b.cookie(), "o.") {
		t.Errorf("the session cookie %q is not marked oidc", b.cookie())
	}
	ws := b.openWS(ts.conversationOf(t, m.ID))
	if !ws.alive() {
		t.Errorf("the WebSocket with the single sign-on session does not answer")
	}
	if _, _, err := ts.dialCookie(t, ts.conversationOf(t, m.ID), b.cookie(), "https://evil.example"); err == nil {
		t.Errorf("the single sign-on cookie opened a WebSocket from another site")
	}

	// The next sign-in, from another browser, with a new email.
	u := ssotest.DefaultUser
	u.Email = "alice@example.org"
	p.SetUser(u)
	b2 := ts.browser(t)
	if loc, msg := b2.ssoSignIn(); loc != "/" {
		t.Fatalf("second sign-in: %s (%s)", loc, msg)
	}
	if st, m2 := b2.me(); st != 200 || m2.ID != m.ID || m2.Email != "alice@example.org" {
		t.Errorf("second sign-in: %d %+v, want the same account with the new email", st, m2)
	}

	p.SetUser(ssotest.User{Subject: "s-zoe", Email: "zoe@example.com", EmailVerified: true})
	z := ts.browser(t)
	z.ssoSignIn()
	if st, mz := z.me(); st != 200 || mz.Name != "zoe" {
		t.Errorf("a person without a username: %d %+v, want named zoe", st, mz)
	}
	p.SetUser(ssotest.User{Subject: "s-odd", PreferredUsername: " \x07odd\u202e name\t"})
	o := ts.browser(t)
	o.ssoSignIn()
	if st, mo := o.me(); st != 200 || mo.Name != "odd\u202e name" {
		t.Errorf("a username with control characters: %d %+v", st, mo)
	}
	p.SetUser(ssotest.User{Subject: "s-none"})
	n := ts.browser(t)
	n.ssoSignIn()
	if st, mn := n.me(); st != 200 || mn.Name != "user" {
		t.Errorf("a person with neither username nor email: %d %+v", st, mn)
	}

	accounts, _ := ts.Store.Accounts(t.Context())
	if len(accounts) != 6 { // alice, bob, alice-2, zoe, odd…, user
		t.Errorf("%d accounts, want 6", len(accounts))
	}
	oks := 0
	for _, e := range ts.auditOf(t, datachat.AuditSignIn) {
		if e.Outcome == datachat.AuditOK && strings.Contains(e.Detail, "method oidc") {
			oks++
		}
	}
	if oks != 5 {
		t.Errorf("%d sign_in ok records of single sign-on, want 5", oks)
	}
	if ev := ts.auditOf(t, datachat.AuditUserInvited); len(ev) != 4 || !strings.Contains(ev[0].Detail, "first single sign-on") {
		t.Errorf("user.invited records: %+v", ev)
	}
}

// TestSSORefusals: each attack the provider's answer or the browser can
// mount is refused through the real server — a token from another
// issuer, an expired token, a replayed callback, an email domain not
// allowed, an email not verified — and so is a disabled user: the browser
// is sent to the page with a message, holds no session, and the refusal is
// in the audit log.
func TestSSORefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*testing.T, *ssotest.Provider, *testServer)
		cfg   func(*sso.Config)
		want  string
	}{
		{"wrong issuer", func(_ *testing.T, p *ssotest.Provider, _ *testServer) {
			p.Misbehave(ssotest.Misbehavior{Issuer: "https://evil.example"})
		}, nil, "could not be verified"},
		{"expired token", func(_ *testing.T, p *ssotest.Provider, _ *testServer) {
			p.Misbehave(ssotest.Misbehavior{Expired: true})
		}, nil, "has expired"},
		{"signed by another key", func(_ *testing.T, p *ssotest.Provider, _ *testServer) {
			p.Misbehave(ssotest.Misbehavior{UnknownKey: true})
		}, nil, "could not be verified"},
		{"unsigned token", func(_ *testing.T, p *ssotest.Provider, _ *testServer) {
			p.Misbehave(ssotest.Misbehavior{Unsigned: true})
		}, nil, "could not be verified"},
		{"disallowed domain", func(_ *testing.T, p *ssotest.Provider, _ *testServer) {
			p.SetUser(ssotest.User{Subject: "m", Email: "mallory@evil.example", EmailVerified: true, PreferredUsername: "mallory"})
		}, func(c *sso.Config) { c.AllowedDomains = []string{"example.com"} }, "evil.example may not sign in"},
		{"unverified email", func(_ *testing.T, p *ssotest.Provider, _ *testServer) {
			p.SetUser(ssotest.User{Subject: "m", Email: "mallory@example.com", EmailVerified: false, PreferredUsername: "mallory"})
		}, func(c *sso.Config) { c.AllowedDomains = []string{"example.com"} }, "not verified"},
		{"disabled user", func(t *testing.T, p *ssotest.Provider, ts *testServer) {
			b := ts.browser(t)
			if loc, msg := b.ssoSignIn(); loc != "/" {
				t.Fatalf("first sign-in: %s", msg)
			}
			_, m := b.me()
			if err := ts.Store.DisableUser(t.Context(), m.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}, nil, datachat.ErrUserDisabled.Message},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ssotest.Start(t)
			var edits []func(*sso.Config)
			if tc.cfg != nil {
				edits = append(edits, tc.cfg)
			}
			ts := ssoServer(t, p, edits...)
			tc.setup(t, p, ts)
			before := len(ts.auditOf(t, datachat.AuditSignIn))
			b := ts.browser(t)
			loc, msg := b.ssoSignIn()
			if loc == "/" || !strings.Contains(msg, tc.want) {
				t.Errorf("got %s (%q), want refused with %q", loc, msg, tc.want)
			}
			if b.cookie() != "" {
				t.Errorf("a refused sign-in left a session cookie")
			}
			ev := ts.auditOf(t, datachat.AuditSignIn)
			if len(ev) != before+1 || ev[0].Outcome != datachat.AuditRefused || !strings.Contains(ev[0].Detail, "method oidc") ||
				!strings.Contains(ev[0].Detail, tc.want) && tc.name != "disabled user" || ev[0].Address != "127.0.0.1" {
				t.Errorf("audit: %d new records, newest %+v", len(ev)-before, ev[0])
			}
		})
	}
}

// TestSSOReplay: a callback URL replayed — with the flow cookie it came
// with, or without — signs nobody in, and the code is never redeemed a
// second time.
func TestSSOReplay(t *testing.T) {
	p := ssotest.Start(t)
	ts := ssoServer(t, p)
	b := ts.browser(t)
	callback, flow := b.ssoFlow()
	if loc := b.navigate(callback); loc != "/" {
		t.Fatalf("sign-in: %s", loc)
	}
	tokens := p.TokenRequests()
	for _, tc := range []struct{ name, cookie, want string }{
		{"with its flow cookie", flow, "already used"},
		{"without a flow cookie", "", "started in another browser"},
		{"with another flow's cookie", func() string { _, f := ts.browser(t).ssoFlow(); return f }(), "not started in this browser"},
	} {
		req, _ := http.NewRequest("GET", callback, nil)
		if tc.cookie != "" {
			req.AddCookie(&http.Cookie{Name: "datachat_oidc_flow", Value: tc.cookie})
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.PathUnescape(resp.Header.Get("Location"))
		if resp.StatusCode != 302 || !strings.Contains(loc, tc.want) || strings.Contains(resp.Header.Get("Set-Cookie"), sessionCookieName+"=o.") {
			t.Errorf("replayed %s: %d %s", tc.name, resp.StatusCode, loc)
		}
	}
	if n := p.TokenRequests(); n != tokens {
		t.Errorf("the replays reached the provider's token endpoint %d times", n-tokens)
	}
}

// TestSSOAdminGroup: with DATACHAT_OIDC_ADMIN_GROUP, the group makes an
// admin at each sign-in and its absence a member — except the last admin,
// who stays one; without it, single sign-on leaves roles as they are.
func TestSSOAdminGroup(t *testing.T) {
	p := ssotest.Start(t)
	ts := ssoServer(t, p, func(c *sso.Config) { c.AdminGroup = "datachat-admins" })
	u := ssotest.User{Subject: "s-ann", Email: "ann@example.com", EmailVerified: true, PreferredUsername: "ann", Groups: []string{"staff", "datachat-admins"}}
	p.SetUser(u)
	b := ts.browser(t)
	b.ssoSignIn()
	if st, m := b.me(); st != 200 || m.Role != datachat.RoleAdmin {
		t.Fatalf("in the admin group: %d %+v", st, m)
	}
	if st, _ := b.get("/api/admin/users"); st != 200 {
		t.Errorf("the group's admin on an admin route: %d", st)
	}
	// Out of the group, but the last admin: still admin.
	u.Groups = []string{"staff"}
	p.SetUser(u)
	b.ssoSignIn()
	if _, m := b.me(); m.Role != datachat.RoleAdmin {
		t.Errorf("the last admin out of the group: %+v, want still admin", m)
	}
	// With another admin, out of the group is a member.
	ts.account(t, "root", datachat.RoleAdmin)
	b.ssoSignIn()
	if _, m := b.me(); m.Role != datachat.RoleMember {
		t.Errorf("out of the group: %+v, want member", m)
	}
	if st, _ := b.get("/api/admin/users"); st != 403 {
		t.Errorf("out of the group on an admin route: %d, want 403", st)
	}
	changed := ts.auditOf(t, datachat.AuditUserChanged)
	if len(changed) != 1 || !strings.Contains(changed[0].Detail, "admin → member") {
		t.Errorf("user.changed records: %+v", changed)
	}

	// Without an admin group, an admin made through the API stays one.
	p2 := ssotest.Start(t)
	ts2 := ssoServer(t, p2)
	p2.SetUser(u)
	b2 := ts2.browser(t)
	b2.ssoSignIn()
	_, m := b2.me()
	if err := ts2.Store.SetRole(t.Context(), m.ID, datachat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	b2.ssoSignIn()
	if _, m := b2.me(); m.Role != datachat.RoleAdmin {
		t.Errorf("without an admin group, the admin after single sign-on: %+v", m)
	}
}

// TestSSONameNotInAGrant: a new single sign-on account is not given a name
// a source is still granted to (its earlier user removed by the command
// line, or named in DATACHAT_SOURCES): it would inherit the grant.
func TestSSONameNotInAGrant(t *testing.T) {
	p := ssotest.Start(t)
	ts := ssoServer(t, p)
	if err := ts.Store.CreateDBSource(t.Context(), &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:x",
		Users: []string{"carol"}, Origin: datachat.OriginConfig}); err != nil {
		t.Fatal(err)
	}
	p.SetUser(ssotest.User{Subject: "s-carol", Email: "carol@example.com", EmailVerified: true, PreferredUsername: "carol"})
	b := ts.browser(t)
	b.ssoSignIn()
	if st, m := b.me(); st != 200 || m.Name != "carol-2" {
		t.Errorf("a newcomer named like a grant: %d %+v, want carol-2", st, m)
	}
}
