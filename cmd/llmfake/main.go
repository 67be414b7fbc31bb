// Command llmfake runs a scripted fake LLM server (internal/llmtest) speaking
// the Gemini, OpenAI Chat Completions or Ollama wire protocol, for browser and
// load tests that need one outside go test. It prints the base URL to give the
// client (GEMINI_BASE_URL, OPENAI_BASE_URL or OLLAMA_HOST) on stdout, logs each
// request on stderr, and runs until interrupted.
//
//	llmfake -protocol openai -script turns.json -addr 127.0.0.1:0
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"datachat/internal/llmtest"
)

// defaultScript answers every request by echoing the user's last message.
const defaultScript = `{"default": {"reply": "You said: {{.LastUser}}"}}`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "llmfake:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	protocol := fs.String("protocol", "gemini", "wire protocol: gemini, openai or ollama")
	scriptPath := fs.String("script", "", "JSON script file (default: echo the last user message)")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	stamp := fs.Bool("stamp", false, "prefix streamed text chunks with their send time, [ts:UNIX_NANOS]")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, err := llmtest.ParseProtocol(*protocol)
	if err != nil {
		return err
	}
	var script llmtest.Script
	if *scriptPath != "" {
		script, err = llmtest.LoadScript(*scriptPath)
	} else {
		script, err = llmtest.ParseScript([]byte(defaultScript))
	}
	if err != nil {
		return err
	}
	if *stamp {
		script.StampTime = true
	}
	srv, err := llmtest.Start(p, script, *addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	srv.OnRequest(func(r llmtest.Request) {
		fmt.Fprintf(stderr, "llmfake: request %d: %s %s kind=%s model=%s messages=%d tools=%d\n",
			r.Index, r.Method, r.Path, r.Kind, r.Model, len(r.Messages), len(r.Tools))
	})
	fmt.Fprintln(stdout, srv.URL)
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
