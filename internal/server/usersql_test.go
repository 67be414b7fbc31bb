package server

import (
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// TestSQLKept: SQL the user runs from the page with keep is stored in the
// conversation — a user message whose tool call holds the query and its
// result (or its error) — and the model reads it as the user's own message
// in the next turn. Nothing is kept while an answer is being written.
func TestSQLKept(t *testing.T) {
	cs := newChatServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user", Contains: "wait"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("request_confirmation",
			`{"action":"execute_sql","parameters":{"query":"SELECT 1"},"explanation":"ok?"}`)}},
		{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Noted."}},
	}})
	conv := cs.withPenguins(t)
	base := "/api/conversations/" + conv + "/sql"

	st, res := cs.post(t, base, cs.alice, `{"query":"SELECT species, count(*) AS n FROM penguins GROUP BY species ORDER BY species","keep":true}`)
	if st != 200 || res["row_count"] != float64(3) || res["message"] == nil || res["error"] != nil {
		t.Fatalf("kept query: %d %v", st, res)
	}
	st, res = cs.post(t, base, cs.alice, `{"query":"SELECT nosuchcolumn FROM penguins","keep":true}`)
	if st != 200 || !strings.Contains(res["error"].(string), "nosuchcolumn") {
		t.Fatalf("kept failing query: %d %v", st, res)
	}
	st, _ = cs.post(t, base, cs.alice, `{"query":"SELECT 1"}`) // without keep: not stored
	if st != 200 {
		t.Fatalf("plain query: %d", st)
	}
	msgs := cs.messages(t, conv)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want the 2 kept queries", len(msgs))
	}
	ok, failed := msgs[0], msgs[1]
	if ok.Role != datachat.RoleUser || len(ok.ToolCalls) != 1 || !ok.ToolCalls[0].OK || !strings.Contains(ok.ToolCalls[0].Result, "Adelie") ||
		!strings.Contains(ok.Content, "I ran this SQL query myself") || !strings.Contains(ok.Content, "Gentoo") {
		t.Errorf("kept query message: %+v", ok)
	}
	if failed.ToolCalls[0].OK || !strings.Contains(failed.ToolCalls[0].Error, "nosuchcolumn") || !strings.Contains(failed.Content, "It failed") {
		t.Errorf("kept failing query message: %+v", failed)
	}
	// The conversation API returns them, as the page reopens them.
	if st, body := cs.getJSON(t, "/api/conversations/"+conv); st != 200 || len(body["messages"].([]any)) != 2 {
		t.Errorf("conversation: %d %v", st, body["messages"])
	}

	// The next turn's model request carries them as the user's messages.
	c := cs.dial(t, conv, cs.alice)
	c.ask("Look at what I found.")
	req := cs.fake.ChatRequests()[0]
	var seen bool
	for _, m := range req.Messages {
		if m.Role == "user" && strings.Contains(m.Text, "Gentoo") {
			seen = true
		}
	}
	if !seen {
		t.Errorf("the model was not told what the user ran: %+v", req.Messages)
	}

	// While an answer waits for the user, nothing is kept.
	c.send("chat_send", map[string]string{"content": "please wait"})
	c.until("confirmation_required")
	if st, res := cs.post(t, base, cs.alice, `{"query":"SELECT 1","keep":true}`); st != 409 {
		t.Errorf("keep during a turn: %d %v, want 409", st, res)
	}
}
