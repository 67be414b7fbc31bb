package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llmtest"
)

func TestSuite(t *testing.T) {
	llmtest.RunModelSuite(t, llmtest.Suite{
		Protocol: llmtest.Ollama,
		New: func(s llmtest.ClientSettings) llmtest.Model {
			return New(Options{
				APIKey:    s.APIKey,
				Host:      s.BaseURL,
				Transport: s.Transport,
			})
		},
	})
}

// serveBody answers every request with body, byte for byte; each must
// have been sent to /api/chat.
func serveBody(t *testing.T, body []byte, status int, contentType string) (*Client, *llmtest.Replay) {
	t.Helper()
	srv := llmtest.ServeBody(t, body, status, contentType)
	t.Cleanup(func() {
		for _, r := range srv.Requests() {
			if r.Path != "/api/chat" {
				t.Errorf("path: got %s", r.Path)
			}
		}
	})
	return New(Options{Host: srv.URL, Transport: llm.Transport{RetryDelay: 10 * time.Millisecond}}), srv
}

// The recorded streams, parsed from their exact bytes.
func TestRecordedStreams(t *testing.T) {
	tests := []struct {
		file string
		want llmtest.Want
	}{
		{
			file: "ollama_chat_stream_text.ndjson",
			want: llmtest.Want{Text: "Okay, here we go!\n\n1, 2, 3, 4, 5\n", Finish: "stop", Usage: datachat.TokenCount{Input: 16, Output: 22}},
		},
		{
			// Ollama Cloud: thinking chunks (not text), then one whole call.
			file: "ollama_chat_stream_tool_call.ndjson",
			want: llmtest.Want{
				Calls:  []datachat.ModelToolCall{{ID: "call_wi63dj03", Name: "weather", Args: json.RawMessage(`{"location":"Florence, Italy"}`)}},
				Finish: "tool_calls", Usage: datachat.TokenCount{Input: 142, Output: 42},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, _ := serveBody(t, llmtest.Recording(t, tt.file), 200, "application/x-ndjson")
			llmtest.CheckStream(t, c, tt.want)
		})
	}
}

// The same kinds of answer framed by the fake (whose framing llmtest checks
// against the recordings), so the client's handling of them is tested
// without ../shared.
func TestStreams(t *testing.T) {
	tests := []struct {
		name string
		turn llmtest.Turn
		want llmtest.Want
	}{
		{
			name: "text",
			turn: llmtest.Turn{Text: []string{"One, ", "two, ", "three\n"}, Usage: &llmtest.Usage{Input: 16, Output: 6}},
			want: llmtest.Want{Text: "One, two, three\n", Finish: "stop", Usage: datachat.TokenCount{Input: 16, Output: 6}},
		},
		{
			name: "thinking then a tool call",
			turn: llmtest.Turn{
				Thinking:  []string{"The user wants", " the weather."},
				ToolCalls: []llmtest.ToolCall{{ID: "call_w1", Name: "weather", Args: json.RawMessage(`{"location":"Oslo, Norway"}`)}},
				Usage:     &llmtest.Usage{Input: 80, Output: 30},
			},
			want: llmtest.Want{
				Calls:  []datachat.ModelToolCall{{ID: "call_w1", Name: "weather", Args: json.RawMessage(`{"location":"Oslo, Norway"}`)}},
				Finish: "tool_calls", Usage: datachat.TokenCount{Input: 80, Output: 30},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Ollama, llmtest.Script{Turns: []llmtest.Turn{tt.turn}})
			llmtest.CheckStream(t, New(Options{Host: srv.URL, Transport: llm.Transport{RetryDelay: 10 * time.Millisecond}}), tt.want)
			if reqs := srv.ChatRequests(); len(reqs) != 1 || reqs[0].Path != "/api/chat" {
				t.Errorf("requests: %+v", reqs)
			}
		})
	}
}

// The ollama/api client returns no error when the connection goes away
// before the final done:true line; this client must.
func TestStreamCutBeforeDone(t *testing.T) {
	chunks := []string{"Okay", ",", " here", " we", " go"}
	for _, tt := range []struct {
		name  string
		fault llmtest.Fault
	}{
		{"response ends", llmtest.Fault{Kind: llmtest.FaultTruncate}},
		{"connection closed", llmtest.Fault{Kind: llmtest.FaultDrop, After: len(chunks)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Ollama, llmtest.Script{Turns: []llmtest.Turn{{Text: chunks, Fault: &tt.fault}}})
			evs, err := llmtest.Collect(context.Background(), New(Options{Host: srv.URL, Transport: llm.Transport{RetryDelay: time.Millisecond}}), &datachat.ModelRequest{})
			var pe *datachat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != datachat.ProviderConnection {
				t.Errorf("got %v, want a connection error", err)
			}
			if evs.Text() != "Okay, here we go" {
				t.Errorf("text %q", evs.Text())
			}
			if n := len(srv.ChatRequests()); n != 1 {
				t.Errorf("got %d requests, want 1 (no retry after tokens)", n)
			}
		})
	}
}

