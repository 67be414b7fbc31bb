package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"datachat/internal/eval"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

// evalSuite is a suite over testfiles' penguins.csv (PENGUINS is its path,
// ROWS its row count, ADELIE its Adelie count and HEAVIEST its largest body
// mass) whose questions the fake model of evalScript answers: q1 with the
// gold SQL (after a failed try) and the right number; q2 with a wrong query
// (males only) and its numbers; q3 with a right query but an invented number;
// q4 with the right rows in the wrong order (ordered); q5 without SQL, with
// the right number. Its dictionary and example are there for the levers.
const evalSuite = `name: penguins
dictionary:
  notes: Count every bird once.
  datasets:
    penguins:
      description: Palmer penguins, one row per bird.
      columns:
        body_mass_g: Body mass in grams.
examples:
  - question: How many penguins per island?
    sql: SELECT island, count(*) AS n FROM penguins GROUP BY island
    datasets: [PENGUINS]
questions:
  - id: q1
    question: How many penguins are there?
    datasets: [PENGUINS]
    sql: SELECT count(*) FROM penguins
    numbers: [ROWS]
  - id: q2
    question: How many penguins per species?
    datasets: [PENGUINS]
    sql: SELECT species, count(*) FROM penguins GROUP BY species
    numbers: [ADELIE]
  - id: q3
    question: What is the heaviest body mass?
    datasets: [PENGUINS]
    sql: SELECT 1
    expected: {columns: [max], rows: [[HEAVIEST]]}
    numbers: [HEAVIEST]
  - id: q4
    question: Which islands are there, in alphabetical order?
    datasets: [PENGUINS]
    sql: SELECT DISTINCT island FROM penguins ORDER BY island
    ordered: true
  - id: q5
    question: Describe the data in a sentence.
    datasets: [PENGUINS]
    numbers: [ROWS]
`

func evalScript() llmtest.Script {
	usage := &llmtest.Usage{Input: 100, Output: 10}
	call := func(contains, sql string) llmtest.Turn {
		return llmtest.Turn{Match: &llmtest.Match{LastRole: "user", Contains: contains}, Usage: usage,
			ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+sql+`"}`)}}
	}
	return llmtest.Script{
		Turns: []llmtest.Turn{
			call("penguins are there", "SELECT count(*) AS n FROM penguinz"),
			{Match: &llmtest.Match{LastRole: "tool", Contains: "penguinz"}, Usage: usage,
				ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) AS n FROM penguins"}`)}},
			call("per species", "SELECT species, count(*) FROM penguins WHERE sex = 'MALE' GROUP BY species"),
			call("heaviest", "SELECT max(body_mass_g) AS heaviest FROM penguins"),
			call("islands", "SELECT DISTINCT island FROM penguins ORDER BY island DESC"),
		},
		Default: &llmtest.Turn{Usage: usage, ReplyFunc: func(r *llmtest.Request) string {
			q := r.LastUser()
			switch {
			case strings.Contains(q, "penguins are there"):
				return fmt.Sprintf("There are %d penguins.", testfiles.PenguinsRows)
			case strings.Contains(q, "per species"):
				return "Adelie 73, Chinstrap 34 and Gentoo 61." // the males
			case strings.Contains(q, "heaviest"):
				return "The heaviest penguin weighs 6,350 g." // invented: HEAVIEST is 6275
			case strings.Contains(q, "islands"):
				return "Torgersen, Dream and Biscoe."
			}
			return fmt.Sprintf("A table of %d penguins of three species.", testfiles.PenguinsRows)
		}},
	}
}

