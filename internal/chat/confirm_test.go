package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// The confirmation gate: a turn pauses when the model asks the user
// (request_confirmation), or before any SQL or load with ConfirmAlways
// (DATACHAT_CONFIRM_SQL=always); Runner.Confirm and Runner.CancelPending
// continue it.

const femaleSQL = "SELECT count(*) FROM penguins WHERE sex = 'FEMALE'"

// askScript: the model says a word, asks to run femaleSQL and, in the same
// answer, searches; once told the outcome it answers final.
func askScript(final string) llmtest.Script {
	return llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Let me ask. "}, Usage: usage, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("request_confirmation", `{"action":"execute_sql","parameters":{"query":"`+femaleSQL+`"},"explanation":"I assume 'women' means sex = FEMALE."}`),
			llmtest.Call("search_documents", `{"query":"sex"}`),
		}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{final}, Usage: usage},
	}}
}

// pause sends a question and checks the turn paused: no chat_complete, a
// confirmation to send that is the conversation's pending one, the message
// awaiting confirmation with the text so far, the usage so far recorded.
func (f *turnFixture) pause(t *testing.T, question string) ([]Event, *datachat.Confirmation) {
	t.Helper()
	evs, out, err := f.send(t, question)
	if err != nil {
		t.Fatal(err)
	}
	if out.Complete != nil || out.Confirmation == nil {
		t.Fatalf("outcome: complete %+v, confirmation %+v; want only a confirmation", out.Complete, out.Confirmation)
	}
	pending, err := f.store.PendingConfirmation(t.Context(), f.conv.ID)
	if err != nil || pending.ID != out.Confirmation.ID || pending.MessageID != out.Message.ID {
		t.Fatalf("pending confirmation %+v, %v; want %s of message %s", pending, err, out.Confirmation.ID, out.Message.ID)
	}
	m := f.answer(t)
	if m.Status != datachat.StatusAwaitingConfirmation || m.Content != streamed(evs) {
		t.Errorf("paused answer %s %q; want awaiting_confirmation %q", m.Status, m.Content, streamed(evs))
	}
	if got, want := f.tokensRecorded(t), usage.Input+usage.Output; got != want {
		t.Errorf("token_usage holds %d tokens while paused, want %d", got, want)
	}
	return evs, out.Confirmation
}

// confirm answers the pending confirmation.
func (f *turnFixture) confirm(t *testing.T, id string, approved bool, note string) ([]Event, *Outcome, error) {
	t.Helper()
	var evs []Event
	out, err := f.r.Confirm(t.Context(), f.user, f.conv.ID, id, approved, note, func(ev Event) { evs = append(evs, ev) })
	return evs, out, err
}

// TestConfirmation: request_confirmation pauses the turn before anything
// runs, and a new question is refused while it waits. Approved, the action
// runs and the model reads its result; declined, it does not run and the
// model reads why. Either way the calls that came after the paused one are
// answered without running, and the answer completes with its usage
// recorded once over both halves.
func TestConfirmation(t *testing.T) {
	skipped := "Not run: it came after an action that needed the user's confirmation. Call it again if it is still needed."
	tests := []struct {
		name     string
		approved bool
		note     string
		final    string
		want     ToolCallResultEvent // the paused call's result
		queries  []string
	}{
		{"approved", true, "", "There is 1 female penguin.",
			ToolCallResultEvent{Tool: datachat.ToolExecuteSQL, OK: true, Content: "The user approved. Result:\nn\n1\n(1 row)"}, []string{femaleSQL}},
		{"declined", false, "  I meant the staff  ", "OK, I won't.",
			ToolCallResultEvent{Tool: datachat.ToolRequestConfirmation, Content: "The user declined this action: I meant the staff. Do not run it; ask the user how they want to proceed.", Error: "declined by the user"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTurnFixture(t, askScript(tt.final))
			data := newQueryData()
			f.r.Data = data
			sent, c := f.pause(t, "How many women?")
			if c.Action != datachat.ToolExecuteSQL || string(c.Parameters) != `{"query":"`+femaleSQL+`"}` || c.Explanation != "I assume 'women' means sex = FEMALE." {
				t.Errorf("confirmation %+v (parameters %s)", c, c.Parameters)
			}
			if starts, _ := toolRounds(t, sent); len(starts) != 0 || len(data.ran()) != 0 {
				t.Errorf("before the answer: %d tools started, %d queries ran; want none", len(starts), len(data.ran()))
			}
			if _, _, err := f.send(t, "Hello?"); datachat.ErrorCode(err) != datachat.ECONFLICT {
				t.Errorf("a question while the confirmation waits: %v, want ECONFLICT", err)
			}

			evs, out, err := f.confirm(t, c.ID, tt.approved, tt.note)
			if err != nil {
				t.Fatal(err)
			}
			starts, results := toolRounds(t, evs)
			if len(results) != 2 {
				t.Fatalf("%d tool results, want the paused call's and the skipped one's", len(results))
			}
			got := results[0]
			got.ID, got.Columns, got.Rows, got.RowCount, got.Truncated, got.ElapsedMS = "", nil, nil, nil, nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("paused call's result %+v, want %+v", results[0], tt.want)
			}
			if tt.approved && string(starts[0].Args) != `{"query":"`+femaleSQL+`"}` {
				t.Errorf("approved call started with %s", starts[0].Args)
			}
			if s := results[1]; s.Tool != datachat.ToolSearchDocuments || s.OK || s.Content != skipped {
				t.Errorf("skipped call's result %+v", s)
			}
			if !reflect.DeepEqual(data.ran(), tt.queries) {
				t.Errorf("queries run %q, want %q", data.ran(), tt.queries)
			}
			reqs := f.fake.ChatRequests()
			if got := reqs[len(reqs)-1].ToolResults(); len(got) != 2 || got[0] != tt.want.Content || got[1] != skipped {
				t.Errorf("the model was told %q", got)
			}

			m := checkComplete(t, f, append(sent, evs...), out, 2)
			if m.Content != "Let me ask. "+tt.final || len(m.ToolCalls) != 2 {
				t.Errorf("stored %q with %d rounds", m.Content, len(m.ToolCalls))
			}
			types := make([]string, len(m.Parts))
			for i, p := range m.Parts {
				types[i] = p.Type
			}
			if want := []string{datachat.PartText, datachat.PartToolCall, datachat.PartToolCall, datachat.PartText}; !reflect.DeepEqual(types, want) {
				t.Errorf("parts %v, want %v", types, want)
			}
			if _, err := f.store.PendingConfirmation(t.Context(), f.conv.ID); datachat.ErrorCode(err) != datachat.ENOTFOUND {
				t.Errorf("a confirmation still pending after the answer: %v", err)
			}
			if _, _, err := f.confirm(t, c.ID, true, ""); datachat.ErrorCode(err) != datachat.ENOTFOUND {
				t.Errorf("answered twice: %v, want ENOTFOUND", err)
			}
		})
	}
}

