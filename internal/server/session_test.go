package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
)

const (
	pwCarol = "correct horse battery"
	pwRoot  = "root's long passphrase"
)

// TestSignInWithPassword: an admin invites a member through the API; the
// member sets a password with the invite link (used once) and is signed
// in, in two tabs, and after a restart of the server; signing out ends
// that session only, and its cookie no longer works.
func TestSignInWithPassword(t *testing.T) {
	ts := newTestServer(t)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)

	st, body := root.postJSON("/api/admin/users", map[string]string{"name": "carol"})
	if st != 201 {
		t.Fatalf("invite carol: %d %s", st, body)
	}
	var created struct {
		User      datachat.Account `json:"user"`
		InviteURL string           `json:"invite_url"`
		ExpiresAt time.Time        `json:"expires_at"`
	}
	json.Unmarshal([]byte(body), &created)
	token, ok := strings.CutPrefix(created.InviteURL, ts.URL+"/#invite=")
	if !ok || !validToken(token) || created.User.Name != "carol" || created.User.Role != datachat.RoleMember ||
		created.ExpiresAt.Sub(time.Now()) < datachat.InviteTTL-time.Minute {
		t.Fatalf("invite: got %s", body)
	}

	carol := ts.browser(t)
	for _, tc := range []struct {
		body        map[string]string
		status      int
		want, type_ string
	}{
		{map[string]string{"token": token, "password": "short"}, 400, "12", "invalid_request"},
		{map[string]string{"token": token, "password": strings.Repeat("x", 1025)}, 400, "1", "invalid_request"},
		{map[string]string{"token": randomToken(), "password": pwCarol}, 401, datachat.ErrInviteInvalid.Message, "unauthorized"},
		{map[string]string{"token": token + "x", "password": pwCarol}, 401, datachat.ErrInviteInvalid.Message, "unauthorized"},
		{map[string]string{"token": "", "password": pwCarol}, 401, datachat.ErrInviteInvalid.Message, "unauthorized"},
	} {
		st, body := carol.postJSON("/api/auth/invite", tc.body)
		if st != tc.status || !strings.Contains(body, tc.want) || !strings.Contains(body, `"type":"`+tc.type_+`"`) || carol.cookie() != "" {
			t.Errorf("invite %v: got %d %s (cookie %q), want %d saying %q", tc.body, st, body, carol.cookie(), tc.status, tc.want)
		}
	}
	resp, body := carol.do("POST", "/api/auth/invite", fmt.Sprintf(`{"token":%q,"password":%q}`, token, pwCarol))
	if resp.StatusCode != 200 || !strings.Contains(body, `"name":"carol"`) || !strings.Contains(body, `"auth":"password"`) || !strings.Contains(body, `"role":"member"`) {
		t.Fatalf("carol uses her invite: %d %s", resp.StatusCode, body)
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{sessionCookieName + "=p.", "Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=" + strconv.Itoa(int(defaultSessionIdle/time.Second))} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("Set-Cookie %q is Secure over plain http without an https DATACHAT_PUBLIC_URL", set)
	}
	if st, body := carol.postJSON("/api/auth/invite", map[string]string{"token": token, "password": pwCarol + "!"}); st != 401 {
		t.Errorf("the invite used again: %d %s, want 401", st, body)
	}
	if st, m := carol.me(); st != 200 || m.Name != "carol" || m.Role != datachat.RoleMember || m.Auth != "password" || m.ID != created.User.ID {
		t.Errorf("/api/me: %d %+v", st, m)
	}

	// A second tab shares the cookie; a second browser signs in anew.
	tab2 := &browser{t: t, ts: ts, jar: carol.jar, c: &http.Client{Jar: carol.jar}}
	if st, _ := tab2.get("/api/conversations"); st != 200 {
		t.Errorf("second tab: %d", st)
	}
	phone := ts.browser(t)
	phone.login("carol", pwCarol)
	if phone.cookie() == carol.cookie() {
		t.Errorf("two sign-ins share a session")
	}

	// A restart: a new server over the same store takes the cookie.
	restarted := httptest.NewServer(New(Deps{Store: ts.Store, Logger: slog.New(slog.DiscardHandler), Workspace: ts.Workspace}, Config{}).Handler())
	defer restarted.Close()
	req, _ := http.NewRequest("GET", restarted.URL+"/api/me", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: carol.cookie()})
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("after a restart: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	old := carol.cookie()
	resp, body = carol.do("POST", "/api/auth/logout", "")
	if resp.StatusCode != 204 || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") || carol.cookie() != "" {
		t.Errorf("logout: %d %s, Set-Cookie %q", resp.StatusCode, body, resp.Header.Get("Set-Cookie"))
	}
	if st, body := ts.withCookie(t, "GET", "/api/me", old, ""); st != 401 || !strings.Contains(body, datachat.ErrSessionEnded.Message) {
		t.Errorf("the signed-out cookie: %d %s, want 401 %q", st, body, datachat.ErrSessionEnded.Message)
	}
	if st, _ := phone.me(); st != 200 {
		t.Errorf("the other session after signing out of one: %d", st)
	}
	if st, _ := carol.postJSON("/api/auth/logout", nil); st != 204 {
		t.Errorf("signing out again: %d, want 204", st)
	}

	// Each sign-in is in the audit log, with its method and address.
	oks := 0
	for _, e := range ts.auditOf(t, datachat.AuditSignIn) {
		if e.Outcome == datachat.AuditOK && e.UserName == "carol" {
			oks++
			if e.Address != "127.0.0.1" || !strings.Contains(e.Detail, "method password") || e.UserID != created.User.ID {
				t.Errorf("sign_in record %+v", *e)
			}
		}
	}
	if oks != 2 {
		t.Errorf("%d sign_in ok records of carol, want 2", oks)
	}
	if ev := ts.auditOf(t, datachat.AuditUserInvited); len(ev) != 1 || ev[0].Target != "carol" || ev[0].UserName != "root" {
		t.Errorf("user.invited records: %+v", ev)
	}
}

