package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"datachat/internal/llmtest"
	"datachat/internal/sharedtest"
	"datachat/internal/testfiles"
)

func TestSQLCommand(t *testing.T) {
	env := testEnv(t, nil)
	dir := t.TempDir()
	penguins := testfiles.Penguins(t, dir)
	out, _, err := runMain(t, env, "sql", "--data", penguins, "SELECT species, count(*) AS n FROM penguins GROUP BY species ORDER BY species")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Adelie", fmt.Sprint(testfiles.AdelieCount), "Chinstrap", fmt.Sprint(testfiles.ChinstrapCount), "Gentoo", fmt.Sprint(testfiles.GentooCount)} {
		if !strings.Contains(out, line) {
			t.Errorf("table output lacks %q:\n%s", line, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "---") {
		t.Errorf("want header, rule and 3 rows:\n%s", out)
	}

	out, _, err = runMain(t, env, "sql", "--format", "csv", "--data", penguins, "SELECT sex, count(*) AS n FROM penguins GROUP BY sex ORDER BY sex NULLS FIRST")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("sex,n\n,%d\nFEMALE,%d\nMALE,%d\n", testfiles.UnknownSex, testfiles.FemaleCount, testfiles.MaleCount); !strings.HasPrefix(out, want) {
		t.Errorf("csv output (nulls as empty fields):\n%q", out)
	}

	out, _, err = runMain(t, env, "sql", "--format", "json", "--data", penguins, "--data", penguins,
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
		{[]string{"sql", "--data", penguins, "SELECT * FROM read_csv('/etc/passwd')"}},
		{[]string{"sql", "--data", penguins, "COPY penguins TO '/tmp/x.csv'"}},
		{[]string{"sql", "--data", filepath.Join(dir, "missing.csv"), "SELECT 1"}},
		{[]string{"sql", "--format", "xml", "SELECT 1"}},
		{[]string{"sql"}},
	} {
		if _, _, err := runMain(t, env, tc.args...); err == nil {
			t.Errorf("%q: got no error", tc.args)
		}
	}
}

func TestSQLCommandOnSharedCSV(t *testing.T) {
	titanic := sharedtest.Path(t, "data/csv/titanic.csv")
	out, _, err := runMain(t, testEnv(t, nil), "sql", "--format", "csv", "--data", titanic, "SELECT count(*) AS n FROM titanic")
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
	out, stderr, err := runMain(t, env, "ask", "--data", testfiles.Penguins(t, t.TempDir()), "How many penguins?")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := fmt.Sprintf("There are %d penguins.", testfiles.PenguinsRows); strings.TrimSpace(out) != want {
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
// a Chroma that is not running). It asks of testfiles' DMCA summary, whose
// page 17 alone answers and so comes first, and of the real dmca.pdf of
// ../shared, whose page 17 is among the excerpts given to the model.
func TestAskWithDocumentIgnoresServerRetrieval(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  func(t *testing.T) string
		want string // in the system prompt
	}{
		{"generated", func(t *testing.T) string { return testfiles.DMCA(t, t.TempDir()) }, fmt.Sprintf("[1] dmca.pdf, page %d", dmcaPage)},
		{"shared", func(t *testing.T) string { return sharedtest.Path(t, "data/docs/dmca.pdf") }, fmt.Sprintf("dmca.pdf, page %d", dmcaPage)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc(t)
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
			out, stderr, err := runMain(t, env, "ask", "--doc", doc, dmcaQuestion)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			// The answer, then the one source it cites.
			if answer, sources, _ := strings.Cut(out, "\n\nSources:\n"); answer != "Title V [1]." || !strings.HasPrefix(sources, "  [1] dmca.pdf, page ") || strings.Count(sources, "\n") != 1 {
				t.Errorf("stdout %q", out)
			}
			if !strings.Contains(system, tc.want) {
				t.Errorf("system prompt lacks %q:\n%.2000s", tc.want, system)
			}
		})
	}
}
