package main

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat/internal/llmtest"
)

// TestGracefulShutdown stops `datachat serve` with SIGTERM while two turns
// stream: no new turn or request starts, the short turn finishes within the
// grace, the long one is interrupted when the grace ends — a second SIGTERM
// ends it here — and stored as interrupted, not cancelled (the user did not
// cancel it), with all the text its client received, its chat_error
// delivered before the socket closes as going away; the process exits
// cleanly. Every step waits for an event (a log line, a WebSocket message, a
// closed channel), none for a time, so a loaded machine only slows it.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	short, long := []string{"s000 ", "s001 ", "s002 ", "s003 "}, []string{"l000 ", "l001 ", "l002 ", "l003 "}
	hold, stall := make(chan struct{}), make(chan struct{})
	defer close(stall)
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		// Each streams two chunks (after OpenAI's role-only frame), then waits.
		{Match: &llmtest.Match{Contains: "long one"}, Text: long, Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 3, Release: stall}},
		{Match: &llmtest.Match{Contains: "short one"}, Text: short, Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 3, Release: hold}},
	}})
	dir := t.TempDir()
	p := startProc(t, map[string]string{
		"DATACHAT_DATA_DIR":       dir,
		"DATACHAT_SHUTDOWN_GRACE": "10m", // ended by the second signal
		"LLM_PROVIDER":            "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	})
	key := p.Key
	convA, convB, convC := newConversation(t, p.URL(), key), newConversation(t, p.URL(), key), newConversation(t, p.URL(), key)
	cA, cB, cC := dialWS(t, p.URL(), key, convA), dialWS(t, p.URL(), key, convB), dialWS(t, p.URL(), key, convC)

	const safety = 20 * time.Second // only ever reached by a failure
	cB.send("chat_send", map[string]string{"content": "long one"})
	evB := cB.until(safety, "chat_token")
	cA.send("chat_send", map[string]string{"content": "short one"})
	evA := cA.until(safety, "chat_token")
	if evA[len(evA)-1].Type != "chat_token" || evB[len(evB)-1].Type != "chat_token" {
		t.Fatalf("turns did not start: %v %v", evA, evB)
	}

	p.Signal(syscall.SIGTERM)
	p.waitLog(`"msg":"draining"`, safety)

	// No new turn starts: a chat_send gets a clear chat_error.
	cC.send("chat_send", map[string]string{"content": "hello?"})
	if got := cC.until(safety); len(got) != 1 || got[0].Type != "chat_error" || !strings.Contains(field(got[0], "message"), "restarting") {
		t.Errorf("chat_send while draining: got %v, want one chat_error saying the server is restarting", got)
	}
	// No new request is taken: the listener is closed (or the answer is 503).
	if resp, err := http.Get(p.URL() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("new request while draining: got HTTP %d, want it refused", resp.StatusCode)
		}
	}

	// The short turn, released, finishes within the grace.
	close(hold)
	evA = append(evA, cA.until(safety, "chat_complete")...)
	if last := evA[len(evA)-1]; last.Type != "chat_complete" || field(last, "status") != "complete" {
		t.Errorf("short turn: ended with %s %s, want chat_complete complete", last.Type, last.Data)
	}
	if got, want := tokensText(evA), strings.Join(short, ""); got != want {
		t.Errorf("short turn text: got %q, want %q", got, want)
	}

	// The grace ends (a second signal): the long turn is interrupted with a
	// chat_error, written before the socket closes as going away.
	p.Signal(syscall.SIGTERM)
	evB = append(evB, cB.until(safety, "chat_complete")...)
	if last := evB[len(evB)-1]; last.Type != "chat_error" || !strings.Contains(field(last, "message"), "restarting") {
		t.Errorf("long turn: ended with %s %s, want a chat_error saying the server is restarting", last.Type, last.Data)
	}
	for name, c := range map[string]*wsClient{"long": cB, "short": cA, "refused": cC} {
		select {
		case <-c.closed:
			if st := websocket.CloseStatus(c.err); st != websocket.StatusGoingAway {
				t.Errorf("%s turn's WebSocket close: got %v (%v), want going away", name, st, c.err)
			}
		case <-time.After(safety):
			t.Errorf("%s turn's WebSocket still open after the shutdown", name)
		}
	}
	if err := p.Wait(safety); err != nil {
		t.Errorf("serve exit: %v, want a clean exit\n%s", err, p.Log())
	}

	db, err := sql.Open("sqlite", filepath.Join(dir, "datachat.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := func(conv string) (status, content string) {
		t.Helper()
		err := db.QueryRow(`SELECT status, content FROM messages WHERE conversation_id = ? AND role = 'assistant'`, conv).Scan(&status, &content)
		if err != nil {
			t.Fatalf("stored answer of %s: %v", conv, err)
		}
		return status, content
	}
	if status, content := stored(convA); status != "complete" || content != strings.Join(short, "") {
		t.Errorf("short turn stored as %s %q", status, content)
	}
	status, content := stored(convB)
	if status != "interrupted" {
		t.Errorf("long turn stored as %s, want interrupted", status)
	}
	if received := tokensText(evB); content != received || received != strings.Join(long[:2], "") {
		t.Errorf("long turn: stored %q, client received %q; want both the two chunks streamed", content, received)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM messages WHERE conversation_id = ?`, convC).Scan(&n); err != nil || n != 0 {
		t.Errorf("messages stored for the refused chat_send: got %d (%v), want 0", n, err)
	}
	integrityCheck(t, filepath.Join(dir, "datachat.db"))
}
