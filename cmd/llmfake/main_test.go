package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"datachat/internal/llmtest"
	"datachat/internal/testlog"
)

func TestRun(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns":[{"text":["Hello ","from ","the ","fake"]}]}`), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testlog.Buffer
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"-protocol", "openai", "-script", script}, outW, &stderr)
		outW.Close()
		done <- err
	}()

	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the printed URL: %v", err)
	}
	go io.Copy(io.Discard, outR)
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("printed %q, want the OpenAI base URL", url)
	}
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`"content":"fake"`)) || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Errorf("answer:\n%s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "request 0: POST /v1/chat/completions kind=chat") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{{"-protocol", "claude"}, {"-script", "/nonexistent.json"}, {"-bogus"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// The command as a separate process, as browser and load tests run it.
func TestProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "llmfake")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-protocol", "ollama", "-stamp")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(strings.TrimSpace(url)+"/api/chat", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"ping"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`"content":"[ts:`)) || !bytes.Contains(body, []byte(`ping"`)) || !bytes.Contains(body, []byte(`"done":true`)) {
		t.Errorf("answer:\n%s", body)
	}
}

// Scripts written for this command elsewhere in the repository must load.
func TestRepositoryScriptsLoad(t *testing.T) {
	for _, path := range []string{"../../web/e2e/llmfake-script.json", "../../internal/llmtest/testdata/chat_script.json"} {
		if _, err := os.Stat(path); err != nil {
			t.Logf("%s: absent, skipped", path)
			continue
		}
		if _, err := llmtest.LoadScript(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}
