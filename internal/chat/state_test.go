package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"datachat"
)

// turnStateV1 is a paused turn's state as version 1 stores it. It must keep
// decoding to the same state for as long as datachat reads version 1: a field
// renamed or dropped from turnState (or from the types it holds) fails
// TestTurnStateGolden instead of paused turns after an upgrade.
const turnStateV1 = `{
 "version": 1,
 "history_ids": ["m1", "m2"],
 "transcript": [
  {"Role": "user", "Content": "How many penguins?", "ToolCalls": null, "ToolCallID": "", "ToolName": ""},
  {"Role": "assistant", "Content": "", "ToolCalls": [{"ID": "c1", "Name": "execute_sql", "Args": {"query": "SELECT count(*) FROM penguins"}, "Signature": "sig"}], "ToolCallID": "", "ToolName": ""},
  {"Role": "tool", "Content": "344", "ToolCalls": null, "ToolCallID": "c1", "ToolName": "execute_sql"}
 ],
 "tool_calls": 2,
 "sql_failures": 1,
 "no_tools": true,
 "context_retried": true,
 "seq": 3,
 "usage": {"Input": 1200, "Output": 80},
 "recorded": {"Input": 1000, "Output": 60},
 "estimated": true,
 "sources": [{"id": "s1", "text": "Adelie penguins", "metadata": {"document": "guide.pdf", "page": 4}, "distance": 0.25, "score": 0.75}],
 "excerpts": 1,
 "pending": {"ID": "c2", "Name": "load_dataset", "Args": {"url": "https://example.com/a.csv"}, "Signature": ""},
 "skipped": [{"ID": "c3", "Name": "search_documents", "Args": {"query": "mass"}, "Signature": ""}],
 "examples": [{"question": "How many birds per island?", "sql": "SELECT island, count(*) FROM birds GROUP BY island", "renames": {"birds": "penguins"}}],
 "results": [{"call_id": "c1", "result": {"columns": [{"name": "count_star()", "type": "BIGINT", "sql_type": "BIGINT"}], "rows": [[344]], "row_count": 1, "truncated": false, "elapsed_ms": 1.5}}]
}`

func TestTurnStateGolden(t *testing.T) {
	s, err := decodeTurnState([]byte(turnStateV1))
	if err != nil {
		t.Fatal(err)
	}
	dist := 0.25
	want := turnState{
		Version:    1,
		HistoryIDs: []string{"m1", "m2"},
		Transcript: []datachat.ModelMessage{
			{Role: "user", Content: "How many penguins?"},
			{Role: "assistant", ToolCalls: []datachat.ModelToolCall{{ID: "c1", Name: "execute_sql", Args: json.RawMessage(`{"query": "SELECT count(*) FROM penguins"}`), Signature: "sig"}}},
			{Role: "tool", Content: "344", ToolCallID: "c1", ToolName: "execute_sql"},
		},
		ToolCalls: 2, SQLFailures: 1, NoTools: true, ContextRetried: true, Seq: 3,
		Usage:     datachat.TokenCount{Input: 1200, Output: 80},
		Recorded:  datachat.TokenCount{Input: 1000, Output: 60},
		Estimated: true,
		Sources:   []datachat.Source{{ID: "s1", Text: "Adelie penguins", Metadata: map[string]any{"document": "guide.pdf", "page": 4.0}, Distance: &dist, Score: 0.75}},
		Excerpts:  1,
		Pending:   &datachat.ModelToolCall{ID: "c2", Name: "load_dataset", Args: json.RawMessage(`{"url": "https://example.com/a.csv"}`)},
		Skipped:   []datachat.ModelToolCall{{ID: "c3", Name: "search_documents", Args: json.RawMessage(`{"query": "mass"}`)}},
		Examples: []PromptExample{{Question: "How many birds per island?", SQL: "SELECT island, count(*) FROM birds GROUP BY island",
			Renames: map[string]string{"birds": "penguins"}}},
		Results: []callResult{{CallID: "c1", Result: &datachat.QueryResult{
			Columns: []datachat.Column{{Name: "count_star()", Type: "BIGINT", SQLType: "BIGINT"}}, Rows: [][]any{{344.0}}, RowCount: 1, ElapsedMS: 1.5,
		}}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("version 1 decodes to\n%+v\nwant\n%+v", s, want)
	}

	// Stored again, it is the same JSON: every key the golden state has is
	// still a field, and no field was added without a place in it.
	b, err := encodeTurnState(s)
	if err != nil {
		t.Fatal(err)
	}
	var got, golden any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(turnStateV1), &golden)
	if !reflect.DeepEqual(got, golden) {
		t.Errorf("stored again:\n%s\nwant the golden state (a field was added or renamed: add it to turnStateV1, or raise turnStateVersion)", b)
	}
}

// TestTurnStateVersions: a state stored before versions reads as version 1;
// one stored by a newer datachat is refused with a message to act on.
func TestTurnStateVersions(t *testing.T) {
	s, err := decodeTurnState([]byte(`{"history_ids": ["m1"], "seq": 2}`))
	if err != nil || s.Version != turnStateVersion || s.Seq != 2 || len(s.HistoryIDs) != 1 {
		t.Errorf("unversioned state: %+v, %v", s, err)
	}
	_, err = decodeTurnState([]byte(`{"version": 99, "seq": 2}`))
	if datachat.ErrorCode(err) != datachat.ECONFLICT || !strings.Contains(datachat.ErrorMessage(err), "newer version") {
		t.Errorf("state of version 99: %v, want a conflict naming a newer version", err)
	}
	if _, err := decodeTurnState([]byte(`{"seq": "two"}`)); err == nil {
		t.Error("a state that is not turnState's JSON decoded without an error")
	}
}
