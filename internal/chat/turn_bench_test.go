package chat

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llmtest"
	"datachat/internal/openai"
	"datachat/internal/sqlite/sqlitetest"
)

// BenchmarkTurn is the server's work for one turn of the token-latency load
// (BENCHMARKS.md, "Token latency"): a question, a search_documents call, and
// an answer of 40 streamed chunks, through a Runner over a temporary SQLite
// store and the OpenAI-protocol fake on 127.0.0.1, rotating over 50
// conversations. What it costs beyond the chunks themselves is the per-turn
// work (store reads and writes, prompt, requests) that shares the cores with
// every other conversation's tokens.
//
//	go test -run '^$' -bench Turn -benchmem -cpuprofile /tmp/turn.pprof ./internal/chat
func BenchmarkTurn(b *testing.B) {
	ctx := b.Context()
	st := sqlitetest.Open(b)
	var u *datachat.User
	convs := make([]*datachat.Conversation, 50)
	for i := range convs {
		u, convs[i] = sqlitetest.Conversation(b, st, "alice")
	}
	var script llmtest.Script
	for range b.N {
		script.Turns = append(script.Turns, loadTurns()...)
	}
	r := newLoadRunner(st, llmtest.NewServer(b, llmtest.OpenAI, script))
	tokens := 0
	sink := func(ev Event) {
		if ev.Type == EventToken {
			tokens++
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := r.Send(ctx, u, convs[i%len(convs)].ID, "Revenue by region?", TurnOptions{}, sink); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if tokens < 40*b.N {
		b.Fatalf("%d tokens streamed in %d turns, want %d", tokens, b.N, 40*b.N)
	}
}

// loadTurns are the model's two answers in a turn of the token-latency
// load: a search_documents call, then 40 streamed chunks.
func loadTurns() []llmtest.Turn {
	answer := make([]string, 40)
	for i := range answer {
		answer[i] = fmt.Sprintf("tok%02d ", i)
	}
	return []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("search_documents", `{"query":"regional revenue"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: answer},
	}
}

// newLoadRunner is the Runner of the token-latency load: store st, the
// OpenAI-protocol fake as its model, streaming, no limits set.
func newLoadRunner(st TurnStore, fake *llmtest.Server) *Runner {
	return &Runner{
		Store: st, Data: newBenchData(), Provider: "openai", ModelID: "m", Window: 1_000_000,
		Model: openai.New(openai.Options{
			APIKey:    "k",
			BaseURL:   fake.URL,
			Transport: llm.Transport{ConnectTimeout: 5 * time.Second, StreamIdleTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)},
		}),
		MaxOutputTokens: 100, Streaming: true, Logger: slog.New(slog.DiscardHandler),
	}
}
