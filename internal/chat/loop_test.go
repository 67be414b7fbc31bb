package chat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llmtest"
)

// The turn's limits, seen as a user and the model see them: the events sent,
// the answer stored, and what the model is told on its next request. The
// fixture (newTurnFixture) is a Runner over a temporary SQLite store and an
// OpenAI-protocol fake; queryData answers the SQL.

// queryData is a conversation's data whose SQL answers as the test says
// (query nil: one row, "1"). It records the queries run and estimated.
type queryData struct {
	benchData
	query    func(ctx context.Context, sql string) (*datachat.QueryResult, error)
	estimate func(sql string) (int64, error)

	mu        sync.Mutex
	queries   []string
	estimates []string
}

func newQueryData() *queryData { return &queryData{benchData: newBenchData()} }

// oneRow is what queryData answers by default.
var oneRow = &datachat.QueryResult{Columns: []datachat.Column{{Name: "n", Type: "integer"}}, Rows: [][]any{{int64(1)}}, RowCount: 1}

func (d *queryData) Query(ctx context.Context, _, sql string) (*datachat.QueryResult, error) {
	d.mu.Lock()
	d.queries = append(d.queries, sql)
	d.mu.Unlock()
	if d.query == nil {
		return oneRow, nil
	}
	return d.query(ctx, sql)
}

func (d *queryData) EstimateRows(_ context.Context, _, sql string) (int64, error) {
	d.mu.Lock()
	d.estimates = append(d.estimates, sql)
	d.mu.Unlock()
	if d.estimate == nil {
		return 42, nil
	}
	return d.estimate(sql)
}

func (d *queryData) ran() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.queries...)
}

// failingQuery fails every query as DuckDB fails a bad column.
func failingQuery(context.Context, string) (*datachat.QueryResult, error) {
	return nil, datachat.Errorf(datachat.EINVALID, "Binder Error: column \"nope\" not found")
}

// usage is what every turn of the tests' scripts reports, so a turn's usage
// is a multiple of it.
var usage = &llmtest.Usage{Input: 100, Output: 10}

// sendCtx is send with the caller's context; the sink may be called from the
// turn's goroutine while ctx is cancelled.
func (f *turnFixture) sendCtx(ctx context.Context, content string) ([]Event, *Outcome, error) {
	var (
		mu  sync.Mutex
		evs []Event
	)
	out, err := f.r.Send(ctx, f.user, f.conv.ID, content, TurnOptions{}, func(ev Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	return evs, out, err
}

// toolRounds checks that each tool_call_start is followed by its
// tool_call_result before the next tool starts, and returns both in order.
func toolRounds(t *testing.T, evs []Event) ([]ToolCallStartEvent, []ToolCallResultEvent) {
	t.Helper()
	var (
		starts  []ToolCallStartEvent
		results []ToolCallResultEvent
	)
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case ToolCallStartEvent:
			if ev.Type != EventToolCallStart || len(starts) != len(results) {
				t.Fatalf("%s %s while %d of %d tools had a result", ev.Type, d.ID, len(results), len(starts))
			}
			starts = append(starts, d)
		case ToolCallResultEvent:
			if ev.Type != EventToolCallResult || len(starts) != len(results)+1 || starts[len(starts)-1].ID != d.ID {
				t.Fatalf("%s %s does not answer the last tool started", ev.Type, d.ID)
			}
			results = append(results, d)
		}
	}
	if len(starts) != len(results) {
		t.Fatalf("%d tools started, %d answered", len(starts), len(results))
	}
	return starts, results
}

// streamed is the text of the chat_token events.
func streamed(evs []Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if tok, ok := ev.Data.(TokenEvent); ok && ev.Type == EventToken {
			b.WriteString(tok.Token)
		}
	}
	return b.String()
}

