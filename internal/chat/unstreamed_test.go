package chat

import (
	"context"
	"reflect"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// TestUnstreamedEnds: with streaming off, the text a turn held arrives as one
// chat_token when it completes or the user cancels it, so the client has what
// the store has, as a streaming client does. A failed turn sends only its
// error (an API client gets an error status rather than a started answer).
func TestUnstreamedEnds(t *testing.T) {
	two := 2
	sql := llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)
	tests := []struct {
		name   string
		turns  []llmtest.Turn
		status string
		sent   bool // the held text is sent
	}{
		{"complete", []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Counting. "}, ToolCalls: []llmtest.ToolCall{sql}},
			{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"One ", "row."}},
		}, datachat.StatusComplete, true},
		{"cancelled", []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Counting. "}, ToolCalls: []llmtest.ToolCall{sql}},
		}, datachat.StatusCancelled, true},
		{"failed", []llmtest.Turn{
			{Text: []string{"Count", "ing. ", "never"}, Error: &llmtest.ErrorReply{Preset: "server_error", After: &two}},
		}, datachat.StatusError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTurnFixture(t, llmtest.Script{Turns: tt.turns})
			f.r.Streaming = false
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			data := newQueryData()
			if tt.status == datachat.StatusCancelled {
				data.query = func(qctx context.Context, _ string) (*datachat.QueryResult, error) {
					cancel()
					<-qctx.Done()
					return nil, qctx.Err()
				}
			}
			f.r.Data = data
			evs, _, _ := f.sendCtx(ctx, "How many?")
			var tokens []string
			for _, ev := range evs {
				if ev.Type == EventToken {
					tokens = append(tokens, ev.Data.(TokenEvent).Token)
				}
			}
			m := f.answer(t)
			if m.Status != tt.status || m.Content == "" {
				t.Fatalf("stored %s %q, want %s with text", m.Status, m.Content, tt.status)
			}
			if want := []string{m.Content}; tt.sent && !reflect.DeepEqual(tokens, want) || !tt.sent && len(tokens) != 0 {
				t.Errorf("chat_token %q; text sent: want %v", tokens, tt.sent)
			}
		})
	}
}
