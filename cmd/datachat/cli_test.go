package main

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"datachat/internal/llmtest"
)

// TestHelpAndUsage runs the built command: help goes to stdout with status
// 0; a wrong command line gets the usage on stderr and status 2.
func TestHelpAndUsage(t *testing.T) {
	bin := datachatBinary(t)
	for _, tc := range []struct {
		args   []string
		status int
		want   string // in stdout for status 0, in stderr otherwise
	}{
		{[]string{"--help"}, 0, "Usage: datachat [--config FILE] COMMAND"},
		{[]string{"-h"}, 0, "Usage: datachat [--config FILE] COMMAND"},
		{[]string{"help"}, 0, "Usage: datachat [--config FILE] COMMAND"},
		{[]string{"help", "sql"}, 0, "Usage: datachat sql"},
		{[]string{"serve", "--help"}, 0, "Usage: datachat serve"},
		{[]string{"sql", "--help"}, 0, "-format"},
		{[]string{"ask", "-h"}, 0, "-doc FILE"},
		{[]string{"mcp", "--help"}, 0, "-conversation ID"},
		{[]string{"migrate", "--help"}, 0, "Usage: datachat migrate"},
		{[]string{"keys", "--help"}, 0, "datachat keys revoke ID"},
		{[]string{"keys", "create", "--help"}, 0, "-user NAME"},
		{[]string{}, 2, "Usage: datachat [--config FILE] COMMAND"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"--nope"}, 2, "flag provided but not defined: -nope"},
		{[]string{"help", "nope"}, 2, "Usage: datachat [--config FILE] COMMAND"},
		{[]string{"serve", "--nope"}, 2, "Usage: datachat serve"},
		{[]string{"serve", "extra"}, 2, "serve takes no arguments"},
		{[]string{"sql", "--format", "xml", "SELECT 1"}, 2, "Usage: datachat sql"},
		{[]string{"sql"}, 2, "want exactly one SQL statement"},
		{[]string{"ask", "--data"}, 2, "flag needs an argument: -data"},
		{[]string{"keys"}, 2, "keys: want create, list or revoke"},
		{[]string{"keys", "drop"}, 2, `unknown subcommand "drop"`},
		{[]string{"keys", "create"}, 2, "want --user NAME"},
		{[]string{"keys", "list", "--user", "x"}, 2, "flag provided but not defined: -user"},
		{[]string{"mcp", "--conversation", "x", "--data", "y.csv"}, 2, "not both"},
	} {
		cmd := exec.Command(bin, tc.args...)
		// No HOME and no data directory: help and usage need no configuration.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			status = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		out, quiet := stdout.String(), stderr.String()
		if tc.status != 0 {
			out, quiet = quiet, out
		}
		if status != tc.status || !strings.Contains(out, tc.want) || quiet != "" {
			t.Errorf("datachat %s: got status %d, stdout %q, stderr %q; want status %d and %q in %s alone",
				strings.Join(tc.args, " "), status, stdout.String(), stderr.String(), tc.status, tc.want, map[bool]string{true: "stdout", false: "stderr"}[tc.status == 0])
		}
	}
}

func TestHelpInProcess(t *testing.T) {
	out, stderr, err := runMain(t, testEnv(t, nil), "keys", "revoke", "--help")
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "datachat keys revoke ID") || stderr != "" {
		t.Errorf("keys revoke --help: got %v, stdout %q, stderr %q", err, out, stderr)
	}
}

// TestOneShotCommandsLogQuietly: sql, ask, mcp, keys and migrate log only
// warnings and errors, as text, unless DATACHAT_LOG_LEVEL or
// DATACHAT_LOG_FORMAT say otherwise.
func TestOneShotCommandsLogQuietly(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) AS n FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Reply: "344."},
	}})
	unset := map[string]string{"DATACHAT_LOG_LEVEL": "", "DATACHAT_LOG_FORMAT": "", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"}
	_, stderr, err := runMain(t, testEnv(t, unset), "ask", "--data", "testdata/penguins.csv", "How many penguins?")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "{") || strings.Contains(line, "level=") {
			t.Errorf("ask's stderr has a log line %q:\n%s", line, stderr)
		}
	}
	if !strings.Contains(stderr, "→ execute_sql") {
		t.Errorf("ask's stderr lacks the tool call:\n%s", stderr)
	}

	vars := map[string]string{"DATACHAT_LOG_LEVEL": "info", "DATACHAT_LOG_FORMAT": ""}
	if _, stderr, _ := runMain(t, testEnv(t, vars), "keys", "list"); !strings.Contains(stderr, `level=INFO msg="migrations applied"`) {
		t.Errorf("DATACHAT_LOG_LEVEL=info: keys list logged no info as text:\n%s", stderr)
	}
	vars["DATACHAT_LOG_FORMAT"] = "json"
	if _, stderr, _ := runMain(t, testEnv(t, vars), "keys", "list"); !strings.Contains(stderr, `"msg":"migrations applied"`) {
		t.Errorf("DATACHAT_LOG_FORMAT=json: keys list logged no JSON:\n%s", stderr)
	}
}