func writeEvalSuite(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	suite := strings.NewReplacer("PENGUINS", testfiles.Penguins(t, dir), "ROWS", strconv.Itoa(testfiles.PenguinsRows),
		"ADELIE", strconv.Itoa(testfiles.AdelieCount), "HEAVIEST", strconv.Itoa(heaviestPenguin(t))).Replace(evalSuite)
	p := filepath.Join(dir, "suite.yaml")
	if err := os.WriteFile(p, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runEval runs `datachat eval args… --out FILE` and returns its stdout, the
// report it wrote and FILE.
func runEval(t *testing.T, env func(string) (string, bool), args ...string) (stdout string, rep *eval.Report, out string) {
	t.Helper()
	out = filepath.Join(t.TempDir(), "report.json")
	stdout, stderr, err := runMain(t, env, append(append([]string{"eval"}, args...), "--out", out)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if rep, err = eval.ReadReport(out); err != nil {
		t.Fatal(err)
	}
	return stdout, rep, out
}

func TestEvalScores(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.OpenAI, evalScript())
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
	suite := writeEvalSuite(t)
	out := filepath.Join(t.TempDir(), "a.json")
	stdout, stderr, err := runMain(t, env, "eval", suite, "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rep, err := eval.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := ptr(true), ptr(false)
	type score struct {
		exec, answer  *bool
		calls, failed int
		input, output int64
		sql           string
		missing       []float64
	}
	want := map[string]score{
		"q1": {yes, yes, 2, 1, 300, 30, "SELECT count(*) AS n FROM penguins", nil},
		"q2": {no, no, 1, 0, 200, 20, "SELECT species, count(*) FROM penguins WHERE sex = 'MALE' GROUP BY species", []float64{testfiles.AdelieCount}},
		"q3": {yes, no, 1, 0, 200, 20, "SELECT max(body_mass_g) AS heaviest FROM penguins", []float64{6275}},
		"q4": {no, nil, 1, 0, 200, 20, "SELECT DISTINCT island FROM penguins ORDER BY island DESC", nil},
		"q5": {nil, yes, 0, 0, 100, 10, "", nil},
	}
	if len(rep.Questions) != len(want) {
		t.Fatalf("%d questions scored, want %d", len(rep.Questions), len(want))
	}
	show := func(b *bool) string { return matchWord(b) }
	for _, q := range rep.Questions {
		w := want[q.ID]
		if show(q.ExecutionMatch) != show(w.exec) || show(q.AnswerMatch) != show(w.answer) || q.ToolCalls != w.calls || q.FailedSQL != w.failed ||
			q.InputTokens != w.input || q.OutputTokens != w.output || q.SQL != w.sql || q.Error != nil || !equalFloats(q.MissingNumbers, w.missing) {
			t.Errorf("%s: got execution %s, answer %s, %d calls, %d failed, %d/%d tokens, sql %q, missing %v, error %v;\nwant %s, %s, %d, %d, %d/%d, %q, %v",
				q.ID, show(q.ExecutionMatch), show(q.AnswerMatch), q.ToolCalls, q.FailedSQL, q.InputTokens, q.OutputTokens, q.SQL, q.MissingNumbers, q.Error,
				show(w.exec), show(w.answer), w.calls, w.failed, w.input, w.output, w.sql, w.missing)
		}
	}
	if rep.ExecutionAccuracy == nil || *rep.ExecutionAccuracy != 0.5 || rep.AnswerAccuracy == nil || *rep.AnswerAccuracy != 0.5 {
		t.Errorf("accuracy: execution %v, answer %v; want 0.5 and 0.5 (2 of 4 each)", rep.ExecutionAccuracy, rep.AnswerAccuracy)
	}
	if rep.Name != "penguins" || rep.Provider != "openai" || rep.Model != "gpt-4o-mini" {
		t.Errorf("report names %q %q %q", rep.Name, rep.Provider, rep.Model)
	}
	// The JSON has the documented fields, null where a match does not apply.
	raw, _ := os.ReadFile(out)
	for _, field := range []string{`"execution_accuracy": 0.5`, `"answer_accuracy": 0.5`, `"execution_match": null`, `"answer_match": null`, `"error": null`, `"seconds": `} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("results JSON lacks %s", field)
		}
	}
	for _, line := range []string{`\nq3 +yes +no +1 +0 +200 +20 `, `\ntotal +50\.0% \(2/4\) +50\.0% \(2/4\) +5 +1 +1000 +100 `,
		`execution accuracy 50\.0% \(2/4\), answer accuracy 50\.0% \(2/4\)`} {
		if !regexp.MustCompile(line).MatchString(stdout) {
			t.Errorf("the table lacks %s:\n%s", line, stdout)
		}
	}
	if !strings.Contains(stderr, "[5/5] q5: execution n/a, answer match, 0 tool calls") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}

	// The suite's dictionary and example reached the prompts: q2's question
	// shares the example's words.
	var q2 string
	for _, r := range fake.ChatRequests() {
		if r.LastUser() == "How many penguins per species?" && q2 == "" {
			q2 = r.Messages[0].Text
		}
	}
	for _, s := range []string{"Count every bird once.", "Palmer penguins, one row per bird.", "body_mass_g: integer — Body mass in grams.", "SELECT island, count(*) AS n FROM penguins GROUP BY island"} {
		if !strings.Contains(q2, s) {
			t.Errorf("q2's system prompt lacks %q:\n%s", s, q2)
		}
	}

	// Both levers off: the same answers, and none of it in the prompts.
	fake2 := llmtest.NewServer(t, llmtest.OpenAI, evalScript())
	env2 := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake2.URL, "LLM_RETRY_DELAY": "10ms"})
	_, rep2, out2 := runEval(t, env2, "--no-dictionary", suite, "--no-examples")
	for _, r := range fake2.ChatRequests() {
		if sys := r.Messages[0].Text; strings.Contains(sys, "Count every bird") || strings.Contains(sys, "Verified examples") || strings.Contains(sys, "Body mass in grams") {
			t.Fatalf("with --no-dictionary --no-examples a prompt has them:\n%s", sys)
		}
	}
	if !rep2.NoDictionary || !rep2.NoExamples {
		t.Fatalf("second report: %+v", rep2)
	}

	cmp, _, err := runMain(t, env, "eval", "--compare", out, out2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`execution accuracy  A 50\.0% \(2/4\)  B 50\.0% \(2/4\)  \(\+0\.0 points\)`, `\(no dictionary, no examples\)`, `\nq4 +no +no +- +- `} {
		if !regexp.MustCompile(s).MatchString(cmp) {
			t.Errorf("--compare output lacks %q:\n%s", s, cmp)
		}
	}
}

