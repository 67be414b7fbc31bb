package chat

import (
	"context"
	"fmt"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// checkCancelled checks what a turn the user cancelled shows: chat_complete
// with status cancelled and the turn's usage, the message cancelled with the
// text the client got, and that usage recorded once.
func checkCancelled(t *testing.T, f *turnFixture, evs []Event, out *Outcome, err error) *datachat.Message {
	t.Helper()
	if err != nil || out == nil || out.Complete == nil {
		t.Fatalf("Send: %+v, %v; want a chat_complete to send and no error", out, err)
	}
	m := f.answer(t)
	if c := out.Complete; c.Status != datachat.StatusCancelled || c.MessageID != m.ID || c.TotalTokens == 0 ||
		c.InputTokens != m.InputTokens || c.OutputTokens != m.OutputTokens {
		t.Errorf("chat_complete %+v; want cancelled for %s with its usage (%d+%d)", c, m.ID, m.InputTokens, m.OutputTokens)
	}
	if m.Status != datachat.StatusCancelled || m.Content != streamed(evs) || m.Error != "" {
		t.Errorf("stored %s %q (error %q); want cancelled with what the client got, %q", m.Status, m.Content, m.Error, streamed(evs))
	}
	if got := f.tokensRecorded(t); got != m.InputTokens+m.OutputTokens {
		t.Errorf("token_usage holds %d tokens, want the turn's %d, once", got, m.InputTokens+m.OutputTokens)
	}
	return m
}

// TestCancelWhileStreaming: cancelling a turn's context while the model
// streams stops the answer where it is: the provider request is aborted,
// the message is stored cancelled with the tokens the client got, and its
// usage (estimated, the provider reporting none) is recorded.
func TestCancelWhileStreaming(t *testing.T) {
	chunks := make([]string, 50)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("w%d ", i)
	}
	// The fake stalls after a few chunks until the client goes.
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Text: chunks, Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 4}},
	}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tokens := 0
	var evs []Event
	out, err := f.r.Send(ctx, f.user, f.conv.ID, "Tell me a long story", TurnOptions{}, func(ev Event) {
		evs = append(evs, ev)
		if ev.Type == EventToken {
			if tokens++; tokens == 2 {
				cancel()
			}
		}
	})
	m := checkCancelled(t, f, evs, out, err)
	if tokens < 2 || tokens >= len(chunks) {
		t.Errorf("the client got %d tokens; want the stream stopped after the cancel", tokens)
	}
	if len(m.Parts) != 1 || m.Parts[0].Text != m.Content {
		t.Errorf("parts %+v", m.Parts)
	}
	if err := f.fake.Wait(t.Context(), func(reqs []llmtest.Request) bool {
		return len(reqs) == 1 && reqs[0].Disconnected
	}); err != nil {
		t.Errorf("the provider request was not aborted: %v", err)
	}
}

// TestCancelDuringTool: cancelling while a tool runs answers it "cancelled"
// (not a failed SQL attempt), runs none of the calls after it, does not call
// the model again, and stores the answer cancelled with the round.
func TestCancelDuringTool(t *testing.T) {
	sql := llmtest.Call("execute_sql", `{"query":"SELECT count(*) FROM big"}`)
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Counting. "}, ToolCalls: []llmtest.ToolCall{sql, sql}, Usage: usage},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Never sent."}, Usage: usage},
	}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	data := newQueryData()
	data.query = func(qctx context.Context, _ string) (*datachat.QueryResult, error) {
		cancel() // the user stops the turn while the query runs
		<-qctx.Done()
		return nil, datachat.Errorf(datachat.EBUSY, "interrupted")
	}
	f.r.Data = data

	evs, out, err := f.sendCtx(ctx, "How many rows?")
	m := checkCancelled(t, f, evs, out, err)
	_, results := toolRounds(t, evs)
	if len(results) != 1 || results[0].OK || results[0].Content != "Error: cancelled" {
		t.Fatalf("tool results %+v; want one, cancelled", results)
	}
	if n := len(data.ran()); n != 1 {
		t.Errorf("%d queries ran, want 1", n)
	}
	if n := len(f.fake.ChatRequests()); n != 1 {
		t.Errorf("the model was called %d times after the cancel, want 0", n-1)
	}
	if m.Content != "Counting. " || len(m.ToolCalls) != 1 || m.ToolCalls[0].Error != "cancelled" {
		t.Errorf("stored %q with rounds %+v", m.Content, m.ToolCalls)
	}
}
