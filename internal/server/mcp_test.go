package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat/internal/nodetest"
)

// keyTransport adds an API key to every request.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to /mcp with key.
func (ts *testServer) mcpSession(t *testing.T, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: keyTransport{key}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text string
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	var structured map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &structured)
	}
	return structured, text, res.IsError
}

func TestMCPOverHTTP(t *testing.T) {
	wantCount, wantMass := penguinsOracle(t)
	cs := &chatServer{testServer: newTestServer(t)}
	conv := cs.withPenguins(t)
	bobConv := cs.newConversation(t, cs.bob)
	s := cs.mcpSession(t, cs.alice)
	ctx := context.Background()

	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(b), `"required":["conversation_id"`) {
			t.Errorf("%s: conversation_id is not required over HTTP: %s", tool.Name, b)
		}
	}
	slices.Sort(names)
	if want := []string{"describe_dataset", "describe_table", "execute_sql", "list_datasets", "list_tables", "load_dataset", "search_documents"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	out, _, isErr := callTool(t, s, "list_datasets", map[string]any{"conversation_id": conv})
	ds, _ := out["datasets"].([]any)
	if isErr || len(ds) != 1 || ds[0].(map[string]any)["name"] != "penguins" || ds[0].(map[string]any)["row_count"] != 344.0 {
		t.Errorf("list_datasets: %v", out)
	}

	out, text, isErr := callTool(t, s, "execute_sql", map[string]any{"conversation_id": conv, "query": adelieSQL})
	rows, _ := out["rows"].([]any)
	if isErr || len(rows) != 1 || fmt.Sprint(rows[0].([]any)[0]) != fmt.Sprint(wantCount) || toFloat(rows[0].([]any)[1]) != wantMass ||
		out["row_count"] != 1.0 || out["truncated"] != false {
		t.Errorf("execute_sql: %v (text %s), want [%d %v]", out, text, wantCount, wantMass)
	}
	if !strings.Contains(text, `"rows":[[`) {
		t.Errorf("execute_sql text content %q is not the result's JSON", text)
	}

	out, _, isErr = callTool(t, s, "describe_dataset", map[string]any{"conversation_id": conv, "name": "PENGUINS"})
	sample, _ := out["sample_rows"].([]any)
	cols, _ := out["columns"].([]any)
	if isErr || len(sample) != 5 || len(cols) != 7 || cols[0].(map[string]any)["sql_type"] == "" {
		t.Errorf("describe_dataset: %v", out)
	}

	out, _, isErr = callTool(t, s, "search_documents", map[string]any{"conversation_id": conv, "query": "penguins"})
	if res, ok := out["results"].([]any); isErr || !ok || len(res) != 0 {
		t.Errorf("search_documents without documents: %v", out)
	}

	out, _, isErr = callTool(t, s, "load_dataset", map[string]any{"conversation_id": conv, "url": servePenguins(t) + "/more.csv"})
	if isErr || out["name"] != "more" || out["row_count"] != 344.0 {
		t.Errorf("load_dataset: %v", out)
	}
	out, _, _ = callTool(t, s, "execute_sql", map[string]any{"conversation_id": conv, "query": "SELECT count(*) AS n FROM more JOIN penguins USING (island, species, bill_length_mm, bill_depth_mm, flipper_length_mm, body_mass_g, sex)"})
	if rows, _ := out["rows"].([]any); len(rows) != 1 {
		t.Errorf("join over the loaded dataset: %v", out)
	}

	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"another user's conversation", "execute_sql", map[string]any{"conversation_id": bobConv, "query": "SELECT 1"}, "not found"},
		{"unknown conversation", "list_datasets", map[string]any{"conversation_id": "nope"}, "not found"},
		{"no conversation", "list_datasets", map[string]any{}, "conversation_id"},
		{"sandbox", "execute_sql", map[string]any{"conversation_id": conv, "query": "SELECT * FROM read_csv('/etc/passwd')"}, ""},
		{"bad SQL", "execute_sql", map[string]any{"conversation_id": conv, "query": "SELECT nope FROM penguins"}, "nope"},
		{"unknown dataset", "describe_dataset", map[string]any{"conversation_id": conv, "name": "birds"}, "penguins"},
		{"private URL", "load_dataset", map[string]any{"conversation_id": conv, "url": "http://10.0.0.1/x.csv"}, ""},
	} {
		_, text, isErr := callTool(t, s, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) || strings.Contains(text, "Internal error") {
			t.Errorf("%s: isError %v, %q; want an error containing %q", tc.name, isErr, text, tc.want)
		}
	}

	m := cs.scrape(t)
	if got := metricValue(m, "datachat_tool_calls_total", `source="mcp"`, `tool="execute_sql"`, `outcome="ok"`); got != 2 {
		t.Errorf("mcp execute_sql ok: %v\n%s", got, grepLines(m, "tool_calls"))
	}
	// The call without conversation_id fails the SDK's schema validation
	// before it reaches the tool, so it is not counted.
	if got := metricValue(m, "datachat_tool_calls_total", `source="mcp"`, `outcome="error"`); got != 6 {
		t.Errorf("mcp errors: %v\n%s", got, grepLines(m, "tool_calls"))
	}
	if got := metricValue(m, "datachat_sql_query_duration_seconds_count", `source="mcp"`); got < 4 {
		t.Errorf("mcp SQL durations: %v", got)
	}
}

