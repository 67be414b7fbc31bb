package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
	"datachat/internal/workspace"
)

// do sends a request with an API key (none: "") and a JSON body ("" for
// none), and returns the status and the body.
func (ts *testServer) do(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	return ts.withCookie(t, method, path, "", body, "X-API-Key", key)
}

// share shares the conversation as the key's user and returns the shares.
func (ts *testServer) share(t *testing.T, key, conv, body string) []datachat.Share {
	t.Helper()
	st, out := ts.do(t, "POST", "/api/conversations/"+conv+"/shares", key, body)
	if st != 201 {
		t.Fatalf("share %s: %d %s", body, st, out)
	}
	var res struct{ Shares []datachat.Share }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	return res.Shares
}

// TestShareAPI: sharing, listing and revoking as the owner; the refusals,
// each with a message saying what to do; the viewer's list and view; the
// audit records.
func TestShareAPI(t *testing.T) {
	ts := newTestServer(t)
	ctx := t.Context()
	carol := ts.keyOf(t, ts.account(t, "carol", datachat.RoleMember))
	zoe := ts.keyOf(t, ts.account(t, "Zoë 李", datachat.RoleMember))
	conv := ts.newConversation(t, ts.alice)
	other := ts.newConversation(t, ts.alice) // never shared
	bobs := ts.newConversation(t, ts.bob)
	base := "/api/conversations/" + conv + "/shares"

	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		want                          []string
	}{
		{"no body", "POST", base, ts.alice, "", 400, []string{"empty"}},
		{"not JSON", "POST", base, ts.alice, `{"users":`, 400, nil},
		{"an unknown field", "POST", base, ts.alice, `{"user":["bob"]}`, 400, []string{"user"}},
		{"users not a list", "POST", base, ts.alice, `{"users":"bob"}`, 400, nil},
		{"no one", "POST", base, ts.alice, `{}`, 400, []string{`{\"users\"`, `{\"everyone\": true}`}},
		{"everyone false", "POST", base, ts.alice, `{"everyone":false,"users":[]}`, 400, []string{"everyone"}},
		{"an unknown user", "POST", base, ts.alice, `{"users":["bob","mallory"]}`, 400, []string{`\"mallory\"`, "No user is named"}},
		{"a name in other capitals", "POST", base, ts.alice, `{"users":["Bob"]}`, 400, []string{`\"Bob\"`}},
		{"a name without its accent", "POST", base, ts.alice, `{"users":["Zoe 李"]}`, 400, []string{`Zoe 李`}},
		{"a name with a line break", "POST", base, ts.alice, `{"users":["bob\nroot"]}`, 400, []string{`\\n`}},
		{"oneself", "POST", base, ts.alice, `{"users":["alice"]}`, 400, []string{"yourself"}},
		{"oneself among others", "POST", base, ts.alice, `{"users":["bob","alice"],"everyone":true}`, 400, []string{"yourself"}},
		{"too many names", "POST", base, ts.alice, mustJSON(map[string]any{"users": manyNames(datachat.MaxShareUsers + 1)}), 400, []string{"at most 500", "everyone"}},
		{"another user's conversation", "POST", "/api/conversations/" + bobs + "/shares", ts.alice, `{"users":["carol"]}`, 404, []string{"not_found"}},
		{"an unknown conversation", "POST", "/api/conversations/nope/shares", ts.alice, `{"everyone":true}`, 404, nil},
		{"without a key", "POST", base, "", `{"users":["bob"]}`, 401, nil},
		{"the list of another user's conversation", "GET", "/api/conversations/" + bobs + "/shares", ts.alice, "", 404, nil},
	} {
		st, out := ts.do(t, tc.method, tc.path, tc.key, tc.body)
		if st != tc.status {
			t.Errorf("%s: got %d %s, want %d", tc.name, st, out, tc.status)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %s does not say %s", tc.name, out, w)
			}
		}
	}
	if list, _ := ts.Store.Shares(ctx, ts.aliceID, conv); len(list) != 0 {
		t.Fatalf("refused requests shared the conversation: %+v", list)
	}
	if n := len(ts.auditOf(t, datachat.AuditShareCreated)); n != 0 {
		t.Errorf("refused requests were recorded as shares: %d", n)
	}

	// Named users (a name twice, a Unicode name), then everyone; again: the
	// same shares.
	shares := ts.share(t, ts.alice, conv, `{"users":["bob","Zoë 李","bob"]}`)
	if len(shares) != 2 || shares[0].UserName != "bob" || shares[1].UserName != "Zoë 李" || shares[0].Everyone || shares[0].ID == "" {
		t.Fatalf("shares: %+v", shares)
	}
	again := ts.share(t, ts.alice, conv, `{"users":["bob"],"everyone":true}`)
	if len(again) != 2 || !again[0].Everyone || again[0].UserName != "" || again[1].ID != shares[0].ID {
		t.Fatalf("shared again: %+v", again)
	}
	st, out := ts.do(t, "GET", base, ts.alice, "")
	if st != 200 || strings.Count(out, `"id"`) != 3 || strings.Contains(out, "user_id") || strings.Contains(out, conv) {
		t.Errorf("GET shares: %d %s", st, out)
	}
	var listed struct{ Shares []map[string]any }
	json.Unmarshal([]byte(out), &listed)
	if _, ok := listed.Shares[2]["user"]; ok || listed.Shares[2]["everyone"] != true || listed.Shares[0]["user"] != "bob" {
		t.Errorf("GET shares: %s", out)
	}

	// One record per share made, none for one that was there.
	ev := ts.auditOf(t, datachat.AuditShareCreated)
	if len(ev) != 3 {
		t.Fatalf("share.created records: %d, want 3", len(ev))
	}
	slices.Reverse(ev)
	for i, want := range []struct{ target, detail string }{{shares[0].ID, "with bob"}, {shares[1].ID, "with Zoë 李"}, {again[0].ID, "with everyone signed in"}} {
		if e := ev[i]; e.Target != want.target || e.Detail != want.detail || e.ConversationID != conv || e.UserName != "alice" || e.Outcome != datachat.AuditOK || e.Address == "" {
			t.Errorf("share.created %d: %+v, want %+v", i, *e, want)
		}
	}

	// The viewers: their list and the view.
	for _, key := range []string{ts.bob, zoe, carol} { // carol through everyone
		st, out := ts.do(t, "GET", "/api/shared", key, "")
		var res struct{ Conversations []map[string]any }
		json.Unmarshal([]byte(out), &res)
		if st != 200 || len(res.Conversations) != 1 || res.Conversations[0]["id"] != conv || res.Conversations[0]["owner"] != "alice" ||
			res.Conversations[0]["title"] != "New conversation" || res.Conversations[0]["shared_at"] == nil || res.Conversations[0]["updated_at"] == nil {
			t.Errorf("GET /api/shared: %d %s", st, out)
		}
		if strings.Contains(out, other) || strings.Contains(out, ts.aliceID) {
			t.Errorf("GET /api/shared tells of more than the shared conversation: %s", out)
		}
		if st, out := ts.do(t, "GET", "/api/shared/"+conv, key, ""); st != 200 || !strings.Contains(out, `"owner":"alice"`) || !strings.Contains(out, `"read_only":true`) {
			t.Errorf("GET /api/shared/{id}: %d %s", st, out)
		}
		if st, _ := ts.do(t, "GET", "/api/shared/"+other, key, ""); st != 404 {
			t.Errorf("GET the owner's other conversation through /api/shared: %d", st)
		}
	}
	if st, out := ts.do(t, "GET", "/api/shared", ts.alice, ""); st != 200 || out != `{"conversations":[]}`+"\n" && out != `{"conversations":[]}` {
		t.Errorf("the owner's own list of conversations shared with them: %d %s", st, out)
	}
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv, ts.alice, ""); st != 404 {
		t.Errorf("the owner through /api/shared: %d, want 404 (theirs is /api/conversations)", st)
	}
	// Everyone is everyone signed in to this server: no one without a key.
	for _, p := range []string{"/api/shared", "/api/shared/" + conv} {
		if st, _ := ts.do(t, "GET", p, "", ""); st != 401 {
			t.Errorf("GET %s without a key: %d, want 401", p, st)
		}
		if st, _ := ts.do(t, "GET", p, "dck_not-a-key", ""); st != 401 {
			t.Errorf("GET %s with a made-up key: %d, want 401", p, st)
		}
	}

	// Revoking: only the owner, only a share of that conversation; the view
	// stops at once.
	if st, _ := ts.do(t, "DELETE", base+"/"+shares[0].ID, ts.bob, ""); st != 404 {
		t.Errorf("the viewer revokes: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", "/api/conversations/"+other+"/shares/"+shares[0].ID, ts.alice, ""); st != 404 {
		t.Errorf("revoke through another conversation: %d", st)
	}
	if st, out := ts.do(t, "DELETE", base+"/"+shares[0].ID, ts.alice, ""); st != 204 {
		t.Fatalf("revoke: %d %s", st, out)
	}
	if st, _ := ts.do(t, "DELETE", base+"/"+shares[0].ID, ts.alice, ""); st != 404 {
		t.Errorf("revoke twice: %d", st)
	}
	// bob still reads it through everyone; once that goes too, no more.
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv, ts.bob, ""); st != 200 {
		t.Errorf("bob after his share is revoked, everyone's kept: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", base+"/"+again[0].ID, ts.alice, ""); st != 204 {
		t.Fatal(st)
	}
	for _, key := range []string{ts.bob, carol} {
		if st, _ := ts.do(t, "GET", "/api/shared/"+conv, key, ""); st != 404 {
			t.Errorf("the view after the revocation: %d", st)
		}
		if st, _ := ts.do(t, "POST", "/api/shared/"+conv+"/copy", key, ""); st != 404 {
			t.Errorf("a copy after the revocation: %d", st)
		}
	}
	rev := ts.auditOf(t, datachat.AuditShareRevoked)
	if len(rev) != 2 || rev[1].Target != shares[0].ID || rev[1].Detail != "with bob" || rev[0].Detail != "with everyone signed in" || rev[0].UserName != "alice" {
		t.Errorf("share.revoked records: %+v", rev)
	}
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv, zoe, ""); st != 200 {
		t.Errorf("zoë's own share after the others were revoked: %d", st)
	}
}

