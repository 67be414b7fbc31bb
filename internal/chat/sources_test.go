package chat

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
)

// fakeSources is one attached PostgreSQL source, warehouse, whose queries
// answer result (or err) and are recorded.
type fakeSources struct {
	mu      sync.Mutex
	queries []string // "user conversation source sql"
	result  *datachat.QueryResult
	err     error
	// streamMax are the row caps Stream was given.
	streamMax []int
	estimate  int64 // EstimateRows's answer; 0: 42
}

func (f *fakeSources) Describe(_ context.Context, user *datachat.User, _ string) ([]datachat.DBSourceInfo, error) {
	rows := int64(344)
	return []datachat.DBSourceInfo{{Name: "warehouse", Kind: "postgres", Dialect: "PostgreSQL 15.14", Tables: []datachat.DBSourceTable{{
		Name: "public.penguins", Rows: &rows, Columns: []datachat.Column{
			{Name: "species", Type: "text", Samples: []string{"Adelie", "Gentoo"}},
			{Name: "Body Mass", Type: "integer"},
		}}}}}, nil
}

func (f *fakeSources) Query(_ context.Context, user *datachat.User, conv, source, sql string) (*datachat.QueryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, strings.Join([]string{user.Name, conv, source, sql}, " "))
	return f.result, f.err
}

func (f *fakeSources) EstimateRows(context.Context, *datachat.User, string, string, string) (int64, error) {
	if f.estimate > 0 {
		return f.estimate, nil
	}
	return 42, nil
}

func (f *fakeSources) Stream(_ context.Context, user *datachat.User, conv, source, sql string, maxRows int, sink datachat.RowSink) (datachat.StreamResult, error) {
	f.mu.Lock()
	f.queries = append(f.queries, strings.Join([]string{user.Name, conv, source, sql}, " "))
	f.streamMax = append(f.streamMax, maxRows)
	res, err := f.result, f.err
	f.mu.Unlock()
	if err != nil {
		return datachat.StreamResult{}, err
	}
	if err := sink.Columns(res.Columns); err != nil {
		return datachat.StreamResult{}, err
	}
	out := datachat.StreamResult{}
	for _, r := range res.Rows {
		if out.Rows == int64(maxRows) {
			out.Truncated = true
			break
		}
		if err := sink.Row(r); err != nil {
			return datachat.StreamResult{}, err
		}
		out.Rows++
	}
	return out, nil
}

func (f *fakeSources) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

func countResult(n int) *datachat.QueryResult {
	return &datachat.QueryResult{Columns: []datachat.Column{{Name: "n", Type: "integer", SQLType: "bigint"}},
		Rows: [][]any{{n}}, RowCount: 1}
}

// lastNumber answers with the number in the last tool result's second line.
func lastNumber(req *llmtest.Request) string {
	lines := strings.Split(req.Last().Text, "\n")
	if len(lines) < 2 {
		return "no result: " + req.Last().Text
	}
	return "There are " + strings.TrimSpace(lines[1]) + " penguins."
}

// newSourceQueryFixture is a turn in which the model runs query on the
// source warehouse, which answers countResult(n), then answers with the
// number it got.
func newSourceQueryFixture(t *testing.T, query string, n int) (*turnFixture, *fakeSources) {
	t.Helper()
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "`+query+`", "source": "warehouse"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: lastNumber},
	}})
	src := &fakeSources{result: countResult(n)}
	f.r.Sources = src
	return f, src
}

// TestExecuteSQLOnASource: the prompt lists the attached source with its
// dialect and tables, execute_sql declares source among the attached ones,
// and a call with source runs there, for the turn's user and conversation,
// with the result given to the model as a file's would be.
func TestExecuteSQLOnASource(t *testing.T) {
	const query = "SELECT count(*) AS n FROM public.penguins"
	f, src := newSourceQueryFixture(t, query, 344)
	evs, out, err := f.send(t, "How many penguins are there?")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.answer(t).Content; !strings.Contains(got, "There are 344 penguins.") {
		t.Errorf("answer %q, want the number from the source", got)
	}
	want := "alice " + f.conv.ID + " warehouse " + query
	if q := src.recorded(); len(q) != 1 || q[0] != want {
		t.Errorf("source queries %q, want [%q]", q, want)
	}
	var started *ToolCallStartEvent
	for _, ev := range evs {
		if s, ok := ev.Data.(ToolCallStartEvent); ok {
			started = &s
		}
		if r, ok := ev.Data.(ToolCallResultEvent); ok && (!r.OK || r.RowCount == nil || *r.RowCount != 1) {
			t.Errorf("tool_call_result %+v, want the result shape", r)
		}
	}
	if started == nil {
		t.Error("no tool_call_start")
	} else if !strings.Contains(string(started.Args), `"source":"warehouse"`) {
		t.Errorf("tool_call_start args %s, want them with the source (the page shows it)", started.Args)
	}
	_ = out

	reqs := f.fake.ChatRequests()
	system := reqs[0].Messages[0].Text
	for _, w := range []string{
		"## Databases",
		`Database warehouse (PostgreSQL 15.14): execute_sql with "source": "warehouse", in PostgreSQL 15.14 SQL.`,
		"Table public.penguins (about 344 rows):",
		"- species: text (e.g. Adelie, Gentoo)",
		`- "Body Mass": integer`,
	} {
		if !strings.Contains(system, w) {
			t.Errorf("system prompt lacks %q:\n%s", w, system)
		}
	}
	if !strings.Contains(string(reqs[0].Raw), `"enum":["warehouse"]`) {
		t.Errorf("execute_sql's declaration has no source among the attached ones: %s", reqs[0].Raw)
	}
}

