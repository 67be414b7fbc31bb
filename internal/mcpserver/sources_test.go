package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
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

// Stream gives three rows of warehouse's penguins, at most maxRows.
func (f *fakeSources) Stream(_ context.Context, u *datachat.User, conv, source, sql string, maxRows int, sink datachat.RowSink) (datachat.StreamResult, error) {
	f.got = append(f.got, fmt.Sprintf("stream %s %s %s %d %s", u.Name, conv, source, maxRows, sql))
	if source != "warehouse" {
		return datachat.StreamResult{}, datachat.Errorf(datachat.ENOTFOUND, "No database source named %q is attached to this conversation.", source)
	}
	if err := sink.Columns([]datachat.Column{{Name: "species", Type: "text"}, {Name: "n", Type: "integer"}}); err != nil {
		return datachat.StreamResult{}, err
	}
	var res datachat.StreamResult
	for _, r := range [][]any{{"Adelie", int64(152)}, {"Chinstrap", int64(68)}, {"Gentoo", int64(124)}} {
		if res.Rows == int64(maxRows) {
			res.Truncated = true
			break
		}
		if err := sink.Row(r); err != nil {
			return res, err
		}
		res.Rows++
	}
	return res, nil
}

// TestExecuteSQLOnASource: with sources, list_datasets lists the
// conversation's databases and execute_sql runs a query with source there,
// for the server's user; without sources, execute_sql declares no source.
func TestExecuteSQLOnASource(t *testing.T) {
	ws := &fakeWorkspace{conv: "c1"}
	src := &fakeSources{}
	cs := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "alice"}, Conversation: "c1", Sources: src})
	out, _, isErr := call(t, cs, datachat.ToolListDatasets, nil)
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"databases":[{"dialect":"PostgreSQL 15.14","kind":"postgres","name":"warehouse","tables":[{"columns":[{"name":"species"`) ||
		!strings.Contains(string(b), `"name":"\"public\".\"penguins\"","rows":344}`) {
		t.Errorf("list_datasets: %s", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT count(*) AS n FROM penguins", "source": "Warehouse"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"rows":[[124]]`) {
		t.Errorf("execute_sql with source: %s", b)
	}
	if len(src.got) != 1 || src.got[0] != "alice c1 warehouse SELECT count(*) AS n FROM penguins" {
		t.Errorf("source queries %q", src.got)
	}
	if _, text, isErr := call(t, cs, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT 1", "source": "elsewhere"}); !isErr || !strings.Contains(text, `"elsewhere" is attached`) {
		t.Errorf("execute_sql on a source not attached: %v %q", isErr, text)
	}

	plain := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "alice"}, Conversation: "c1"})
	tools, err := plain.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if b, _ := json.Marshal(tool.InputSchema); tool.Name == datachat.ToolExecuteSQL && strings.Contains(string(b), "source") {
			t.Errorf("execute_sql without sources declares one: %s", b)
		}
	}
	if _, text, isErr := call(t, plain, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT 1", "source": "warehouse"}); !isErr || !strings.Contains(text, "No database sources") {
		t.Errorf("execute_sql with source on a server without sources: %v %q", isErr, text)
	}
}

// TestSaveAsOnASource: execute_sql with source and save_as streams the
// query's rows into a new table of the conversation, at most SaveAsMaxRows
// of them (truncated beyond), answering one row that names the table; the
// table is then queried without source. save_as without source, or on a
// source not attached, is refused.
func TestSaveAsOnASource(t *testing.T) {
	ws := &fakeWorkspace{conv: "c1"}
	src := &fakeSources{}
	cs := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "alice"}, Conversation: "c1", Sources: src, SaveAsMaxRows: 2})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == datachat.ToolExecuteSQL {
			if b, _ := json.Marshal(tl.InputSchema); !strings.Contains(string(b), `"save_as"`) || tl.Description != datachat.ExecuteSQLSourcesSpec.Description {
				t.Errorf("execute_sql declares %s: %s", b, tl.Description)
			}
		}
	}
	out, text, isErr := call(t, cs, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT species, count(*) AS n FROM penguins GROUP BY 1", "source": "warehouse", "save_as": "by_species"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"rows":[["by_species",2,"database warehouse"]]`) || !strings.Contains(string(b), `"truncated":true`) {
		t.Errorf("execute_sql with save_as: %s %s", b, text)
	}
	if len(src.got) != 1 || src.got[0] != "stream alice c1 warehouse 2 SELECT species, count(*) AS n FROM penguins GROUP BY 1" {
		t.Errorf("source calls %q, want one stream capped at 2 rows", src.got)
	}
	out, _, isErr = call(t, cs, datachat.ToolExecuteSQL, map[string]any{"query": "SELECT * FROM by_species"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"rows":[["Adelie",152],["Chinstrap",68]]`) {
		t.Errorf("the saved table: %s", b)
	}
	for _, args := range []map[string]any{
		{"query": "SELECT 1", "save_as": "x"},
		{"query": "SELECT 1", "source": "elsewhere", "save_as": "x"},
	} {
		if _, text, isErr := call(t, cs, datachat.ToolExecuteSQL, args); !isErr || text == "" {
			t.Errorf("execute_sql %v: %v %q, want refused", args, isErr, text)
		}
	}
}

// TestListAndDescribeTables: list_tables lists the datasets and the
// databases' tables by pattern; describe_table gives one's columns and how
// to query it, by its name as a model writes it; an unknown name or source
// is refused naming what to give.
func TestListAndDescribeTables(t *testing.T) {
	ws := &fakeWorkspace{conv: "c1", datasets: []*datachat.Dataset{{Name: "islands", RowCount: 3, Description: "Area of each island.",
		Columns: []datachat.Column{{Name: "island", Type: "text"}}}}}
	cs := connect(t, Options{Workspace: ws, User: &datachat.User{ID: "u1", Name: "alice"}, Conversation: "c1", Sources: &fakeSources{}})
	out, _, isErr := call(t, cs, datachat.ToolListTables, map[string]any{"pattern": "*"})
	if b, _ := json.Marshal(out); isErr || string(b) != `{"tables":[{"description":"Area of each island.","name":"islands","rows":3},{"name":"\"public\".\"penguins\"","rows":344,"source":"warehouse"}]}` {
		t.Errorf("list_tables: %s", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolListTables, map[string]any{"source": "warehouse", "pattern": "PENG"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), "penguins") || strings.Contains(string(b), "islands") {
		t.Errorf("list_tables of warehouse: %s", b)
	}
	out, _, isErr = call(t, cs, datachat.ToolDescribeTable, map[string]any{"name": "public.penguins"})
	if b, _ := json.Marshal(out); isErr || !strings.Contains(string(b), `"columns":[{"name":"species"`) || !strings.Contains(string(b), `"how":"execute_sql with source \"warehouse\"`) {
		t.Errorf("describe_table: %s", b)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{datachat.ToolDescribeTable, map[string]any{"name": "nothing"}, "list_tables"},
		{datachat.ToolDescribeTable, map[string]any{"name": ""}, "name is required"},
		{datachat.ToolListTables, map[string]any{"source": "elsewhere"}, `no database named "elsewhere"`},
	} {
		if _, text, isErr := call(t, cs, tc.tool, tc.args); !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s %v: %v %q, want an error saying %q", tc.tool, tc.args, isErr, text, tc.want)
		}
	}
}
