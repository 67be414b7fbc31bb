// Command datachat is a self-hosted server for chatting with your data.
//
//	datachat serve                         web UI + API
//	datachat sql --data FILE "SELECT …"    the sandboxed SQL engine, no LLM
//	datachat ask --data FILE "question"    one chat turn in the terminal
//	datachat mcp --data FILE               the data tools over MCP on stdio
//	datachat eval SUITE                    measure the chat's accuracy
//	datachat users add NAME [--admin]      users (also list, disable, enable, reset, remove, role)
//	datachat keys create --user NAME       API keys (also list, revoke)
//	datachat sources add NAME --url URL    database sources (also list, remove)
//	datachat audit [--since TIME] …        the audit log
//	datachat migrate                       apply database migrations
//	datachat help [COMMAND]                usage
//
// Exit status: 0 on success and after help, 1 when the command failed, 2 for
// a wrong command line or configuration.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	m := NewMain()
	if err := m.ParseFlags(ctx, os.Args[1:]); err != nil {
		os.Exit(m.exitCode(err, false))
	}
	if err := m.Run(ctx); err != nil {
		m.Close()
		os.Exit(m.exitCode(err, true))
	}
	grace := context.Background()
	if m.Command == "serve" {
		<-ctx.Done()
		// A second signal ends the grace at once: the turns still running
		// are stored as interrupted and serve exits. A third kills it.
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		stop()
		var endGrace context.CancelFunc
		grace, endGrace = context.WithCancel(context.Background())
		defer endGrace()
		go func() {
			<-again
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			m.Logger.Warn("second signal: ending the shutdown grace now; a third kills the process")
			endGrace()
		}()
		m.Logger.Info("shutting down", slog.Duration("grace", m.shutdownGrace()))
	}
	if err := m.CloseWithin(grace); err != nil {
		fmt.Fprintln(os.Stderr, "datachat:", err)
		os.Exit(1)
	}
}

// shutdownGrace bounds how long serve waits for requests and turns in flight.
const shutdownGrace = 20 * time.Second
