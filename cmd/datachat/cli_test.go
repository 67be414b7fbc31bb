package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

// TestHelpAndUsage runs the built command: help goes to stdout with status
// 0; a wrong command line gets the usage on stderr and status 2.
func TestHelpAndUsage(t *testing.T) {
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
		{[]string{"sources", "--help"}, 0, "datachat sources add NAME --url URL"},
		{[]string{"help", "sources"}, 0, "-all-users"},
		{[]string{"sources", "add", "--help"}, 0, "-tables PATTERNS"},
		{[]string{"sources"}, 2, "sources: want add, list or remove"},
		{[]string{"sources", "drop"}, 2, `unknown subcommand "drop"`},
		{[]string{"sources", "add", "x"}, 2, "want --url URL"},
		{[]string{"sources", "add", "--url", "postgres://u:p@h/db"}, 2, "want one NAME"},
		{[]string{"sources", "add", "x", "--url", "postgres://u:p@h/db", "--users", "a", "--all-users"}, 2, "not both"},
		{[]string{"sources", "remove"}, 2, "want the source's NAME"},
		{[]string{"sources", "list", "x"}, 2, "takes no arguments"},
	} {
		// No HOME and no data directory: help and usage need no configuration.
		stdout, stderr, status := runBinary(t, []string{"PATH=" + os.Getenv("PATH")}, "", tc.args...)
		out, quiet := stdout, stderr
		if tc.status != 0 {
			out, quiet = quiet, out
		}
		if status != tc.status || !strings.Contains(out, tc.want) || quiet != "" {
			t.Errorf("datachat %s: got status %d, stdout %q, stderr %q; want status %d and %q in %s alone",
				strings.Join(tc.args, " "), status, stdout, stderr, tc.status, tc.want, map[bool]string{true: "stdout", false: "stderr"}[tc.status == 0])
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
	_, stderr, err := runMain(t, testEnv(t, unset), "ask", "--data", testfiles.Penguins(t, t.TempDir()), "How many penguins?")
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

// userEnv is the environment of a user who set no DATACHAT_DATA_DIR: the
// data directory is the default under home.
func userEnv(t *testing.T, home string, vars map[string]string) func(string) (string, bool) {
	t.Helper()
	all := map[string]string{"DATACHAT_DATA_DIR": "", "HOME": home}
	for k, v := range vars {
		all[k] = v
	}
	return testEnv(t, all)
}

// TestDefaultDataDirFromAnyDirectory: a key created in one directory is
// listed from another, both commands naming on stderr the one data
// directory, created 0700 under the user's home.
func TestDefaultDataDirFromAnyDirectory(t *testing.T) {
	home := t.TempDir()
	env := userEnv(t, home, nil)
	dataDir := filepath.Join(home, ".local", "share", "datachat")
	announce := "datachat: data directory " + dataDir + " (default); database " + filepath.Join(dataDir, "datachat.db") + " (SQLite)\n"

	t.Chdir(t.TempDir())
	key, stderr, err := runMain(t, env, "keys", "create", "--user", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^dck_\S+\n$`).MatchString(key) {
		t.Errorf("keys create: stdout %q, want the key alone", key)
	}
	if !strings.HasPrefix(stderr, announce) {
		t.Errorf("keys create: stderr %q does not start with %q", stderr, announce)
	}
	if fi, err := os.Stat(dataDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory: %v, %v; want mode 0700", fi, err)
	}

	t.Chdir(t.TempDir())
	list, stderr, err := runMain(t, env, "keys", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "alice") {
		t.Errorf("keys list from another directory: %q lacks alice", list)
	}
	if !strings.HasPrefix(stderr, announce) {
		t.Errorf("keys list: stderr %q does not start with %q", stderr, announce)
	}

	// XDG_DATA_HOME moves it; DATACHAT_DATA_DIR overrides both.
	xdg := t.TempDir()
	_, stderr, err = runMain(t, userEnv(t, home, map[string]string{"XDG_DATA_HOME": xdg}), "migrate")
	if want := "data directory " + filepath.Join(xdg, "datachat") + " (default)"; err != nil || !strings.Contains(stderr, want) {
		t.Errorf("XDG_DATA_HOME: got %v, stderr %q, want %q", err, stderr, want)
	}
	dir := t.TempDir()
	_, stderr, err = runMain(t, userEnv(t, home, map[string]string{"XDG_DATA_HOME": xdg, "DATACHAT_DATA_DIR": dir}), "migrate")
	if want := "data directory " + dir + " (DATACHAT_DATA_DIR)"; err != nil || !strings.Contains(stderr, want) {
		t.Errorf("DATACHAT_DATA_DIR: got %v, stderr %q, want %q", err, stderr, want)
	}
}

// TestLegacyDataDir: where ./datachat-data holds an earlier datachat's data
// and the default does not exist yet, a command changes nothing and says how
// to move the data, keep it, or start afresh.
func TestLegacyDataDir(t *testing.T) {
	home := t.TempDir()
	env := userEnv(t, home, nil)
	dataDir := filepath.Join(home, ".local", "share", "datachat")
	work := t.TempDir()
	t.Chdir(work)
	old := filepath.Join(work, "datachat-data")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err := runMain(t, env, "keys", "list")
	if err == nil {
		t.Fatal("keys list beside ./datachat-data: got no error")
	}
	for _, want := range []string{old, "mv " + old + " " + dataDir, "export DATACHAT_DATA_DIR=" + old, "mkdir -p -m 700 " + dataDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the default data directory was created: %v", err)
	}
	// Given DATACHAT_DATA_DIR, or once the default exists, it is not asked.
	if _, _, err := runMain(t, userEnv(t, home, map[string]string{"DATACHAT_DATA_DIR": old}), "keys", "list"); err != nil {
		t.Errorf("DATACHAT_DATA_DIR=./datachat-data: %v", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runMain(t, env, "keys", "list"); err != nil {
		t.Errorf("with the default directory made: %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@db:5432/x":                      "postgres://u:xxxxx@db:5432/x",
		"postgres://u@db/x?password=secret&sslmode=disable":  "postgres://u@db/x?password=xxxxx&sslmode=disable",
		"postgresql://db/x?sslmode=require":                  "postgresql://db/x?sslmode=require",
		"postgres://u:secret@db/x?application_name=datachat": "postgres://u:xxxxx@db/x?application_name=datachat",
	} {
		if got := redactURL(in); got != want || strings.Contains(got, "secret") {
			t.Errorf("redactURL(%q): got %q, want %q", in, got, want)
		}
	}
}

// TestAskTextDocumentAndNoModel: a Markdown document has no pages, and a
// source without a page names none; without a model, ask says to run it
// again, not to restart a server.
func TestAskTextDocumentAndNoModel(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(doc, []byte("# Vessel hulls\n\nTitle V of the DMCA protects the design of vessel hulls.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Reply: "Title V [1]."}})
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
	out, stderr, err := runMain(t, env, "ask", "--doc", doc, "Which title protects vessel hulls?")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if out != "Title V [1].\n\nSources:\n  [1] notes.md, section \"Vessel hulls\"\n" {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(stderr, "document notes.md: text, 1 chunk\n") {
		t.Errorf("stderr does not say the document is text or name its source:\n%s", stderr)
	}
	if strings.Contains(stderr, "0 pages") || strings.Contains(stderr, "<nil>") || strings.Contains(stderr, "page") {
		t.Errorf("stderr speaks of pages of a text document:\n%s", stderr)
	}
	if !strings.Contains(stderr, "ask keeps nothing") {
		t.Errorf("stderr does not say ask keeps nothing:\n%s", stderr)
	}

	_, stderr, err = runMain(t, testEnv(t, nil), "ask", "hello")
	if err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY") || !strings.Contains(err.Error(), "run the command again") || strings.Contains(err.Error(), "restart") {
		t.Errorf("no provider: got %v, want the variables to set and no restart", err)
	}
	if strings.Contains(stderr, "no LLM provider configured") {
		t.Errorf("no provider: ask also logged it:\n%s", stderr)
	}
}