// TestSourceFailuresCount: a source's refusal is a failed SQL attempt like a
// file's; a source that is not attached is refused before anything runs,
// naming the attached ones; after three failures no SQL runs.
func TestSourceFailuresCount(t *testing.T) {
	bad := func(src string) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "SELECT secret FROM creds", "source": "`+src+`"}`)}}
	}
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		bad("warehouse"), bad("elsewhere"), bad("warehouse"), bad("warehouse"),
		{Text: []string{"I could not query it."}},
	}})
	src := &fakeSources{err: datachat.Errorf(datachat.EINVALID, "unknown table: relation \"creds\" is not allowed; the tables you can query: public.penguins")}
	f.r.Sources = src
	evs, _, err := f.send(t, "Show me the secrets")
	if err != nil {
		t.Fatal(err)
	}
	_, results := toolRounds(t, evs)
	if len(results) != 4 {
		t.Fatalf("%d tool results, want 4", len(results))
	}
	if !strings.Contains(results[0].Content, "the tables you can query: public.penguins") {
		t.Errorf("first result %q, want the source's own hint", results[0].Content)
	}
	if !strings.Contains(results[1].Content, `no database named "elsewhere"`) || !strings.Contains(results[1].Content, "warehouse") {
		t.Errorf("second result %q, want the unknown source refused, naming the attached one", results[1].Content)
	}
	if !strings.Contains(results[2].Content, "failed SQL attempt 3 of 3") {
		t.Errorf("third result %q, want the last allowed failure", results[2].Content)
	}
	if !strings.Contains(results[3].Content, "Not run") {
		t.Errorf("fourth result %q, want it not run", results[3].Content)
	}
	if n := len(src.recorded()); n != 2 {
		t.Errorf("%d queries reached the source, want 2 (not the unknown source's, not the one past the limit)", n)
	}
}

// TestConfirmSourceQuery: with DATACHAT_CONFIRM_SQL=always a source query
// waits for approval with the source and the source's own estimate in its
// parameters, and runs there once approved.
func TestConfirmSourceQuery(t *testing.T) {
	const query = "SELECT species FROM public.penguins"
	f, src := newSourceQueryFixture(t, query, 7)
	f.r.ConfirmAlways = true
	_, out, err := f.send(t, "Which species?")
	if err != nil {
		t.Fatal(err)
	}
	c := out.Confirmation
	if c == nil {
		t.Fatal("no confirmation asked")
	}
	var p map[string]any
	json.Unmarshal(c.Parameters, &p)
	if p["query"] != query || p["source"] != "warehouse" || p["estimated_rows"] != float64(42) {
		t.Errorf("confirmation parameters %s, want the query, its source and the source's estimate", c.Parameters)
	}
	if !strings.Contains(c.Explanation, "warehouse") {
		t.Errorf("explanation %q does not name the database", c.Explanation)
	}
	if n := len(src.recorded()); n != 0 {
		t.Fatalf("%d queries ran before approval", n)
	}
	if _, err := f.r.Confirm(t.Context(), f.user, f.conv.ID, c.ID, true, "", nil); err != nil {
		t.Fatal(err)
	}
	want := "alice " + f.conv.ID + " warehouse " + query
	if q := src.recorded(); len(q) != 1 || q[0] != want {
		t.Errorf("source queries %q, want [%q]", q, want)
	}
	if got := f.answer(t).Content; !strings.Contains(got, "There are 7") {
		t.Errorf("answer %q", got)
	}
}

// TestNoSourcesNoChange: without sources, the prompt has no databases
// (execute_sql's declaration without sources: tools.TestSpec).
func TestNoSourcesNoChange(t *testing.T) {
	s, err := SystemPrompt(nil, PromptData{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "Databases") || strings.Contains(s, "source") {
		t.Errorf("prompt without sources mentions them:\n%s", s)
	}
	// Sources without datasets: the prompt does not ask for a file.
	s, _ = SystemPrompt(nil, PromptData{Sources: []datachat.DBSourceInfo{{Name: "shop", Kind: "mysql", Unavailable: "it does not answer"}}})
	if strings.Contains(s, "tell the user to add a dataset") || !strings.Contains(s, "its data is in the databases below") ||
		!strings.Contains(s, "Database shop (MySQL/MariaDB)") || !strings.Contains(s, "cannot be listed right now: it does not answer") {
		t.Errorf("prompt with an unavailable source and no datasets:\n%s", s)
	}
	if got := quoteIdentFor("mysql", "Body Mass"); got != "`Body Mass`" {
		t.Errorf("MySQL column quoting: got %s", got)
	}
}
