package main

import (
	"database/sql"
	"fmt"
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
// grace (DATACHAT_SHUTDOWN_GRACE), the long one is stored as interrupted —
// not cancelled: the user did not cancel it — with all the text its client
// received, and the process exits cleanly soon after the grace.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	chunks := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%03d ", prefix, i)
		}
		return out
	}
	short, long := chunks("s", 25), chunks("l", 300)
	delay := llmtest.Duration(40 * time.Millisecond) // short: 1 s, long: 12 s
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{Contains: "long one"}, Text: long, Delay: delay},
		{Match: &llmtest.Match{Contains: "short one"}, Text: short, Delay: delay},
	}})
	const grace = 2 * time.Second
	dir := t.TempDir()
	p := startProc(t, map[string]string{
		"DATACHAT_DATA_DIR":       dir,
		"DATACHAT_SHUTDOWN_GRACE": grace.String(),
		"LLM_PROVIDER":            "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	})
	key := p.Key
	convA, convB, convC := newConversation(t, p.URL(), key), newConversation(t, p.URL(), key), newConversation(t, p.URL(), key)
	cA, cB, cC := dialWS(t, p.URL(), key, convA), dialWS(t, p.URL(), key, convB), dialWS(t, p.URL(), key, convC)

	cB.send("chat_send", map[string]string{"content": "long one"})
	evB := cB.until(5*time.Second, "chat_token")
	cA.send("chat_send", map[string]string{"content": "short one"})
	evA := cA.until(5*time.Second, "chat_token")
	if evA[len(evA)-1].Type != "chat_token" || evB[len(evB)-1].Type != "chat_token" {
		t.Fatalf("turns did not start: %v %v", evA, evB)
	}

	p.Signal(syscall.SIGTERM)
	term := time.Now()
	time.Sleep(300 * time.Millisecond)

	// No new turn starts: a chat_send gets a clear chat_error.
	cC.send("chat_send", map[string]string{"content": "hello?"})
	if got := cC.until(3 * time.Second); len(got) != 1 || got[0].Type != "chat_error" || !strings.Contains(field(got[0], "message"), "restarting") {
		t.Errorf("chat_send while draining: got %v, want one chat_error saying the server is restarting", got)
	}
	// No new request is taken: the listener is closed (or the answer is 503).
	if resp, err := http.Get(p.URL() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("new request while draining: got HTTP %d, want it refused", resp.StatusCode)
		}
	}

	// The short turn finishes within the grace.
	evA = append(evA, cA.until(5*time.Second, "chat_complete")...)
	if last := evA[len(evA)-1]; last.Type != "chat_complete" || field(last, "status") != "complete" {
		t.Errorf("short turn: ended with %s %s, want chat_complete complete", last.Type, last.Data)
	}
	if got, want := tokensText(evA), strings.Join(short, ""); got != want {
		t.Errorf("short turn text: got %q, want %q", got, want)
	}

	// The long one streams on until the grace is over, then is interrupted
	// with a chat_error, and the socket closes as going away.
	evB = append(evB, cB.until(grace+5*time.Second, "chat_complete")...)
	interrupted := time.Since(term)
	if last := evB[len(evB)-1]; last.Type != "chat_error" || !strings.Contains(field(last, "message"), "restarting") {
		t.Errorf("long turn: ended with %s %s, want a chat_error saying the server is restarting", last.Type, last.Data)
	}
	if interrupted < grace || interrupted > grace+3*time.Second {
		t.Errorf("long turn interrupted %s after SIGTERM, want just after the %s grace", interrupted, grace)
	}
	select {
	case <-cB.closed:
		if st := websocket.CloseStatus(cB.err); st != websocket.StatusGoingAway {
			t.Errorf("WebSocket close: got %v (%v), want going away", st, cB.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("WebSocket still open after the shutdown")
	}

	if err := p.Wait(8 * time.Second); err != nil {
		t.Errorf("serve exit: %v, want a clean exit\n%s", err, p.Log())
	}
	if took := time.Since(term); took > grace+5*time.Second {
		t.Errorf("serve took %s to stop after SIGTERM with a %s grace", took, grace)
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
	if received := tokensText(evB); content != received || len(received) < len(long[0])*20 {
		t.Errorf("long turn: stored %d bytes, client received %d; want the same text, some seconds of it", len(content), len(received))
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM messages WHERE conversation_id = ?`, convC).Scan(&n); err != nil || n != 0 {
		t.Errorf("messages stored for the refused chat_send: got %d (%v), want 0", n, err)
	}
	integrityCheck(t, filepath.Join(dir, "datachat.db"))
}