// manyNames returns n user names.
func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%d", i)
	}
	return out
}

// TestShareManyUsers shares with as many users as one request takes, and
// lists them.
func TestShareManyUsers(t *testing.T) {
	ts := newTestServer(t)
	names := manyNames(datachat.MaxShareUsers)
	for _, n := range names {
		if _, err := ts.Store.EnsureUser(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	conv := ts.newConversation(t, ts.alice)
	shares := ts.share(t, ts.alice, conv, mustJSON(map[string]any{"users": names}))
	if len(shares) != len(names) || shares[len(names)-1].UserName != names[len(names)-1] {
		t.Fatalf("got %d shares", len(shares))
	}
	if n := len(ts.auditOf(t, datachat.AuditShareCreated)); n != len(names) {
		t.Errorf("share.created records: %d, want %d", n, len(names))
	}
	st, out := ts.do(t, "GET", "/api/conversations/"+conv+"/shares", ts.alice, "")
	if st != 200 || strings.Count(out, `"id"`) != len(names) {
		t.Errorf("GET shares: %d, %d shares", st, strings.Count(out, `"id"`))
	}
}

// failingAudit is a store whose audit log refuses the kinds in fail.
type failingAudit struct {
	datachat.Store
	fail  map[string]bool
	after atomic.Int32 // records of those kinds written before they fail
}

func (f *failingAudit) AppendAudit(ctx context.Context, e *datachat.AuditEvent) error {
	if f.fail[e.Kind] && f.after.Add(-1) < 0 {
		return errors.New("the audit log's disk is gone")
	}
	return f.Store.AppendAudit(ctx, e)
}

// TestShareAuditFailsClosed: a share whose record cannot be written does
// not stand (the answer says so); a revocation stands without its record,
// which is logged.
func TestShareAuditFailsClosed(t *testing.T) {
	var fa *failingAudit
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		fa = &failingAudit{Store: d.Store, fail: map[string]bool{datachat.AuditShareCreated: true, datachat.AuditShareRevoked: true}}
		d.Store = fa
	})
	conv := ts.newConversation(t, ts.alice)
	carolID := ts.account(t, "carol", datachat.RoleMember)
	ts.account(t, "dave", datachat.RoleMember)

	// The second of three records fails: the first share stands, the
	// second and third are undone.
	fa.after.Store(1)
	st, out := ts.do(t, "POST", "/api/conversations/"+conv+"/shares", ts.alice, `{"users":["bob","carol","dave"]}`)
	if st != 503 || !strings.Contains(out, "was not done") || !strings.Contains(out, "audit log") {
		t.Errorf("sharing without its record: %d %s, want 503 saying it was not done", st, out)
	}
	list, _ := ts.Store.Shares(t.Context(), ts.aliceID, conv)
	if len(list) != 1 || list[0].UserName != "bob" {
		t.Errorf("shares left: %v, want bob's alone (the one recorded)", list)
	}
	if _, err := ts.Store.SharedConversation(t.Context(), carolID, conv); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("carol sees a share no record accounts for: %v", err)
	}
	if ev := ts.auditOf(t, datachat.AuditShareCreated); len(ev) != 1 || ev[0].Target != list[0].ID {
		t.Errorf("share.created records: %+v", ev)
	}

	// A revocation stands.
	fa.after.Store(0)
	if st, out := ts.do(t, "DELETE", "/api/conversations/"+conv+"/shares/"+list[0].ID, ts.alice, ""); st != 204 {
		t.Errorf("revoking without its record: %d %s, want 204", st, out)
	}
	if list, _ := ts.Store.Shares(t.Context(), ts.aliceID, conv); len(list) != 0 {
		t.Errorf("the revoked share is back: %v", list)
	}
}

