package chat

import (
	"fmt"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// storeHistory stores n alternating user and assistant messages, "message
// i" padded to chars characters.
func (f *turnFixture) storeHistory(t *testing.T, n, chars int) {
	t.Helper()
	for i := range n {
		role := datachat.RoleUser
		if i%2 == 1 {
			role = datachat.RoleAssistant
		}
		text := fmt.Sprintf("message %d", i)
		text += strings.Repeat(".", max(0, chars-len(text)))
		if err := f.store.CreateMessage(t.Context(), &datachat.Message{ConversationID: f.conv.ID, Role: role, Content: text, Status: datachat.StatusComplete}); err != nil {
			t.Fatal(err)
		}
	}
}

// conversationSent returns the user and assistant messages of a request.
func conversationSent(r llmtest.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" || m.Role == "assistant" {
			out = append(out, m.Text)
		}
	}
	return out
}

// TestHistoryPruned: a turn sends the newest MaxContextMessages messages,
// its question last; when the model answers that the context is too large
// the turn retries once without the oldest contextDropCount, and a second
// refusal ends the turn with ErrContextTooLarge, stored on the message.
func TestHistoryPruned(t *testing.T) {
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		llmtest.Preset("context_too_large"),
		{Text: []string{"Fits now."}, Usage: usage},
		llmtest.Preset("context_too_large"),
		llmtest.Preset("context_too_large"),
	}})
	f.storeHistory(t, 60, 0)
	evs, out, err := f.send(t, "message 60")
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.fake.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	for i, want := range []struct {
		n     int
		first string
	}{{MaxContextMessages, "message 11"}, {MaxContextMessages - contextDropCount, "message 21"}} {
		sent := conversationSent(reqs[i])
		if len(sent) != want.n || sent[0] != want.first || sent[len(sent)-1] != "message 60" {
			t.Errorf("request %d sent %d messages, %q to %q; want %d from %q to the question", i, len(sent), sent[0], sent[len(sent)-1], want.n, want.first)
		}
	}
	if streamed(evs) != "Fits now." || out.Complete == nil || f.answer(t).Status != datachat.StatusComplete {
		t.Errorf("answer %q, outcome %+v", streamed(evs), out.Complete)
	}

	// Too large even after the retry.
	_, out, err = f.send(t, "again")
	if ev := ErrorEventFor(err); err == nil || ev.Message != ErrContextTooLarge {
		t.Fatalf("got %v (chat_error %+v), want %q", err, ev, ErrContextTooLarge)
	}
	if n := len(f.fake.ChatRequests()); n != 4 {
		t.Errorf("the model was called %d times, want 2 more", n)
	}
	if m := f.answer(t); m.Status != datachat.StatusError || m.Error != ErrContextTooLarge || m.ID != out.Message.ID {
		t.Errorf("stored %s with error %q, want error %q", m.Status, m.Error, ErrContextTooLarge)
	}
}

// TestHistoryFitsWindow: with a small window the turn sends the newest
// messages that fit 80% of it (chars/4, system prompt included) and not one
// more; the question is sent even when nothing else fits.
func TestHistoryFitsWindow(t *testing.T) {
	f := newTurnFixture(t, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}, Usage: usage}})
	data := newQueryData()
	data.datasets = nil
	f.r.Data = data
	const chars = 400
	f.storeHistory(t, 40, chars)
	f.r.Window = 2_500 // 2,000 tokens: 8,000 characters
	question := "message 40" + strings.Repeat(".", chars-len("message 40"))
	if _, _, err := f.send(t, question); err != nil {
		t.Fatal(err)
	}
	req := f.fake.ChatRequests()[0]
	sent := conversationSent(req)
	system := len(req.Messages[0].Text)
	if req.Messages[0].Role != "system" || system == 0 {
		t.Fatalf("first message %+v, want the system prompt", req.Messages[0])
	}
	fit := 0 // the most messages whose estimate fits 80% of the window
	for (system+(fit+1)*chars)/4 <= f.r.Window*8/10 {
		fit++
	}
	if fit < 2 || fit > 30 {
		t.Fatalf("the test wants room for a few messages: %d fit beside a %d-character prompt", fit, system)
	}
	if len(sent) != fit || sent[len(sent)-1] != question || !strings.HasPrefix(sent[0], fmt.Sprintf("message %d.", 41-fit)) {
		t.Errorf("sent %d messages from %.12q; want the newest %d, to the question", len(sent), sent[0], fit)
	}

	// A window the prompt alone fills: the question still goes.
	f.r.Window = 100
	if _, _, err := f.send(t, "message 42"); err != nil {
		t.Fatal(err)
	}
	reqs := f.fake.ChatRequests()
	if sent := conversationSent(reqs[len(reqs)-1]); len(sent) != 1 || sent[0] != "message 42" {
		t.Errorf("sent %q, want only the question", sent)
	}
}
