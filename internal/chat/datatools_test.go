package chat

import (
	"context"
	"fmt"
	"sync"
	"testing"

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

func (f *fakeTools) Run(ctx context.Context, c tools.Call, a tools.Args) (*tools.Result, error) {
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