// TestConfirmWrongID: an answer naming another confirmation than the one
// waiting is refused and leaves it waiting.
func TestConfirmWrongID(t *testing.T) {
	f := newTurnFixture(t, askScript("Done."))
	_, c := f.pause(t, "How many women?")
	if _, _, err := f.confirm(t, "other", true, ""); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("wrong id: %v, want ENOTFOUND", err)
	}
	if p, err := f.store.PendingConfirmation(t.Context(), f.conv.ID); err != nil || p.ID != c.ID {
		t.Errorf("pending after a wrong answer: %+v, %v", p, err)
	}
	if n := len(f.fake.ChatRequests()); n != 1 {
		t.Errorf("the model was called %d times, want once", n)
	}
}

// TestCancelPending: stopping a turn that waits for a confirmation declines
// it and ends the answer cancelled, without running the action or calling
// the model; the conversation then takes a new question.
func TestCancelPending(t *testing.T) {
	script := askScript("unused")
	script.Turns = append(script.Turns, llmtest.Turn{Match: &llmtest.Match{Contains: "Something else"}, Text: []string{"Sure."}, Usage: usage})
	f := newTurnFixture(t, script)
	data := newQueryData()
	f.r.Data = data
	sent, c := f.pause(t, "How many women?")

	var evs []Event
	out, err := f.r.CancelPending(t.Context(), f.user, f.conv.ID, func(ev Event) { evs = append(evs, ev) })
	m := checkCancelled(t, f, sent, out, err)
	if len(evs) != 0 {
		t.Errorf("events %+v, want none", evs)
	}
	if m.InputTokens != usage.Input || m.OutputTokens != usage.Output || len(data.ran()) != 0 || len(f.fake.ChatRequests()) != 1 {
		t.Errorf("after the cancel: %d+%d tokens, %d queries, %d model calls; want the first call's usage only, no query, no call",
			m.InputTokens, m.OutputTokens, len(data.ran()), len(f.fake.ChatRequests()))
	}
	if _, err := f.store.ResolveConfirmation(t.Context(), c.ID, datachat.ConfirmApproved, ""); datachat.ErrorCode(err) != datachat.ECONFLICT {
		t.Errorf("the confirmation is still open after the cancel: %v", err)
	}
	if _, _, err := f.confirm(t, c.ID, true, ""); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("approved after the cancel: %v, want ENOTFOUND", err)
	}
	if _, err := f.r.CancelPending(t.Context(), f.user, f.conv.ID, nil); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("cancelled twice: %v, want ENOTFOUND", err)
	}

	evs, out, err = f.send(t, "Something else")
	if err != nil || out.Complete == nil || streamed(evs) != "Sure." {
		t.Errorf("the next question: %q, %v", streamed(evs), err)
	}
}

