package server

import (
	"encoding/json"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// TestStoredResultColumns: a reopened answer's query result keeps its
// columns' types, a float column of whole numbers included (its text,
// "3701", reads as an integer), for the model's queries and the user's own.
func TestStoredResultColumns(t *testing.T) {
	const q = `SELECT species, count(*) AS n, round(avg(body_mass_g)) AS avg_mass FROM penguins GROUP BY species ORDER BY species`
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+q+`"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}},
	}})
	conv := cs.withPenguins(t)
	c := cs.dial(t, conv, cs.alice)
	c.ask("Mean mass by species?")
	body, _ := json.Marshal(map[string]any{"query": q, "keep": true})
	if st, res := cs.post(t, "/api/conversations/"+conv+"/sql", cs.alice, string(body)); st != 200 {
		t.Fatalf("kept query: %d %v", st, res)
	}
	want := []datachat.Column{{Name: "species", Type: "text", SQLType: "VARCHAR"}, {Name: "n", Type: "integer", SQLType: "BIGINT"}, {Name: "avg_mass", Type: "float", SQLType: "DOUBLE"}}
	var calls []datachat.ToolCall
	for _, m := range cs.messages(t, conv) {
		calls = append(calls, m.ToolCalls...)
	}
	if len(calls) != 2 {
		t.Fatalf("%d stored tool calls, want the answer's and the user's", len(calls))
	}
	for i, tc := range calls {
		got, _ := json.Marshal(tc.Columns)
		w, _ := json.Marshal(want)
		if string(got) != string(w) {
			t.Errorf("stored tool call %d (%s): columns %s, want %s", i, tc.CallID, got, w)
		}
	}
}