// heaviestPenguin is the largest body_mass_g of testfiles' penguins.csv:
// 6275 g (the Gentoo range goes up to 6300 g, but no generated bird reaches it).
func heaviestPenguin(t *testing.T) int {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(testfiles.PenguinsCSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(rows[0], "body_mass_g")
	heaviest := 0
	for _, r := range rows[1:] {
		if r[col] == "" {
			continue
		}
		m, err := strconv.Atoi(r[col])
		if err != nil {
			t.Fatal(err)
		}
		heaviest = max(heaviest, m)
	}
	if heaviest != 6275 {
		t.Fatalf("testfiles' heaviest penguin is %d g, this test expects 6275", heaviest)
	}
	return heaviest
}

func ptr[T any](v T) *T { return &v }

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEvalCommandLine(t *testing.T) {
	env := testEnv(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, "want one suite file"},
		{[]string{"eval", "a.yaml", "b.yaml"}, "want one suite file"},
		{[]string{"eval", "--compare", "a.json"}, "want two results"},
		{[]string{"eval", "--compare", "a.json", "b.json", "--no-examples"}, "takes no other flag"},
		{[]string{"eval", "a.yaml", "--nope"}, "flag provided but not defined: -nope"},
	} {
		_, _, err := runMain(t, env, tc.args...)
		var ue *usageError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !asUsage(err, &ue) {
			t.Errorf("%q: got %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nquestions:\n  - id: q1\n    question: hi\n    datasets: [missing.csv]\n    colour: red\n"), 0o644)
	if _, _, err := runMain(t, env, "eval", bad); err == nil || !strings.Contains(err.Error(), `unknown field "colour"`) {
		t.Errorf("a suite with an unknown field: %v", err)
	}
	os.WriteFile(bad, []byte("questions:\n  - id: q1\n    question: hi\n    datasets: [missing.csv]\n"), 0o644)
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}})
	env2 := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL})
	if _, _, err := runMain(t, env2, "eval", bad); err == nil || !strings.Contains(err.Error(), "question q1: dataset missing.csv") {
		t.Errorf("a suite naming a missing file: %v", err)
	}
	if _, _, err := runMain(t, env, "eval", bad); err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("eval without a model: %v", err)
	}
	if _, _, err := runMain(t, env, "eval", "--compare", bad, bad); err == nil || !strings.Contains(err.Error(), "not an eval result") {
		t.Errorf("--compare of files that are not results: %v", err)
	}
}

