package main

// Tests of the command line as a new user meets it in the first hour (issue
// 24): --config after the command, datachat version, sql without a row cap,
// ask's parts and sources, keys create's sign-in URL, serve's log on a
// terminal, eval's exit status, mcp --data leaving nothing behind and
// answering a malformed line.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"datachat/internal/llmtest"
	"datachat/internal/testenv"
	"datachat/internal/testfiles"
	"datachat/internal/testlog"
)

// runBinary runs the built datachat with env and returns its stdout, stderr
// and exit status.
func runBinary(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(datachatBinary(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
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
	return stdout.String(), stderr.String(), status
}

// TestConfigAfterCommand: --config works after the command as before it,
// for every kind of command, and twice with two files is a wrong command
// line.
func TestConfigAfterCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "datachat.yaml")
	if err := os.WriteFile(cfg, []byte("DATACHAT_DATA_DIR: "+dir+"\nDATACHAT_ADDR: 127.0.0.1:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The environment names no data directory: only the file can.
	env := func(k string) (string, bool) {
		if k == "HOME" {
			return t.TempDir(), true
		}
		return "", false
	}
	for _, args := range [][]string{
		{"keys", "create", "--user", "alice", "--config", cfg},
		{"keys", "create", "--config", cfg, "--user", "bob"},
		{"--config", cfg, "keys", "create", "--user", "carol"},
		{"keys", "create", "--user=dave", "-config=" + cfg},
	} {
		if _, stderr, err := runMain(t, env, args...); err != nil || !strings.Contains(stderr, "data directory "+dir) {
			t.Fatalf("%q: %v, stderr %q; want the data directory of the file", args, err, stderr)
		}
	}
	list, _, err := runMain(t, env, "keys", "list", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob", "carol", "dave"} {
		if !strings.Contains(list, user) {
			t.Errorf("keys list --config: %q lacks %s", list, user)
		}
	}
	for _, args := range [][]string{
		{"migrate", "--config", cfg},
		{"sources", "list", "--config", cfg},
		{"audit", "--limit", "1", "--config", cfg},
		{"keys", "revoke", "nope", "--config", cfg}, // after the positional argument too
	} {
		_, stderr, err := runMain(t, env, args...)
		if !strings.Contains(stderr, "data directory "+dir) {
			t.Errorf("%q: %v, stderr %q; want the data directory of the file", args, err, stderr)
		}
	}
	m := &Main{Env: env, Stdout: io.Discard, Stderr: io.Discard}
	if err := m.ParseFlags(context.Background(), []string{"serve", "--config", cfg}); err != nil {
		t.Fatal(err)
	}
	if m.Config.DataDir != dir || m.ConfigPath != cfg {
		t.Errorf("serve --config: data dir %q, config %q", m.Config.DataDir, m.ConfigPath)
	}
	// sql reads the file too: a bad value there stops it.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("DATACHAT_QUERY_TIMEOUT: forever\n"), 0o600)
	if _, _, err := runMain(t, env, "sql", "SELECT 1", "--config", bad); err == nil || !strings.Contains(err.Error(), "DATACHAT_QUERY_TIMEOUT") {
		t.Errorf("sql --config with a bad value: got %v, want an error naming DATACHAT_QUERY_TIMEOUT", err)
	}
	var ue *usageError
	if _, _, err := runMain(t, env, "--config", cfg, "migrate", "--config", bad); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--config") {
		t.Errorf("two --config files: got %v, want a usage error naming --config", err)
	}
	// The same file twice is no contradiction.
	if _, _, err := runMain(t, env, "--config", cfg, "migrate", "--config", cfg); err != nil {
		t.Errorf("the same --config twice: %v", err)
	}
}

// TestConfigInEveryHelp: each command's --help lists --config.
func TestConfigInEveryHelp(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--help"}, {"sql", "--help"}, {"ask", "--help"}, {"mcp", "--help"}, {"eval", "--help"},
		{"migrate", "--help"}, {"audit", "--help"}, {"keys", "--help"}, {"keys", "create", "--help"},
		{"keys", "list", "--help"}, {"keys", "revoke", "--help"}, {"sources", "--help"}, {"sources", "add", "--help"},
		{"sources", "list", "--help"}, {"sources", "remove", "--help"}, {"help", "keys"}, {"help", "migrate"},
		{"version", "--help"},
	} {
		out, _, err := runMain(t, testEnv(t, nil), args...)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: %v", args, err)
		}
		if !strings.Contains(out, "-config FILE") {
			t.Errorf("%q does not list --config:\n%s", args, out)
		}
	}
}