// The recorded stream cut the same way, after its fifth line.
func TestRecordedStreamCutBeforeDone(t *testing.T) {
	body := llmtest.Recording(t, "ollama_chat_stream_text.ndjson")
	lines := bytes.SplitAfter(body, []byte("\n"))
	cut := bytes.Join(lines[:5], nil)
	for _, reset := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Write(cut)
			if reset {
				rc := http.NewResponseController(w)
				rc.Flush()
				conn, _, _ := rc.Hijack()
				conn.Close()
			}
		}))
		evs, err := llmtest.Collect(context.Background(), New(Options{Host: srv.URL, Transport: llm.Transport{RetryDelay: time.Millisecond}}), &datachat.ModelRequest{})
		srv.Close()
		var pe *datachat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != datachat.ProviderConnection {
			t.Errorf("reset %v: got %v, want a connection error", reset, err)
		}
		if evs.Text() != "Okay, here we go" {
			t.Errorf("reset %v: text %q", reset, evs.Text())
		}
	}
}

// checkToolsUnsupported checks that c fails at once with a bad request
// that says the model cannot call tools.
func checkToolsUnsupported(t *testing.T, c *Client, requests func() int) {
	t.Helper()
	_, err := llmtest.Collect(context.Background(), c, llmtest.Hello())
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != datachat.ProviderBadRequest || pe.Status != 400 ||
		!strings.Contains(pe.Reason, "does not support tools") || !strings.Contains(pe.SuggestedAction, "supports tools") {
		t.Fatalf("got %#v", err)
	}
	if n := requests(); n != 1 {
		t.Errorf("got %d requests, want 1", n)
	}
}

func TestRecordedError(t *testing.T) {
	c, calls := serveBody(t, llmtest.Recording(t, "ollama_error_400_tools_unsupported.json"), 400, "application/json; charset=utf-8")
	checkToolsUnsupported(t, c, calls.Count)
}

// The fake's answer for a model without tools, worded like the recorded one.
func TestToolsUnsupportedError(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Ollama, llmtest.Script{Turns: []llmtest.Turn{llmtest.Preset("tools_unsupported"), llmtest.Texts("must not be reached")}})
	checkToolsUnsupported(t, New(Options{Host: srv.URL, Transport: llm.Transport{RetryDelay: 10 * time.Millisecond}}), func() int { return len(srv.ChatRequests()) })
}

