package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/dataset"
	"datachat/internal/duckdb"
	"datachat/internal/retrieval"
	"datachat/internal/sqlite/sqlitetest"
	"datachat/internal/workspace"
)

// send sends req, failing t if it cannot, and returns the answer's status,
// body and headers.
func send(t *testing.T, req *http.Request) (int, string, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// testServer is a Server over a fresh SQLite store with users alice and bob.
type testServer struct {
	*Server
	URL        string
	alice, bob string // API keys
	aliceID    string
}

// newTestServer starts a test server; each opt may change its dependencies
// and configuration before New.
func newTestServer(t *testing.T, opts ...func(*Deps, *Config)) *testServer {
	t.Helper()
	ctx := context.Background()
	st := sqlitetest.Open(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	engine, err := duckdb.New(duckdb.Options{Timeout: 10 * time.Second, MemoryLimit: 512 << 20, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	loader, err := dataset.New(dataset.Options{Dir: filepath.Join(dir, "datasets"), AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	index, err := retrieval.Open(ctx, retrieval.Options{Path: filepath.Join(dir, "index.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { index.Close() })
	ws := &workspace.Workspace{Store: st, Loader: loader, Engine: engine, Index: index, Logger: logger, MaxDocumentBytes: 64 << 20}
	d := Deps{Store: st, Logger: logger, Workspace: ws}
	c := Config{MaxDatasetBytes: 64 << 20, MaxDocumentBytes: 64 << 20}
	for _, opt := range opts {
		opt(&d, &c)
	}
	hs := httptest.NewUnstartedServer(nil)
	if c.PublicURL == selfURL {
		c.PublicURL = "http://" + hs.Listener.Addr().String()
	}
	ts := &testServer{Server: New(d, c)}
	key := func(name string) (string, string) {
		u, err := st.EnsureUser(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		secret, hash, prefix := datachat.NewAPIKeySecret()
		if err := st.CreateAPIKey(ctx, &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}); err != nil {
			t.Fatal(err)
		}
		return secret, u.ID
	}
	ts.alice, ts.aliceID = key("alice")
	ts.bob, _ = key("bob")
	hs.Config.Handler = ts.Handler()
	hs.Start()
	t.Cleanup(hs.Close)
	ts.URL = hs.URL
	return ts
}

// selfURL, as an option's Config.PublicURL, makes DATACHAT_PUBLIC_URL the
// test server's own address.
const selfURL = "http://self.invalid"

// scenario is one HTTP exchange and what its answer must (not) contain.
type scenario struct {
	name        string
	method, url string
	body        string
	headers     map[string]string
	wantStatus  int
	wantContent []string
	notContent  []string
}

func (ts *testServer) run(t *testing.T, sc scenario) string {
	t.Helper()
	var body io.Reader
	if sc.body != "" {
		body = strings.NewReader(sc.body)
	}
	req, err := http.NewRequest(sc.method, ts.URL+sc.url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sc.headers {
		req.Header.Set(k, v)
	}
	st, b, h := send(t, req)
	if st != sc.wantStatus {
		t.Errorf("%s: got status %d, want %d; body %s", sc.name, st, sc.wantStatus, b)
	}
	for _, w := range sc.wantContent {
		if !strings.Contains(b, w) {
			t.Errorf("%s: body %s does not contain %q", sc.name, b, w)
		}
	}
	for _, w := range sc.notContent {
		if strings.Contains(b, w) {
			t.Errorf("%s: body %s contains %q", sc.name, b, w)
		}
	}
	if h.Get("X-Request-ID") == "" {
		t.Errorf("%s: no X-Request-ID", sc.name)
	}
	return b
}

func TestConversationAPI(t *testing.T) {
	ts := newTestServer(t)
	alice := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/json"}
	bob := map[string]string{"Authorization": "Bearer " + ts.bob}

	created := ts.run(t, scenario{name: "create", method: "POST", url: "/api/conversations", body: `{"title":"  Q3 sales "}`, headers: alice,
		wantStatus: 201, wantContent: []string{`"title":"Q3 sales"`}})
	var conv datachat.Conversation
	json.Unmarshal([]byte(created), &conv)
	id := conv.ID

	for _, sc := range []scenario{
		{name: "healthz needs no key", method: "GET", url: "/healthz", wantStatus: 200, wantContent: []string{`"ok"`}},
		{name: "no key", method: "GET", url: "/api/conversations", wantStatus: 401, wantContent: []string{`"type":"unauthorized"`}},
		{name: "bad key", method: "GET", url: "/api/conversations", headers: map[string]string{"X-API-Key": "nope"}, wantStatus: 401},
		{name: "bearer lowercase", method: "GET", url: "/api/conversations", headers: map[string]string{"Authorization": "bearer " + ts.alice}, wantStatus: 200},
		{name: "api_key query only for /ws", method: "GET", url: "/api/conversations?api_key=" + ts.alice, wantStatus: 401},
		{name: "create without body", method: "POST", url: "/api/conversations", headers: map[string]string{"X-API-Key": ts.alice}, wantStatus: 201, wantContent: []string{"New conversation"}},
		{name: "create bad json", method: "POST", url: "/api/conversations", body: `{"title":`, headers: alice, wantStatus: 400, wantContent: []string{`"type":"invalid_request"`}},
		{name: "create unknown field", method: "POST", url: "/api/conversations", body: `{"titel":"x"}`, headers: alice, wantStatus: 400, wantContent: []string{"titel"}},
		{name: "create empty title", method: "POST", url: "/api/conversations", body: `{"title":"  "}`, headers: alice, wantStatus: 400},
		{name: "create long title", method: "POST", url: "/api/conversations", body: `{"title":"` + strings.Repeat("x", 201) + `"}`, headers: alice, wantStatus: 400},
		{name: "create wrong content type", method: "POST", url: "/api/conversations", body: `{"title":"x"}`, headers: map[string]string{"X-API-Key": ts.alice, "Content-Type": "text/plain"}, wantStatus: 400},
		{name: "list", method: "GET", url: "/api/conversations", headers: alice, wantStatus: 200, wantContent: []string{id}},
		{name: "bob's list is empty", method: "GET", url: "/api/conversations", headers: bob, wantStatus: 200, wantContent: []string{`"conversations":[]`}},
		{name: "get", method: "GET", url: "/api/conversations/" + id, headers: alice, wantStatus: 200, wantContent: []string{`"messages":[]`, `"pending_confirmation":null`}},
		{name: "bob gets alice's", method: "GET", url: "/api/conversations/" + id, headers: bob, wantStatus: 404, wantContent: []string{`"type":"not_found"`}},
		{name: "bob renames alice's", method: "PATCH", url: "/api/conversations/" + id, body: `{"title":"mine"}`, headers: bob, wantStatus: 404},
		{name: "bob deletes alice's", method: "DELETE", url: "/api/conversations/" + id, headers: bob, wantStatus: 404},
		{name: "unknown id", method: "GET", url: "/api/conversations/nope", headers: alice, wantStatus: 404},
		{name: "rename", method: "PATCH", url: "/api/conversations/" + id, body: `{"title":"Q4"}`, headers: alice, wantStatus: 200, wantContent: []string{`"title":"Q4"`}},
		{name: "unknown route", method: "GET", url: "/api/nothing", headers: alice, wantStatus: 404, wantContent: []string{`"type":"not_found"`}},
		{name: "wrong method", method: "PUT", url: "/api/conversations/" + id, headers: alice, wantStatus: 405},
		{name: "delete", method: "DELETE", url: "/api/conversations/" + id, headers: alice, wantStatus: 204},
		{name: "gone", method: "GET", url: "/api/conversations/" + id, headers: alice, wantStatus: 404},
	} {
		ts.run(t, sc)
	}
}

func TestRequestIDEchoed(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct{ sent, want string }{
		{"abc-123", "abc-123"},
		{"bad id with spaces", ""},
		{strings.Repeat("x", 200), ""},
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/healthz", nil)
		req.Header.Set("X-Request-ID", tc.sent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-ID")
		if tc.want != "" && got != tc.want || tc.want == "" && (got == "" || got == tc.sent) {
			t.Errorf("sent %q: got %q", tc.sent, got)
		}
	}
}

func TestInternalErrorsHideDetail(t *testing.T) {
	ts := newTestServer(t)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil)
	ts.error(rec, req, io.ErrUnexpectedEOF)
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"Internal error."`) || strings.Contains(rec.Body.String(), "EOF") {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}
