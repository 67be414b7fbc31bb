package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"datachat"
)

// fakeWorkspace is one conversation, c1, with the table sales.
type fakeWorkspace struct {
	users   []string // the user each call carried
	queries []string
	search  datachat.SearchQuery
}

func (f *fakeWorkspace) seen(ctx context.Context) {
	f.users = append(f.users, datachat.UserIDFrom(ctx))
}

func (f *fakeWorkspace) Datasets(ctx context.Context, conv string) ([]*datachat.Dataset, error) {
	f.seen(ctx)
	return []*datachat.Dataset{{ID: "d1", Name: "sales", Source: "sales.csv", RowCount: 3,
		Columns: []datachat.Column{{Name: "amount", Type: datachat.TypeInteger, SQLType: "BIGINT"}}}}, nil
}

func (f *fakeWorkspace) Query(ctx context.Context, conv, sql string) (*datachat.QueryResult, error) {
	f.seen(ctx)
	f.queries = append(f.queries, "datasets: "+sql)
	if strings.Contains(sql, "nope") {
		return nil, datachat.Errorf(datachat.EINVALID, "Binder Error: column nope not found")
	}
	return &datachat.QueryResult{Columns: []datachat.Column{{Name: "n"}}, Rows: [][]any{{float64(3)}}, RowCount: 1}, nil
}

func (f *fakeWorkspace) LoadURL(ctx context.Context, conv, url, name string) ([]*datachat.Dataset, error) {
	f.seen(ctx)
	return []*datachat.Dataset{{Name: "birds", Source: url, Notes: []string{"2 rows skipped"}}, {Name: "birds_2", Source: url}}, nil
}

func (f *fakeWorkspace) Search(ctx context.Context, conv string, q datachat.SearchQuery) (*datachat.SearchResult, error) {
	f.seen(ctx)
	f.search = q
	return &datachat.SearchResult{Sources: []datachat.Source{
		{Text: " Refunds take 14 days. ", Metadata: map[string]any{"document": "policy.pdf", "page": 2}},
	}}, nil
}

func (f *fakeWorkspace) SaveQuery(ctx context.Context, conv, name, source string, run func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error) {
	f.seen(ctx)
	res, err := run(ctx, nil)
	if err != nil {
		return nil, res, err
	}
	return &datachat.Dataset{Name: name, Source: source, RowCount: res.Rows}, res, nil
}

// fakeSources is the database warehouse.
type fakeSources struct{ queries []string }

func (f *fakeSources) Describe(ctx context.Context, u *datachat.User, conv string) ([]datachat.DBSourceInfo, error) {
	return []datachat.DBSourceInfo{{Name: "warehouse", Kind: "postgres", Tables: []datachat.DBSourceTable{{Name: "public.orders"}, {Name: "public.order_items"}}}}, nil
}

func (f *fakeSources) Query(ctx context.Context, u *datachat.User, conv, source, sql string) (*datachat.QueryResult, error) {
	f.queries = append(f.queries, fmt.Sprintf("%s %s as %s (ctx %s): %s", source, conv, u.ID, datachat.UserIDFrom(ctx), sql))
	return &datachat.QueryResult{Columns: []datachat.Column{{Name: "n"}}, Rows: [][]any{{float64(124)}}, RowCount: 1}, nil
}

func (f *fakeSources) EstimateRows(context.Context, *datachat.User, string, string, string) (int64, error) {
	return 0, nil
}

func (f *fakeSources) Stream(ctx context.Context, u *datachat.User, conv, source, sql string, maxRows int, sink datachat.RowSink) (datachat.StreamResult, error) {
	f.queries = append(f.queries, fmt.Sprintf("stream %s at most %d: %s", source, maxRows, sql))
	return datachat.StreamResult{Rows: 7, Truncated: true}, nil
}

type sqlCount struct {
	ok, failed int
	tools      []string // "tool:ok"
}

