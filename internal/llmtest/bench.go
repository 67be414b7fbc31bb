package llmtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llm"
)

// The streamed answers a provider package's decoder is benchmarked on, as
// the fake sends them (framed like the recordings), and the benchmark.

// BenchTurns are the answers [BenchmarkDecodeStream] decodes: a text answer
// of 40 content chunks (Markdown, escapes, non-ASCII) and an answer of two
// parallel tool calls, after some thinking where the protocol streams it.
func BenchTurns() map[string]Turn {
	words := strings.Fields("The orders table has 1,204 rows from 2024 . Most come from Lyon and Zürich ; the café “Le Nœud” alone placed 87 of them , almost all in March .")
	text := make([]string, 0, 40)
	text = append(text, "Here is what I found:\n\n")
	for len(text) < 39 {
		text = append(text, " "+words[len(text)%len(words)])
	}
	text = append(text, "\n\n| city | orders |\n|---|---|\n| \"Lyon\" | 311 |\n")
	thinking := strings.Fields("The user asks for orders per city . I should count rows grouped by city in the orders table .")
	for i := range thinking {
		thinking[i] = " " + thinking[i]
	}
	return map[string]Turn{
		"text": {Text: text, Usage: &Usage{Input: 1820, Output: 64}},
		"tool_calls": {
			Thinking: thinking,
			ToolCalls: []ToolCall{
				{Name: "run_sql", Args: []byte(`{"query":"SELECT city, count(*) AS orders FROM orders GROUP BY city ORDER BY 2 DESC","limit":50}`)},
				{Name: "describe_table", Args: []byte(`{"table":"orders"}`)},
			},
			Usage: &Usage{Input: 1790, Output: 41, Thoughts: 30},
		},
	}
}

// Answer returns the raw streamed answer of a fake server for protocol p to a
// chat request answered by turn: the body a provider's decoder reads.
func Answer(tb testing.TB, p Protocol, turn Turn) []byte {
	tb.Helper()
	srv := NewServer(tb, p, Script{Turns: []Turn{turn}})
	var path, body string
	switch p {
	case Gemini:
		path, body = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	case OpenAI:
		path, body = "/chat/completions", `{"model":"gpt-4o-2024-08-06","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	default:
		path, body = "/api/chat", `{"model":"llama3.1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("fake answer: status %d, %v", resp.StatusCode, err)
	}
	return b
}

// BenchmarkDecodeStream benchmarks a provider's decodeStream on the answers
// of [BenchTurns] in protocol p, one sub-benchmark each. Besides the figures
// per answer it reports them per chunk (an SSE event's data, an NDJSON line):
// ns/chunk, B/chunk and allocs/chunk.
func BenchmarkDecodeStream(b *testing.B, p Protocol, decodeStream func(body io.Reader, out *llm.Output, newID func() string) error) {
	turns := BenchTurns()
	for _, name := range []string{"text", "tool_calls"} {
		body := Answer(b, p, turns[name])
		next := llm.NewSSEReader(bytes.NewReader(body)).NextData
		if p == Ollama {
			next = llm.NewNDJSONReader(bytes.NewReader(body)).Next
		}
		chunks := 0
		for _, err := next(); err == nil; _, err = next() {
			chunks++
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				out := llm.NewOutput(context.Background(), func(datachat.ModelEvent) error { return nil })
				if err := decodeStream(bytes.NewReader(body), out, func() string { return "call_x" }); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			n := float64(b.N * chunks)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/chunk")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/chunk")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/chunk")
		})
	}
}
