package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"datachat"
)

// fakeSources is one database attached to conversation c1.
type fakeSources struct{ got []string }

func (f *fakeSources) Describe(_ context.Context, u *datachat.User, conv string) ([]datachat.DBSourceInfo, error) {
	rows := int64(344)
	return []datachat.DBSourceInfo{{Name: "warehouse", Kind: "postgres", Dialect: "PostgreSQL 15.14", Tables: []datachat.DBSourceTable{
		{Name: `"public"."penguins"`, Rows: &rows, Columns: []datachat.Column{{Name: "species", Type: "text", SQLType: "text"}}}}}}, nil
}

func (f *fakeSources) Query(_ context.Context, u *datachat.User, conv, source, sql string) (*datachat.QueryResult, error) {
	f.got = append(f.got, u.Name+" "+conv+" "+source+" "+sql)
	if source != "warehouse" {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "No database source named %q is attached to this conversation.", source)
	}
	return &datachat.QueryResult{Columns: []datachat.Column{{Name: "n", Type: "integer", SQLType: "bigint"}}, Rows: [][]any{{124}}, RowCount: 1}, nil
}

func (f *fakeSources) EstimateRows(context.Context, *datachat.User, string, string, string) (int64, error) {
	return 0, nil
}

// TestExecuteSQLOnASource: with sources, list_datasets lists the
// conversation's databases and execute_sql runs a query with source there,
// for the server's user; without sources, execute_sql declares no source.
func TestExecuteSQLOnASource(t *testing.T) {
	ws := &fakeWorkspace{conv: "c1"}
	src := &fakeSources{}
	cs := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "alice"}, Conversation: "c1", Sources: src})
	out, _, isErr := call(t, cs, ToolListDatasets, nil)
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"databases":[{"dialect":"PostgreSQL 15.14","kind":"postgres","name":"warehouse","tables":[{"columns":[{"name":"species"`) ||
		!strings.Contains(string(b), `"name":"\"public\".\"penguins\"","rows":344}`) {
		t.Errorf("list_datasets: %s", b)
	}
	out, _, isErr = call(t, cs, ToolExecuteSQL, map[string]any{"query": "SELECT count(*) AS n FROM penguins", "source": "Warehouse"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"rows":[[124]]`) {
		t.Errorf("execute_sql with source: %s", b)
	}
	if len(src.got) != 1 || src.got[0] != "alice c1 warehouse SELECT count(*) AS n FROM penguins" {
		t.Errorf("source queries %q", src.got)
	}
	if _, text, isErr := call(t, cs, ToolExecuteSQL, map[string]any{"query": "SELECT 1", "source": "elsewhere"}); !isErr || !strings.Contains(text, `"elsewhere" is attached`) {
		t.Errorf("execute_sql on a source not attached: %v %q", isErr, text)
	}

	plain := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "alice"}, Conversation: "c1"})
	tools, err := plain.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if b, _ := json.Marshal(tool.InputSchema); tool.Name == ToolExecuteSQL && strings.Contains(string(b), "source") {
			t.Errorf("execute_sql without sources declares one: %s", b)
		}
	}
	if _, text, isErr := call(t, plain, ToolExecuteSQL, map[string]any{"query": "SELECT 1", "source": "warehouse"}); !isErr || !strings.Contains(text, "No database sources") {
		t.Errorf("execute_sql with source on a server without sources: %v %q", isErr, text)
	}
}