func (s *sqlCount) ToolCalled(tool string, ok bool, d time.Duration) {
	s.tools = append(s.tools, fmt.Sprintf("%s:%t", tool, ok))
}

func (s *sqlCount) SQLQueried(ok bool, d time.Duration) {
	if ok {
		s.ok++
	} else {
		s.failed++
	}
}

func newCatalog() (*Catalog, *fakeWorkspace, *fakeSources, *sqlCount) {
	ws, src, obs := &fakeWorkspace{}, &fakeSources{}, &sqlCount{}
	return &Catalog{Workspace: ws, Sources: src, Observer: obs, SaveAsMaxRows: 5,
		SchemaText: func(ds []*datachat.Dataset) string { return fmt.Sprintf("\n(schema of %d tables)\n", len(ds)) }}, ws, src, obs
}

var alice = &datachat.User{ID: "u1", Name: "alice"}

// run parses args for tool and runs it in conversation c1 for alice, the
// database warehouse attached.
func run(t *testing.T, cat *Catalog, tool string, args string) (*Result, error) {
	t.Helper()
	return cat.Run(context.Background(), Call{User: alice, Conversation: "c1", Attached: []string{"warehouse"}}, tool, json.RawMessage(args))
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		tool, args, want string
	}{
		{datachat.ToolExecuteSQL, `{"query": "  "}`, `query is required: execute_sql needs {"query": "SELECT …"}.`},
		{datachat.ToolExecuteSQL, `not json`, `query is required: execute_sql needs {"query": "SELECT …"}.`},
		{datachat.ToolLoadDataset, `{"name": "x"}`, `url is required: load_dataset needs {"url": "https://…"}.`},
		{datachat.ToolLoadDataset, fmt.Sprintf(`{"url": "https://x/y.csv", "name": %q}`, strings.Repeat("é", 256)), "name is 256 characters long"},
		{datachat.ToolSearchDocuments, `{"top_k": 3}`, `query is required: search_documents needs {"query": "…"}.`},
		{datachat.ToolDescribeTable, `{"name": " "}`, `name is required: describe_table needs {"name": "…"}`},
		{datachat.ToolListTables, `[1]`, "list_tables needs a JSON object of its arguments."},
	} {
		_, err := Parse(tc.tool, json.RawMessage(tc.args))
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), tc.want) {
			t.Errorf("%s %s: got %v, want EINVALID saying %q", tc.tool, tc.args, err, tc.want)
		}
	}
	a, err := Parse(datachat.ToolExecuteSQL, json.RawMessage(`{"query": " SELECT 1 ", "source": " Warehouse ", "save_as": " t ", "conversation_id": " c1 "}`))
	if err != nil || a.Query != " SELECT 1 " || a.Source != "warehouse" || a.SaveAs != "t" || a.ConversationID != "c1" || a.Tool != datachat.ToolExecuteSQL {
		t.Errorf("execute_sql: got %+v %v, want the query as written, the rest trimmed, the source in lower case", a, err)
	}
	if a, err := Parse(datachat.ToolListDatasets, nil); err != nil || a.Tool != datachat.ToolListDatasets {
		t.Errorf("list_datasets without arguments: %+v %v", a, err)
	}
}

func TestExecuteSQL(t *testing.T) {
	cat, ws, src, obs := newCatalog()
	res, err := run(t, cat, datachat.ToolExecuteSQL, `{"query": "SELECT count(*) AS n FROM sales"}`)
	if err != nil || res.Text != "n\n3\n(1 row)" || res.Rows.RowCount != 1 {
		t.Errorf("on the datasets: %+v %v", res, err)
	}
	res, err = run(t, cat, datachat.ToolExecuteSQL, `{"query": "SELECT 124", "source": "Warehouse"}`)
	if err != nil || res.Text != "n\n124\n(1 row)" {
		t.Errorf("on the source: %+v %v", res, err)
	}
	if want := "warehouse c1 as u1 (ctx u1): SELECT 124"; len(src.queries) != 1 || src.queries[0] != want {
		t.Errorf("the source ran %q, want %q", src.queries, want)
	}
	if _, err := run(t, cat, datachat.ToolExecuteSQL, `{"query": "SELECT nope"}`); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("a failing query: %v, want the engine's EINVALID", err)
	}
	if obs.ok != 2 || obs.failed != 1 {
		t.Errorf("observed %d ok and %d failed queries, want 2 and 1", obs.ok, obs.failed)
	}
	if strings.Join(ws.users, ",") != "u1,u1" {
		t.Errorf("the workspace's calls carried users %q, want u1 each", ws.users)
	}
}

