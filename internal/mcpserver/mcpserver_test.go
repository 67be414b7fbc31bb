package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
)

// fakeWorkspace holds one conversation's datasets and answers queries from a
// table of canned results.
type fakeWorkspace struct {
	mu       sync.Mutex
	conv     string
	datasets []*datachat.Dataset
	results  map[string]*datachat.QueryResult
	queries  []string
}

func (f *fakeWorkspace) Datasets(ctx context.Context, conv string) ([]*datachat.Dataset, error) {
	if conv != f.conv {
		return nil, errors.New("wrong conversation")
	}
	return f.datasets, nil
}

func (f *fakeWorkspace) Query(ctx context.Context, conv, sql string) (*datachat.QueryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, sql)
	if sql == "BOOM" {
		return nil, errors.New("disk on fire at /var/secret")
	}
	if r, ok := f.results[sql]; ok {
		return r, nil
	}
	return nil, datachat.Errorf(datachat.EINVALID, "Binder Error: no such table in %q", sql)
}

func (f *fakeWorkspace) LoadURL(ctx context.Context, conv, url, name string) ([]*datachat.Dataset, error) {
	return nil, datachat.Errorf(datachat.EINVALID, "URL %s is not allowed", url)
}

func (f *fakeWorkspace) Search(ctx context.Context, conv string, q datachat.SearchQuery) (*datachat.SearchResult, error) {
	return &datachat.SearchResult{}, nil // documents not configured
}

// SaveQuery saves what run streams as a dataset of the fake, its rows as
// the result of "SELECT * FROM name".
func (f *fakeWorkspace) SaveQuery(ctx context.Context, conv, name, source string, run func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error) {
	c := &collect{}
	res, err := run(ctx, c)
	if err != nil {
		return nil, res, err
	}
	d := &datachat.Dataset{Name: name, Source: "database " + source, Columns: c.cols, RowCount: int64(len(c.rows))}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.datasets = append(f.datasets, d)
	if f.results == nil {
		f.results = map[string]*datachat.QueryResult{}
	}
	f.results["SELECT * FROM "+name] = &datachat.QueryResult{Columns: c.cols, Rows: c.rows, RowCount: len(c.rows)}
	return d, res, nil
}

type collect struct {
	cols []datachat.Column
	rows [][]any
}

func (c *collect) Columns(cols []datachat.Column) error { c.cols = cols; return nil }
func (c *collect) Row(v []any) error                    { c.rows = append(c.rows, append([]any(nil), v...)); return nil }

type calls struct {
	mu    sync.Mutex
	tools []string
	sql   int
}

func (c *calls) ToolCalled(tool string, ok bool, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tools = append(c.tools, tool+":"+map[bool]string{true: "ok", false: "error"}[ok])
}

func (c *calls) SQLQueried(ok bool, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sql++
}

func connect(t *testing.T, o Options) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := New(o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out, res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestFixedConversation(t *testing.T) {
	ws := &fakeWorkspace{
		conv: "c1",
		datasets: []*datachat.Dataset{{ID: "d1", Name: "sales", Source: "sales.csv", Format: "csv", RowCount: 2,
			Columns: []datachat.Column{{Name: "amount", Type: "integer", SQLType: "BIGINT", Samples: []string{"1", "2"}}}}},
		results: map[string]*datachat.QueryResult{
			`SELECT * FROM "sales" LIMIT 5`: {Columns: []datachat.Column{{Name: "amount", Type: "integer", SQLType: "BIGINT"}}, Rows: [][]any{{1}, {2}}, RowCount: 2},
			`SELECT sum(amount) FROM sales`: {Columns: []datachat.Column{{Name: "s", Type: "integer", SQLType: "HUGEINT"}}, Rows: [][]any{{3}}, RowCount: 1},
			`SELECT 1 WHERE false`:          {Columns: []datachat.Column{{Name: "x", Type: "integer", SQLType: "INTEGER"}}, RowCount: 0},
		},
	}
	var logs bytes.Buffer
	obs := &calls{}
	cs := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "local"}, Conversation: "c1",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Observer: obs})

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(string(b), "conversation_id") {
			t.Errorf("%s takes conversation_id with a fixed conversation: %s", tool.Name, b)
		}
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != (tool.Name != datachat.ToolLoadDataset) {
			t.Errorf("%s: annotations %+v", tool.Name, tool.Annotations)
		}
	}

	out, _, isErr := call(t, cs, datachat.ToolListDatasets, nil)
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"name":"sales"`) || strings.Contains(string(b), "samples") {
		t.Errorf("list_datasets: %s (samples are for the model's prompt, not agents)", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolDescribeDataset, map[string]any{"name": "Sales"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"sample_rows":[[1],[2]]`) || !strings.Contains(string(b), `"sql_type":"BIGINT"`) {
		t.Errorf("describe_dataset: %s", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT sum(amount) FROM sales"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"rows":[[3]]`) {
		t.Errorf("execute_sql: %s", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT 1 WHERE false"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"rows":[]`) {
		t.Errorf("empty result: %s, want rows []", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolSearchDocuments, map[string]any{"query": "refunds"})
	if b, _ := json.Marshal(out); isErr || string(b) != `{"results":[]}` {
		t.Errorf("search_documents without documents: %s", b)
	}

	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{datachat.ToolExecuteSQL, map[string]any{"query": "SELECT nope"}, "Binder Error"},
		{datachat.ToolExecuteSQL, map[string]any{"query": "  "}, "query is required"},
		{datachat.ToolExecuteSQL, map[string]any{"query": "BOOM"}, "Internal error."},
		{datachat.ToolDescribeDataset, map[string]any{"name": "birds"}, "the tables are: sales"},
		{datachat.ToolLoadDataset, map[string]any{"url": "http://10.0.0.1/x.csv"}, "not allowed"},
	} {
		_, text, isErr := call(t, cs, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s %v: isError %v %q, want %q", tc.tool, tc.args, isErr, text, tc.want)
		}
	}
	if strings.Contains(logs.String(), "Binder") || !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("only internal errors are logged, with their detail: %s", logs.String())
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := "list_datasets:ok describe_dataset:ok execute_sql:ok execute_sql:ok search_documents:ok " +
		"execute_sql:error execute_sql:error execute_sql:error describe_dataset:error load_dataset:error"
	if got := strings.Join(obs.tools, " "); got != want || obs.sql != 5 {
		t.Errorf("observed %q and %d queries, want %q and 5", got, obs.sql, want)
	}
}