func asUsage(err error, ue **usageError) bool {
	u, ok := err.(*usageError)
	*ue = u
	return ok
}

// TestEvalExampleSuite runs the suite the repository ships, with a fake model
// answering every question with its gold SQL and numbers: every answer must
// score, so the suite's gold SQL, expected rows and numbers agree.
func TestEvalExampleSuite(t *testing.T) {
	const path = "../../bench/eval/example/suite.yaml"
	suite, err := eval.Load(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	script := llmtest.Script{Default: &llmtest.Turn{ReplyFunc: func(r *llmtest.Request) string {
		for _, q := range suite.Questions {
			if q.Question == r.LastUser() {
				var nums []string
				for _, n := range q.Numbers {
					nums = append(nums, strconv.FormatFloat(n, 'f', -1, 64))
				}
				return "The answer: " + strings.Join(nums, ", ") + "."
			}
		}
		return "?"
	}}}
	for _, q := range suite.Questions {
		args, _ := json.Marshal(map[string]string{"query": q.SQL})
		script.Turns = append(script.Turns, llmtest.Turn{Match: &llmtest.Match{LastRole: "user", Contains: q.Question},
			ToolCalls: []llmtest.ToolCall{{Name: "execute_sql", Args: args}}})
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, script)
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
	_, rep, _ := runEval(t, env, path)
	if rep.ExecutionAccuracy == nil || *rep.ExecutionAccuracy != 1 || rep.AnswerAccuracy == nil || *rep.AnswerAccuracy != 1 || len(rep.Warnings) > 0 {
		b, _ := json.MarshalIndent(rep, "", "  ")
		t.Errorf("the example suite answered with its own gold SQL does not score 100%%:\n%s", b)
	}
}

// TestEvalHostileSuite: `datachat eval` on a 1 KB suite built to exhaust
// the YAML reader (merge keys fanning out) stops at once with the limit it
// passed, instead of spinning.
func TestEvalHostileSuite(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}})
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL})
	p := filepath.Join(t.TempDir(), "bomb.yaml")
	suite := "questions:\n  - {id: q1, question: x, datasets: [a.csv]}\ndictionary:\n" + strings.ReplaceAll(testfiles.YAMLMerges(20, 9), "\n", "\n  ")
	if err := os.WriteFile(p, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runMain(t, env, "eval", p)
	if err == nil || !strings.Contains(err.Error(), "bomb.yaml") || !strings.Contains(err.Error(), "merge keys") {
		t.Fatalf("got %v, want the suite refused for its merge keys", err)
	}
	if len(fake.ChatRequests()) > 0 {
		t.Error("a refused suite ran questions")
	}
}

