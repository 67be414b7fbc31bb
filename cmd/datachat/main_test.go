package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"datachat"
)

// testEnv returns a Lookup over vars, with a fresh data directory and an
// ephemeral loopback port unless vars set them.
func testEnv(t *testing.T, vars map[string]string) func(string) (string, bool) {
	t.Helper()
	env := map[string]string{
		"DATACHAT_DATA_DIR":   t.TempDir(),
		"DATACHAT_ADDR":       "127.0.0.1:0",
		"DATACHAT_LOG_FORMAT": "text",
		"DATACHAT_LOG_LEVEL":  "warn",
	}
	for k, v := range vars {
		env[k] = v
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// runMain runs one command to completion and returns its stdout and stderr.
func runMain(t *testing.T, env func(string) (string, bool), args ...string) (string, string, error) {
	t.Helper()
	return runMainWith(t, &Main{Env: env}, args...)
}

// runMainWith runs m with args, its output to buffers, and returns its
// stdout, stderr and error (Run's, else Close's).
func runMainWith(t *testing.T, m *Main, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m.Stdout, m.Stderr = &stdout, &stderr
	ctx := context.Background()
	err := m.ParseFlags(ctx, args)
	if err == nil {
		err = m.Run(ctx)
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	return stdout.String(), stderr.String(), err
}

// startServe starts `datachat serve` in-process and returns it and its
// stdout; it is closed when the test ends.
func startServe(t *testing.T, env func(string) (string, bool)) (*Main, *bytes.Buffer) {
	t.Helper()
	m, stdout := openServe(t, env)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m, stdout
}

// openServe starts `datachat serve` in-process and returns it and its
// stdout, for the test to close.
func openServe(t *testing.T, env func(string) (string, bool)) (*Main, *bytes.Buffer) {
	t.Helper()
	var stdout bytes.Buffer
	m := &Main{Env: env, Stdout: &stdout, Stderr: io.Discard}
	ctx := context.Background()
	if err := m.ParseFlags(ctx, []string{"serve"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return m, &stdout
}

// apiCall sends body (JSON; none when "") to url with the API key key (none
// when "") and returns the answer's status, body and headers.
func apiCall(t *testing.T, method, url, key, body string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// do is [apiCall] for an answer in JSON, which must say its request ID.
func do(t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	st, b, h := apiCall(t, method, url, key, body)
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal([]byte(b), &out); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", method, url, b, err)
		}
	}
	if h.Get("X-Request-ID") == "" {
		t.Errorf("%s %s: no X-Request-ID header", method, url)
	}
	return st, out
}

func TestServeKeysAndOwnership(t *testing.T) {
	env := testEnv(t, nil)
	m, stdout := startServe(t, env)
	base := "http://" + m.Addr()

	// First start with no users prints a setup URL: an invite of the
	// administrator admin, on the address serve listens on.
	re := regexp.MustCompile(`\n  (http://[^/\s]+)/#invite=([A-Za-z0-9_-]{43})\n`)
	match := re.FindStringSubmatch(stdout.String())
	if match == nil || match[1] != base {
		t.Fatalf("no setup URL for %s in serve output %q", base, stdout.String())
	}
	if strings.Contains(stdout.String(), "#key=") {
		t.Errorf("serve printed a key URL: %q", stdout.String())
	}
	admin, err := storeOf(t, env).UseInvite(t.Context(), datachat.HashAPIKey(match[2]), "$argon2id$test", time.Now())
	if err != nil || admin.Name != "admin" || admin.Role != datachat.RoleAdmin {
		t.Fatalf("the setup URL's invite: %+v, %v; want the admin admin's", admin, err)
	}
	adminKey, _, err := runMain(t, env, "keys", "create", "--user", "admin")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := do(t, "GET", base+"/api/conversations", strings.TrimSpace(adminKey), ""); st != 200 {
		t.Errorf("admin's key: got %d, want 200", st)
	}

	if st, body := do(t, "GET", base+"/healthz", "", ""); st != 200 || body["status"] != "ok" {
		t.Errorf("healthz: got %d %v", st, body)
	}

	alice, _, err := runMain(t, env, "keys", "create", "--user", "alice")
	if err != nil {
		t.Fatal(err)
	}
	alice = strings.TrimSpace(alice)
	bob, _, err := runMain(t, env, "keys", "create", "--user", "bob")
	if err != nil {
		t.Fatal(err)
	}
	bob = strings.TrimSpace(bob)

	if st, body := do(t, "GET", base+"/api/conversations", "", ""); st != 401 || errType(body) != "unauthorized" {
		t.Errorf("no key: got %d %v, want 401 unauthorized", st, body)
	}
	if st, _ := do(t, "GET", base+"/api/conversations", "dck_wrong", ""); st != 401 {
		t.Errorf("wrong key: got %d, want 401", st)
	}

	st, conv := do(t, "POST", base+"/api/conversations", alice, `{"title":"Sales"}`)
	if st != 201 || conv["title"] != "Sales" {
		t.Fatalf("create: got %d %v", st, conv)
	}
	id := conv["id"].(string)

	// Bearer works too.
	req, _ := http.NewRequest("GET", base+"/api/conversations/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("bearer: got %d, want 200", resp.StatusCode)
	}

	for _, tc := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"title":"x"}`}, {"DELETE", ""}} {
		if st, body := do(t, tc.method, base+"/api/conversations/"+id, bob, tc.body); st != 404 || errType(body) != "not_found" {
			t.Errorf("bob %s alice's conversation: got %d %v, want 404", tc.method, st, body)
		}
	}
	if _, list := do(t, "GET", base+"/api/conversations", bob, ""); len(list["conversations"].([]any)) != 0 {
		t.Errorf("bob's list: got %v, want empty", list)
	}

	if st, c := do(t, "PATCH", base+"/api/conversations/"+id, alice, `{"title":"Revenue"}`); st != 200 || c["title"] != "Revenue" {
		t.Errorf("rename: got %d %v", st, c)
	}
	if st, c := do(t, "GET", base+"/api/conversations/"+id, alice, ""); st != 200 || c["title"] != "Revenue" || c["messages"] == nil {
		t.Errorf("get: got %d %v", st, c)
	}
	if st, _ := do(t, "DELETE", base+"/api/conversations/"+id, alice, ""); st != 204 {
		t.Errorf("delete: got %d, want 204", st)
	}
	if st, _ := do(t, "GET", base+"/api/conversations/"+id, alice, ""); st != 404 {
		t.Errorf("get after delete: got %d, want 404", st)
	}

	// Revoking a key closes the door.
	list, _, err := runMain(t, env, "keys", "list")
	if err != nil {
		t.Fatal(err)
	}
	var bobID string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "bob" {
			bobID = f[0]
		}
	}
	if bobID == "" {
		t.Fatalf("bob not in keys list:\n%s", list)
	}
	if _, _, err := runMain(t, env, "keys", "revoke", bobID); err != nil {
		t.Fatal(err)
	}
	if st, _ := do(t, "GET", base+"/api/conversations", bob, ""); st != 401 {
		t.Errorf("revoked key: got %d, want 401", st)
	}
}

// TestServeWithUsersPrintsNoSetupURL: an install that has users (here one
// with a key, as before accounts) starts as before, printing nothing.
func TestServeWithUsersPrintsNoSetupURL(t *testing.T) {
	env := testEnv(t, nil)
	if _, _, err := runMain(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}
	key, _, err := runMain(t, env, "keys", "create", "--user", "alice")
	if err != nil {
		t.Fatal(err)
	}
	m, stdout := startServe(t, env)
	if stdout.Len() > 0 {
		t.Errorf("serve printed %q although users exist", stdout)
	}
	if st, _ := do(t, "GET", "http://"+m.Addr()+"/api/conversations", strings.TrimSpace(key), ""); st != 200 {
		t.Errorf("alice's key: got %d, want 200", st)
	}
}

func TestBadConfigurationNamesTheVariable(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{"DATACHAT_ADDR", "nonsense"},
		{"DATACHAT_DATABASE_URL", "mysql://x"},
	} {
		_, _, err := runMain(t, testEnv(t, map[string]string{tc.key: tc.val}), "serve")
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s=%s: got %v, want an error naming %s", tc.key, tc.val, err, tc.key)
		}
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "datachat.yaml")
	if err := os.WriteFile(path, []byte("DATACHAT_ADDR: 127.0.0.1:0\nDATACHAT_DATA_DIR: "+dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return "", false }
	var stdout bytes.Buffer
	m := &Main{Env: env, Stdout: &stdout, Stderr: io.Discard}
	if err := m.ParseFlags(context.Background(), []string{"--config", path, "serve"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Stat(filepath.Join(dir, "datachat.db")); err != nil {
		t.Errorf("database not in the configured data dir: %v", err)
	}
}

func errType(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["type"].(string)
	return s
}
