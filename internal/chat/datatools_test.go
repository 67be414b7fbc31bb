package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llmtest"
	"datachat/internal/tools"
)

// fakeTools is a catalog that answers every call with its script, in order,
// and remembers what it was asked.
type fakeTools struct {
	mu      sync.Mutex
	answers []error // nil: a result
	calls   []string
}

func (f *fakeTools) Run(ctx context.Context, c tools.Call, tool string, args json.RawMessage) (*tools.Result, error) {
	a, _ := tools.Parse(tool, args)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %s by %s: %s", a.Tool, c.Conversation, c.User.Name, a.Query))
	err := f.answers[0]
	f.answers = f.answers[1:]
	if err != nil {
		return nil, err
	}
	return &tools.Result{Text: "n\n1\n(1 row)", Rows: &datachat.QueryResult{Columns: []datachat.Column{{Name: "n"}}, Rows: [][]any{{1}}, RowCount: 1}}, nil
}

func (f *fakeTools) Spec(tool string, attached []string) (datachat.ToolSpec, bool) {
	return (&tools.Catalog{}).Spec(tool, attached)
}

func (f *fakeTools) EstimateRows(context.Context, tools.Call, tools.Args) (int64, error) {
	return 1, nil
}

// TestTurnOverAFakeCatalog: a turn runs its data tools through
// Runner.Tools, keeping its own policy: the catalog's errors are failed SQL
// attempts, counted towards MaxSQLFailures, after which the catalog is not
// asked again.
func TestTurnOverAFakeCatalog(t *testing.T) {
	q := llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{q}},
		{Match: &llmtest.Match{Contains: "(1 row)"}, ToolCalls: []llmtest.ToolCall{q}},
		{Match: &llmtest.Match{Contains: "Binder"}, ToolCalls: []llmtest.ToolCall{q}},
		{Match: &llmtest.Match{Contains: "Binder"}, ToolCalls: []llmtest.ToolCall{q}},
		{Match: &llmtest.Match{Contains: "do not run more SQL"}, ToolCalls: []llmtest.ToolCall{q}},
		{Match: &llmtest.Match{Contains: "Not run"}, Text: []string{"Done."}},
	}})
	bad := datachat.Errorf(datachat.EINVALID, "Binder Error: no")
	cat := &fakeTools{answers: []error{nil, bad, bad, bad}}
	f.r.Tools = cat
	evs, _, err := f.send(t, "Count")
	if err != nil {
		t.Fatal(err)
	}
	_, results := toolRounds(t, evs)
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprint(r.OK))
	}
	if fmt.Sprint(got) != "[true false false false false]" || len(cat.calls) != MaxSQLFailures+1 {
		t.Errorf("results ok %v, catalog asked %q; want [true false false false false] and %d calls", got, cat.calls, MaxSQLFailures+1)
	}
	if want := fmt.Sprintf("execute_sql %s by alice: SELECT 1", f.conv.ID); len(cat.calls) == 0 || cat.calls[0] != want {
		t.Errorf("the catalog was asked %q, want %q first", cat.calls, want)
	}
}

// sqlRefused charges every budget but refuses SQL, as a user over
// DATACHAT_SQL_RPM is.
type sqlRefused struct{ charged []tools.Budget }

func (b *sqlRefused) Charge(userID string, bud tools.Budget) error {
	b.charged = append(b.charged, bud)
	if bud == tools.SQLBudget {
		return datachat.Errorf(datachat.ERATELIMIT, "Too many SQL queries: the limit is 8 a minute per user.")
	}
	return nil
}

// toolCounts counts the tool calls observed, by tool and outcome.
type toolCounts struct {
	mu    sync.Mutex
	calls []string
}

func (o *toolCounts) TurnEnded(string, time.Duration) {}
func (o *toolCounts) FirstToken(time.Duration)        {}
func (o *toolCounts) ToolCalled(tool string, ok bool, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, fmt.Sprintf("%s:%t", tool, ok))
}
func (o *toolCounts) SQLQueried(bool, time.Duration)          {}
func (o *toolCounts) ProviderFailed(string)                   {}
func (o *toolCounts) TokensUsed(string, string, int64, int64) {}

// TestTurnListsDatasetsAndSpendsBudgets: the model can list the
// conversation's datasets; each data tool call is charged to the user's
// budgets (Runner.Budgets, the server's, which MCP spends too), a refused
// call answering the model the refusal; each call is observed once.
func TestTurnListsDatasetsAndSpendsBudgets(t *testing.T) {
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("list_datasets", `{}`), llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}},
	}})
	budgets, obs := &sqlRefused{}, &toolCounts{}
	f.r.Budgets, f.r.Observer = budgets, obs
	evs, _, err := f.send(t, "What data is there?")
	if err != nil {
		t.Fatal(err)
	}
	_, results := toolRounds(t, evs)
	if len(results) != 2 || !results[0].OK || !strings.Contains(results[0].Content, "5 datasets, queried with execute_sql") ||
		results[1].OK || !strings.Contains(results[1].Content, "Too many SQL queries") {
		t.Fatalf("results %+v", results)
	}
	if want := []tools.Budget{tools.NoBudget, tools.SQLBudget}; !slices.Equal(budgets.charged, want) {
		t.Errorf("charged %v, want %v", budgets.charged, want)
	}
	if want := "[list_datasets:true execute_sql:false]"; fmt.Sprint(obs.calls) != want {
		t.Errorf("observed %v, want %s, once each", obs.calls, want)
	}
}