// TestLoginRefusals: an unknown user, a user without a password (who signs
// in with a key) and a wrong password get the same answer; a disabled user
// hears so only with the right password; each refusal is in the audit log
// with its reason and address, and a refused sign-in sets no cookie.
func TestLoginRefusals(t *testing.T) {
	ts := newTestServer(t)
	ts.member(t, "carol", pwCarol)
	ts.person(t, "dora", datachat.RoleMember, pwCarol)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	if st, body := root.postJSON("/api/admin/users/dora/disable", nil); st != 200 {
		t.Fatalf("disable dora: %d %s", st, body)
	}
	wrong := "Wrong user name or password."
	for _, tc := range []struct {
		user, pw, want, reason string
	}{
		{"nobody", pwCarol, wrong, "no such user"},
		{"alice", pwCarol, wrong, "no password"}, // alice has a key only
		{"carol", pwCarol + "x", wrong, "wrong password"},
		{"carol", strings.ToUpper(pwCarol), wrong, "wrong password"},
		{"dora", "not her password", wrong, "wrong password"},
		{"dora", pwCarol, datachat.ErrUserDisabled.Message, "disabled"},
	} {
		b := ts.browser(t)
		st, body := b.postJSON("/api/auth/login", map[string]string{"user": tc.user, "password": tc.pw})
		if st != 401 || !strings.Contains(body, tc.want) || b.cookie() != "" {
			t.Errorf("%s/%s: got %d %s (cookie %q), want 401 %q", tc.user, tc.pw, st, body, b.cookie(), tc.want)
		}
	}
	refused := map[string]string{}
	for _, e := range ts.auditOf(t, datachat.AuditSignIn) {
		if e.Outcome == datachat.AuditRefused {
			refused[e.UserName] += e.Detail + "|"
			if e.Address != "127.0.0.1" || !strings.Contains(e.Detail, "method password") {
				t.Errorf("refusal record %+v", *e)
			}
		}
	}
	for user, want := range map[string][]string{
		"nobody": {"no such user"}, "alice": {"no password"}, "carol": {"wrong password", "wrong password"},
		"dora": {"wrong password", "disabled"},
	} {
		for _, w := range want {
			if !strings.Contains(refused[user], w) {
				t.Errorf("audit of %s's refusals %q lacks %q", user, refused[user], w)
			}
		}
	}
}