// TestSharedViewIsTheOwnersView: GET /api/shared/{id} answers what GET
// /api/conversations/{id} answers the owner — messages with their parts,
// tool calls, results, number checks and citations, sources — with the
// datasets and documents, the owner's name and read_only; never the
// owner's pending confirmation.
func TestSharedViewIsTheOwnersView(t *testing.T) {
	ts := newTestServer(t)
	ctx := t.Context()
	conv := ts.newConversation(t, ts.alice)
	if st, d := ts.upload(t, "/api/conversations/"+conv+"/datasets", ts.alice, testfiles.Penguins(t, t.TempDir()), "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	doc := filepath.Join(t.TempDir(), "guide.md")
	os.WriteFile(doc, []byte("# Penguins\n\nAdelie penguins nest on rocky shores."), 0o600)
	if st, d := ts.upload(t, "/api/conversations/"+conv+"/documents", ts.alice, doc, "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	// An answer with everything an answer holds, and a query alice ran.
	a := &datachat.Message{ConversationID: conv, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	if err := ts.Store.CreateMessage(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := ts.Store.CreateToolCall(ctx, &datachat.ToolCall{MessageID: a.ID, Seq: 1, CallID: "c1", Tool: datachat.ToolExecuteSQL,
		Args: json.RawMessage(`{"query":"SELECT count(*) FROM penguins"}`), OK: true, Result: `{"columns":[{"name":"n"}],"rows":[[344]],"row_count":1}`}); err != nil {
		t.Fatal(err)
	}
	a.Status, a.Content = datachat.StatusComplete, "There are 344 penguins [1]."
	a.Parts = []datachat.Part{{Type: datachat.PartToolCall, CallID: "c1"}, {Type: datachat.PartText, Text: a.Content}}
	a.Sources = []datachat.Source{{ID: "s1", Text: "Adelie penguins nest on rocky shores.", Metadata: map[string]any{"document": "guide.md"}}}
	a.NumberChecks = []datachat.NumberCheck{{Text: "344", Start: 10, End: 13, Status: "matched", Source: json.RawMessage(`{"tool_call_id":"c1","row":0,"column":0}`)}}
	if err := ts.Store.FinishMessage(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if st, out := ts.do(t, "POST", "/api/conversations/"+conv+"/sql", ts.alice, `{"query":"SELECT count(*) AS n FROM penguins","keep":true}`); st != 200 {
		t.Fatalf("sql: %d %s", st, out)
	}
	if err := ts.Store.CreateConfirmation(ctx, &datachat.Confirmation{ConversationID: conv, MessageID: a.ID, CallID: "c9", Action: "execute_sql",
		Parameters: json.RawMessage(`{"query":"SELECT secret_plan FROM penguins"}`), Explanation: "secret-explanation"}); err != nil {
		t.Fatal(err)
	}
	ts.share(t, ts.alice, conv, `{"users":["bob"]}`)

	_, owner := ts.do(t, "GET", "/api/conversations/"+conv, ts.alice, "")
	st, viewer := ts.do(t, "GET", "/api/shared/"+conv, ts.bob, "")
	if st != 200 {
		t.Fatalf("GET /api/shared/{id}: %d %s", st, viewer)
	}
	var o, v map[string]any
	json.Unmarshal([]byte(owner), &o)
	json.Unmarshal([]byte(viewer), &v)
	if o["pending_confirmation"] == nil {
		t.Fatalf("the owner's view lacks the pending confirmation: %s", owner)
	}
	if v["pending_confirmation"] != nil || strings.Contains(viewer, "secret-explanation") || strings.Contains(viewer, "secret_plan") {
		t.Errorf("the viewer sees the owner's pending confirmation: %s", viewer)
	}
	if v["owner"] != "alice" || v["read_only"] != true {
		t.Errorf("owner %v, read_only %v", v["owner"], v["read_only"])
	}
	for _, k := range []string{"owner", "read_only", "datasets", "documents"} {
		if _, ok := o[k]; ok && k != "datasets" && k != "documents" {
			t.Errorf("the owner's view has %s", k)
		}
		delete(v, k)
	}
	delete(o, "pending_confirmation")
	delete(v, "pending_confirmation")
	if b1, b2 := mustJSON(o), mustJSON(v); b1 != b2 {
		t.Errorf("the viewer's view differs from the owner's:\nowner  %s\nviewer %s", b1, b2)
	}
	for _, w := range []string{`"number_checks"`, `"tool_calls"`, `"parts"`, `"sources"`, "rocky shores", `"I ran this SQL query myself`} {
		if !strings.Contains(viewer, w) {
			t.Errorf("the view lacks %s", w)
		}
	}
	var data struct {
		Datasets  []datachat.Dataset
		Documents []datachat.Document
	}
	json.Unmarshal([]byte(viewer), &data)
	if len(data.Datasets) != 1 || data.Datasets[0].Name != "penguins" || data.Datasets[0].RowCount != 344 || len(data.Documents) != 1 || data.Documents[0].Name != "guide.md" {
		t.Errorf("the view's datasets and documents: %+v", data)
	}
	if strings.Contains(viewer, ".parquet") {
		t.Errorf("the view names a stored file: %s", viewer)
	}

	// A disabled owner's conversation is seen by no one, until enabled.
	if err := ts.Store.DisableUser(ctx, ts.aliceID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv, ts.bob, ""); st != 404 {
		t.Errorf("a disabled owner's shared conversation: %d", st)
	}
	if st, out := ts.do(t, "GET", "/api/shared", ts.bob, ""); st != 200 || strings.Contains(out, conv) {
		t.Errorf("GET /api/shared while the owner is disabled: %d %s", st, out)
	}
	if err := ts.Store.EnableUser(ctx, ts.aliceID); err != nil {
		t.Fatal(err)
	}
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv, ts.bob, ""); st != 200 {
		t.Errorf("once the owner is enabled: %d", st)
	}
}

// viewerRequest is a request to a route pattern on the shared conversation
// (path values filled with the owner's real ids), with a body the owner's
// own request could send.
func viewerRequest(pattern, conv string, ids map[string]string) (method, path, body string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.ReplaceAll(path, "{id}", conv)
	for k, v := range ids {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	switch {
	case strings.HasSuffix(path, "/sql"), strings.HasSuffix(path, "/search"):
		body = `{"query":"SELECT count(*) FROM penguins"}`
	case strings.HasSuffix(path, "/datasets") && method == "POST":
		body = `{"url":"http://127.0.0.1:1/penguins.csv"}`
	case strings.HasSuffix(path, "/shares") && method == "POST":
		body = `{"users":["carol"]}`
	case strings.HasSuffix(path, "/sources") && method == "POST":
		body = `{"name":"warehouse"}`
	case method == "PATCH" && strings.Contains(path, "/datasets/"):
		body = `{"description":"mine now"}`
	case method == "PATCH":
		body = `{"title":"mine now","notes":"mine now"}`
	case strings.HasSuffix(path, "/dictionary") && method == "POST":
		body = `{"notes":"mine now"}`
	}
	return method, path, body
}

// TestSharedViewerCannotActOnOwner enumerates every route of the server on
// one conversation (every pattern under /api/conversations/{id}, from the
// one list Server.routes is) and calls each as a viewer the conversation is
// shared with — by name and with everyone, with a key and with a browser
// session — with the owner's real ids in the path: each answers 404, as for
// an id that does not exist. So do the WebSocket, /chat/query, /v1 and every
// MCP tool. Nothing of the owner's changed, no query ran, and no
// confirmation was read. A new per-conversation route that forgets whose
// conversation it acts on fails here.
func TestSharedViewerCannotActOnOwner(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"I should never answer a viewer."}}})
	ts := cs.testServer
	ctx := t.Context()
	conv := cs.withPenguins(t)
	ds, _ := ts.Store.Datasets(ctx, conv)
	doc := filepath.Join(t.TempDir(), "plan.md")
	os.WriteFile(doc, []byte("# Plan\n\nThe secret plan is on page one."), 0o600)
	if st, d := ts.upload(t, "/api/conversations/"+conv+"/documents", ts.alice, doc, "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	docs, _ := ts.Store.Documents(ctx, conv)
	if err := ts.Store.CreateDBSource(ctx, &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:x", AllUsers: true}); err != nil {
		t.Fatal(err)
	}
	if err := ts.Store.AttachDBSource(ctx, conv, "warehouse"); err != nil {
		t.Fatal(err)
	}
	m := &datachat.Message{ConversationID: conv, Role: datachat.RoleAssistant, Status: datachat.StatusAwaitingConfirmation}
	if err := ts.Store.CreateMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	confirm := &datachat.Confirmation{ConversationID: conv, MessageID: m.ID, CallID: "c1", Action: "execute_sql",
		Parameters: json.RawMessage(`{"query":"SELECT 1"}`), Explanation: "secret-explanation"}
	if err := ts.Store.CreateConfirmation(ctx, confirm); err != nil {
		t.Fatal(err)
	}
	shares := ts.share(t, ts.alice, conv, `{"users":["bob"],"everyone":true}`)
	ts.account(t, "carol", datachat.RoleMember)
	viewerBrowser := ts.member(t, "vera", pwCarol) // through everyone, signed in with a password
	before := snapshot(t, ts, conv)

	ids := map[string]string{"dataset_id": ds[0].ID, "doc_id": docs[0].ID, "name": "warehouse", "share_id": shares[0].ID}
	var routes []string
	for _, p := range registeredRoutes(t, ts) {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/api/conversations/{id}") {
			routes = append(routes, p)
		}
	}
	if len(routes) < 20 {
		t.Fatalf("only %d per-conversation routes: %v", len(routes), routes)
	}
	viewers := []struct {
		name string
		do   func(method, path, body string) (int, string)
	}{
		{"bob's key (shared by name)", func(method, path, body string) (int, string) { return ts.do(t, method, path, ts.bob, body) }},
		{"vera's session (shared with everyone)", func(method, path, body string) (int, string) {
			resp, out := viewerBrowser.do(method, path, body)
			return resp.StatusCode, out
		}},
	}
	for _, v := range viewers {
		for _, p := range routes {
			method, path, body := viewerRequest(p, conv, ids)
			st, out := v.do(method, path, body)
			if st != 404 {
				t.Errorf("%s as %s: got %d %s, want 404", p, v.name, st, out)
			}
			if strings.Contains(out, "secret") || strings.Contains(out, "penguins") {
				t.Errorf("%s as %s: the answer tells of the owner's data: %s", p, v.name, out)
			}
		}
		// The viewer's own routes do not reach it either.
		if st, out := v.do("GET", "/api/conversations", ""); st != 200 || strings.Contains(out, conv) {
			t.Errorf("%s lists their conversations: %d %s", v.name, st, out)
		}
		if st, out := v.do("POST", "/api/examples", mustJSON(map[string]any{"conversation_id": conv, "question": "q", "sql": "SELECT 1", "verdict": "correct"})); st != 404 {
			t.Errorf("POST /api/examples on the shared conversation as %s: %d %s", v.name, st, out)
		}
		if st, out := v.do("POST", "/chat/query", mustJSON(map[string]any{"query": "How many penguins?", "conversation_id": conv})); st != 404 {
			t.Errorf("POST /chat/query on the shared conversation as %s: %d %s", v.name, st, out)
		}
	}
	// The WebSocket: refused before the upgrade, so no turn and no
	// confirmation reaches the viewer.
	for _, dial := range []func() (*websocket.Conn, *http.Response, error){
		func() (*websocket.Conn, *http.Response, error) {
			c, resp, err := websocket.Dial(ctx, strings.Replace(ts.URL, "http://", "ws://", 1)+"/ws?conversation_id="+conv+"&api_key="+ts.bob, nil)
			if err == nil {
				c.CloseNow()
			}
			return c, resp, err
		},
		func() (*websocket.Conn, *http.Response, error) {
			return ts.dialCookie(t, conv, viewerBrowser.cookie(), ts.URL)
		},
	} {
		if _, resp, err := dial(); err == nil || resp == nil || resp.StatusCode != 404 {
			t.Errorf("the chat WebSocket on the shared conversation: %v, %v; want 404", resp, err)
		}
	}
	// /v1 with the conversation's id.
	resp := ts.completionReq(t, `{"model":"datachat","messages":[{"role":"user","content":"How many penguins?"}]}`,
		map[string]string{"Authorization": "Bearer " + ts.bob, "X-Conversation-ID": conv})
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/v1/chat/completions with the shared conversation's id: %d", resp.StatusCode)
	}
	// Every MCP tool, with the shared conversation's id.
	s := ts.mcpSession(t, ts.bob)
	tools, err := s.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 4 {
		t.Fatalf("MCP tools: %v %v", tools, err)
	}
	values := map[string]any{"conversation_id": conv, "query": "SELECT count(*) FROM penguins", "name": "penguins", "url": "http://127.0.0.1:1/x.csv"}
	for _, tool := range tools.Tools {
		// The arguments the tool requires, each with a value the owner
		// could send: the call reaches the tool, not a check of its
		// arguments.
		var schema struct{ Required []string }
		b, _ := json.Marshal(tool.InputSchema)
		json.Unmarshal(b, &schema)
		args := map[string]any{}
		for _, k := range schema.Required {
			v, ok := values[k]
			if !ok {
				t.Fatalf("MCP %s takes %s, which this test has no value for", tool.Name, k)
			}
			args[k] = v
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: args})
		if err != nil {
			t.Errorf("MCP %s: %v", tool.Name, err)
			continue
		}
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if !res.IsError || !strings.Contains(strings.ToLower(text), "not found") {
			t.Errorf("MCP %s on the shared conversation: error %v, %q; want not found", tool.Name, res.IsError, text)
		}
	}

	if after := snapshot(t, ts, conv); after != before {
		t.Errorf("the viewers changed the owner's conversation:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(cs.fake.ChatRequests()); n != 0 {
		t.Errorf("the model was asked %d times for a viewer", n)
	}
	// And the view itself still works: what was refused was the acting.
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv, ts.bob, ""); st != 200 {
		t.Errorf("the view after the attempts: %d", st)
	}
}