// TestVersion: datachat version and datachat --version print the version,
// the commit it was built from, and the Go and DuckDB versions.
func TestVersion(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, stderr, status := runBinary(t, env, "", args...)
		if status != 0 || stderr != "" {
			t.Fatalf("datachat %s: status %d, stderr %q", args[0], status, stderr)
		}
		for _, want := range []string{"datachat ", "go " + runtime.Version(), "duckdb v1.", runtime.GOOS + "/" + runtime.GOARCH} {
			if !strings.Contains(out, want) {
				t.Errorf("datachat %s: %q lacks %q", args[0], out, want)
			}
		}
		// The commit is the one the toolchain stamped into the binary (none
		// where the build had no version control: GOFLAGS=-buildvcs=false,
		// a git worktree).
		info, err := exec.Command("go", "version", "-m", datachatBinary(t)).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := "commit unknown (built without version control information)"
		if m := regexp.MustCompile(`vcs\.revision=(\S+)`).FindSubmatch(info); m != nil {
			want = "commit " + string(m[1])
		}
		if !strings.Contains(out, want) {
			t.Errorf("datachat %s: %q lacks %q", args[0], out, want)
		}
	}
	if _, stderr, status := runBinary(t, env, "", "version", "extra"); status != 2 || !strings.Contains(stderr, "version takes no arguments") {
		t.Errorf("version extra: status %d, stderr %q", status, stderr)
	}
}

