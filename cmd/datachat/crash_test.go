package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"datachat/internal/llmtest"
)

// integrityCheck runs PRAGMA integrity_check on an SQLite database file.
func integrityCheck(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	if res != "ok" {
		t.Errorf("integrity_check: got %q, want ok", res)
	}
}

// TestCrashMidTurn kills `datachat serve` with SIGKILL in the middle of a
// streamed answer and starts it again: the user's message is
// there, the partial answer is stored once, as interrupted, at most about a
// second behind what the client had received, the database is intact, and
// the conversation goes on.
func TestCrashMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	chunks := make([]string, 150)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("w%03d ", i)
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{Contains: "count slowly"}, Text: chunks, Delay: llmtest.Duration(30 * time.Millisecond)},
		{Match: &llmtest.Match{Contains: "again"}, Text: []string{"Still ", "here."}},
	}})
	dir := t.TempDir()
	vars := map[string]string{
		"DATACHAT_DATA_DIR": dir,
		"LLM_PROVIDER":      "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	}
	p, key := startFirstProc(t, vars)
	conv := newConversation(t, p.URL(), key)
	c := dialWS(t, p.URL(), key, conv)
	c.send("chat_send", map[string]string{"content": "count slowly"})

	// Let it stream for 2.2 s (about 70 of 150 chunks), then kill it.
	var evs []wsEvent
	for stop := time.Now().Add(2200 * time.Millisecond); time.Now().Before(stop); {
		ev, ok := c.next(5 * time.Second)
		if !ok {
			t.Fatalf("connection ended early: %v", c.err)
		}
		evs = append(evs, ev)
	}
	p.Kill()
	killed := time.Now()
	for ev := range c.events { // what had arrived before the connection broke
		evs = append(evs, ev)
	}
	received := tokensText(evs)
	if n := strings.Count(received, " "); n < 30 || n >= len(chunks) {
		t.Fatalf("client received %d chunks before the kill, want a good part of %d but not all", n, len(chunks))
	}
	integrityCheck(t, filepath.Join(dir, "datachat.db"))

	// Start again on the same address: the killed run's turn is over.
	vars["DATACHAT_ADDR"] = p.Addr
	p2 := startProc(t, vars)
	if !strings.Contains(p2.Log(), "marked interrupted") {
		t.Errorf("restart did not log messages marked interrupted:\n%s", p2.Log())
	}
	msgs := conversationMessages(t, p2.URL(), key, conv)
	if len(msgs) != 2 {
		t.Fatalf("messages after the restart: got %d (%+v), want the user's and the partial answer", len(msgs), msgs)
	}
	if m := msgs[0]; m.Role != "user" || m.Content != "count slowly" || m.Status != "complete" {
		t.Errorf("user message: got %+v", m)
	}
	answer := msgs[1]
	if answer.Role != "assistant" || answer.Status != "interrupted" {
		t.Errorf("answer: got role %q status %q, want an interrupted assistant message", answer.Role, answer.Status)
	}
	// The stored text and what the client received agree, and the stored text
	// holds everything the client had a flush interval (plus slack) before
	// the kill.
	if !strings.HasPrefix(received, answer.Content) && !strings.HasPrefix(answer.Content, received) {
		t.Errorf("stored answer and received text disagree:\nstored   %q\nreceived %q", answer.Content, received)
	}
	var before []wsEvent
	for _, ev := range evs {
		if ev.At.Before(killed.Add(-1500 * time.Millisecond)) {
			before = append(before, ev)
		}
	}
	if had := tokensText(before); !strings.HasPrefix(answer.Content, had) {
		t.Errorf("stored answer is more than ~1 s behind the client:\nstored             %q\nreceived by kill-1.5s %q", answer.Content, had)
	}
	t.Logf("client received %d bytes, %d stored (%d behind)", len(received), len(answer.Content), len(received)-len(answer.Content))

	// The conversation continues normally, with the partial answer in its history.
	c2 := dialWS(t, p2.URL(), key, conv)
	c2.send("chat_send", map[string]string{"content": "again"})
	got := c2.until(10*time.Second, "chat_complete")
	last := got[len(got)-1]
	if last.Type != "chat_complete" || field(last, "status") != "complete" || tokensText(got) != "Still here." {
		t.Fatalf("turn after the restart: got %v", got)
	}
	reqs := fake.ChatRequests()
	history := reqs[len(reqs)-1].Messages
	var sawQuestion, sawPartial bool
	for _, m := range history {
		sawQuestion = sawQuestion || m.Role == "user" && m.Text == "count slowly"
		sawPartial = sawPartial || m.Role == "assistant" && m.Text == answer.Content
	}
	if !sawQuestion || !sawPartial {
		t.Errorf("the model's history after the restart lacks the first question (%v) or the partial answer (%v): %+v", sawQuestion, sawPartial, history)
	}
	msgs = conversationMessages(t, p2.URL(), key, conv)
	var statuses []string
	for _, m := range msgs {
		statuses = append(statuses, m.Role+":"+m.Status)
	}
	if want := "user:complete assistant:interrupted user:complete assistant:complete"; strings.Join(statuses, " ") != want {
		t.Errorf("messages at the end: got %v, want %s", statuses, want)
	}
	integrityCheck(t, filepath.Join(dir, "datachat.db"))
}