// snapshot is everything of a conversation the viewers might change, as
// text.
func snapshot(t *testing.T, ts *testServer, conv string) string {
	t.Helper()
	ctx := t.Context()
	c, err := ts.Store.Conversation(ctx, ts.aliceID, conv)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := ts.Store.Messages(ctx, conv)
	ds, _ := ts.Store.Datasets(ctx, conv)
	docs, _ := ts.Store.Documents(ctx, conv)
	srcs, _ := ts.Store.ConversationDBSources(ctx, conv)
	shares, _ := ts.Store.Shares(ctx, ts.aliceID, conv)
	pending, _ := ts.Store.PendingConfirmation(ctx, conv)
	ex, _ := ts.Store.Examples(ctx, ts.aliceID)
	return mustJSON(map[string]any{"conversation": c, "messages": msgs, "datasets": ds, "documents": docs, "sources": srcs,
		"shares": shares, "pending": pending, "examples": ex})
}

// TestSharedCopyAnswersFollowUp: bob copies a conversation alice shared
// with him — messages, the dataset (its file copied), the document (found
// by search in the copy), the source granted to him (the other named as not
// copied) — and asks a follow-up in the copy over the real WebSocket: the
// fake model sees the copied history and queries the copied table. Once
// alice deletes her conversation, bob's copy still answers.
func TestSharedCopyAnswersFollowUp(t *testing.T) {
	wantCount, _ := penguinsOracle(t)
	cs := newChatServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user", Contains: "How many Adelie"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+adelieSQL+`"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
			return "There are " + cell(r.LastToolResult(), 0, 0) + " Adelie penguins."
		}},
		{Match: &llmtest.Match{LastRole: "user", Contains: "And Gentoo"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) AS n FROM penguins WHERE species = 'Gentoo'"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
			return "And " + cell(r.LastToolResult(), 0, 0) + " Gentoo."
		}},
	}})
	ts := cs.testServer
	ctx := t.Context()
	conv := cs.withPenguins(t)
	doc := filepath.Join(t.TempDir(), "guide.md")
	os.WriteFile(doc, []byte("# Nesting\n\nGentoo penguins build nests of pebbles."), 0o600)
	if st, d := ts.upload(t, "/api/conversations/"+conv+"/documents", ts.alice, doc, "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	for _, src := range []*datachat.DBSource{
		{Name: "warehouse", Kind: "postgres", SealedURL: "v1:x", AllUsers: true},
		{Name: "payroll", Kind: "mysql", SealedURL: "v1:y", Users: []string{"alice"}},
	} {
		if err := ts.Store.CreateDBSource(ctx, src); err != nil {
			t.Fatal(err)
		}
		if err := ts.Store.AttachDBSource(ctx, conv, src.Name); err != nil {
			t.Fatal(err)
		}
	}
	notes := "Counts are of birds measured in 2007-2009."
	if err := ts.Store.UpdateDictionary(ctx, ts.aliceID, conv, datachat.Dictionary{Notes: &notes}); err != nil {
		t.Fatal(err)
	}
	c := cs.dial(t, conv, ts.alice)
	c.send("chat_send", map[string]string{"content": "How many Adelie penguins?"})
	if evs := c.until("chat_complete"); !strings.Contains(tokens(evs), fmt.Sprintf("There are %d Adelie", wantCount)) {
		t.Fatalf("alice's answer: %q", tokens(evs))
	}
	ts.share(t, ts.alice, conv, `{"users":["bob"]}`)

	st, out := ts.do(t, "POST", "/api/shared/"+conv+"/copy", ts.bob, "")
	if st != 201 {
		t.Fatalf("copy: %d %s", st, out)
	}
	var res struct {
		Conversation datachat.Conversation
		NotCopied    []map[string]string `json:"not_copied"`
	}
	json.Unmarshal([]byte(out), &res)
	cp := res.Conversation.ID
	if cp == "" || cp == conv || res.Conversation.Title != "Copy of New conversation" || res.Conversation.Notes != notes {
		t.Fatalf("the copy: %s", out)
	}
	if len(res.NotCopied) != 1 || res.NotCopied[0]["kind"] != "source" || res.NotCopied[0]["name"] != "payroll" || !strings.Contains(res.NotCopied[0]["reason"], "not granted") {
		t.Errorf("not_copied: %v, want payroll, not granted", res.NotCopied)
	}
	if st, out := ts.do(t, "GET", "/api/conversations", ts.bob, ""); st != 200 || !strings.Contains(out, cp) {
		t.Errorf("bob's conversations: %d %s", st, out)
	}
	orig, copied := cs.messages(t, conv), cs.messages(t, cp)
	if len(copied) != len(orig) || copied[1].Content != orig[1].Content || len(copied[1].ToolCalls) != 1 || copied[1].ToolCalls[0].Result != orig[1].ToolCalls[0].Result ||
		!slices.Equal(copied[1].Parts, orig[1].Parts) || len(copied[1].NumberChecks) != len(orig[1].NumberChecks) || len(orig[1].NumberChecks) == 0 {
		t.Errorf("copied messages differ: %d vs %d", len(copied), len(orig))
	}
	// The dataset reads a file of its own.
	ods, _ := ts.Store.Datasets(ctx, conv)
	cds, _ := ts.Store.Datasets(ctx, cp)
	if len(cds) != 1 || cds[0].Name != "penguins" || cds[0].Path == ods[0].Path || cds[0].RowCount != ods[0].RowCount {
		t.Fatalf("copied datasets: %+v", cds)
	}
	for _, d := range []*datachat.Dataset{ods[0], cds[0]} {
		if _, err := os.Stat(filepath.Join(ts.Workspace.Loader.Dir(), d.Path)); err != nil {
			t.Errorf("dataset file: %v", err)
		}
	}
	if srcs, _ := ts.Store.ConversationDBSources(ctx, cp); len(srcs) != 1 || srcs[0].Name != "warehouse" {
		t.Errorf("copied sources: %v", srcs)
	}
	// The copy is bob's: he searches its document, and alice cannot reach it.
	if st, out := ts.do(t, "POST", "/api/conversations/"+cp+"/search", ts.bob, `{"query":"pebbles"}`); st != 200 || !strings.Contains(out, "Gentoo penguins build nests") {
		t.Errorf("search in the copy: %d %s", st, out)
	}
	if st, _ := ts.do(t, "GET", "/api/conversations/"+cp, ts.alice, ""); st != 404 {
		t.Errorf("alice reads bob's copy: %d", st)
	}
	if st, _ := ts.do(t, "GET", "/api/shared/"+cp, ts.alice, ""); st != 404 {
		t.Errorf("alice reads bob's copy as shared: %d", st)
	}

	// Alice deletes hers: the copy keeps its file, and answers a follow-up
	// over the WebSocket with the copied history.
	if st, _ := ts.do(t, "DELETE", "/api/conversations/"+conv, ts.alice, ""); st != 204 {
		t.Fatal(st)
	}
	if _, err := os.Stat(filepath.Join(ts.Workspace.Loader.Dir(), ods[0].Path)); !os.IsNotExist(err) {
		t.Errorf("alice's dataset file after she deleted her conversation: %v", err)
	}
	b := cs.dial(t, cp, ts.bob)
	evs := b.ask("And Gentoo?")
	if got := tokens(evs); !strings.Contains(got, fmt.Sprintf("And %d Gentoo.", countSpecies(t, "Gentoo"))) {
		t.Fatalf("the follow-up in the copy: %q (%v %s)", got, types(evs), find(evs, "chat_error"))
	}
	reqs := cs.fake.ChatRequests()
	last := reqs[len(reqs)-2] // the follow-up's first request
	var history []string
	for _, m := range last.Messages {
		history = append(history, m.Text)
	}
	if h := strings.Join(history, "\n"); !strings.Contains(h, "How many Adelie penguins?") || !strings.Contains(h, fmt.Sprintf("There are %d Adelie", wantCount)) ||
		!strings.Contains(h, "Table penguins") || !strings.Contains(h, notes) {
		t.Errorf("the follow-up's request lacks the copied history, table or notes:\n%s", h)
	}
	if done := decode[chat.CompleteEvent](t, find(evs, "chat_complete")[0]); done.Status != "complete" {
		t.Errorf("chat_complete: %+v", done)
	}
}

