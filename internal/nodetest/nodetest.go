// Package nodetest runs, from Go tests, the Node.js scripts that drive
// datachat with official third-party clients (OpenAI's npm client, the
// Vercel AI SDK's OpenAI provider, the MCP TypeScript SDK). The scripts and their package.json live in
// internal/server/testdata/node; install them with
//
//	(cd internal/server/testdata/node && npm ci)
//
// A test needing them is skipped when node or those packages are missing,
// except in CI (CI=true), where it fails instead.
package nodetest

import (
	"bytes"
	"context"
	"datachat/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// packages are the npm packages the scripts import.
var packages = []string{"openai", "@modelcontextprotocol/sdk", "ai", "@ai-sdk/openai"}

// Dir is the folder of the scripts, found from this source file.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "server", "testdata", "node")
}

// Require returns the node binary, or skips t (fails it when CI=true) when
// node or the installed packages are missing.
func Require(t testing.TB) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		msg := what + "; to run this test: (cd " + Dir() + " && npm ci)"
		testenv.Missing(t, msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(Dir(), "node_modules", p, "package.json")); err != nil {
			missing("npm package " + p + " is not installed")
		}
	}
	return node
}

// Run runs `node script args…` in the scripts' folder with env added to the
// process's environment, and returns its standard output. It fails t when
// the script fails, showing its standard error.
func Run(t testing.TB, env []string, script string, args ...string) []byte {
	t.Helper()
	node := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = Dir()
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s\nstdout:\n%s", script, err, stderr.Bytes(), stdout.Bytes())
	}
	if testing.Verbose() && stderr.Len() > 0 {
		t.Logf("node %s stderr:\n%s", script, stderr.Bytes())
	}
	return stdout.Bytes()
}