// tokensRecorded is the user's usage in token_usage.
func (f *turnFixture) tokensRecorded(t *testing.T) int64 {
	t.Helper()
	n, err := f.store.TokensSince(t.Context(), f.user.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkComplete checks what every completed turn must show: chat_complete to
// send with the stored message's ID and usage, the message complete with the
// text streamed, its usage that of requests model calls, recorded once.
func checkComplete(t *testing.T, f *turnFixture, evs []Event, out *Outcome, requests int) *datachat.Message {
	t.Helper()
	m := f.answer(t)
	want := datachat.TokenCount{Input: usage.Input * int64(requests), Output: usage.Output * int64(requests)}
	if out == nil || out.Complete == nil {
		t.Fatalf("outcome %+v: want a chat_complete to send", out)
	}
	if c := out.Complete; c.Status != datachat.StatusComplete || c.MessageID != m.ID || c.InputTokens != want.Input || c.OutputTokens != want.Output {
		t.Errorf("chat_complete %+v; want complete for %s with %+v tokens", c, m.ID, want)
	}
	if m.Status != datachat.StatusComplete || m.Content != streamed(evs) || m.InputTokens != want.Input || m.OutputTokens != want.Output {
		t.Errorf("stored answer %s %q (%d+%d tokens); want complete %q with %+v", m.Status, m.Content, m.InputTokens, m.OutputTokens, streamed(evs), want)
	}
	if got := f.tokensRecorded(t); got != want.Input+want.Output {
		t.Errorf("token_usage holds %d tokens, want %d, once", got, want.Input+want.Output)
	}
	if n := len(f.fake.ChatRequests()); n != requests {
		t.Errorf("the model was called %d times, want %d", n, requests)
	}
	return m
}

// loopForever sends "Loop forever" in a turn whose model follows script,
// over a dataset engine that answers every query, and returns the turn's
// events, its outcome and its tool results.
func loopForever(t *testing.T, script llmtest.Script) (*turnFixture, *queryData, []Event, *Outcome, []ToolCallResultEvent) {
	t.Helper()
	f := newTurnFixture(t, script)
	data := newQueryData()
	f.r.Data = data
	evs, out, err := f.send(t, "Loop forever")
	if err != nil {
		t.Fatal(err)
	}
	_, results := toolRounds(t, evs)
	return f, data, evs, out, results
}

// TestToolCallLimit: a turn runs at most MaxToolCalls tools. The call past
// the limit is answered, without running, with the limit and an instruction
// to answer now; the next request offers no tools; the answer completes with
// every round stored.
func TestToolCallLimit(t *testing.T) {
	sql := llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)
	answer := llmtest.Turn{Match: &llmtest.Match{NoTools: true}, Text: []string{"Here is ", "what I found."}, Usage: usage}
	tests := []struct {
		name     string
		script   llmtest.Script
		calls    int // tool calls the model makes
		requests int
	}{
		{"one call per answer", llmtest.Script{
			Turns:   []llmtest.Turn{answer},
			Default: &llmtest.Turn{ToolCalls: []llmtest.ToolCall{sql}, Usage: usage},
		}, MaxToolCalls + 1, MaxToolCalls + 2},
		{"seven calls in one answer", llmtest.Script{Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{sql, sql, sql, sql, sql, sql, sql}, Usage: usage},
			answer,
		}}, MaxToolCalls + 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, data, evs, out, results := loopForever(t, tt.script)
			if len(results) != tt.calls {
				t.Fatalf("got %d tool results, want %d", len(results), tt.calls)
			}
			refusal := fmt.Sprintf("Not run: the limit of %d tool calls per turn was reached. Answer the user now with what you have, without calling tools.", MaxToolCalls)
			for i, res := range results {
				if i < MaxToolCalls && (!res.OK || res.Content != "n\n1\n(1 row)") {
					t.Errorf("result %d: %+v; want the query's result", i, res)
				}
				if i >= MaxToolCalls && (res.OK || res.Content != refusal || res.Error != refusal) {
					t.Errorf("result %d: %+v; want refused with %q", i, res, refusal)
				}
			}
			if n := len(data.ran()); n != MaxToolCalls {
				t.Errorf("%d queries ran, want %d", n, MaxToolCalls)
			}

			reqs := f.fake.ChatRequests()
			last := reqs[len(reqs)-1]
			if len(last.Tools) != 0 {
				t.Errorf("after the limit the model was offered %v, want no tools", last.Tools)
			}
			if got := last.ToolResults(); len(got) == 0 || got[len(got)-1] != refusal {
				t.Errorf("the model was told %q, want the refusal last", got)
			}
			for i, r := range reqs[:len(reqs)-1] {
				if !r.HasTool(datachat.ToolExecuteSQL) {
					t.Errorf("request %d, within the limit, offered %v", i, r.Tools)
				}
			}

			m := checkComplete(t, f, evs, out, tt.requests)
			if m.Content != "Here is what I found." || len(m.ToolCalls) != tt.calls {
				t.Errorf("stored %q with %d tool rounds, want the answer with %d", m.Content, len(m.ToolCalls), tt.calls)
			}
			if tc := m.ToolCalls[len(m.ToolCalls)-1]; tc.OK || tc.Result != refusal {
				t.Errorf("stored refusal %+v", tc)
			}
			if n := len(m.Parts); n != tt.calls+1 || m.Parts[n-1].Type != datachat.PartText {
				t.Errorf("parts %+v; want %d tool calls then the text", m.Parts, tt.calls)
			}
		})
	}
}