// countSpecies counts the penguins of a species in the CSV.
func countSpecies(t *testing.T, species string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(string(testfiles.PenguinsCSV()), "\n") {
		if strings.HasPrefix(line, species+",") {
			n++
		}
	}
	return n
}

// TestCopyOnlyForViewers: copying needs the share, through the route and
// through the store's check at the time of the copy; the owner and others
// get 404; a copy through everyone works; the copy leaves nothing behind
// when refused.
func TestCopyOnlyForViewers(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.keyOf(t, ts.account(t, "carol", datachat.RoleMember))
	conv := ts.newConversation(t, ts.alice)
	if st, d := ts.upload(t, "/api/conversations/"+conv+"/datasets", ts.alice, testfiles.Penguins(t, t.TempDir()), "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	files := func() int {
		entries, _ := os.ReadDir(ts.Workspace.Loader.Dir())
		n := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".parquet") {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct{ name, key, conv, body string }{
		{"a user it is not shared with", carol, conv, ""},
		{"the owner", ts.alice, conv, ""},
		{"an unknown id", ts.bob, "nope", ""},
	} {
		if st, out := ts.do(t, "POST", "/api/shared/"+tc.conv+"/copy", tc.key, tc.body); st != 404 {
			t.Errorf("copy by %s: %d %s", tc.name, st, out)
		}
	}
	ts.share(t, ts.alice, conv, `{"everyone":true}`)
	if st, out := ts.do(t, "POST", "/api/shared/"+conv+"/copy", carol, `{"title":"x"}`); st != 400 {
		t.Errorf("copy with an unknown field: %d %s", st, out)
	}
	if st, out := ts.do(t, "POST", "/api/shared/"+conv+"/copy", ts.alice, ""); st != 404 {
		t.Errorf("the owner copies through everyone: %d %s", st, out)
	}
	if n := files(); n != 1 {
		t.Errorf("dataset files after refused copies: %d, want 1", n)
	}
	for i, key := range []string{carol, carol, ts.bob} {
		st, out := ts.do(t, "POST", "/api/shared/"+conv+"/copy", key, "{}")
		if st != 201 || !strings.Contains(out, `"not_copied":[]`) {
			t.Errorf("copy %d: %d %s", i, st, out)
		}
	}
	if n := files(); n != 4 {
		t.Errorf("dataset files after 3 copies: %d, want 4", n)
	}
}

// TestSharedSources: the view lists the sources attached as the owner sees
// them (those granted to the owner), a source's tables only when the viewer
// may use it too; the copy attaches only those granted to the viewer.
func TestSharedSources(t *testing.T) {
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		d.Sources = &workspace.Sources{Store: d.Store, Logger: d.Logger, DataDir: t.TempDir()}
	})
	ctx := t.Context()
	conv := ts.newConversation(t, ts.alice)
	for _, src := range []*datachat.DBSource{
		{Name: "warehouse", Kind: "postgres", SealedURL: "v1:x", Tables: []string{"public.*"}, AllUsers: true},
		{Name: "payroll", Kind: "mysql", SealedURL: "v1:y", Tables: []string{"hr.salaries"}, Users: []string{"alice"}},
		{Name: "retired", Kind: "postgres", SealedURL: "v1:z", Tables: []string{"old.stuff"}, Users: []string{"bob"}},
	} {
		if err := ts.Store.CreateDBSource(ctx, src); err != nil {
			t.Fatal(err)
		}
		if err := ts.Store.AttachDBSource(ctx, conv, src.Name); err != nil { // "retired": granted away from alice since
			t.Fatal(err)
		}
	}
	ts.share(t, ts.alice, conv, `{"users":["bob"]}`)
	var owner, viewer struct{ Sources []sourceView }
	_, o := ts.do(t, "GET", "/api/conversations/"+conv, ts.alice, "")
	_, v := ts.do(t, "GET", "/api/shared/"+conv, ts.bob, "")
	json.Unmarshal([]byte(o), &owner)
	json.Unmarshal([]byte(v), &viewer)
	want := []sourceView{{Name: "warehouse", Kind: "postgres", Tables: []string{"public.*"}}, {Name: "payroll", Kind: "mysql", Tables: []string{"hr.salaries"}}}
	if mustJSON(owner.Sources) != mustJSON(want) {
		t.Errorf("the owner's sources: %s", o)
	}
	want[1].Tables = []string{}
	if mustJSON(viewer.Sources) != mustJSON(want) || strings.Contains(v, "hr.salaries") || strings.Contains(v, "retired") {
		t.Errorf("the viewer's sources: %s, want %s", mustJSON(viewer.Sources), mustJSON(want))
	}
	st, out := ts.do(t, "POST", "/api/shared/"+conv+"/copy", ts.bob, "")
	var res struct {
		Conversation datachat.Conversation
		NotCopied    []workspace.NotCopied `json:"not_copied"`
	}
	json.Unmarshal([]byte(out), &res)
	if st != 201 || len(res.NotCopied) != 1 || res.NotCopied[0].Name != "payroll" {
		t.Fatalf("copy: %d %s", st, out)
	}
	// The copy's sources: warehouse; not retired, which is granted to bob
	// but no longer to alice, and was not in the view.
	_, c := ts.do(t, "GET", "/api/conversations/"+res.Conversation.ID+"/sources", ts.bob, "")
	if !strings.Contains(c, `"warehouse"`) || strings.Contains(c, `"retired"`) || strings.Contains(c, "payroll") {
		t.Errorf("the copy's sources: %s", c)
	}
}