// TestConfirmAlways: with ConfirmAlways every execute_sql pauses first,
// showing its query and estimated rows; approved, it runs and the model
// reads its result as from any query. A query that cannot be planned is not
// put to the user: it fails as an SQL attempt.
func TestConfirmAlways(t *testing.T) {
	const query = "SELECT * FROM penguins"
	script := llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+query+`"}`)}, Usage: usage},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}, Usage: usage},
	}}

	t.Run("approved", func(t *testing.T) {
		f := newTurnFixture(t, script)
		f.r.ConfirmAlways = true
		data := newQueryData()
		f.r.Data = data
		sent, c := f.pause(t, "Show all")
		var params struct {
			Query         string `json:"query"`
			EstimatedRows int64  `json:"estimated_rows"`
		}
		if err := json.Unmarshal(c.Parameters, &params); err != nil || c.Action != datachat.ToolExecuteSQL || params.Query != query || params.EstimatedRows != 42 {
			t.Errorf("confirmation %+v (parameters %s); want the query with 42 estimated rows", c, c.Parameters)
		}
		if len(data.ran()) != 0 || len(data.estimates) != 1 {
			t.Errorf("before the answer: %d queries run, %d estimated; want 0 and 1", len(data.ran()), len(data.estimates))
		}
		evs, out, err := f.confirm(t, c.ID, true, "")
		if err != nil {
			t.Fatal(err)
		}
		_, results := toolRounds(t, evs)
		if len(results) != 1 || !results[0].OK || results[0].Content != "n\n1\n(1 row)" || results[0].RowCount == nil || *results[0].RowCount != 1 {
			t.Fatalf("results %+v; want the query's", results)
		}
		if got := f.fake.ChatRequests()[1].LastToolResult(); got != "n\n1\n(1 row)" {
			t.Errorf("the model was told %q", got)
		}
		if !reflect.DeepEqual(data.ran(), []string{query}) {
			t.Errorf("queries run %q", data.ran())
		}
		checkComplete(t, f, append(sent, evs...), out, 2)
	})

	t.Run("not planned", func(t *testing.T) {
		f := newTurnFixture(t, script)
		f.r.ConfirmAlways = true
		data := newQueryData()
		data.estimate = func(string) (int64, error) {
			return 0, datachat.Errorf(datachat.EINVALID, "Catalog Error: table penguins does not exist")
		}
		f.r.Data = data
		evs, out, err := f.send(t, "Show all")
		if err != nil {
			t.Fatal(err)
		}
		if out.Confirmation != nil {
			t.Errorf("asked to confirm %+v", out.Confirmation)
		}
		_, results := toolRounds(t, evs)
		if len(results) != 1 || results[0].OK || !strings.Contains(results[0].Content, "table penguins does not exist") {
			t.Errorf("results %+v; want the planning error", results)
		}
		if len(data.ran()) != 0 {
			t.Errorf("queries run %q", data.ran())
		}
		checkComplete(t, f, evs, out, 2)
	})
}

// TestConfirmUnfamiliarURL: a load_dataset of a URL the user never wrote
// waits for their approval; one they gave loads at once.
func TestConfirmUnfamiliarURL(t *testing.T) {
	const url = "https://example.com/a.csv"
	load := llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("load_dataset", `{"url":"`+url+`"}`)}, Usage: usage}
	done := llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}, Usage: usage}

	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{load, done}})
	_, c := f.pause(t, "Load the file the report mentions")
	if c.Action != datachat.ToolLoadDataset || string(c.Parameters) != `{"url":"`+url+`"}` || !strings.Contains(c.Explanation, "not in your messages") {
		t.Errorf("confirmation %+v (parameters %s)", c, c.Parameters)
	}

	f = newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{load, done}})
	evs, out, err := f.send(t, "Load "+url+" please")
	if err != nil || out.Confirmation != nil {
		t.Fatalf("a URL from the user's message: %v, confirmation %+v", err, out.Confirmation)
	}
	// benchData refuses every load: the call ran.
	if _, results := toolRounds(t, evs); len(results) != 1 || results[0].Content != "Error: not in a benchmark" {
		t.Errorf("results %+v", results)
	}
}

// TestConfirmationUnstreamed: with streaming off, each half of a paused turn
// arrives as one chat_token when it ends — the text before the question when
// the turn pauses, the rest when it completes — so the client ends with the
// stored answer.
func TestConfirmationUnstreamed(t *testing.T) {
	f := newTurnFixture(t, askScript("There is 1 female penguin."))
	f.r.Streaming = false
	f.r.Data = newQueryData()
	sent, c := f.pause(t, "How many women?")
	evs, _, err := f.confirm(t, c.ID, true, "")
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, ev := range append(sent, evs...) {
		if ev.Type == EventToken {
			tokens = append(tokens, ev.Data.(TokenEvent).Token)
		}
	}
	if want := []string{"Let me ask. ", "There is 1 female penguin."}; !reflect.DeepEqual(tokens, want) {
		t.Errorf("chat_token %q, want %q", tokens, want)
	}
	if m := f.answer(t); m.Content != strings.Join(tokens, "") {
		t.Errorf("stored %q, the client got %q", m.Content, strings.Join(tokens, ""))
	}
}
