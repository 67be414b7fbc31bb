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

// saveData is the turn's data with save_as: what run streams is kept as a
// new dataset, named as asked; a name taken is refused as the workspace
// refuses it.
type saveData struct {
	benchData
	mu    sync.Mutex
	saved []*datachat.Dataset
	rows  [][]any
}

func (d *saveData) Datasets(context.Context, string) ([]*datachat.Dataset, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*datachat.Dataset(nil), d.saved...), nil
}

func (d *saveData) SaveQuery(ctx context.Context, conv, name, source string, run func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error) {
	d.mu.Lock()
	for _, s := range d.saved {
		if s.Name == datachat.TableName(name, nil) {
			d.mu.Unlock()
			return nil, datachat.StreamResult{}, datachat.Errorf(datachat.EINVALID, "This conversation already has a table named %s", name)
		}
	}
	d.mu.Unlock()
	c := &rowsKept{}
	res, err := run(ctx, c)
	if err != nil {
		return nil, res, err
	}
	name = datachat.TableName(name, nil)
	ds := &datachat.Dataset{Name: name, Source: "database " + source + ", saved now", Columns: c.cols, RowCount: res.Rows}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.saved = append(d.saved, ds)
	d.rows = c.rows
	return ds, res, nil
}

type rowsKept struct {
	cols []datachat.Column
	rows [][]any
}

func (r *rowsKept) Columns(c []datachat.Column) error { r.cols = c; return nil }
func (r *rowsKept) Row(v []any) error                 { r.rows = append(r.rows, append([]any(nil), v...)); return nil }

func regionsResult() *datachat.QueryResult {
	return &datachat.QueryResult{Columns: []datachat.Column{{Name: "region", Type: "text"}, {Name: "target", Type: "integer"}},
		Rows: [][]any{{"north", int64(10)}, {"south", int64(20)}, {"east", int64(30)}}, RowCount: 3}
}

// TestSaveAs: execute_sql with source and save_as streams the source's rows
// (capped at SaveAsMaxRows) into a new table of the conversation; the model
// is told the table and its columns, the prompt of its next call lists it,
// and the prompt says when to save. save_as without source, and a name
// taken, are failed SQL attempts with a message saying what to do.
func TestSaveAs(t *testing.T) {
	const query = "SELECT region, target FROM public.targets"
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "`+query+`", "source": "warehouse", "save_as": "Targets"}`)}},
		{Match: &llmtest.Match{LastRole: "tool", Contains: "Saved"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "SELECT 1", "save_as": "other"}`)}},
		{Match: &llmtest.Match{LastRole: "tool", Contains: "give source"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "`+query+`", "source": "warehouse", "save_as": "targets"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}},
	}})
	// The engine's estimate (1 row) is under the cap: no one is asked, and
	// the rows past the cap are cut as they stream.
	src := &fakeSources{result: regionsResult(), estimate: 1}
	data := &saveData{}
	f.r.Sources, f.r.Data, f.r.SaveAsMaxRows = src, data, 2
	evs, _, err := f.send(t, "Compare sales with the targets in the warehouse")
	if err != nil {
		t.Fatal(err)
	}
	_, results := toolRounds(t, evs)
	if len(results) != 3 {
		t.Fatalf("%d tool results, want 3", len(results))
	}
	if r := results[0]; !r.OK || !strings.Contains(r.Content, "Saved 2 rows of the query on warehouse as the table targets") ||
		!strings.Contains(r.Content, "only the first 2 rows were saved") || !strings.Contains(r.Content, "- target: integer") {
		t.Errorf("save_as result %+v", r)
	}
	if len(src.streamMax) != 1 || src.streamMax[0] != 2 {
		t.Errorf("streams capped at %v, want one at 2", src.streamMax)
	}
	if len(data.rows) != 2 || data.rows[1][0] != "south" {
		t.Errorf("rows saved %v, want the first 2", data.rows)
	}
	if r := results[1]; r.OK || !strings.Contains(r.Content, "give source too") {
		t.Errorf("save_as without source: %+v", r)
	}
	if r := results[2]; r.OK || !strings.Contains(r.Content, "already has a table named targets") {
		t.Errorf("save_as into a name taken: %+v", r)
	}
	reqs := f.fake.ChatRequests()
	if !strings.Contains(reqs[0].Messages[0].Text, `execute_sql with "source" and "save_as"`) {
		t.Errorf("the prompt does not say when to save:\n%s", reqs[0].Messages[0].Text)
	}
	if strings.Contains(reqs[0].Messages[0].Text, "Table targets") || !strings.Contains(reqs[1].Messages[0].Text, "Table targets (from database warehouse") {
		t.Errorf("the saved table is not in the prompt of the next call:\n%s", reqs[1].Messages[0].Text)
	}
	if !strings.Contains(string(reqs[0].Raw), `"save_as"`) {
		t.Errorf("execute_sql declares no save_as: %s", reqs[0].Raw)
	}
}

// TestSaveAsOverCapAsks: a save whose estimate (the source's EXPLAIN) is
// above DATACHAT_SAVE_AS_MAX_ROWS waits for the user, saying the estimate
// and the cap; approved, it saves the first rows up to the cap; a save under
// the cap does not ask.
func TestSaveAsOverCapAsks(t *testing.T) {
	const query = "SELECT region, target FROM public.targets"
	f := newTurnFixture(t, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user", Contains: "big"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "`+query+`", "source": "warehouse", "save_as": "targets"}`)}},
		{Match: &llmtest.Match{LastRole: "user", Contains: "small"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", `{"query": "`+query+`", "source": "warehouse", "save_as": "targets_2"}`)}},
	}, Default: &llmtest.Turn{ReplyFunc: func(r *llmtest.Request) string { return "Result: " + r.Last().Text }}})
	src := &fakeSources{result: regionsResult()} // estimates 42 rows
	data := &saveData{}
	f.r.Sources, f.r.Data, f.r.SaveAsMaxRows = src, data, 10
	_, out, err := f.send(t, "Save the big one")
	if err != nil {
		t.Fatal(err)
	}
	if out.Confirmation == nil {
		t.Fatal("a save over the cap ran without asking")
	}
	c := out.Confirmation
	var p map[string]any
	json.Unmarshal(c.Parameters, &p)
	if c.Action != "execute_sql" || p["save_as"] != "targets" || p["source"] != "warehouse" || p["estimated_rows"] != 42.0 || p["max_rows"] != 10.0 ||
		!strings.Contains(c.Explanation, "about 42 rows") || !strings.Contains(c.Explanation, "only the first 10") {
		t.Errorf("confirmation %s %s: %s", c.Action, c.Parameters, c.Explanation)
	}
	if len(src.recorded()) != 0 {
		t.Errorf("ran before the user approved: %q", src.recorded())
	}
	if _, _, err := f.confirm(t, c.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if len(data.saved) != 1 || data.saved[0].Name != "targets" || data.saved[0].RowCount != 3 {
		t.Errorf("saved %+v after approval", data.saved)
	}

	f.r.SaveAsMaxRows = 100
	_, out, err = f.send(t, "Save the small one")
	if err != nil {
		t.Fatal(err)
	}
	if out.Confirmation != nil || len(data.saved) != 2 {
		t.Errorf("a save under the cap: confirmation %v, saved %d tables; want it run at once", out.Confirmation, len(data.saved))
	}
}