func TestSourceChecks(t *testing.T) {
	cat, _, src, _ := newCatalog()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cat  *Catalog
		call Call
		args string
		want string
	}{
		{"unknown source", cat, Call{User: alice, Conversation: "c1", Attached: []string{"warehouse", "crm"}}, `{"query": "SELECT 1", "source": "erp"}`,
			`no database named "erp" is attached to this conversation; the attached databases are warehouse, crm.`},
		{"none attached", cat, Call{User: alice, Conversation: "c1", Attached: []string{}}, `{"query": "SELECT 1", "source": "warehouse"}`,
			`no database named "warehouse" is attached to this conversation, and none is`},
		{"no sources on the server", &Catalog{Workspace: cat.Workspace}, Call{User: alice, Conversation: "c1"}, `{"query": "SELECT 1", "source": "warehouse"}`,
			"No database sources on this server: omit source to query the datasets."},
		{"no user", cat, Call{Conversation: "c1"}, `{"query": "SELECT 1", "source": "warehouse"}`,
			"No database sources on this server"},
		{"save_as without source", cat, Call{User: alice, Conversation: "c1", Attached: []string{"warehouse"}}, `{"query": "SELECT 1", "save_as": "t"}`,
			"save_as saves the result of a query on a database: give source too."},
		{"save_as on a source not attached", cat, Call{User: alice, Conversation: "c1", Attached: []string{"crm"}}, `{"query": "SELECT 1", "source": "warehouse", "save_as": "t"}`,
			`no database named "warehouse" is attached`},
		{"save_as without sources", &Catalog{Workspace: cat.Workspace}, Call{User: alice, Conversation: "c1"}, `{"query": "SELECT 1", "source": "warehouse", "save_as": "t"}`,
			"No database sources on this server: save_as needs one."},
	} {
		_, err := tc.cat.Run(ctx, tc.call, datachat.ToolExecuteSQL, json.RawMessage(tc.args))
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), tc.want) {
			t.Errorf("%s: %v, want EINVALID saying %q", tc.name, err, tc.want)
		}
	}
	if len(src.queries) != 0 {
		t.Errorf("the source was asked %q, want nothing", src.queries)
	}
	// Without the attached names, the source service decides.
	if _, err := cat.Run(ctx, Call{User: alice, Conversation: "c1"}, datachat.ToolExecuteSQL, json.RawMessage(`{"query": "SELECT 1", "source": "warehouse"}`)); err != nil || len(src.queries) != 1 {
		t.Errorf("attachment unknown: %v, %q; want the source asked", err, src.queries)
	}
}