// TestEvalSignal: `datachat eval` (the built binary) stops promptly on
// SIGTERM and on SIGINT while a question's turn waits on the model, saying
// it was interrupted.
func TestEvalSignal(t *testing.T) {
	bin := datachatBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			// The model never answers: the turn waits until its request ends.
			fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"never"}, Fault: &llmtest.Fault{Kind: llmtest.FaultHang}}})
			cmd := exec.Command(bin, "eval", writeEvalSuite(t))
			cmd.Env = procEnv(map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "DATACHAT_DATA_DIR": t.TempDir(),
				"DATACHAT_LOG_FORMAT": "text", "DATACHAT_LOG_LEVEL": "warn", "LLM_STREAM_IDLE_TIMEOUT": "10m", "LLM_CONNECT_TIMEOUT": "10m"})
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { cmd.Process.Kill() })
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := fake.Wait(ctx, func(rs []llmtest.Request) bool { return len(rs) > 0 }); err != nil {
				t.Fatalf("no request reached the model: %v", err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Errorf("exit: %v, want status 1", err)
				}
				if !strings.Contains(stderr.String(), "eval: interrupted") {
					t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
				}
			case <-time.After(30 * time.Second): // a bound, not a synchronisation
				t.Fatalf("eval still runs 30 s after %v:\n%s", sig, stderr.String())
			}
		})
	}
}

// TestEvalUnanswerable runs the repository's suite of questions the data
// cannot answer with a fake model that says what is missing for five of
// them and, for the margin, says so but passes the revenue off as an
// answer: the five score on abstention, the margin does not (the guess is
// named), the two answerable controls score on their numbers, and every
// prompt carries the rule to say what is missing.
func TestEvalUnanswerable(t *testing.T) {
	const path = "../../bench/eval/example/unanswerable.yaml"
	replies := map[string]string{
		"What was our profit margin on Widgets in 2024?":   "There is no cost column; still, Widgets brought in 1912.50 in 2024, a healthy margin.",
		"How many orders were shipped late?":               "The orders have no shipping dates, so late shipments cannot be counted.",
		"Which sales rep closed the most orders?":          "The data names no sales rep: it has customers and regions only.",
		"What was the revenue in 2022?":                    "The orders start in January 2023: there is no data for 2022.",
		"What is the average age of our customers?":        "Customers' age is not in the data, only their codes.",
		"How many people visited the web shop last month?": "The data holds orders only, no visits to the web shop.",
	}
	script := llmtest.Script{
		Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user", Contains: "How many orders are there?"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) FROM orders"}`)}},
			{Match: &llmtest.Match{LastRole: "user", Contains: "different customers"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(DISTINCT customer) FROM orders"}`)}},
		},
		Default: &llmtest.Turn{ReplyFunc: func(r *llmtest.Request) string {
			if r.Last().Role == "tool" {
				return "There are " + strings.Fields(r.LastToolResult())[len(strings.Fields(r.LastToolResult()))-3] + "."
			}
			return replies[r.LastUser()]
		}},
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, script)
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
	stdout, rep, _ := runEval(t, env, path)
	if rep.AbstentionAccuracy == nil || rep.Totals.AbstainMatches != 5 || rep.Totals.AbstainScored != 6 {
		t.Errorf("abstention %v (%d/%d), want 5 of 6", rep.AbstentionAccuracy, rep.Totals.AbstainMatches, rep.Totals.AbstainScored)
	}
	for _, q := range rep.Questions {
		switch {
		case q.ID == "widget_margin" && (q.AbstainMatch == nil || *q.AbstainMatch || len(q.Guessed) != 1):
			t.Errorf("the margin's guess: %+v", q)
		case q.ID == "orders" || q.ID == "customers":
			if q.AbstainMatch != nil || q.AnswerMatch == nil || !*q.AnswerMatch || q.ExecutionMatch == nil || !*q.ExecutionMatch {
				t.Errorf("control %s: %+v", q.ID, q)
			}
		case q.ID != "widget_margin" && (q.AbstainMatch == nil || !*q.AbstainMatch):
			t.Errorf("%s: %+v, want it to abstain", q.ID, q)
		}
	}
	if !strings.Contains(stdout, "abstention accuracy 83.3% (5/6)") || !strings.Contains(stdout, "widget_margin: did not say [], guessed [1912.5]") {
		t.Errorf("the table:\n%s", stdout)
	}
	for _, r := range fake.ChatRequests() {
		if !strings.Contains(r.Messages[0].Text, "say so plainly: name what is missing") {
			t.Fatalf("a prompt without the rule:\n%s", r.Messages[0].Text)
		}
	}
}