// wideCSV writes a CSV of n rows (id, label) and returns its path.
func wideCSV(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,label\n")
	for i := range n {
		fmt.Fprintf(&b, "%d,row %d\n", i, i)
	}
	p := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSQLNoRowCap: the CLI over the user's own files returns every row;
// --max-rows N sets a cap, said on stderr.
func TestSQLNoRowCap(t *testing.T) {
	p := wideCSV(t, 2500)
	env := testEnv(t, nil)
	for _, format := range []string{"csv", "table", "json"} {
		out, stderr, err := runMain(t, env, "sql", "--data", p, "--format", format, "SELECT * FROM rows ORDER BY id")
		if err != nil {
			t.Fatalf("%s: %v\n%s", format, err, stderr)
		}
		switch format {
		case "csv":
			if n := strings.Count(out, "\n"); n != 2501 {
				t.Errorf("csv: %d lines, want 2501 (a header and 2,500 rows)", n)
			}
		case "table":
			if n := strings.Count(out, "\n"); n != 2502 {
				t.Errorf("table: %d lines, want 2502", n)
			}
		case "json":
			var r struct {
				RowCount  int  `json:"row_count"`
				Truncated bool `json:"truncated"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.RowCount != 2500 || r.Truncated {
				t.Errorf("json: %+v, %v", r, err)
			}
		}
		if strings.Contains(stderr, "rows shown") {
			t.Errorf("%s: stderr says rows were cut:\n%s", format, stderr)
		}
	}
	out, stderr, err := runMain(t, env, "sql", "--data", p, "--max-rows", "10", "--format", "csv", "SELECT * FROM rows ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 11 || !strings.Contains(stderr, "--max-rows 10") {
		t.Errorf("--max-rows 10: %d lines, stderr %q; want 11 lines and a notice naming --max-rows", n, stderr)
	}
	if _, _, err := runMain(t, env, "sql", "--max-rows", "-1", "SELECT 1"); err == nil || !strings.Contains(err.Error(), "--max-rows") {
		t.Errorf("--max-rows -1: got %v, want a usage error", err)
	}
}

// TestAskPartsAndSources: the answer's parts around a tool call are
// separated, as the page shows them, and the sources follow the answer on
// stdout.
func TestAskPartsAndSources(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "tips.md")
	if err := os.WriteFile(doc, []byte("# Tips\n\nTips are highest on Sundays, the staff handbook says.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Here is the count by day."},
			ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) AS n FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Tips are highest ", "on Sundays [1]."}},
	}})
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
	out, stderr, err := runMain(t, env, "ask", "--data", penguinsCSV(t), "--doc", doc, "When are tips highest?")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	want := "Here is the count by day.\n\nTips are highest on Sundays [1].\n\nSources:\n  [1] tips.md, section \"Tips\"\n"
	if out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if strings.Contains(stderr, "[1] tips.md") {
		t.Errorf("the sources are on stderr too:\n%s", stderr)
	}
}

// TestKeysCreatePrintsSignInURL: keys create prints the key alone on stdout
// (for scripts) and the page's sign-in URL with it on stderr.
func TestKeysCreatePrintsSignInURL(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"DATACHAT_ADDR": "127.0.0.1:9090"}, "http://127.0.0.1:9090/#key="},
		{map[string]string{"DATACHAT_ADDR": "0.0.0.0:8080"}, "http://127.0.0.1:8080/#key="},
		{map[string]string{"DATACHAT_ADDR": "[::]:8080"}, "http://127.0.0.1:8080/#key="},
		{map[string]string{"DATACHAT_PUBLIC_URL": "https://chat.example.com"}, "https://chat.example.com/#key="},
	} {
		key, stderr, err := runMain(t, testEnv(t, tc.vars), "keys", "create", "--user", "alice")
		if err != nil {
			t.Fatal(err)
		}
		key = strings.TrimSpace(key)
		if !regexp.MustCompile(`^dck_\S+$`).MatchString(key) {
			t.Errorf("%v: stdout %q, want the key alone", tc.vars, key)
		}
		if !strings.Contains(stderr, tc.want+key+"\n") {
			t.Errorf("%v: stderr %q lacks %s%s", tc.vars, stderr, tc.want, key)
		}
	}
}

// openPTY opens a pseudo-terminal and returns its two ends.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	missing := func(what string, err error) {
		t.Helper()
		testenv.Missing(t, fmt.Sprintf("%s: %v; this test needs a Linux pseudo-terminal (/dev/ptmx and devpts mounted on /dev/pts)", what, err))
	}
	c, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		missing("no pseudo-terminal here", err)
	}
	if err := unix.IoctlSetPointerInt(int(c.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		c.Close()
		missing("unlock the pseudo-terminal", err)
	}
	n, err := unix.IoctlGetInt(int(c.Fd()), unix.TIOCGPTN)
	if err != nil {
		c.Close()
		missing("pseudo-terminal number", err)
	}
	term, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		c.Close()
		missing("open the pseudo-terminal", err)
	}
	t.Cleanup(func() { term.Close(); c.Close() })
	return c, term
}

// TestServeLogOnTerminal: serve logs JSON for a log collector, but as text
// with readable durations when its stderr is a terminal, unless
// DATACHAT_LOG_FORMAT says otherwise.
func TestServeLogOnTerminal(t *testing.T) {
	controller, term := openPTY(t)
	var got bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := controller.Read(buf)
			got.Write(buf[:n])
			if err != nil || bytes.Contains(got.Bytes(), []byte("msg=serving")) {
				return
			}
		}
	}()
	env := testEnv(t, map[string]string{"DATACHAT_LOG_FORMAT": "", "DATACHAT_LOG_LEVEL": "info", "DATACHAT_QUERY_TIMEOUT": "90s"})
	m := &Main{Env: env, Stdout: io.Discard, Stderr: term}
	if err := m.ParseFlags(context.Background(), []string{"serve"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve logged no 'serving' line on the terminal:\n%s", got.String())
	}
	log := got.String()
	if !strings.Contains(log, "level=INFO msg=\"sql workers\"") || !strings.Contains(log, "timeout=1m30s") || strings.Contains(log, `{"time"`) {
		t.Errorf("serve on a terminal did not log text with readable durations:\n%s", log)
	}

	// Not a terminal: JSON, as before.
	var buf bytes.Buffer
	m = &Main{Env: testEnv(t, map[string]string{"DATACHAT_LOG_FORMAT": "", "DATACHAT_LOG_LEVEL": "info"}), Stdout: io.Discard, Stderr: &buf}
	if err := m.ParseFlags(context.Background(), []string{"serve"}); err != nil {
		t.Fatal(err)
	}
	m.Logger.Info("probe", "d", time.Second)
	if !strings.HasPrefix(buf.String(), `{"time"`) {
		t.Errorf("serve's log to a file is not JSON: %q", buf.String())
	}
	// DATACHAT_LOG_FORMAT=json wins over the terminal.
	m = &Main{Env: testEnv(t, map[string]string{"DATACHAT_LOG_FORMAT": "json", "DATACHAT_LOG_LEVEL": "info"}), Stdout: io.Discard, Stderr: term}
	if err := m.ParseFlags(context.Background(), []string{"serve"}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%T", m.Logger.Handler()) != "*slog.JSONHandler" {
		t.Errorf("DATACHAT_LOG_FORMAT=json on a terminal: handler %T", m.Logger.Handler())
	}
}

// TestEvalExitStatus: eval fails (status 1) when a question errors, and
// below --min-execution-accuracy; it still prints the table and writes --out.
func TestEvalExitStatus(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite.yaml")
	os.WriteFile(suite, []byte(fmt.Sprintf(`name: status
questions:
  - id: ok
    question: How many penguins are there?
    datasets: [%[1]s]
    sql: SELECT count(*) FROM penguins
  - id: wrong
    question: How many penguins live on Biscoe?
    datasets: [%[1]s]
    sql: SELECT count(*) FROM penguins WHERE island = 'Biscoe'
`, testfiles.Penguins(t, dir))), 0o600)
	count := func() llmtest.Turn {
		return llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) AS n FROM penguins"}`)}}
	}
	answer := llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, Reply: "Done."}
	run := func(script llmtest.Script, args ...string) (string, string, error) {
		fake := llmtest.NewServer(t, llmtest.OpenAI, script)
		env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "LLM_RETRY_DELAY": "10ms"})
		return runMain(t, env, append([]string{"eval", suite}, args...)...)
	}

	// One right, one wrong: 50 %.
	half := llmtest.Script{Turns: []llmtest.Turn{count(), answer, count(), answer}}
	if _, stderr, err := run(half); err != nil {
		t.Errorf("no threshold, no error: %v\n%s", err, stderr)
	}
	if _, _, err := run(half, "--min-execution-accuracy", "0.5"); err != nil {
		t.Errorf("50%% against a threshold of 0.5: %v", err)
	}
	out := filepath.Join(dir, "out.json")
	stdout, _, err := run(half, "--min-execution-accuracy", "0.75", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "execution accuracy 50.0% is below --min-execution-accuracy 75.0%") {
		t.Errorf("50%% against 0.75: got %v", err)
	}
	if _, serr := os.Stat(out); serr != nil || !strings.Contains(stdout, "execution accuracy 50.0%") {
		t.Errorf("a failed threshold still prints the table and writes --out: %v\n%s", serr, stdout)
	}
	if _, _, err := run(half, "--min-execution-accuracy", "80%"); err == nil {
		t.Errorf("50%% against 80%%: no error")
	}

	// Every question errors (the model's server fails): status 1, naming them.
	failing := llmtest.Script{Default: &llmtest.Turn{Error: &llmtest.ErrorReply{Preset: "auth"}}}
	stdout, _, err = run(failing)
	if err == nil || !strings.Contains(err.Error(), "2 of 2 questions failed with an error (ok, wrong)") {
		t.Errorf("every question errored: got %v", err)
	}
	if !strings.Contains(stdout, "ok") {
		t.Errorf("no table when questions errored:\n%s", stdout)
	}
	// One of them errors.
	one := llmtest.Script{Turns: []llmtest.Turn{count(), answer, {Error: &llmtest.ErrorReply{Preset: "auth"}}}}
	if _, _, err := run(one); err == nil || !strings.Contains(err.Error(), "1 of 2 questions failed with an error (wrong)") {
		t.Errorf("one question errored: got %v", err)
	}

	for _, bad := range []string{"1.5", "-0.1", "abc", "150%"} {
		var ue *usageError
		if _, _, err := runMain(t, testEnv(t, nil), "eval", suite, "--min-execution-accuracy", bad); !errors.As(err, &ue) {
			t.Errorf("--min-execution-accuracy %s: got %v, want a usage error", bad, err)
		}
	}
}

