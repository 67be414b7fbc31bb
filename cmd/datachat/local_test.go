package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat/internal/llmtest"
)

// sharedData returns ../shared/data (beside the repository), or skips.
func sharedData(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("../shared/data is absent (a user's clone has no ../shared): %v", err)
	}
	return dir
}

func TestSQLCommand(t *testing.T) {
	env := testEnv(t, nil)
	out, _, err := runMain(t, env, "sql", "--data", "testdata/penguins.csv", "SELECT species, count(*) AS n FROM penguins GROUP BY species ORDER BY species")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Adelie", "152", "Chinstrap", "68", "Gentoo", "124"} {
		if !strings.Contains(out, line) {
			t.Errorf("table output lacks %q:\n%s", line, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "---") {
		t.Errorf("want header, rule and 3 rows:\n%s", out)
	}

	out, _, err = runMain(t, env, "sql", "--format", "csv", "--data", "testdata/penguins.csv", "SELECT sex, count(*) AS n FROM penguins GROUP BY sex ORDER BY sex NULLS FIRST")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "sex,n\n,11\nFEMALE,165\nMALE,168\n") {
		t.Errorf("csv output (nulls as empty fields):\n%q", out)
	}

	out, _, err = runMain(t, env, "sql", "--format", "json", "--data", "testdata/penguins.csv", "--data", "testdata/penguins.csv",
		"SELECT count(*) AS n FROM penguins JOIN penguins_2 USING (species)")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Columns  []struct{ Name, Type string }
		Rows     [][]any
		RowCount int `json:"row_count"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.RowCount != 1 || res.Columns[0].Type != "integer" {
		t.Errorf("json output %q: %v", out, err)
	}

	for _, tc := range []struct{ args []string }{
		{[]string{"sql", "--data", "testdata/penguins.csv", "SELECT * FROM read_csv('/etc/passwd')"}},
		{[]string{"sql", "--data", "testdata/penguins.csv", "COPY penguins TO '/tmp/x.csv'"}},
		{[]string{"sql", "--data", "testdata/missing.csv", "SELECT 1"}},
		{[]string{"sql", "--format", "xml", "SELECT 1"}},
		{[]string{"sql"}},
	} {
		if _, _, err := runMain(t, env, tc.args...); err == nil {
			t.Errorf("%q: got no error", tc.args)
		}
	}
}

func TestSQLCommandOnSharedCSV(t *testing.T) {
	data := sharedData(t)
	out, _, err := runMain(t, testEnv(t, nil), "sql", "--format", "csv", "--data", filepath.Join(data, "csv", "titanic.csv"), "SELECT count(*) AS n FROM titanic")
	if err != nil {
		t.Fatal(err)
	}
	if out != "n\n891\n" {
		t.Errorf("titanic count: got %q, want 891", out)
	}
}

func TestAskCommand(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) AS n FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
			lines := strings.Split(r.LastToolResult(), "\n")
			return "There are " + lines[1] + " penguins."
		}},
	}})
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
	out, stderr, err := runMain(t, env, "ask", "--data", "testdata/penguins.csv", "How many penguins?")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.TrimSpace(out) != "There are 344 penguins." {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(stderr, "execute_sql") || !strings.Contains(stderr, "1 rows") {
		t.Errorf("stderr lacks the tool call: %q", stderr)
	}

	_, _, err = runMain(t, testEnv(t, nil), "ask", "hello")
	if err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("no provider: got %v", err)
	}
}

// TestAskWithDocumentIgnoresServerRetrieval: `ask` keeps its documents in its
// own temporary index, whatever DATACHAT_RETRIEVAL names for the server (here
// a Chroma that is not running).
func TestAskWithDocumentIgnoresServerRetrieval(t *testing.T) {
	var system string
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{
		ReplyFunc: func(r *llmtest.Request) string {
			system = r.Messages[0].Text
			return "Title V [1]."
		},
	}})
	env := testEnv(t, map[string]string{
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms",
		"DATACHAT_RETRIEVAL": "chroma", "CHROMA_URL": "http://127.0.0.1:1", "EMBEDDING_PROVIDER": "openai",
	})
	out, stderr, err := runMain(t, env, "ask", "--doc", "testdata/dmca.pdf", dmcaQuestion)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.TrimSpace(out) != "Title V [1]." {
		t.Errorf("stdout %q", out)
	}
	if want := fmt.Sprintf("dmca.pdf, page %d", dmcaPage); !strings.Contains(system, want) {
		t.Errorf("system prompt lacks %q:\n%.2000s", want, system)
	}
}
