package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat/internal/llmtest"
	"datachat/internal/sso/ssotest"
	"datachat/internal/testnet"
)

// TestServeSignIn: serve, configured by its variables, signs people in:
// single sign-on against a provider on 127.0.0.1 (DATACHAT_OIDC_*, its
// flow sealed with a key derived from the server's secret key, made in the
// data directory), whose admin group makes an admin; that admin invites a
// member, who sets a password and signs in; DATACHAT_SESSION_IDLE sets the
// cookie's life, DATACHAT_SIGNIN_PER_USER the guesses allowed; and the
// member's own token budget, set by the admin, overrides
// DATACHAT_TOKENS_PER_DAY for their next turn.
func TestServeSignIn(t *testing.T) {
	p := ssotest.Start(t)
	addr := testnet.ClosedAddr(t) // serve listens there below
	base := "http://" + addr
	p.AddClient(ssotest.Client{ID: "datachat", Secret: "s3cret", RedirectURIs: []string{base + "/api/auth/oidc/callback"}})
	p.SetUser(ssotest.User{Subject: "ann-1", Email: "ann@example.com", EmailVerified: true, PreferredUsername: "ann", Groups: []string{"admins"}})
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}, Usage: &llmtest.Usage{Input: 80, Output: 30}}})
	env := testEnv(t, map[string]string{
		"DATACHAT_ADDR": addr, "DATACHAT_PUBLIC_URL": base,
		"DATACHAT_OIDC_ISSUER": p.URL, "DATACHAT_OIDC_CLIENT_ID": "datachat", "DATACHAT_OIDC_CLIENT_SECRET": "s3cret",
		"DATACHAT_OIDC_ADMIN_GROUP": "admins", "DATACHAT_OIDC_ALLOWED_DOMAINS": "example.com",
		"DATACHAT_SESSION_IDLE": "2h", "DATACHAT_SIGNIN_PER_USER": "2",
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "DATACHAT_TOKENS_PER_DAY": "100",
	})
	startServe(t, env)
	dir, _ := env("DATACHAT_DATA_DIR")
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); err != nil {
		t.Errorf("the server's secret key: %v", err)
	}

	type browser struct{ c *http.Client }
	newBrowser := func() browser {
		jar, _ := cookiejar.New(nil)
		return browser{&http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	}
	send := func(b browser, method, path, body string) (*http.Response, string) {
		t.Helper()
		u := path
		if strings.HasPrefix(path, "/") {
			u = base + path
		}
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, u, rd)
		if method != "GET" {
			req.Header.Set("Origin", base)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, string(out)
	}

	if _, body := send(newBrowser(), "GET", "/api/auth/methods", ""); !strings.Contains(body, `"oidc":true`) {
		t.Errorf("methods: %s", body)
	}
	ann := newBrowser()
	loc := base + "/api/auth/oidc/login"
	var last *http.Response
	for range 4 {
		last, _ = send(ann, "GET", loc, "")
		if loc = last.Header.Get("Location"); loc == "/" || strings.HasPrefix(loc, "/#") {
			break
		}
	}
	maxAge := -1
	for _, c := range last.Cookies() {
		if c.Name == "datachat_session" {
			maxAge = c.MaxAge
		}
	}
	if loc != "/" || maxAge != 7200 {
		t.Fatalf("single sign-on ended at %q, the session cookie's Max-Age %d (want 7200, DATACHAT_SESSION_IDLE)", loc, maxAge)
	}
	if _, body := send(ann, "GET", "/api/me", ""); !strings.Contains(body, `"name":"ann"`) || !strings.Contains(body, `"role":"admin"`) || !strings.Contains(body, `"auth":"oidc"`) {
		t.Fatalf("ann: %s", body)
	}

	resp, body := send(ann, "POST", "/api/admin/users", `{"name":"carol"}`)
	var created struct {
		InviteURL string `json:"invite_url"`
	}
	json.Unmarshal([]byte(body), &created)
	token, ok := strings.CutPrefix(created.InviteURL, base+"/#invite=")
	if resp.StatusCode != 201 || !ok {
		t.Fatalf("invite carol: %d %s", resp.StatusCode, body)
	}
	carol := newBrowser()
	if resp, body := send(carol, "POST", "/api/auth/invite", `{"token":"`+token+`","password":"correct horse battery"}`); resp.StatusCode != 200 {
		t.Fatalf("carol's invite: %d %s", resp.StatusCode, body)
	}
	guess := newBrowser()
	for i, want := range []int{401, 401, 429} {
		if resp, body := send(guess, "POST", "/api/auth/login", `{"user":"carol","password":"a wrong guess"}`); resp.StatusCode != want {
			t.Errorf("guess %d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}

	_, body = send(carol, "POST", "/api/conversations", `{}`)
	var conv struct{ ID string }
	json.Unmarshal([]byte(body), &conv)
	ask := func() int {
		resp, _ := send(carol, "POST", "/chat/query", `{"query":"hi","conversation_id":"`+conv.ID+`"}`)
		return resp.StatusCode
	}
	if st := ask(); st != 200 {
		t.Fatalf("carol's first turn: %d", st)
	}
	if st := ask(); st != 429 {
		t.Errorf("carol over DATACHAT_TOKENS_PER_DAY: %d, want 429", st)
	}
	if resp, body := send(ann, "PATCH", "/api/admin/users/carol", `{"tokens_per_day":1000}`); resp.StatusCode != 200 {
		t.Fatalf("carol's budget: %d %s", resp.StatusCode, body)
	}
	if st := ask(); st != 200 {
		t.Errorf("carol with her own budget: %d, want 200", st)
	}
}