func TestSaveAs(t *testing.T) {
	cat, _, src, obs := newCatalog()
	res, err := run(t, cat, datachat.ToolExecuteSQL, `{"query": "SELECT * FROM orders", "source": "warehouse", "save_as": "orders_copy"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := "Saved 7 rows of the query on warehouse as the table orders_copy in this conversation. The result was cut: only the first 5 rows were saved (DATACHAT_SAVE_AS_MAX_ROWS), or a value longer than 1 MiB was shortened; say so in the answer if it matters. Query it, or join it with the datasets, with execute_sql without source (DuckDB SQL).\n(schema of 1 tables)"
	if res.Text != want || res.Rows != nil || len(res.Datasets) != 1 || !res.Saved.Truncated {
		t.Errorf("got %+v\ntext %q\nwant %q", res, res.Text, want)
	}
	if len(src.queries) != 1 || src.queries[0] != "stream warehouse at most 5: SELECT * FROM orders" || obs.ok != 1 {
		t.Errorf("the source streamed %q (observed %d), want one stream of at most 5 rows", src.queries, obs.ok)
	}
}

func TestLoadAndSearch(t *testing.T) {
	cat, ws, _, _ := newCatalog()
	res, err := run(t, cat, datachat.ToolLoadDataset, `{"url": " https://example.com/birds.json "}`)
	want := "Loaded https://example.com/birds.json as tables birds, birds_2.\n(schema of 2 tables)\nNote on birds: 2 rows skipped"
	if err != nil || res.Text != want || len(res.Datasets) != 2 {
		t.Errorf("load_dataset: %q %v, want %q", res.Text, err, want)
	}
	res, err = cat.Run(context.Background(), Call{User: alice, Conversation: "c1", Filters: map[string]any{"team": "ops"}, FirstExcerpt: 3}, datachat.ToolSearchDocuments, json.RawMessage(`{"query": "refunds", "top_k": 99}`))
	if err != nil || res.Text != "[3] policy.pdf, page 2\nRefunds take 14 days." || len(res.Excerpts) != 1 {
		t.Errorf("search_documents: %q %v", res.Text, err)
	}
	if ws.search.TopK != datachat.MaxToolTopK || ws.search.Filters["team"] != "ops" {
		t.Errorf("searched %+v, want top_k capped at %d and the call's filters", ws.search, datachat.MaxToolTopK)
	}
}

func TestDatasetsAndTables(t *testing.T) {
	cat, ws, _, _ := newCatalog()
	res, err := run(t, cat, datachat.ToolListDatasets, `{}`)
	if err != nil || len(res.Datasets) != 1 || len(res.Databases) != 1 {
		t.Errorf("list_datasets: %+v %v", res, err)
	}
	res, err = run(t, cat, datachat.ToolDescribeDataset, `{"name": "SALES"}`)
	if err != nil || res.Datasets[0].Name != "sales" || ws.queries[len(ws.queries)-1] != `datasets: SELECT * FROM "sales" LIMIT 5` {
		t.Errorf("describe_dataset: %+v %v (queries %q)", res, err, ws.queries)
	}
	if _, err := run(t, cat, datachat.ToolDescribeDataset, `{"name": "birds"}`); datachat.ErrorCode(err) != datachat.ENOTFOUND || !strings.Contains(err.Error(), "the tables are: sales") {
		t.Errorf("describe_dataset of no dataset: %v", err)
	}
	res, err = run(t, cat, datachat.ToolListTables, `{"pattern": "*order*"}`)
	if err != nil || len(res.Tables) != 2 || res.Tables[0].Key() != "warehouse.public.orders" {
		t.Errorf("list_tables: %+v %v", res, err)
	}
	res, err = run(t, cat, datachat.ToolDescribeTable, `{"name": "orders"}`)
	if err != nil || len(res.Tables) != 1 || res.Tables[0].Source != "warehouse" {
		t.Errorf("describe_table: %+v %v", res, err)
	}
	if _, err := run(t, cat, datachat.ToolListTables, `{"source": "erp"}`); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("list_tables of a database not attached: %v", err)
	}
}

func TestBudgetOf(t *testing.T) {
	for tool, want := range map[string]Budget{
		datachat.ToolExecuteSQL: SQLBudget, datachat.ToolSearchDocuments: SearchBudget,
		datachat.ToolLoadDataset: UploadBudget, datachat.ToolListTables: NoBudget,
	} {
		if got := BudgetOf(tool); got != want {
			t.Errorf("%s: %v, want %v", tool, got, want)
		}
	}
}