func TestMapError(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		kind   string
	}{
		{400, `{"error":"the input length exceeds the context length"}`, datachat.ProviderContextTooLarge},
		{500, `{"error":"prompt is too long; exceeded max context length by 20 tokens"}`, datachat.ProviderContextTooLarge},
		{404, `{"error":"model \"llama3.1\" not found, try pulling it first"}`, datachat.ProviderBadRequest},
		{401, `{"error":"unauthorized"}`, datachat.ProviderAuth},
		{503, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`, datachat.ProviderUnavailable},
		{429, `{"error":"too many requests"}`, datachat.ProviderRateLimited},
		{0, `{"error":"an error was encountered while running the model: unexpected EOF"}`, datachat.ProviderUnavailable},
		{500, `{"error":"context canceled"}`, datachat.ProviderUnavailable},
	} {
		pe := mapError(tt.status, nil, []byte(tt.body))
		if pe.Kind != tt.kind || pe.Reason == "" || pe.SuggestedAction == "" {
			t.Errorf("%d %s: got %#v, want kind %s", tt.status, tt.body, pe, tt.kind)
		}
	}
	if pe := mapError(404, nil, []byte(`{"error":"model \"x\" not found, try pulling it first"}`)); !strings.Contains(pe.SuggestedAction, "ollama pull") {
		t.Errorf("model not found action: %q", pe.SuggestedAction)
	}
}

// The recorded follow-up request of a client that sent a tool result,
// rebuilt from datachat's model types: the same JSON except that client's own
// max_tokens field, which is not an /api/chat parameter.
func TestRequestMatchesRecording(t *testing.T) {
	req := &datachat.ModelRequest{
		System: "You are a helpful assistant",
		Messages: []datachat.ModelMessage{
			{Role: datachat.ModelRoleUser, Content: "What's the weather in Florence,Italy?"},
			{Role: datachat.ModelRoleAssistant, Content: "User asks current weather in Florence, Italy. Use function.", ToolCalls: []datachat.ModelToolCall{
				{ID: "0", Name: "weather", Args: json.RawMessage(`{"location":"Florence, Italy"}`)},
			}},
			{Role: datachat.ModelRoleTool, ToolCallID: "0", ToolName: "weather", Content: "40 C"},
		},
		Tools: []datachat.ToolSpec{{Name: "weather", Description: "Get weather information for a location",
			Parameters: json.RawMessage(`{"properties":{"location":{"description":"the city","type":"string"}},"required":["location"],"type":"object"}`)}},
	}
	wire, err := toRequest(req, "gpt-oss:120b-cloud", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(wire)
	var got map[string]any
	json.Unmarshal(b, &got)
	want := llmtest.RecordedRequest(t, "ollama_chat_tool_result_followup.request.json")
	delete(want, "max_tokens")
	if !reflect.DeepEqual(got, want) {
		w, _ := json.Marshal(want)
		t.Errorf("got  %s\nwant %s", b, w)
	}
}

func TestOptions(t *testing.T) {
	temp := 0.7
	wire, _ := toRequest(&datachat.ModelRequest{Temperature: &temp, MaxOutputTokens: 512}, "m", 8192)
	b, _ := json.Marshal(wire.Options)
	if string(b) != `{"temperature":0.7,"num_ctx":8192,"num_predict":512}` {
		t.Errorf("options: got %s", b)
	}
	srv := llmtest.NewServer(t, llmtest.Ollama, llmtest.Script{Turns: []llmtest.Turn{llmtest.Texts("ok")}})
	if _, err := llmtest.Collect(context.Background(), New(Options{Host: srv.URL, NumCtx: 4096}), &datachat.ModelRequest{}); err != nil {
		t.Fatal(err)
	}
	opts, _ := srv.ChatRequests()[0].Body["options"].(map[string]any)
	if n, _ := opts["num_ctx"].(json.Number); n != "4096" {
		t.Errorf("num_ctx sent: %v", srv.ChatRequests()[0].Body)
	}
}

func TestHostURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "http://127.0.0.1:11434",
		"127.0.0.1":                  "http://127.0.0.1:11434",
		"0.0.0.0:11434":              "http://127.0.0.1:11434",
		"gpu-box:8080":               "http://gpu-box:8080",
		"http://localhost:11434/":    "http://localhost:11434",
		"https://ollama.com":         "https://ollama.com:443",
		"http://proxy:80/ollama":     "http://proxy:80/ollama",
		"[::1]:11434":                "http://[::1]:11434",
		" http://127.0.0.1:9999 ":    "http://127.0.0.1:9999",
		"https://example.com:8443/x": "https://example.com:8443/x",
	} {
		if got := HostURL(in); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
	if c := New(Options{}); c.Name() != "ollama" || c.ModelName() != "llama3.1" || c.EmbeddingModelName() != "nomic-embed-text" || c.Host() != "http://127.0.0.1:11434" {
		t.Errorf("defaults: %s %s %s %s", c.Name(), c.ModelName(), c.EmbeddingModelName(), c.Host())
	}
}

func TestArgumentsAsString(t *testing.T) {
	var evs llmtest.Events
	out := llm.NewOutput(context.Background(), func(ev datachat.ModelEvent) error { evs = append(evs, ev); return nil })
	body := `{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":"{\"a\": 1}"}}]},"done":false}
{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}
`
	if err := decodeStream(strings.NewReader(body), out, func() string { return "gen" }); err != nil {
		t.Fatal(err)
	}
	calls := evs.ToolCalls()
	if len(calls) != 1 || string(calls[0].Args) != `{"a":1}` || calls[0].ID != "gen" {
		t.Errorf("got %+v", calls)
	}
}

func TestEmbedError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"the input length exceeds the context length"}`)
	}))
	defer srv.Close()
	_, err := New(Options{Host: srv.URL}).Embed(context.Background(), []string{"long"})
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != datachat.ProviderContextTooLarge {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecodeStream(f *testing.F) {
	llmtest.SeedRecordings(f, "ollama_chat_stream_text.ndjson", "ollama_chat_stream_tool_call.ndjson")
	f.Add([]byte(`{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","thinking":"Hm."},"done":false}
{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"One"},"done":false}
{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","function":{"index":0,"name":"f","arguments":{"x":1}}}]},"done":false}
{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":9,"prompt_eval_count":4,"eval_count":3}
`))
	f.Add([]byte("{\"error\":\"boom\"}\n"))
	f.Add([]byte("{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"\\\"x\\\"\"}}]},\"done\":true}\n"))
	llmtest.FuzzDecodeStream(f, decodeStream)
}
