package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat/internal/nodetest"
	"datachat/internal/testfiles"
)

// penguinsCSV writes testfiles' penguins.csv to a temporary directory and
// returns its absolute path.
func penguinsCSV(t *testing.T) string { return testfiles.Penguins(t, t.TempDir()) }

// mcpEnv is the environment of a spawned `datachat mcp` using dataDir.
func mcpEnv(dataDir string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"DATACHAT_DATA_DIR=" + dataDir, "DATACHAT_LOG_LEVEL=warn", "DATACHAT_LOG_FORMAT=text"}
}

// mcpOverPipe runs `datachat mcp` on penguins.csv with lines (JSON-RPC
// messages) as its stdin, and returns its stdout and stderr once it has
// exited.
func mcpOverPipe(t *testing.T, lines []string) ([]byte, string) {
	t.Helper()
	cmd := exec.Command(datachatBinary(t), "mcp", "--data", penguinsCSV(t))
	cmd.Env = mcpEnv(t.TempDir())
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("datachat mcp: %v\nstderr: %s", err, stderr.String())
	}
	return out, stderr.String()
}

// stdioSession runs `datachat mcp args…` and connects the Go SDK's client to it.
func stdioSession(t *testing.T, dataDir string, stderr *bytes.Buffer, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(datachatBinary(t), append([]string{"mcp"}, args...)...)
	cmd.Env = mcpEnv(dataDir)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr: %s", err, stderr)
	}
	return s
}