// TestLoginHostileInput: malformed bodies are refused saying what is
// wrong; names that look like carol's, but are not, do not sign in as
// her; a password longer than any that can be set is refused unhashed.
func TestLoginHostileInput(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.SignInPerUser, c.SignInPerAddress = -1, -1 })
	ts.member(t, "José", pwCarol) // NFC: U+00E9
	b := ts.browser(t)
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"extra field", `{"user":"José","password":"` + pwCarol + `","admin":true}`, 400, "admin"},
		{"not JSON", `user=José&password=x`, 400, "not valid JSON"},
		{"trailing data", `{"user":"José","password":"x"}{}`, 400, "after the JSON object"},
		{"empty", ``, 400, "empty"},
		{"no password", `{"user":"José"}`, 400, "user name and password"},
		{"number for a name", `{"user":1,"password":"x"}`, 400, "not valid JSON"},
		{"invalid UTF-8", "{\"user\":\"Jos\xc3\",\"password\":\"x\"}", 400, "UTF-8"},
		{"huge password", `{"user":"José","password":"` + strings.Repeat("p", 1025) + `"}`, 400, "1024"},
		{"body over 1 MiB", `{"user":"José","password":"` + strings.Repeat("p", 1<<20) + `"}`, 400, "larger than"},
		{"NUL in the name", `{"user":"Jos\u0000é","password":"x"}`, 401, "Wrong user name"},
		{"long name", `{"user":"` + strings.Repeat("é", 5000) + `","password":"x"}`, 401, "Wrong user name"},
		{"NFD", `{"user":"Jose\u0301","password":"` + pwCarol + `"}`, 401, "Wrong user name"},
		{"upper case", `{"user":"JOSÉ","password":"` + pwCarol + `"}`, 401, "Wrong user name"},
		{"trailing space", `{"user":"José ","password":"` + pwCarol + `"}`, 401, "Wrong user name"},
		{"zero-width space", `{"user":"José\u200b","password":"` + pwCarol + `"}`, 401, "Wrong user name"},
		{"fullwidth", `{"user":"Ｊｏｓé","password":"` + pwCarol + `"}`, 401, "Wrong user name"},
		{"password with a NUL", `{"user":"José","password":"` + pwCarol + `\u0000"}`, 401, "Wrong user name"},
		{"right", `{"user":"José","password":"` + pwCarol + `"}`, 200, `"name":"José"`},
	} {
		resp, body := b.do("POST", "/api/auth/login", tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: got %d %s, want %d with %q", tc.name, resp.StatusCode, body, tc.status, tc.want)
		}
		if tc.status != 200 && strings.Contains(resp.Header.Get("Set-Cookie"), "=p.") {
			t.Errorf("%s: a refused sign-in set a session cookie", tc.name)
		}
	}
}