// dirFiles lists the files and directories under dir, relative to it.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestMCPDataLeavesNothing: datachat mcp --data works in a temporary
// directory, as sql and ask do: agents restart it often, and nothing may
// pile up in the data directory, nor in TMPDIR.
func TestMCPDataLeavesNothing(t *testing.T) {
	dataDir := t.TempDir()
	tmp := t.TempDir()
	csv := penguinsCSV(t)
	for range 3 {
		cmd := exec.Command(datachatBinary(t), "mcp", "--data", csv)
		cmd.Env = append(mcpEnv(dataDir), "TMPDIR="+tmp)
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_sql","arguments":{"query":"SELECT count(*) AS n FROM penguins"}}}
`)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("datachat mcp: %v\nstderr: %s", err, stderr.String())
		}
		if !strings.Contains(string(out), fmt.Sprint(testfiles.PenguinsRows)) {
			t.Fatalf("execute_sql: %s\nstderr: %s", out, stderr.String())
		}
		if !strings.Contains(stderr.String(), "mcp keeps nothing") {
			t.Errorf("stderr does not say mcp --data keeps nothing:\n%s", stderr.String())
		}
	}
	if left := dirFiles(t, dataDir); len(left) > 0 {
		t.Errorf("mcp --data left in the data directory: %v", left)
	}
	if left := dirFiles(t, tmp); len(left) > 0 {
		t.Errorf("mcp --data left in TMPDIR: %v", left)
	}
}

// TestLocalCommandsSweepKilledRuns: what a killed sql, ask or mcp --data
// left in TMPDIR goes at the next run.
func TestLocalCommandsSweepKilledRuns(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(datachatBinary(t), "mcp", "--data", penguinsCSV(t))
	cmd.Env = append(mcpEnv(t.TempDir()), "TMPDIR="+tmp)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	serving := make(chan struct{})
	var stderr testlog.Buffer
	go func() {
		sc := bufio.NewScanner(errPipe)
		signalled := false
		for sc.Scan() {
			stderr.Write(append(sc.Bytes(), '\n'))
			if !signalled && strings.Contains(sc.Text(), "serving") {
				close(serving)
				signalled = true
			}
		}
	}()
	select {
	case <-serving:
	case <-time.After(30 * time.Second):
		t.Fatalf("mcp --data did not start serving; stderr:\n%s", stderr.String())
	}
	if len(dirFiles(t, tmp)) == 0 {
		t.Fatalf("mcp --data wrote nothing in TMPDIR; stderr:\n%s", stderr.String())
	}
	cmd.Process.Kill()
	cmd.Wait()
	if len(dirFiles(t, tmp)) == 0 {
		t.Fatal("the killed run left nothing to sweep")
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + tmp, "DATACHAT_DATA_DIR=" + t.TempDir()}
	if _, stderr, status := runBinary(t, env, "", "sql", "SELECT 1"); status != 0 {
		t.Fatalf("sql: status %d\n%s", status, stderr)
	}
	if left := dirFiles(t, tmp); len(left) > 0 {
		t.Errorf("the next run left what the killed one had: %v", left)
	}
}

// TestMCPStdioMalformedLine: a line that is not JSON gets -32700 Parse
// error, one that is not a JSON-RPC message -32600 Invalid Request, and the
// session goes on.
func TestMCPStdioMalformedLine(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"`, // cut short
		`this is not JSON`,
		``,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_sql","arguments":{"query":"SELECT count(*) AS n FROM penguins"}}}`,
		`{"id":4,"hello":"world"}`,
		`42`,
		`[]`,
		`[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`, // batches ended with protocol 2025-06-18
		"\x00\xff",
		`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`,
	}
	out, stderr := mcpOverPipe(t, lines)
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	var byID = map[string]string{}
	var errs []rpcError
	var nullIDs []rpcError
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *rpcError       `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Fatalf("stdout line %q is not a JSON-RPC message: %v", line, err)
		}
		if msg.Error != nil {
			errs = append(errs, *msg.Error)
			if string(msg.ID) == "null" {
				nullIDs = append(nullIDs, *msg.Error)
			}
		}
		byID[string(msg.ID)] = string(msg.Result)
	}
	if !strings.Contains(byID["3"], fmt.Sprint(testfiles.PenguinsRows)) || !strings.Contains(byID["6"], "execute_sql") {
		t.Errorf("the session did not go on after the malformed lines:\n%s\nstderr: %s", out, stderr)
	}
	codes := map[int]int{}
	for _, e := range errs {
		codes[e.Code]++
	}
	// Three lines are not JSON; {"id":4,…}, 42, [] and the batch are not
	// messages this session takes.
	if codes[-32700] != 3 || codes[-32600] != 4 {
		t.Errorf("errors %+v; want 3 × -32700 and 4 × -32600\n%s", errs, out)
	}
	for _, e := range errs {
		if e.Code == -32700 && !strings.HasPrefix(e.Message, "Parse error") {
			t.Errorf("-32700 with message %q", e.Message)
		}
	}
	if !strings.Contains(string(out), `"id":4,"error"`) && !strings.Contains(string(out), `"id":4`) {
		t.Errorf("the invalid request with id 4 was not answered under its id:\n%s", out)
	}
	if len(nullIDs) < 3 {
		t.Errorf("parse errors not answered with id null: %+v", nullIDs)
	}
}

func TestCitedSources(t *testing.T) {
	for _, tc := range []struct {
		answer string
		n      int
		want   string
	}{
		{"Title V [1].", 3, "[1]"},
		{"See [2, 3] and [1].", 3, "[1 2 3]"},
		{"Pages [1-3] say so.", 5, "[1 2 3]"},
		{"Pages [2–3] say so.", 5, "[2 3]"},
		{"Out of range [4] [0] [9].", 3, "[]"},
		{"Backwards [3-1].", 3, "[]"},
		{"Huge [1-1000000000000].", 3, "[]"},
		{"A link [5](http://x) and [2].", 5, "[2]"},
		{"No citation.", 3, "[]"},
	} {
		if got := fmt.Sprint(citedSources(tc.answer, tc.n)); got != tc.want {
			t.Errorf("citedSources(%q, %d): got %s, want %s", tc.answer, tc.n, got, tc.want)
		}
	}
}

// TestLocalErrorsNameTheFileOnce: an error about a --data or --doc file or
// URL names it once, and a refused loopback URL names the setting that
// allows it.
func TestLocalErrorsNameTheFileOnce(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.csv")
	os.WriteFile(empty, nil, 0o600)
	emptyDoc := filepath.Join(dir, "notes.md")
	os.WriteFile(emptyDoc, nil, 0o600)
	env := testEnv(t, nil)
	for _, tc := range []struct {
		args      []string
		name      string
		wantAlso  string
		wantCount int
	}{
		{[]string{"sql", "--data", empty, "SELECT 1"}, "empty.csv", "is empty", 1},
		{[]string{"sql", "--data", "http://127.0.0.1:9/x.csv", "SELECT 1"}, "http://127.0.0.1:9/x.csv", "DATACHAT_ALLOW_PRIVATE_URLS", 1},
		{[]string{"sql", "--data", filepath.Join(dir, "missing.csv"), "SELECT 1"}, "missing.csv", "no such file", 1},
		{[]string{"mcp", "--data", empty}, "empty.csv", "is empty", 1},
	} {
		_, _, err := runMain(t, env, tc.args...)
		if err == nil {
			t.Errorf("%q: no error", tc.args)
			continue
		}
		if n := strings.Count(err.Error(), tc.name); n != tc.wantCount || !strings.Contains(err.Error(), tc.wantAlso) {
			t.Errorf("%q: %q names %s %d times (want %d) or lacks %q", tc.args, err, tc.name, n, tc.wantCount, tc.wantAlso)
		}
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Reply: "Hello."}})
	aenv := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL})
	_, _, err := runMain(t, aenv, "ask", "--doc", emptyDoc, "Hi?")
	if err == nil || strings.Count(err.Error(), "notes.md") != 1 || !strings.Contains(err.Error(), "empty") {
		t.Errorf("ask --doc of an empty file: %v", err)
	}
}

// TestSQLOverEuropeanCSV: a CSV of decimal commas sums, as the user
// tried, and stderr says which columns were read as numbers.
func TestSQLOverEuropeanCSV(t *testing.T) {
	p := filepath.Join(t.TempDir(), "umsatz.csv")
	os.WriteFile(p, []byte("Datum;Filiale;Betrag\n31.12.2024;Köln;1.234,56\n02.01.2025;Bonn;12,50\n03.01.2025;Köln;1.000.000,00\n"), 0o600)
	out, stderr, err := runMain(t, testEnv(t, nil), "sql", "--data", p, "--format", "csv",
		`SELECT Filiale, sum(Betrag) AS summe, min(Datum) AS ab FROM umsatz GROUP BY Filiale ORDER BY Filiale`)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if out != "Filiale,summe,ab\nBonn,12.5,2025-01-02\nKöln,1001234.56,2024-12-31\n" {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(stderr, `Numbers written with a decimal comma (such as 1.234,56) were read as numbers in "Betrag"`) {
		t.Errorf("stderr does not say Betrag was read as numbers:\n%s", stderr)
	}
}

// TestJSONLines: the filter in front of the SDK's stdio transport passes
// messages on and answers the rest itself, whatever the line's length.
func TestJSONLines(t *testing.T) {
	long := `{"jsonrpc":"2.0","method":"notifications/x","params":{"pad":"` + strings.Repeat("x", 200<<10) + `"}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
		`not json`,
		long,
		`[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, // batches are 2025-03-26's
		`[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"nope":1}]`,
		"  \t",
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") // no newline after the last
	var answers lockedWriter
	var buf bytes.Buffer
	answers.w = &buf
	r := jsonLines(strings.NewReader(in), &answers, slog.New(slog.DiscardHandler))
	passed, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(passed), "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "initialize") || lines[1] != long || !strings.HasPrefix(lines[2], `[{"jsonrpc":"2.0","id":2`) || !strings.Contains(lines[3], "ping") {
		t.Errorf("passed on %d lines: %.200q", len(lines), passed)
	}
	errs := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(errs) != 2 || !strings.Contains(errs[0], `"code":-32700`) || !strings.Contains(errs[1], `"code":-32600`) {
		t.Errorf("answered %q", errs)
	}
	// A line over the cap is answered, not buffered whole.
	tooLong := strings.Repeat("a", maxMCPLine+10) + "\n" + `{"jsonrpc":"2.0","id":5,"method":"ping"}` + "\n"
	buf.Reset()
	passed, _ = io.ReadAll(jsonLines(strings.NewReader(tooLong), &answers, slog.New(slog.DiscardHandler)))
	if !strings.Contains(string(passed), `"id":5`) || !strings.Contains(buf.String(), "longer than") {
		t.Errorf("after a line over the cap: passed %q, answered %q", passed, buf.String())
	}
}
