package main

import (
	"bytes"
	"context"
	"datachat/internal/testenv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
// web/e2e/llmfake-script.json.
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
	m, _ := startServe(t, env)
	key, _, err := runMain(t, env, "keys", "create", "--user", "browser")
	if err != nil {
		t.Fatal(err)
	}
	// With a PostgreSQL server, the data panel attaches a database source
	// holding penguins.csv and the answer queries it (web/e2e/run.mjs).
	var sourceEnv []string
	if os.Getenv("DATACHAT_TEST_POSTGRES_URL") != "" {
		src := newPostgresSource(t)
		if out, err := runMainOut(t, env, "sources", "add", "warehouse", "--url", src.reader, "--tables", "penguins", "--users", "browser"); err != nil {
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

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(e2e, "run.mjs"))
	cmd.Env = append(os.Environ(),
		"DATACHAT_E2E_URL=http://"+m.Addr(),
		"DATACHAT_E2E_KEY="+strings.TrimSpace(key),
		"DATACHAT_E2E_CSV="+csv,
		"DATACHAT_E2E_SHOTS="+shots,
		"DATACHAT_E2E_EXTRAS=1", // chat_error, hostile Markdown, citations: scripted in llmfake-script.json
		"DATACHAT_E2E_DOC="+doc,
	)
	cmd.Env = append(cmd.Env, sourceEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("browser run (screenshots in %s):\n%s", shots, out.String())
	if err != nil {
		t.Fatalf("browser scenario failed: %v", err)
	}
}
