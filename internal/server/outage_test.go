package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
)

// downStore is a store whose database can be taken away: while down, the
// calls of the requests below fail as a store does when its database is
// unreachable (its own classification, tested in each store package against
// the real thing).
type downStore struct {
	datachat.Store
	down atomic.Bool
}

func (s *downStore) fail() error {
	if s.down.Load() {
		return datachat.StoreUnavailable(dialError{syscall.ECONNREFUSED})
	}
	return nil
}

// dialError stands for the driver's connection error.
type dialError struct{ err error }

func (e dialError) Error() string { return "dial tcp 127.0.0.1:5432: " + e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

func (s *downStore) Ping(ctx context.Context) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.Ping(ctx)
}

func (s *downStore) Authenticate(ctx context.Context, hash string) (*datachat.User, datachat.Credential, error) {
	if err := s.fail(); err != nil {
		return nil, datachat.Credential{}, err
	}
	return s.Store.Authenticate(ctx, hash)
}

func (s *downStore) Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.Conversation(ctx, userID, id)
}

func (s *downStore) BeginTurn(ctx context.Context, user, assistant *datachat.Message, lease datachat.Lease, now time.Time) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.BeginTurn(ctx, user, assistant, lease, now)
}

func (s *downStore) RecentMessages(ctx context.Context, conversationID string, n int) ([]*datachat.Message, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.RecentMessages(ctx, conversationID, n)
}

func (s *downStore) TurnStart(ctx context.Context, userID, conversationID string, n int) (*datachat.Conversation, *datachat.Confirmation, []*datachat.Message, error) {
	if err := s.fail(); err != nil {
		return nil, nil, nil, err
	}
	return s.Store.TurnStart(ctx, userID, conversationID, n)
}

func (s *downStore) TakeRequest(ctx context.Context, userID string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	if err := s.fail(); err != nil {
		return false, 0, err
	}
	return s.Store.TakeRequest(ctx, userID, now, window, limit)
}

// TestDatabaseOutage: while the database is unavailable every route answers
// 503 busy with Retry-After — /healthz (503 unavailable), REST, the OpenAI-compatible routes in their own
// error shape, /chat/query, the WebSocket before its upgrade — and a chat_send
// on an open WebSocket gets a chat_error with a reason and a suggested
// action; nothing says "Internal error."
func TestDatabaseOutage(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"fine"}}})
	st := &downStore{Store: cs.Store}
	cs.Server.Store, cs.Chat.Store, cs.Workspace.Store = st, st, st
	conv := cs.newConversation(t, cs.alice)
	open := cs.dial(t, conv, cs.alice)
	st.down.Store(true)

	const msg = "The database is unavailable; try again in a few seconds."
	check := func(name string, resp *http.Response, want ...string) {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" {
			t.Errorf("%s: got %d, Retry-After %q; want 503 with Retry-After 5: %s", name, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		for _, w := range append(want, msg) {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: body %s lacks %q", name, b, w)
			}
		}
		if strings.Contains(string(b), "Internal error") || strings.Contains(string(b), "5432") {
			t.Errorf("%s: body %s", name, b)
		}
	}
	req := func(method, path, body string) *http.Response {
		r, _ := http.NewRequest(method, cs.URL+path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+cs.alice)
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	check("GET /api/conversations", req("GET", "/api/conversations", ""), `"type":"busy"`)
	check("POST /api/conversations/{id}/sql", req("POST", "/api/conversations/"+conv+"/sql", `{"query":"SELECT 1"}`), `"type":"busy"`)
	check("POST /chat/query", req("POST", "/chat/query", `{"query":"hello"}`), `"type":"busy"`)
	check("POST /v1/chat/completions", req("POST", "/v1/chat/completions", `{"model":"datachat","messages":[{"role":"user","content":"hi"}]}`),
		`"type":"server_error"`, `"code":"server_busy"`)
	check("GET /v1/models", req("GET", "/v1/models", ""), `"type":"server_error"`)

	// /healthz needs no key and says only that the server is unavailable,
	// but when to look again too.
	hz, err := http.Get(cs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hzBody, _ := io.ReadAll(hz.Body)
	hz.Body.Close()
	if hz.StatusCode != http.StatusServiceUnavailable || hz.Header.Get("Retry-After") != "5" || !strings.Contains(string(hzBody), `"unavailable"`) {
		t.Errorf("GET /healthz: got %d, Retry-After %q, %s; want 503 unavailable with Retry-After 5", hz.StatusCode, hz.Header.Get("Retry-After"), hzBody)
	}

	_, resp, err := websocket.Dial(context.Background(), strings.Replace(cs.URL, "http", "ws", 1)+"/ws?conversation_id="+conv+"&api_key="+cs.alice, nil)
	if err == nil || resp == nil {
		t.Fatalf("WebSocket upgrade with the database down: got %v, want HTTP 503", err)
	}
	check("GET /ws", resp)

	evs := open.ask("hello")
	errs := find(evs, "chat_error")
	if len(errs) != 1 {
		t.Fatalf("chat_send with the database down: events %v, want a chat_error", types(evs))
	}
	ev := decode[chat.ErrorEvent](t, errs[0])
	if ev.Message != msg || ev.Reason == "" || !strings.Contains(ev.SuggestedAction, "Try again") {
		t.Errorf("chat_error: got %+v, want %q with a reason and a suggested action", ev, msg)
	}

	st.down.Store(false)
	if resp := req("GET", "/api/conversations", ""); resp.StatusCode != 200 {
		t.Errorf("GET /api/conversations with the database back: %d", resp.StatusCode)
	}
	open.send("chat_send", map[string]string{"content": "hello"})
	if evs := open.until("chat_complete"); tokens(evs) != "fine" {
		t.Errorf("turn with the database back: %v", types(evs))
	}
}