func TestMCPOverHTTPAuth(t *testing.T) {
	ts := newTestServer(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	accept := "application/json, text/event-stream"
	ts.run(t, scenario{name: "no key", method: "POST", url: "/mcp", body: init, headers: map[string]string{"Content-Type": "application/json", "Accept": accept},
		wantStatus: 401, wantContent: []string{`"type":"unauthorized"`}})
	ts.run(t, scenario{name: "wrong key", method: "POST", url: "/mcp", body: init, headers: map[string]string{"Content-Type": "application/json", "Accept": accept, "X-API-Key": "dck_x"},
		wantStatus: 401})
	ts.run(t, scenario{name: "initialize", method: "POST", url: "/mcp", body: init, headers: map[string]string{"Content-Type": "application/json", "Accept": accept, "X-API-Key": ts.alice},
		wantStatus: 200, wantContent: []string{`"serverInfo":{"name":"datachat"`, `"tools"`}})
}

func TestMCPClientNodeHTTP(t *testing.T) {
	nodetest.Require(t)
	wantCount, _ := penguinsOracle(t)
	cs := &chatServer{testServer: newTestServer(t)}
	conv := cs.withPenguins(t)
	before := cs.scrape(t)
	out := nodetest.Run(t, nil, "mcp_client.mjs", "http", cs.URL+"/mcp", cs.alice, conv, adelieSQL)
	checkNodeMCP(t, out, wantCount, true)
	after := cs.scrape(t)
	for _, labels := range [][]string{
		{`source="mcp"`, `tool="execute_sql"`, `outcome="ok"`},
		{`source="mcp"`, `tool="execute_sql"`, `outcome="error"`},
		{`source="mcp"`, `tool="list_datasets"`, `outcome="ok"`},
	} {
		if d := metricValue(after, "datachat_tool_calls_total", labels...) - metricValue(before, "datachat_tool_calls_total", labels...); d != 1 {
			t.Errorf("tool calls %v moved by %v, want 1", labels, d)
		}
	}
	if d := metricValue(after, "datachat_http_requests_total", `route="/mcp"`, `status="200"`); d < 4 {
		t.Errorf("/mcp requests: %v", d)
	}
}

// checkNodeMCP checks what mcp_client.mjs printed.
func checkNodeMCP(t *testing.T, out []byte, wantCount int, withConversation bool) {
	t.Helper()
	var got struct {
		Server struct{ Name string } `json:"server"`
		Tools  []struct {
			Name     string   `json:"name"`
			Required []string `json:"required"`
		} `json:"tools"`
		Datasets struct {
			Datasets []struct{ Name string } `json:"datasets"`
		} `json:"datasets"`
		SQL struct {
			IsError    bool `json:"isError"`
			Structured struct {
				Columns  []struct{ Name, Type string } `json:"columns"`
				Rows     [][]any                       `json:"rows"`
				RowCount int                           `json:"row_count"`
			} `json:"structured"`
			Text string `json:"text"`
		} `json:"sql"`
		Refused struct {
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
		} `json:"refused"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
		if slices.Contains(tool.Required, "conversation_id") != withConversation {
			t.Errorf("%s requires %v", tool.Name, tool.Required)
		}
	}
	slices.Sort(names)
	if want := []string{"describe_dataset", "describe_table", "execute_sql", "list_datasets", "list_tables", "load_dataset", "search_documents"}; got.Server.Name != "datachat" || !slices.Equal(names, want) {
		t.Errorf("server %q, tools %v, want %v", got.Server.Name, names, want)
	}
	if len(got.Datasets.Datasets) != 1 || got.Datasets.Datasets[0].Name != "penguins" {
		t.Errorf("datasets %+v", got.Datasets)
	}
	r := got.SQL.Structured
	if got.SQL.IsError || len(r.Rows) != 1 || fmt.Sprint(r.Rows[0][0]) != fmt.Sprint(wantCount) || r.RowCount != 1 || len(r.Columns) != 2 || r.Columns[0].Name != "n" || r.Columns[0].Type != "integer" {
		t.Errorf("execute_sql: %+v, want %d Adelie penguins", got.SQL, wantCount)
	}
	if !got.Refused.IsError || got.Refused.Text == "" {
		t.Errorf("the sandbox did not refuse read_csv('/etc/passwd'): %+v", got.Refused)
	}
}
