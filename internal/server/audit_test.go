package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/workspace"
)

// adminKey creates the user admin, an administrator (as serve's first
// start makes them), and a key of theirs.
func (ts *testServer) adminKey(t *testing.T) string {
	t.Helper()
	u, err := ts.Store.EnsureUser(t.Context(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Store.SetRole(t.Context(), u.ID, datachat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	secret, hash, prefix := datachat.NewAPIKeySecret()
	if err := ts.Store.CreateAPIKey(t.Context(), &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return secret
}

// auditPage is GET /api/admin/audit's answer.
type auditPage struct {
	Events []datachat.AuditEvent `json:"events"`
	Next   string                `json:"next_cursor"`
}

func (ts *testServer) audit(t *testing.T, key, query string) (int, auditPage, string) {
	t.Helper()
	st, b, _ := ts.getAs(t, "/api/admin/audit"+query, key)
	var p auditPage
	if st == 200 {
		if err := json.Unmarshal([]byte(b), &p); err != nil {
			t.Fatalf("%s: %v: %s", query, err, b)
		}
	}
	return st, p, b
}

// TestAuditAPI: GET /api/admin/audit lists the audit log to the admin,
// newest first, filtered and paged — past events that share a time —, and
// refuses, naming what is wrong, what it cannot read; hostile values match
// nothing and break nothing.
func TestAuditAPI(t *testing.T) {
	ts := newTestServer(t)
	admin := ts.adminKey(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	at := func(h int) time.Time { return now.Add(time.Duration(-h) * time.Hour) }
	var want []datachat.AuditEvent // newest first
	add := func(e datachat.AuditEvent) {
		if err := ts.Store.AppendAudit(ctx, &e); err != nil {
			t.Fatal(err)
		}
		want = append([]datachat.AuditEvent{e}, want...)
	}
	add(datachat.AuditEvent{Time: at(50), Kind: datachat.AuditKeyCreated, Outcome: datachat.AuditOK, Target: "k1", Detail: "key dck_x… for user alice"})
	add(datachat.AuditEvent{Time: at(30), Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice", UserID: ts.aliceID,
		Address: "192.0.2.1", ConversationID: "c1", Source: "warehouse", SQL: "SELECT 1\n\x1b[2J", RowCount: ptrTo(int64(1)), DurationMS: 3})
	add(datachat.AuditEvent{Time: at(20), Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditRefused, UserName: "bob",
		Source: "warehouse", SQL: "DELETE FROM t", Error: "refused by the sandbox"})
	for i := range 7 { // seven at one time
		add(datachat.AuditEvent{Time: at(10), Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice",
			Source: "shop", SQL: fmt.Sprintf("SELECT %d", i), RowCount: ptrTo(int64(i))})
	}
	// Equal times are listed by id, newest first.
	for i := range want {
		for j := i + 1; j < len(want); j++ {
			if want[j].Time.Equal(want[i].Time) && want[j].ID > want[i].ID {
				want[i], want[j] = want[j], want[i]
			}
		}
	}

	st, p, body := ts.audit(t, admin, "")
	if st != 200 || len(p.Events) != len(want) || p.Next != "" {
		t.Fatalf("the whole log: %d, %d events, cursor %q; want 200, %d, none: %s", st, len(p.Events), p.Next, len(want), body)
	}
	for i := range want {
		if !reflect.DeepEqual(p.Events[i], want[i]) {
			t.Errorf("event %d:\ngot  %+v\nwant %+v", i, p.Events[i], want[i])
		}
	}
	if !strings.Contains(body, `"sql":"SELECT 1\n\u001b[2J"`) || !strings.Contains(body, `"row_count":1`) || !strings.Contains(body, `"time":"`) {
		t.Errorf("the JSON does not carry the record's fields as named: %s", body)
	}

	count := func(q string) int {
		t.Helper()
		st, p, body := ts.audit(t, admin, q)
		if st != 200 {
			t.Errorf("%s: %d %s", q, st, body)
		}
		return len(p.Events)
	}
	since := url.QueryEscape(at(25).Format(time.RFC3339Nano))
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"?user=alice", 8},
		{"?user=bob&source=warehouse", 1},
		{"?source=shop", 7},
		{"?kind=source.query", 9},
		{"?kind=key.created", 1},
		{"?outcome=refused", 1},
		{"?since=" + since, 8},
		{"?since=24h", 8},
		{"?since=3d&until=" + since, 2},
		{"?until=40h", 1},
		{"?since=2000-01-01", 10},
		{"?user=" + url.QueryEscape("alice' OR '1'='1"), 0},
		{"?user=" + url.QueryEscape("%"), 0},
		{"?source=" + url.QueryEscape("shop\x00"), 0},
		{"?user=" + url.QueryEscape(strings.Repeat("a", 1<<15)), 0},
		{"?limit=2", 2},
		{"?limit=100000", 10},
	} {
		if got := count(tc.query); got != tc.want {
			t.Errorf("%.60s: got %d events, want %d", tc.query, got, tc.want)
		}
	}

	// Pages of 2 across the seven that share a time: each once, in order.
	var paged []string
	q := "?limit=2&kind=source.query"
	for range 20 {
		st, p, body := ts.audit(t, admin, q)
		if st != 200 {
			t.Fatalf("%s: %d %s", q, st, body)
		}
		for _, e := range p.Events {
			paged = append(paged, e.ID)
		}
		if p.Next == "" {
			break
		}
		q = "?limit=2&kind=source.query&cursor=" + url.QueryEscape(p.Next)
	}
	var wantIDs []string
	for _, e := range want {
		if e.Kind == datachat.AuditSourceQuery {
			wantIDs = append(wantIDs, e.ID)
		}
	}
	if strings.Join(paged, ",") != strings.Join(wantIDs, ",") {
		t.Errorf("paged:\ngot  %v\nwant %v", paged, wantIDs)
	}

	for _, tc := range []struct{ query, want string }{
		{"?kind=source.queried", "Unknown audit event kind"},
		{"?kind=" + url.QueryEscape("' OR 1=1 --"), "Unknown audit event kind"},
		{"?outcome=denied", "Unknown audit event outcome"},
		{"?since=yesterday", "is not a time"},
		{"?until=-5h", "is not a time"},
		{"?since=1h&until=2h", "since"},
		{"?limit=0", "limit"},
		{"?limit=-1", "limit"},
		{"?limit=ten", "limit"},
		{"?cursor=nonsense", "cursor"},
		{"?cursor=" + url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte("1 x' OR 1=1"))), "cursor"},
		{"?usr=alice", `Unknown parameter \"usr\"`},
		{"?user=alice&user=bob", "given 2 times"},
		{"?" + url.QueryEscape("\x1b[31m") + "=1", `\\u001b`},
	} {
		st, _, body := ts.audit(t, admin, tc.query)
		if st != 400 || !strings.Contains(body, tc.want) || strings.Contains(body, "Internal error") {
			t.Errorf("%.60s: got %d %s, want 400 saying %q", tc.query, st, body, tc.want)
		}
	}
	if got := count(""); got != len(want) {
		t.Errorf("after the hostile requests: %d events, want %d", got, len(want))
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestAuditAdminOnly: only an administrator may read the audit log; every
// other user — whatever their name — gets 403, a request without a key
// 401, and neither sees an event.
func TestAuditAdminOnly(t *testing.T) {
	ts := newTestServer(t)
	admin := ts.adminKey(t)
	if err := ts.Store.AppendAudit(t.Context(), &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditRefused, UserName: "alice", Detail: "secret-detail"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who, key string
		status   int
	}{
		{"admin", admin, 200},
		{"alice", ts.alice, 403},
		{"bob", ts.bob, 403},
		{"Admin", ts.newKey(t, "Admin"), 403},
		{"admin in Cyrillic", ts.newKey(t, "\u0430dmin"), 403},
		{"administrator", ts.newKey(t, "administrator"), 403},
		{"no key", "", 401},
		{"a wrong key", "dck_nope", 401},
	} {
		for _, q := range []string{"", "?user=alice", "?limit=nope"} {
			st, _, body := ts.audit(t, tc.key, q)
			want := tc.status
			if want == 200 && q == "?limit=nope" {
				want = 400
			}
			if st != want || (want != 200 && strings.Contains(body, "secret-detail")) {
				t.Errorf("%s %s: got %d %s, want %d", tc.who, q, st, body, want)
			}
			if st == 403 && !strings.Contains(body, `"type":"forbidden"`) {
				t.Errorf("%s: got %s, want type forbidden", tc.who, body)
			}
		}
	}
	req, _ := http.NewRequest("POST", ts.URL+"/api/admin/audit", nil)
	req.Header.Set("X-API-Key", admin)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 {
		t.Errorf("POST /api/admin/audit: %v %v, want 405", resp, err)
	}
}

// headerTransport adds headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestAuditEveryPath: a query on a database source is recorded, with the
// address and request id of the request it came from, whichever way it
// reached the source — a chat turn over the WebSocket, POST /chat/query,
// POST /v1/chat/completions, or MCP execute_sql over /mcp: they all go
// through workspace.Sources.Query. The source's credentials cannot be
// opened here, so each query fails, and is recorded as failed.
func TestAuditEveryPath(t *testing.T) {
	paths := []string{"ws", "chatquery", "v1", "mcp"}
	var turns []llmtest.Turn
	for _, p := range paths {
		turns = append(turns, llmtest.Turn{Match: &llmtest.Match{LastRole: "user", Contains: "via " + p},
			ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", fmt.Sprintf(`{"query":"SELECT '%s'","source":"warehouse"}`, p))}})
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: turns, Default: &llmtest.Turn{Reply: "done"}})
	key := make([]byte, 32)
	rand.Read(key)
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		src := &workspace.Sources{Store: d.Store, Logger: d.Logger, SecretKey: base64.StdEncoding.EncodeToString(key), DataDir: t.TempDir()}
		t.Cleanup(func() { src.Close() })
		d.Sources = src
		d.Chat = &chat.Runner{
			Store: d.Store, Data: d.Workspace, Sources: src, Model: newModel(llmtest.OpenAI, fake.URL),
			Provider: "openai", ModelID: "test-model", Window: 1_000_000, MaxOutputTokens: 1024, MaxContextDocs: 5,
			MaxQueryChars: 2000, Streaming: true, Logger: slog.New(slog.DiscardHandler),
		}
	})
	ctx := t.Context()
	if err := ts.Store.CreateDBSource(ctx, &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:sealed-elsewhere", Users: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	conv := &datachat.Conversation{UserID: ts.aliceID}
	if err := ts.Store.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if err := ts.Store.AttachDBSource(ctx, conv.ID, "warehouse"); err != nil {
		t.Fatal(err)
	}

	// The WebSocket.
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	wsURL := strings.Replace(ts.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv.ID
	c, _, err := websocket.Dial(dctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"X-Api-Key": {ts.alice}, "X-Request-Id": {"req-ws"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	b, _ := json.Marshal(map[string]any{"type": "chat_send", "data": map[string]string{"content": "via ws"}})
	if err := c.Write(dctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	for {
		_, msg, err := c.Read(dctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg), `"chat_complete"`) || strings.Contains(string(msg), `"chat_error"`) {
			break
		}
	}

	post := func(path, reqID, body string, headers ...string) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.alice)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-ID", reqID)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		if st, b, _ := send(t, req); st != 200 {
			t.Fatalf("%s: %d %s", path, st, b)
		}
	}
	post("/chat/query", "req-chatquery", fmt.Sprintf(`{"query":"via chatquery","conversation_id":%q}`, conv.ID))
	post("/v1/chat/completions", "req-v1", `{"model":"datachat","messages":[{"role":"user","content":"via v1"}]}`, "X-Conversation-ID", conv.ID)

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport{"Authorization": "Bearer " + ts.alice, "X-Request-ID": "req-mcp"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "execute_sql", Arguments: map[string]any{
		"conversation_id": conv.ID, "source": "warehouse", "query": "SELECT 'mcp'"}})
	if err != nil || !res.IsError {
		t.Fatalf("MCP execute_sql: %+v, %v; want the source's error", res, err)
	}

	page, err := ts.Store.AuditEvents(ctx, datachat.AuditFilter{Kind: datachat.AuditSourceQuery})
	if err != nil {
		t.Fatal(err)
	}
	bySQL := map[string]*datachat.AuditEvent{}
	for _, e := range page.Events {
		bySQL[e.SQL] = e
	}
	if len(page.Events) != len(paths) {
		t.Errorf("got %d source.query events, want %d, one a path", len(page.Events), len(paths))
	}
	for _, p := range paths {
		e := bySQL[fmt.Sprintf("SELECT '%s'", p)]
		if e == nil {
			t.Errorf("%s: the query is not in the audit log", p)
			continue
		}
		if e.Address != "127.0.0.1" || e.RequestID != "req-"+p || e.UserName != "alice" || e.ConversationID != conv.ID ||
			e.Source != "warehouse" || e.Outcome != datachat.AuditFailed || !strings.Contains(e.Error, "secret key") {
			t.Errorf("%s: got %+v, want alice's failed query from 127.0.0.1, req-%s, in %s", p, *e, p, conv.ID)
		}
	}
}