// TestSQLFailureLimit: after MaxSQLFailures failed statements (bad arguments
// count) the last failure tells the model to stop, execute_sql is no longer
// offered, and a further execute_sql is refused without running; the turn
// still completes with the model's explanation.
func TestSQLFailureLimit(t *testing.T) {
	bad := llmtest.Call("execute_sql", `{"query":"SELECT nope FROM penguins"}`)
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{}`)}, Usage: usage},
		{Match: &llmtest.Match{Contains: "needs"}, ToolCalls: []llmtest.ToolCall{bad}, Usage: usage},
		{Match: &llmtest.Match{Contains: "not found"}, ToolCalls: []llmtest.ToolCall{bad}, Usage: usage},
		// Told to stop, the model runs SQL once more, then explains.
		{Match: &llmtest.Match{Contains: "do not run more SQL"}, ToolCalls: []llmtest.ToolCall{bad}, Usage: usage},
		{Match: &llmtest.Match{Contains: "Not run"}, Text: []string{"The column nope does not exist."}, Usage: usage},
	}})
	data := newQueryData()
	data.query = failingQuery
	f.r.Data = data

	evs, out, err := f.send(t, "Use the nope column")
	if err != nil {
		t.Fatal(err)
	}
	_, results := toolRounds(t, evs)
	stop := fmt.Sprintf("\n\nThat was failed SQL attempt %d of %d: do not run more SQL in this turn. Explain the error to the user.", MaxSQLFailures, MaxSQLFailures)
	want := []string{
		`Error: query is required: execute_sql needs {"query": "SELECT …"}.`,
		`Error: Binder Error: column "nope" not found`,
		`Error: Binder Error: column "nope" not found` + stop,
		fmt.Sprintf("Error: Not run: %d SQL attempts failed in this turn. Explain the error to the user instead of running more SQL.", MaxSQLFailures),
	}
	if len(results) != len(want) {
		t.Fatalf("got %d tool results, want %d", len(results), len(want))
	}
	for i, res := range results {
		if res.OK || res.Content != want[i] {
			t.Errorf("result %d: %+v; want failed with %q", i, res, want[i])
		}
	}
	if n := len(data.ran()); n != 2 {
		t.Errorf("%d queries ran, want 2: the statement without a query and the one after the limit do not run", n)
	}

	reqs := f.fake.ChatRequests()
	for i, r := range reqs {
		if got := r.HasTool(datachat.ToolExecuteSQL); got != (i < MaxSQLFailures) {
			t.Errorf("request %d offers %v; execute_sql offered: got %v, want %v", i, r.Tools, got, i < MaxSQLFailures)
		}
		if i > 0 && r.LastToolResult() != want[i-1] {
			t.Errorf("request %d: the model was told %q, want %q", i, r.LastToolResult(), want[i-1])
		}
	}
	if last := reqs[len(reqs)-1]; !last.HasTool(datachat.ToolLoadDataset) || !last.HasTool(datachat.ToolRequestConfirmation) {
		t.Errorf("after the SQL limit the model was offered %v; want the other tools kept", last.Tools)
	}
	m := checkComplete(t, f, evs, out, 5)
	if m.Content != "The column nope does not exist." || len(m.ToolCalls) != len(want) {
		t.Errorf("stored %q with %d tool rounds", m.Content, len(m.ToolCalls))
	}
}

// TestProviderCallBound: a model that keeps calling tools after it was told
// it has none is called at most maxProviderCalls times; the turn then ends
// complete, every call past the limit answered with the refusal.
func TestProviderCallBound(t *testing.T) {
	f, data, evs, out, results := loopForever(t, llmtest.Script{
		Default: &llmtest.Turn{Text: []string{"Once more. "}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)}, Usage: usage},
	})
	if len(results) != maxProviderCalls {
		t.Fatalf("got %d tool results, want one per model call, %d", len(results), maxProviderCalls)
	}
	for i, res := range results[MaxToolCalls:] {
		if res.OK || !strings.HasPrefix(res.Content, "Not run: the limit of") {
			t.Errorf("result %d: %+v; want refused", MaxToolCalls+i, res)
		}
	}
	if n := len(data.ran()); n != MaxToolCalls {
		t.Errorf("%d queries ran, want %d", n, MaxToolCalls)
	}
	m := checkComplete(t, f, evs, out, maxProviderCalls)
	if m.Content != strings.Repeat("Once more. ", maxProviderCalls) {
		t.Errorf("stored %q", m.Content)
	}
}

// TestRoundText: the text the model writes before its tool calls goes back to
// it, on the next request, as that round's assistant message, each round
// with its own text only; the answer stored is every round's text in order.
func TestRoundText(t *testing.T) {
	sql := llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)
	f, _, evs, out, results := loopForever(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Let me ", "count. "}, ToolCalls: []llmtest.ToolCall{sql}, Usage: usage},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Once ", "more. "}, ToolCalls: []llmtest.ToolCall{sql}, Usage: usage},
		{Text: []string{"It is ", "1."}, Usage: usage},
	}})
	if len(results) != 2 {
		t.Fatalf("%d tool results, want 2", len(results))
	}
	reqs := f.fake.ChatRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var said []string
	for _, m := range reqs[2].Messages {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			said = append(said, m.Text)
		}
	}
	if want := []string{"Let me count. ", "Once more. "}; !slices.Equal(said, want) {
		t.Errorf("the last request carries the rounds' text %q, want %q", said, want)
	}
	if m := checkComplete(t, f, evs, out, 3); m.Content != "Let me count. Once more. It is 1." {
		t.Errorf("stored %q, want every round's text", m.Content)
	}
}