func sqlRows(t *testing.T, s *mcp.ClientSession, query string) ([][]any, string) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_sql", Arguments: map[string]any{"query": query}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		return nil, text
	}
	var r struct {
		Rows [][]any `json:"rows"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &r)
	return r.Rows, text
}

var convLine = regexp.MustCompile(`serving conversation (\S+) of user local`)

func TestMCPStdio(t *testing.T) {
	dataDir := t.TempDir()
	var stderr bytes.Buffer
	s := stdioSession(t, dataDir, &stderr, "--data", penguinsCSV(t))
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 7 {
		t.Errorf("%d tools", len(tools.Tools))
	}
	for _, tool := range tools.Tools {
		if b, _ := json.Marshal(tool.InputSchema); strings.Contains(string(b), "conversation_id") {
			t.Errorf("%s takes a conversation_id over stdio: %s", tool.Name, b)
		}
	}
	rows, text := sqlRows(t, s, "SELECT count(*) FROM penguins WHERE species = 'Adelie'")
	if len(rows) != 1 || fmt.Sprint(rows[0][0]) != fmt.Sprint(testfiles.AdelieCount) {
		t.Fatalf("execute_sql: %v %s", rows, text)
	}
	if err := s.Close(); err != nil {
		t.Errorf("datachat mcp did not exit cleanly: %v\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("table penguins: penguins.csv, %d rows", testfiles.PenguinsRows)) {
		t.Fatalf("stderr %q names no table", stderr.String())
	}

	// --conversation opens a stored conversation of user local: one made
	// on the page, with a key of user local.
	m, _ := startServe(t, testEnv(t, map[string]string{"DATACHAT_DATA_DIR": dataDir}))
	key, _, err := runMain(t, testEnv(t, map[string]string{"DATACHAT_DATA_DIR": dataDir}), "keys", "create", "--user", "local")
	if err != nil {
		t.Fatal(err)
	}
	key = strings.TrimSpace(key)
	base := "http://" + m.Addr()
	_, conv := do(t, "POST", base+"/api/conversations", key, `{"title":"Penguins"}`)
	id, _ := conv["id"].(string)
	if st, body := upload(t, base, key, id, penguinsCSV(t)); st != 201 {
		t.Fatalf("upload: %d %v", st, body)
	}
	stderr.Reset()
	s = stdioSession(t, dataDir, &stderr, "--conversation", id)
	if m := convLine.FindStringSubmatch(stderr.String()); m == nil || m[1] != id {
		t.Errorf("stderr %q does not name conversation %s", stderr.String(), id)
	}
	rows, text = sqlRows(t, s, "SELECT count(*) FROM penguins")
	if len(rows) != 1 || fmt.Sprint(rows[0][0]) != fmt.Sprint(testfiles.PenguinsRows) {
		t.Errorf("stored conversation: %v %s", rows, text)
	}
	if _, text := sqlRows(t, s, "COPY penguins TO '/tmp/x.csv'"); !strings.Contains(strings.ToLower(text), "refused") && !strings.Contains(text, "read-only") {
		t.Errorf("COPY … TO over MCP: %q", text)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v\nstderr: %s", err, stderr.String())
	}
}

func TestMCPStdioRefusals(t *testing.T) {
	env := testEnv(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--conversation", "nope"}, "not found"},
		{[]string{"mcp", "--conversation", "x", "--data", penguinsCSV(t)}, "not both"},
		{[]string{"mcp", "--data", "missing.csv"}, "missing.csv"},
		{[]string{"mcp", "extra"}, "unexpected"},
	} {
		_, _, err := runMain(t, env, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestMCPStdioNodeClient(t *testing.T) {
	nodetest.Require(t)
	bin := datachatBinary(t)
	abs := penguinsCSV(t)
	out := nodetest.Run(t, []string{"DATACHAT_DATA_DIR=" + t.TempDir(), "DATACHAT_LOG_LEVEL=warn"},
		"mcp_client.mjs", "stdio", "SELECT count(*) AS n, sum(body_mass_g) AS mass FROM penguins WHERE species = 'Adelie'", bin, "mcp", "--data", abs)
	var got struct {
		Tools []struct {
			Name     string   `json:"name"`
			Required []string `json:"required"`
		} `json:"tools"`
		SQL struct {
			IsError    bool `json:"isError"`
			Structured struct {
				Rows [][]any `json:"rows"`
			} `json:"structured"`
		} `json:"sql"`
		Refused struct {
			IsError bool `json:"isError"`
		} `json:"refused"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	if len(got.Tools) != 7 { // the five data tools, list_tables and describe_table
		t.Errorf("tools %+v", got.Tools)
	}
	if r := got.SQL.Structured.Rows; got.SQL.IsError || len(r) != 1 || fmt.Sprint(r[0][0]) != fmt.Sprint(testfiles.AdelieCount) || fmt.Sprint(r[0][1]) != fmt.Sprint(testfiles.AdelieBodyMass) {
		t.Errorf("execute_sql over stdio: %+v", got.SQL)
	}
	if !got.Refused.IsError {
		t.Errorf("the sandbox did not refuse read_csv('/etc/passwd') over stdio")
	}
}

// TestMCPStdioAnswersAfterStdinCloses: a client that writes its requests and
// closes stdin at once (as a script piping a file in does) gets an answer to
// every request before datachat mcp exits.
func TestMCPStdioAnswersAfterStdinCloses(t *testing.T) {
	requests := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_sql","arguments":{"query":"SELECT count(*) AS n FROM penguins"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_sql","arguments":{"query":"SELECT count(*) AS n FROM penguins WHERE species = 'Gentoo'"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
	}
	out, stderr := mcpOverPipe(t, requests)
	answers := map[float64]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var msg struct {
			ID     *float64        `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		if msg.ID != nil {
			answers[*msg.ID] = string(msg.Result) + string(msg.Error)
		}
	}
	for id, want := range map[float64]string{1: "protocolVersion", 2: fmt.Sprint(testfiles.PenguinsRows), 3: fmt.Sprint(testfiles.GentooCount), 4: "execute_sql"} {
		if got, ok := answers[id]; !ok {
			t.Errorf("request %v: no answer\nstdout:\n%s\nstderr: %s", id, out, stderr)
		} else if !strings.Contains(got, want) {
			t.Errorf("request %v: got %s, want it to contain %q", id, got, want)
		}
	}
}