// TestLoginLimits: sign-ins are limited per user name and per address:
// past the limit even the right password is refused, 429 with Retry-After
// and when to try again, while other names (per name) go on; the limit per
// address covers invites too.
func TestLoginLimits(t *testing.T) {
	t.Run("per user name", func(t *testing.T) {
		ts := newTestServer(t, func(_ *Deps, c *Config) { c.SignInPerUser, c.SignInPerAddress = 3, 100 })
		ts.member(t, "carol", pwCarol)
		ts.member(t, "dave", pwCarol)
		b := ts.browser(t)
		for i := range 3 {
			if st, _ := b.postJSON("/api/auth/login", map[string]string{"user": "carol", "password": fmt.Sprint("guess ", i)}); st != 401 {
				t.Fatalf("guess %d: %d, want 401", i, st)
			}
		}
		resp, body := b.do("POST", "/api/auth/login", fmt.Sprintf(`{"user":"carol","password":%q}`, pwCarol))
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 429 || !strings.Contains(body, "Too many sign-in attempts; try again in 15 minutes.") ||
			!strings.Contains(body, `"type":"rate_limited"`) || ra < 890 || ra > 900 || b.cookie() != "" {
			t.Errorf("the right password past the limit: %d %s, Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
		b.login("dave", pwCarol) // another name from the same address
		// A name that only looks like carol's is another name.
		if st, _ := b.postJSON("/api/auth/login", map[string]string{"user": "Carol", "password": pwCarol}); st != 401 {
			t.Errorf("Carol: %d, want 401", st)
		}
	})
	t.Run("per address", func(t *testing.T) {
		ts := newTestServer(t, func(_ *Deps, c *Config) { c.SignInPerUser, c.SignInPerAddress = 100, 4 })
		id := ts.account(t, "carol", datachat.RoleMember)
		token := ts.inviteToken(t, id)
		b := ts.browser(t)
		for _, name := range []string{"u1", "u2", "u3", "u4"} {
			if st, _ := b.postJSON("/api/auth/login", map[string]string{"user": name, "password": pwCarol}); st != 401 {
				t.Fatalf("%s: %d, want 401", name, st)
			}
		}
		if st, body := b.postJSON("/api/auth/invite", map[string]string{"token": token, "password": pwCarol}); st != 429 || !strings.Contains(body, "Too many sign-in attempts") {
			t.Errorf("an invite past the address's limit: %d %s", st, body)
		}
		if st, _ := b.postJSON("/api/auth/login", map[string]string{"user": "u5", "password": pwCarol}); st != 429 {
			t.Errorf("a fifth name past the address's limit: %d, want 429", st)
		}
	})
	t.Run("zero is the default, negative is none", func(t *testing.T) {
		if limitOf(0, 10) != 10 || limitOf(-1, 10) != 0 || limitOf(3, 10) != 3 {
			t.Errorf("limitOf")
		}
	})
}

// TestTooManySignInsMessage: the wait is said in whole minutes, rounded up.
func TestTooManySignInsMessage(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second:                  "1 minute.",
		90 * time.Second:             "2 minutes.",
		15 * time.Minute:             "15 minutes.",
		15*time.Minute - time.Second: "15 minutes.",
		0:                            "1 minute.",
	} {
		err := errTooManySignIns(d)
		if !strings.HasSuffix(datachat.ErrorMessage(err), "try again in "+want) {
			t.Errorf("%v: %q", d, datachat.ErrorMessage(err))
		}
		if ra, ok := datachat.RetryAfter(err); !ok || ra < time.Second {
			t.Errorf("%v: Retry-After %v", d, ra)
		}
	}
}

// TestSessionCookieHostile: a cookie that is not a live session's — made
// up, altered, cut, lengthened, its method mark swapped, from another
// server, or from before a sign-out — signs nobody in, and the browser is
// told to drop it.
func TestSessionCookieHostile(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	good := carol.cookie()
	other := newTestServer(t)
	elsewhere := other.member(t, "carol", pwCarol).cookie()
	swapped := "o." + good[2:]
	flip := byte('A')
	if good[20] == 'A' {
		flip = 'B'
	}
	flipped := good[:20] + string(flip) + good[21:]
	for name, v := range map[string]string{
		"made up":              "p." + randomToken(),
		"altered":              flipped,
		"cut":                  good[:len(good)-1],
		"lengthened":           good + "A",
		"method swapped":       swapped,
		"no mark":              good[2:],
		"unknown mark":         "x." + good[2:],
		"another server's":     elsewhere,
		"not base64":           "p." + strings.Repeat("*", 43),
		"padded base64":        "p." + good[2:44] + "=",
		"long":                 strings.Repeat("p", 8000),
		"the API key in it":    ts.alice,
		"the hash of the real": datachat.HashAPIKey(good),
	} {
		st, body := ts.withCookie(t, "GET", "/api/me", v, "")
		if st != 401 || !strings.Contains(body, `"type":"unauthorized"`) {
			t.Errorf("%s: got %d %s, want 401", name, st, body)
		}
		req, _ := http.NewRequest("GET", ts.URL+"/api/conversations", nil)
		req.Header.Set("Cookie", sessionCookieName+"="+v)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("Set-Cookie"), sessionCookieName+"=;") {
			t.Errorf("%s: got %d, Set-Cookie %q; want 401 deleting the cookie", name, resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	}
	if st, _ := ts.withCookie(t, "GET", "/api/me", good, ""); st != 200 {
		t.Errorf("the real cookie: %d", st)
	}
	// Two cookies of the name: the first is the one read.
	if st, _ := ts.withCookie(t, "GET", "/api/me", "", "", "Cookie", sessionCookieName+"=p."+randomToken()+"; "+sessionCookieName+"="+good); st != 401 {
		t.Errorf("a made-up cookie before the real one: %d, want 401", st)
	}
}

// TestSessionFixation: a session cookie a browser carried before signing
// in — an attacker's own, planted, or a made-up one — is not honoured
// after: signing in makes a new session, and the old one ends.
func TestSessionFixation(t *testing.T) {
	ts := newTestServer(t)
	ts.member(t, "carol", pwCarol)
	mallory := ts.member(t, "mallory", pwCarol+"!")
	planted := mallory.cookie()

	victim := ts.browser(t)
	victim.setCookie(planted)
	if st, m := victim.me(); st != 200 || m.Name != "mallory" {
		t.Fatalf("the planted cookie before sign-in: %d %+v", st, m)
	}
	victim.login("carol", pwCarol)
	if victim.cookie() == planted {
		t.Fatalf("the session cookie did not change at sign-in")
	}
	if st, m := victim.me(); st != 200 || m.Name != "carol" {
		t.Errorf("after sign-in: %d %+v", st, m)
	}
	if st, _ := ts.withCookie(t, "GET", "/api/me", planted, ""); st != 401 {
		t.Errorf("the planted cookie after the victim signed in: %d, want 401", st)
	}

	madeUp := "p." + randomToken()
	b := ts.browser(t)
	b.setCookie(madeUp)
	b.login("carol", pwCarol)
	if b.cookie() == madeUp || b.cookie() == "" {
		t.Errorf("a made-up cookie survived sign-in: %q", b.cookie())
	}
	if st, _ := ts.withCookie(t, "GET", "/api/me", madeUp, ""); st != 401 {
		t.Errorf("the made-up cookie after sign-in: %d", st)
	}
}

// TestCookieOnlyWhereAllowed: the session cookie reaches the page's API,
// never /v1, /mcp or /metrics, which take API keys only.
func TestCookieOnlyWhereAllowed(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/models", ""},
		{"GET", "/v1/models/datachat", ""},
		{"POST", "/v1/chat/completions", `{"model":"datachat","messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"GET", "/mcp", ""},
		{"GET", "/metrics", ""},
	} {
		resp, body := carol.do(tc.method, tc.path, tc.body, "Accept", "application/json, text/event-stream")
		if resp.StatusCode != 401 {
			t.Errorf("%s %s with the cookie: %d %s, want 401", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	if st, _ := carol.get("/api/conversations"); st != 200 {
		t.Errorf("the page's API with the cookie: %d", st)
	}
}

// TestCrossSiteRequests: a request made with the cookie from another site
// is refused before it does anything — a form, a fetch with credentials,
// a sibling subdomain, a sandboxed page, a WebSocket —; the same from the
// page, from DATACHAT_PUBLIC_URL, or with an API key instead of the
// cookie, goes through. Sign-in, invites and sign-out are protected too.
func TestCrossSiteRequests(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	cookie := carol.cookie()
	const evil = "https://evil.example"
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"fetch with credentials", []string{"Origin", evil, "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 403},
		{"form post", []string{"Origin", evil, "Sec-Fetch-Site", "cross-site", "Content-Type", "application/x-www-form-urlencoded"}, 403},
		{"form post from an old browser", []string{"Origin", evil, "Content-Type", "text/plain"}, 403},
		{"a sibling site", []string{"Origin", "http://other.127.0.0.1.nip.io", "Sec-Fetch-Site", "same-site"}, 403},
		{"a sandboxed page", []string{"Origin", "null"}, 403},
		{"the page", []string{"Origin", ts.URL, "Sec-Fetch-Site", "same-origin"}, 201},
		{"a typed URL", []string{"Sec-Fetch-Site", "none"}, 201},
		{"not a browser", nil, 201},
	} {
		for _, method := range []string{"POST", "PATCH", "DELETE"} {
			path, body := "/api/conversations", `{"title":"x"}`
			want := tc.status
			if method != "POST" {
				path, body = "/api/conversations/"+ts.conversationOf(t, carolID(t, ts)), `{"title":"refused"}`
				if tc.status != 403 {
					body = `{"title":"allowed"}`
				}
				if want == 201 {
					want = map[string]int{"PATCH": 200, "DELETE": 204}[method]
				}
				if method == "DELETE" {
					body = ""
				}
			}
			st, out := ts.withCookie(t, method, path, cookie, body, tc.headers...)
			if st != want {
				t.Errorf("%s, %s: got %d %s, want %d", tc.name, method, st, out, want)
			}
			if want == 403 && !strings.Contains(out, "another site") {
				t.Errorf("%s, %s: the refusal %s does not say why", tc.name, method, out)
			}
		}
	}
	// Nothing a refused request asked for was done.
	list, _ := ts.Store.Conversations(t.Context(), carolID(t, ts))
	for _, c := range list {
		if c.Title == "refused" {
			t.Errorf("a refused PATCH renamed a conversation")
		}
	}

	// A read from another site is answered (the browser keeps it from the
	// site: no CORS header), and a key is not the cookie.
	if st, _ := ts.withCookie(t, "GET", "/api/conversations", cookie, "", "Origin", evil, "Sec-Fetch-Site", "cross-site"); st != 200 {
		t.Errorf("a cross-site GET: %d, want 200", st)
	}
	if st, _ := ts.withCookie(t, "POST", "/api/conversations", "", `{}`, "X-API-Key", ts.alice, "Origin", evil, "Sec-Fetch-Site", "cross-site"); st != 201 {
		t.Errorf("an API key from another origin: %d, want 201", st)
	}

	// Sign-in, invites and sign-out from another site.
	for _, path := range []string{"/api/auth/login", "/api/auth/invite", "/api/auth/logout"} {
		st, out := ts.withCookie(t, "POST", path, cookie, fmt.Sprintf(`{"user":"carol","password":%q}`, pwCarol), "Origin", evil, "Sec-Fetch-Site", "cross-site")
		if st != 403 {
			t.Errorf("%s from another site: %d %s, want 403", path, st, out)
		}
	}
	if st, _ := carol.me(); st != 200 {
		t.Errorf("a sign-out from another site signed carol out")
	}

	// The WebSocket.
	conv := ts.conversationOf(t, carolID(t, ts))
	for _, tc := range []struct {
		name, origin string
		status       int
	}{
		{"another site", evil, 403},
		{"a sibling port", "http://127.0.0.1:1", 403},
		{"no Origin", "", 403},
		{"a malformed Origin", "http://[::1", 403},
		{"the page", ts.URL, 0},
		{"the page, upper case", strings.ToUpper(ts.URL), 0},
	} {
		_, resp, err := ts.dialCookie(t, conv, cookie, tc.origin)
		switch {
		case tc.status == 0 && err != nil:
			t.Errorf("WebSocket from %s: %v, want it open", tc.name, err)
		case tc.status != 0 && (err == nil || resp == nil || resp.StatusCode != tc.status):
			t.Errorf("WebSocket from %s: %v %v, want %d", tc.name, resp, err, tc.status)
		}
	}
}

// carolID returns the id of the user carol.
func carolID(t *testing.T, ts *testServer) string {
	t.Helper()
	a, err := ts.Store.AccountByName(t.Context(), "carol")
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// TestPublicURLIsTrusted: behind a proxy that passes another Host, the
// page at DATACHAT_PUBLIC_URL is the server's own: its cookie requests
// and WebSockets go through, the cookie is Secure for https, and invite
// URLs start with it.
func TestPublicURLIsTrusted(t *testing.T) {
	const public = "https://chat.example.com"
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.PublicURL = public })
	root := ts.browser(t)
	id := ts.account(t, "root", datachat.RoleAdmin)
	resp, body := root.do("POST", "/api/auth/invite", fmt.Sprintf(`{"token":%q,"password":%q}`, ts.inviteToken(t, id), pwRoot), "Origin", public, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Set-Cookie"), "Secure") {
		t.Fatalf("sign-in from the public URL: %d %s, Set-Cookie %q", resp.StatusCode, body, resp.Header.Get("Set-Cookie"))
	}
	// The jar keeps a Secure cookie from http only for https: read it from the answer.
	cookie := strings.TrimPrefix(strings.Split(resp.Header.Get("Set-Cookie"), ";")[0], sessionCookieName+"=")
	st, out := ts.withCookie(t, "POST", "/api/admin/users", cookie, `{"name":"carol"}`, "Origin", public, "Sec-Fetch-Site", "cross-site")
	if st != 201 || !strings.Contains(out, `"invite_url":"`+public+`/#invite=`) {
		t.Errorf("invite from the public URL: %d %s", st, out)
	}
	if st, _ := ts.withCookie(t, "POST", "/api/conversations", cookie, `{}`, "Origin", "https://chat.example.com.evil.example", "Sec-Fetch-Site", "cross-site"); st != 403 {
		t.Errorf("an origin that begins like the public URL: %d, want 403", st)
	}
	conv := ts.conversationOf(t, id)
	if _, _, err := ts.dialCookie(t, conv, cookie, public); err != nil {
		t.Errorf("WebSocket from the public URL: %v", err)
	}
	if _, resp, err := ts.dialCookie(t, conv, cookie, "http://chat.example.com"); err == nil || resp.StatusCode != 403 {
		t.Errorf("WebSocket from the public URL over http: %v %v, want 403", resp, err)
	}
}

// TestConcurrentSignIns: one user signing in many times at once gets as
// many sessions, each its own, each live; signing out of one leaves the
// others.
func TestConcurrentSignIns(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.SignInPerUser, c.SignInPerAddress = -1, -1 })
	ts.member(t, "carol", pwCarol)
	const n = 8
	browsers := make([]*browser, n)
	var wg sync.WaitGroup
	for i := range n {
		browsers[i] = ts.browser(t)
		wg.Go(func() {
			body, _ := json.Marshal(map[string]string{"user": "carol", "password": pwCarol})
			req, _ := http.NewRequest("POST", ts.URL+"/api/auth/login", strings.NewReader(string(body)))
			resp, err := browsers[i].c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("sign-in %d: %d", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, b := range browsers {
		c := b.cookie()
		if c == "" || seen[c] {
			t.Errorf("browser %d: cookie %q (seen before: %v)", i, c, seen[c])
		}
		seen[c] = true
	}
	browsers[0].postJSON("/api/auth/logout", nil)
	for i, b := range browsers[1:] {
		if st, _ := b.me(); st != 200 {
			t.Errorf("browser %d after another signed out: %d", i+1, st)
		}
	}
}

// TestAuthMethodsAndMe: GET /api/auth/methods says password sign-in only
// (single sign-on is off); GET /api/me answers for a key as api_key, and
// without credentials 401.
func TestAuthMethodsAndMe(t *testing.T) {
	ts := newTestServer(t)
	st, body := ts.withCookie(t, "GET", "/api/auth/methods", "", "")
	if st != 200 || strings.TrimSpace(body) != `{"oidc":false,"password":true}` {
		t.Errorf("methods: %d %s", st, body)
	}
	st, body = ts.withCookie(t, "GET", "/api/me", "", "", "X-API-Key", ts.alice)
	if st != 200 || !strings.Contains(body, `"name":"alice"`) || !strings.Contains(body, `"auth":"api_key"`) || !strings.Contains(body, `"role":"member"`) || strings.Contains(body, "email") {
		t.Errorf("me with a key: %d %s", st, body)
	}
	if st, body := ts.withCookie(t, "GET", "/api/me", "", ""); st != 401 || !strings.Contains(body, "sign in") {
		t.Errorf("me without credentials: %d %s", st, body)
	}
	if st, _ := ts.withCookie(t, "GET", "/api/auth/oidc/login", "", ""); st != 404 {
		t.Errorf("the single sign-on route with it off: %d, want 404", st)
	}
}

// TestSessionIdlesOut: a session unused for longer than the server's idle
// time no longer signs in, anywhere: a server whose idle time has passed
// since the cookie was last used refuses it, and the session is gone for
// the first server too.
func TestSessionIdlesOut(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	strict := httptest.NewServer(New(Deps{Store: ts.Store, Logger: slog.New(slog.DiscardHandler), Workspace: ts.Workspace},
		Config{SessionIdle: time.Nanosecond}).Handler())
	defer strict.Close()
	req, _ := http.NewRequest("GET", strict.URL+"/api/me", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: carol.cookie()})
	if st, body, _ := send(t, req); st != 401 || !strings.Contains(body, datachat.ErrSessionEnded.Message) {
		t.Errorf("a session past the idle time: %d %s, want 401", st, body)
	}
	if st, _ := carol.me(); st != 401 {
		t.Errorf("the idled-out session on the first server: %d, want 401", st)
	}
}

// TestSecureCookieOverTLS: a sign-in over TLS sets a Secure cookie, even
// without DATACHAT_PUBLIC_URL.
func TestSecureCookieOverTLS(t *testing.T) {
	ts := newTestServer(t)
	id := ts.account(t, "carol", datachat.RoleMember)
	tls := httptest.NewTLSServer(ts.Handler())
	defer tls.Close()
	req, _ := http.NewRequest("POST", tls.URL+"/api/auth/invite", strings.NewReader(fmt.Sprintf(`{"token":%q,"password":%q}`, ts.inviteToken(t, id), pwCarol)))
	resp, err := tls.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := resp.Header.Get("Set-Cookie"); resp.StatusCode != 200 || !strings.Contains(c, "; Secure") || !strings.Contains(c, "HttpOnly") {
		t.Errorf("over TLS: %d, Set-Cookie %q", resp.StatusCode, c)
	}
}

// TestSessionIsNotAKey: a session's token sent as an API key, or a key
// sent as the cookie, signs nobody in.
func TestSessionIsNotAKey(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	for _, h := range [][]string{{"X-API-Key", carol.cookie()}, {"Authorization", "Bearer " + carol.cookie()}} {
		for _, path := range []string{"/api/me", "/v1/models"} {
			if st, body := ts.withCookie(t, "GET", path, "", "", h...); st != 401 {
				t.Errorf("%s with the session as %s: %d %s, want 401", path, h[0], st, body)
			}
		}
	}
}
