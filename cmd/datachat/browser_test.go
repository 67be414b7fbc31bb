package main

import (
	"bufio"
	"bytes"
	"context"
	"datachat/internal/testenv"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

// needTool skips when a tool the test needs is missing, except in CI, which
// installs everything (.ci/run) and must never skip.
func needTool(t *testing.T, what, hint string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	testenv.Missing(t, what+" is missing: "+hint)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestBrowser runs web/e2e/run.mjs — Playwright driving Debian's Chromium —
// against a real `datachat serve` whose provider is the OpenAI fake playing
// web/e2e/llmfake-script.json. Its first start on a new data directory
// prints the setup URL that makes the first admin; the scenario asks for a
// restart on the same address (sessions must outlive it) and for the key's
// revocation, each by a line on its stdout.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	node, err := exec.LookPath("node")
	needTool(t, "node", "install Node.js 20", err == nil)
	e2e, _ := filepath.Abs("../../web/e2e")
	needTool(t, "web/e2e/node_modules", "run (cd web/e2e && npm ci)", exists(filepath.Join(e2e, "node_modules", "playwright-core")))
	needTool(t, "chromium", "apt-get install -y chromium", exists("/usr/bin/chromium"))

	script, err := llmtest.LoadScript(filepath.Join(e2e, "llmfake-script.json"))
	if err != nil {
		t.Fatal(err)
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, script)
	env := testEnv(t, map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL})
	srv := startRestartable(t, env)
	setupURL := regexp.MustCompile(`https?://\S+/#invite=\S+`).FindString(srv.stdout.String())
	var setupEnv []string
	switch {
	case setupURL != "":
		setupEnv = []string{"DATACHAT_E2E_SETUP_URL=" + setupURL}
	case strings.Contains(srv.stdout.String(), "#key="):
		t.Log("serve printed a key URL, not a setup URL: a server without accounts; the team steps are skipped")
	default:
		t.Fatalf("no setup URL (…/#invite=TOKEN) in serve's first output:\n%s", srv.stdout.String())
	}
	key, _, err := runMain(t, env, "keys", "create", "--user", "browser")
	if err != nil {
		t.Fatal(err)
	}
	// With a PostgreSQL server, the data panel attaches a database source
	// holding penguins.csv and the answer queries it (web/e2e/run.mjs).
	var sourceEnv []string
	if os.Getenv("DATACHAT_TEST_POSTGRES_URL") != "" {
		src := newPostgresSource(t)
		// The role may read these tables, and --tables must name them all.
		granted := strings.Join(dbsourcetest.Tables(t, sourceCSVs), ",")
		if out, err := runMainOut(t, env, "sources", "add", "warehouse", "--url", src.reader, "--tables", granted, "--users", "browser"); err != nil {
			t.Fatalf("sources add: %v\n%s", err, out)
		}
		sourceEnv = []string{"DATACHAT_E2E_SOURCE=warehouse", fmt.Sprintf("DATACHAT_E2E_SOURCE_ANSWER=%d", gentoos(t))}
	} else {
		t.Log("DATACHAT_TEST_POSTGRES_URL is not set: the database source step is skipped")
	}
	shots := os.Getenv("DATACHAT_E2E_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	files := t.TempDir()
	csv, doc := testfiles.Penguins(t, files), testfiles.DMCA(t, files)
	xlsx := testfiles.Write(t, files, "zoo.xlsx", testfiles.ZooWorkbook()) // three sheets, dropped on the page (web/e2e/steps-panel.mjs)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(e2e, "run.mjs"))
	cmd.Env = append(os.Environ(),
		"DATACHAT_E2E_URL=http://"+srv.m.Addr(),
		"DATACHAT_E2E_KEY="+strings.TrimSpace(key),
		"DATACHAT_E2E_CSV="+csv,
		"DATACHAT_E2E_SHOTS="+shots,
		"DATACHAT_E2E_EXTRAS=1", // chat_error, hostile Markdown, citations: scripted in llmfake-script.json
		"DATACHAT_E2E_DOC="+doc,
		"DATACHAT_E2E_XLSX="+xlsx,
		"DATACHAT_E2E_REVOKE=1",  // its last step: the key is revoked when it says so
		"DATACHAT_E2E_RESTART=1", // serve is restarted when it says so
	)
	cmd.Env = append(cmd.Env, sourceEnv...)
	cmd.Env = append(cmd.Env, setupEnv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(&out, line)
		switch line {
		case "revoke the key now":
			// As an operator would, beside the running server.
			if _, _, err := runMain(t, env, "keys", "revoke", keyID(t, env, "browser")); err != nil {
				t.Errorf("keys revoke: %v", err)
			}
		case "restart the server now":
			srv.restart(t)
			fmt.Fprintln(stdin, "restarted")
		}
	}
	err = cmd.Wait()
	t.Logf("browser run (screenshots in %s):\n%s%s", shots, out.String(), errOut.String())
	if err != nil {
		t.Fatalf("browser scenario failed: %v", err)
	}
}

// restartable is a `datachat serve` run in-process that can be stopped and
// started again on the same address and data directory.
type restartable struct {
	env    func(string) (string, bool)
	m      *Main
	stdout *bytes.Buffer
}

func startRestartable(t *testing.T, env func(string) (string, bool)) *restartable {
	t.Helper()
	r := &restartable{env: env}
	r.start(t, env)
	t.Cleanup(func() {
		if r.m != nil {
			if err := r.m.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	return r
}

func (r *restartable) start(t *testing.T, env func(string) (string, bool)) {
	t.Helper()
	r.stdout = &bytes.Buffer{}
	m := &Main{Env: env, Stdout: r.stdout, Stderr: io.Discard}
	ctx := context.Background()
	if err := m.ParseFlags(ctx, []string{"serve"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	r.m = m
}

// restart stops serve and starts it again where it was: what the browser
// holds (its session cookie) must still sign it in.
func (r *restartable) restart(t *testing.T) {
	t.Helper()
	addr := r.m.Addr()
	m := r.m
	r.m = nil
	if err := m.Close(); err != nil {
		t.Errorf("stop serve for the restart: %v", err)
	}
	r.start(t, func(k string) (string, bool) {
		if k == "DATACHAT_ADDR" {
			return addr, true
		}
		return r.env(k)
	})
}

// keyID returns the id `keys list` shows for the user's one key.
func keyID(t *testing.T, env func(string) (string, bool), user string) string {
	t.Helper()
	list, _, err := runMain(t, env, "keys", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == user {
			return f[0]
		}
	}
	t.Fatalf("no key of %s in keys list:\n%s", user, list)
	return ""
}
