package ssotest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The provider refuses what a real one refuses, so that the relying
// party's tests against it mean something.

const redirect = "http://127.0.0.1:1/callback"

func start(t *testing.T) *Provider {
	p := Start(t)
	p.AddClient(Client{ID: "app", Secret: "secret", RedirectURIs: []string{redirect}})
	return p
}

func authorizeQuery(edit func(url.Values)) url.Values {
	q := url.Values{
		"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {redirect}, "scope": {"openid email"},
		"state": {"st"}, "nonce": {"n"}, "code_challenge": {s256("verifier")}, "code_challenge_method": {"S256"},
	}
	if edit != nil {
		edit(q)
	}
	return q
}

// authorize sends an authorization request and returns the status and the
// query of the redirect back (nil when there is none).
func authorize(t *testing.T, p *Provider, q url.Values) (int, url.Values) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(p.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if loc == "" {
		return resp.StatusCode, nil
	}
	if !strings.HasPrefix(loc, redirect+"?") {
		t.Fatalf("redirect to %q, want the client's redirect_uri", loc)
	}
	u, _ := url.Parse(loc)
	return resp.StatusCode, u.Query()
}

func TestAuthorize(t *testing.T) {
	p := start(t)
	for _, tc := range []struct {
		name   string
		edit   func(url.Values)
		status int
		error  string // the error sent back; "" for a code
	}{
		{"good", nil, http.StatusFound, ""},
		{"unknown client", func(q url.Values) { q.Set("client_id", "nobody") }, http.StatusBadRequest, ""},
		{"unregistered redirect_uri", func(q url.Values) { q.Set("redirect_uri", redirect+"/other") }, http.StatusBadRequest, ""},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, http.StatusFound, "invalid_request"},
		{"PKCE plain", func(q url.Values) { q.Set("code_challenge_method", "plain") }, http.StatusFound, "invalid_request"},
		{"no openid scope", func(q url.Values) { q.Set("scope", "email") }, http.StatusFound, "invalid_scope"},
		{"implicit flow", func(q url.Values) { q.Set("response_type", "id_token") }, http.StatusFound, "unsupported_response_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, back := authorize(t, p, authorizeQuery(tc.edit))
			if status != tc.status {
				t.Fatalf("got %d, want %d", status, tc.status)
			}
			if back == nil {
				return
			}
			if back.Get("error") != tc.error || back.Get("state") != "st" || back.Get("iss") != p.URL || (tc.error == "") != (back.Get("code") != "") {
				t.Errorf("sent back %v, want error %q with state and iss", back, tc.error)
			}
		})
	}
}

// exchange sends a token request and returns its status and error code.
func exchange(t *testing.T, p *Provider, form url.Values, user, pass string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", p.URL+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Error   string `json:"error"`
		IDToken string `json:"id_token"`
	}
	json.Unmarshal(b, &body)
	if resp.StatusCode == http.StatusOK && body.IDToken == "" {
		t.Errorf("no id_token in %s", b)
	}
	return resp.StatusCode, body.Error
}

func TestToken(t *testing.T) {
	p := start(t)
	p.AddClient(Client{ID: "other", Secret: "other", RedirectURIs: []string{redirect}})
	for _, tc := range []struct {
		name       string
		edit       func(url.Values)
		user, pass string
		status     int
		error      string
	}{
		{"good", nil, "app", "secret", http.StatusOK, ""},
		{"secret in the form", func(f url.Values) { f.Set("client_id", "app"); f.Set("client_secret", "secret") }, "", "", http.StatusOK, ""},
		{"wrong secret", nil, "app", "guess", http.StatusUnauthorized, "invalid_client"},
		{"no client authentication", nil, "", "", http.StatusUnauthorized, "invalid_client"},
		{"another client", nil, "other", "other", http.StatusBadRequest, "invalid_grant"},
		{"wrong verifier", func(f url.Values) { f.Set("code_verifier", "guess") }, "app", "secret", http.StatusBadRequest, "invalid_grant"},
		{"no verifier", func(f url.Values) { f.Del("code_verifier") }, "app", "secret", http.StatusBadRequest, "invalid_grant"},
		{"other redirect_uri", func(f url.Values) { f.Set("redirect_uri", redirect+"/x") }, "app", "secret", http.StatusBadRequest, "invalid_grant"},
		{"unknown code", func(f url.Values) { f.Set("code", "made-up") }, "app", "secret", http.StatusBadRequest, "invalid_grant"},
		{"other grant type", func(f url.Values) { f.Set("grant_type", "password") }, "app", "secret", http.StatusBadRequest, "unsupported_grant_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, back := authorize(t, p, authorizeQuery(nil))
			form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")}, "redirect_uri": {redirect}, "code_verifier": {"verifier"}}
			if tc.edit != nil {
				tc.edit(form)
			}
			status, code := exchange(t, p, form, tc.user, tc.pass)
			if status != tc.status || code != tc.error {
				t.Errorf("got %d %q, want %d %q", status, code, tc.status, tc.error)
			}
			if status == http.StatusOK {
				if status, code := exchange(t, p, form, tc.user, tc.pass); code != "invalid_grant" {
					t.Errorf("the code again: got %d %q, want invalid_grant", status, code)
				}
			}
		})
	}
}

// Only the announced client authentication methods are accepted.
func TestAuthMethods(t *testing.T) {
	p := start(t)
	p.SetAuthMethods("client_secret_post")
	_, back := authorize(t, p, authorizeQuery(nil))
	form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")}, "redirect_uri": {redirect}, "code_verifier": {"verifier"}}
	if status, code := exchange(t, p, form, "app", "secret"); code != "invalid_client" {
		t.Errorf("Basic when only the form is announced: got %d %q, want invalid_client", status, code)
	}
}
