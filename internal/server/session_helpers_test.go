package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat"
)

// account creates a user with role and returns their id.
func (ts *testServer) account(t *testing.T, name string, role datachat.Role) string {
	t.Helper()
	a := &datachat.Account{User: datachat.User{Name: name}, Role: role}
	if err := ts.Store.CreateAccount(t.Context(), a); err != nil {
		t.Fatalf("create account %s: %v", name, err)
	}
	return a.ID
}

// inviteToken makes an invite for the user and returns its token.
func (ts *testServer) inviteToken(t *testing.T, userID string) string {
	t.Helper()
	token := randomToken()
	if err := ts.Store.CreateInvite(t.Context(), &datachat.Invite{UserID: userID, Hash: datachat.HashAPIKey(token), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return token
}

// member creates a member with a password (set through an invite, as a
// person does) and returns a browser signed in as them.
func (ts *testServer) member(t *testing.T, name, pw string) *browser {
	t.Helper()
	return ts.person(t, name, datachat.RoleMember, pw)
}

// person creates a user of role with password pw and returns a browser
// signed in as them, through the invite.
func (ts *testServer) person(t *testing.T, name string, role datachat.Role, pw string) *browser {
	t.Helper()
	id := ts.account(t, name, role)
	b := ts.browser(t)
	if st, body := b.postJSON("/api/auth/invite", map[string]string{"token": ts.inviteToken(t, id), "password": pw}); st != 200 {
		t.Fatalf("%s uses their invite: %d %s", name, st, body)
	}
	return b
}

// keyOf creates an API key of the user id and returns it.
func (ts *testServer) keyOf(t *testing.T, userID string) string {
	t.Helper()
	secret, hash, prefix := datachat.NewAPIKeySecret()
	if err := ts.Store.CreateAPIKey(t.Context(), &datachat.APIKey{UserID: userID, Hash: hash, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return secret
}

// browser is a person's browser on the test server's page: a cookie jar,
// redirects not followed, and the headers a browser sends with a request
// its own page makes (Origin, Sec-Fetch-Site: same-origin).
type browser struct {
	t   *testing.T
	ts  *testServer
	jar *cookiejar.Jar
	c   *http.Client
}

func (ts *testServer) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, ts: ts, jar: jar, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends a request from the page; headers (pairs) are added or, when
// given an empty value, removed.
func (b *browser) do(method, path, body string, headers ...string) (*http.Response, string) {
	b.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.ts.URL+path, r)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Origin", b.ts.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, body := b.do("GET", path, "")
	return resp.StatusCode, body
}

func (b *browser) postJSON(path string, v any) (int, string) {
	b.t.Helper()
	body, _ := json.Marshal(v)
	resp, out := b.do("POST", path, string(body))
	return resp.StatusCode, out
}

// login signs in with a password and fails the test unless it worked.
func (b *browser) login(name, pw string) {
	b.t.Helper()
	if st, body := b.postJSON("/api/auth/login", map[string]string{"user": name, "password": pw}); st != 200 {
		b.t.Fatalf("login %s: %d %s", name, st, body)
	}
}

// cookie returns the browser's session cookie value, "" if none.
func (b *browser) cookie() string {
	u, _ := url.Parse(b.ts.URL)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == sessionCookieName {
			return c.Value
		}
	}
	return ""
}

// setCookie puts a session cookie value in the browser, as a page of a
// sibling site, or an attacker with access to the machine, could.
func (b *browser) setCookie(v string) {
	u, _ := url.Parse(b.ts.URL)
	b.jar.SetCookies(u, []*http.Cookie{{Name: sessionCookieName, Value: v, Path: "/"}})
}

// me is GET /api/me as the browser.
func (b *browser) me() (int, me) {
	b.t.Helper()
	st, body := b.get("/api/me")
	var m me
	if st == 200 {
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			b.t.Fatalf("/api/me: %v: %s", err, body)
		}
	}
	return st, m
}

// withCookie sends a request with only the cookie value (no jar), with
// headers (pairs), and returns the status and body.
func (ts *testServer) withCookie(t *testing.T, method, path, cookie, body string, headers ...string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, ts.URL+path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: sessionCookieName, Value: cookie})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	st, out, _ := send(t, req)
	return st, out
}

// dialCookie opens the chat WebSocket with a session cookie from origin
// ("" for none) and returns the connection, or the answer that refused it.
func (ts *testServer) dialCookie(t *testing.T, conv, cookie, origin string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{"Cookie": {sessionCookieName + "=" + cookie}}
	if origin != "" {
		h.Set("Origin", origin)
	}
	return ts.dialWS(t, conv, h)
}

// dialKeyConn opens the chat WebSocket of conv with the API key key; the
// test fails if it is refused.
func (ts *testServer) dialKeyConn(t *testing.T, conv, key string) *websocket.Conn {
	t.Helper()
	c, _, err := ts.dialWS(t, conv, http.Header{"X-API-Key": {key}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dialWS opens the chat WebSocket of conv with the request headers h and
// returns the connection, closed when the test ends, or the answer that
// refused it.
func (ts *testServer) dialWS(t *testing.T, conv string, h http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	u := strings.Replace(ts.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

// conversationOf creates a conversation of the user id in the store.
func (ts *testServer) conversationOf(t *testing.T, userID string) string {
	t.Helper()
	c := &datachat.Conversation{UserID: userID, Title: "t"}
	if err := ts.Store.CreateConversation(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// closedWith waits for a WebSocket's server to close it and returns the
// close status and reason; the test's deadline bounds the wait.
func closedWith(t *testing.T, c *websocket.Conn, within time.Duration) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			t.Fatalf("the WebSocket is still open %s later", within)
		}
		return websocket.CloseStatus(err), closeReasonOf(err)
	}
}

func closeReasonOf(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}

// auditOf returns the audit events of kind, newest first.
func (ts *testServer) auditOf(t *testing.T, kind string) []*datachat.AuditEvent {
	t.Helper()
	p, err := ts.Store.AuditEvents(t.Context(), datachat.AuditFilter{Kind: kind, Limit: datachat.AuditPageMax})
	if err != nil {
		t.Fatal(err)
	}
	return p.Events
}
