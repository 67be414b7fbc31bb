package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llmtest"
)

func TestSuite(t *testing.T) {
	llmtest.RunModelSuite(t, llmtest.Suite{
		Protocol: llmtest.Gemini,
		KeyVar:   "GEMINI_API_KEY",
		New: func(s llmtest.ClientSettings) llmtest.Model {
			return New(Options{
				APIKey: s.APIKey, BaseURL: s.BaseURL,
				StreamIdleTimeout: s.StreamIdleTimeout, RetryDelay: s.RetryDelay, Logger: s.Logger,
			})
		},
	})
}

// serveFile answers every request with a recorded body, byte for byte.
func serveFile(t *testing.T, name string, status int, contentType string) (*Client, func() []*http.Request) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return New(Options{APIKey: "test-key", BaseURL: srv.URL, RetryDelay: 10 * time.Millisecond}), func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]*http.Request(nil), seen...)
	}
}

func TestRecordedStreams(t *testing.T) {
	tests := []struct {
		file   string
		text   []string
		calls  []datachat.ModelToolCall
		finish string
		usage  datachat.TokenCount
	}{
		{
			file: "gemini_stream_text_after_function_response.sse",
			text: []string{"The sum of ", "2 and 3 is 5. The product of 2 and 3 is", " 6."},
			// usageMetadata repeats with growing counts: the last one counts.
			finish: "stop", usage: datachat.TokenCount{Input: 218, Output: 22},
		},
		{
			file: "gemini_stream_function_call_parallel.sse",
			calls: []datachat.ModelToolCall{
				{Name: "add", Args: json.RawMessage(`{"b":3,"a":2}`), Signature: "CloBvj72+4/aTlyeodvVsF6WQseQLaqynO0Ocu6hCxSIV1rJCGFv67dtpjtFqWaborKte+82ZXWG2DaoPZaL+k7ONU3tUVwUXH0yI3ADtb46NJAqGWp2V/Ht3uMKhQEBvj72+53r7rtJS2JS+RSr/gNHTgRy4DDPTPtEEj+K6F4GFNMQEXVmXPYPa87j/74GGwi14Qwvde1kfemWz/+cRwpf2EDDKELVYuZ56LWb6pmPj4kyXPBERjn3dCiTrAhaysdd21dD0/t3xSXCKNFbPTDjK6IeGzqAGRFeL5D37oKPrh2N"},
				{Name: "multiply", Args: json.RawMessage(`{"a":2,"b":3}`)},
			},
			// Thinking tokens are output tokens: 36 candidates + 38 thoughts.
			finish: "tool_calls", usage: datachat.TokenCount{Input: 121, Output: 74},
		},
		{
			file:   "gemini_stream_function_call_single.sse",
			calls:  []datachat.ModelToolCall{{Name: "get_capital", Args: json.RawMessage(`{"country":"France"}`)}},
			finish: "tool_calls", usage: datachat.TokenCount{Input: 52, Output: 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, seen := serveFile(t, tt.file, 200, "text/event-stream")
			evs, err := llmtest.Collect(context.Background(), c, &datachat.ModelRequest{Messages: []datachat.ModelMessage{{Role: "user", Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, ev := range evs {
				if ev.Text != "" {
					texts = append(texts, ev.Text)
				}
			}
			if !reflect.DeepEqual(texts, tt.text) {
				t.Errorf("text chunks: got %q, want %q", texts, tt.text)
			}
			calls := evs.ToolCalls()
			if len(calls) != len(tt.calls) {
				t.Fatalf("got %d calls, want %d", len(calls), len(tt.calls))
			}
			for i, want := range tt.calls {
				got := calls[i]
				if got.Name != want.Name || string(got.Args) != string(want.Args) || got.Signature != want.Signature || !strings.HasPrefix(got.ID, "call_") {
					t.Errorf("call %d: got %+v, want %+v with a generated id", i, got, want)
				}
			}
			if err := evs.CheckEnd(); err != nil {
				t.Error(err)
			}
			if evs.Finish() != tt.finish || *evs.Usage() != tt.usage {
				t.Errorf("end: got %q %+v, want %q %+v", evs.Finish(), *evs.Usage(), tt.finish, tt.usage)
			}
			r := seen()[0]
			if r.URL.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || r.URL.Query().Get("alt") != "sse" || r.Header.Get("x-goog-api-key") != "test-key" {
				t.Errorf("request: %s %s key %q", r.Method, r.URL, r.Header.Get("x-goog-api-key"))
			}
		})
	}
}

func TestRecordedErrors(t *testing.T) {
	for _, tt := range []struct {
		file   string
		status int
		kind   string
		action string
	}{
		{"gemini_error_400_api_key_invalid.json", 400, datachat.ProviderAuth, "Check GEMINI_API_KEY"},
		{"gemini_error_403_permission_denied.json", 403, datachat.ProviderAuth, "Check GEMINI_API_KEY"},
		{"gemini_error_429_resource_exhausted.json", 429, datachat.ProviderRateLimited, "Wait and try again"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			c, seen := serveFile(t, tt.file, tt.status, "application/json; charset=UTF-8")
			_, err := llmtest.Collect(context.Background(), c, &datachat.ModelRequest{Messages: []datachat.ModelMessage{{Role: "user", Content: "hi"}}})
			var pe *datachat.ProviderError
			if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || pe.SuggestedAction != tt.action {
				t.Fatalf("got %#v, want kind %s, status %d, action %q", err, tt.kind, tt.status, tt.action)
			}
			if len(seen()) != 1 {
				t.Errorf("got %d requests, want 1 (no retry)", len(seen()))
			}
		})
	}
}

func TestMapErrorDetails(t *testing.T) {
	body := []byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`)
	if pe := mapError(429, http.Header{}, body); pe.Kind != datachat.ProviderRateLimited || pe.RetryAfter != 37*time.Second || pe.SuggestedAction != "Wait 37s and try again" {
		t.Errorf("RetryInfo: got %#v", pe)
	}
	if pe := mapError(429, http.Header{"Retry-After": {"5"}}, body); pe.RetryAfter != 5*time.Second {
		t.Errorf("Retry-After header: got %v", pe.RetryAfter)
	}
	tooLong := []byte(`{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`)
	if pe := mapError(400, nil, tooLong); pe.Kind != datachat.ProviderContextTooLarge {
		t.Errorf("context: got %#v", pe)
	}
	if pe := mapError(400, nil, []byte(`{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`)); pe.Kind != datachat.ProviderBadRequest || !strings.Contains(pe.Reason, "Invalid JSON payload") {
		t.Errorf("bad request: got %#v", pe)
	}
	if pe := mapError(502, nil, []byte("<html>bad gateway</html>")); pe.Kind != datachat.ProviderUnavailable {
		t.Errorf("HTML 502: got %#v", pe)
	}
}

func readJSON(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The recorded go-genai requests, rebuilt from datachat's model types: the
// same JSON, key for key.
func TestRequestMatchesRecording(t *testing.T) {
	number := func(desc string) string {
		return `{"type":"integer","description":"` + desc + `"}`
	}
	params := json.RawMessage(`{"type":"object","properties":{"a":` + number("first number") + `,"b":` + number("second number") + `},"required":["a","b"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`)
	req := &datachat.ModelRequest{
		System:          "You are a helpful assistant. Always use both add and multiply at the same time.",
		Messages:        []datachat.ModelMessage{{Role: datachat.ModelRoleUser, Content: "Add and multiply the number 2 and 3"}},
		Tools:           []datachat.ToolSpec{{Name: "add", Description: "Add two numbers", Parameters: params}, {Name: "multiply", Description: "Multiply two numbers", Parameters: params}},
		MaxOutputTokens: 4000,
	}
	check := func(name string) {
		t.Helper()
		wire, err := toRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		var got any
		b, _ := json.Marshal(wire)
		json.Unmarshal(b, &got)
		if want := readJSON(t, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ngot  %s\nwant %s", name, b, mustJSON(want))
		}
	}
	check("gemini_stream_function_call_parallel.request.json")

	sig := "CloBvj72+4/aTlyeodvVsF6WQseQLaqynO0Ocu6hCxSIV1rJCGFv67dtpjtFqWaborKte+82ZXWG2DaoPZaL+k7ONU3tUVwUXH0yI3ADtb46NJAqGWp2V/Ht3uMKhQEBvj72+53r7rtJS2JS+RSr/gNHTgRy4DDPTPtEEj+K6F4GFNMQEXVmXPYPa87j/74GGwi14Qwvde1kfemWz/+cRwpf2EDDKELVYuZ56LWb6pmPj4kyXPBERjn3dCiTrAhaysdd21dD0/t3xSXCKNFbPTDjK6IeGzqAGRFeL5D37oKPrh2N"
	req.Messages = append(req.Messages,
		datachat.ModelMessage{Role: datachat.ModelRoleAssistant, ToolCalls: []datachat.ModelToolCall{
			{ID: "1", Name: "add", Args: json.RawMessage(`{"a":2,"b":3}`), Signature: sig},
			{ID: "2", Name: "multiply", Args: json.RawMessage(`{"a":2,"b":3}`)},
		}},
		datachat.ModelMessage{Role: datachat.ModelRoleTool, ToolCallID: "1", ToolName: "add", Content: "5"},
		datachat.ModelMessage{Role: datachat.ModelRoleTool, ToolCallID: "2", Content: "6"}, // name found from the call
	)
	check("gemini_stream_function_response_followup.request.json")
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestToSchema(t *testing.T) {
	got, err := toSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"query": {"type": "string", "format": "uri", "description": "q"},
			"top_k": {"type": ["integer", "null"], "minimum": 1},
			"when": {"type": "string", "format": "date-time"},
			"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
			"mode": {"enum": ["fast", "slow"]},
			"any": {"anyOf": [{"type": "string"}, {"type": "number"}]}
		},
		"required": ["query"],
		"additionalProperties": false,
		"$defs": {}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{"any":{"anyOf":[{"type":"STRING"},{"type":"NUMBER"}]},"mode":{"enum":["fast","slow"],"type":"STRING"},"query":{"description":"q","type":"STRING"},"tags":{"items":{"enum":["a","b"],"type":"STRING"},"type":"ARRAY"},"top_k":{"minimum":1,"nullable":true,"type":"INTEGER"},"when":{"format":"date-time","type":"STRING"}},"required":["query"],"type":"OBJECT"}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if _, err := toSchema(json.RawMessage(`[1]`)); err == nil {
		t.Error("a non-object schema was accepted")
	}
}

func TestToRequestMergesAndSkips(t *testing.T) {
	temp := 0.2
	wire, err := toRequest(&datachat.ModelRequest{
		Temperature: &temp,
		Messages: []datachat.ModelMessage{
			{Role: "user", Content: "a"},
			{Role: "assistant"}, // empty: dropped
			{Role: "user", Content: "b"},
			{Role: "assistant", Content: "let me check", ToolCalls: []datachat.ModelToolCall{{ID: "x", Name: "execute_sql"}}},
			{Role: "tool", ToolCallID: "x", Content: "42"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(wire)
	want := `{"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]},{"role":"model","parts":[{"text":"let me check"},{"functionCall":{"id":"x","name":"execute_sql","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"x","name":"execute_sql","response":{"result":"42"}}}]}],"generationConfig":{"temperature":0.2}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if _, err := toRequest(&datachat.ModelRequest{Messages: []datachat.ModelMessage{{Role: "tool", ToolCallID: "nope"}}}); err == nil {
		t.Error("a tool result for an unknown call was accepted")
	}
}

func TestVersionedBase(t *testing.T) {
	for in, want := range map[string]string{
		"https://generativelanguage.googleapis.com":         "https://generativelanguage.googleapis.com/v1beta",
		"https://generativelanguage.googleapis.com/v1beta/": "https://generativelanguage.googleapis.com/v1beta",
		"http://127.0.0.1:8081":                             "http://127.0.0.1:8081/v1beta",
		"https://proxy.example/gemini/v1":                   "https://proxy.example/gemini/v1",
	} {
		if got := versionedBase(in); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

func TestNotConfigured(t *testing.T) {
	err := New(Options{}).Stream(context.Background(), &datachat.ModelRequest{}, func(datachat.ModelEvent) error { return nil })
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != datachat.ProviderNotConfigured || pe.SuggestedAction != "Set GEMINI_API_KEY" {
		t.Fatalf("got %#v", err)
	}
	if c := New(Options{}); c.Name() != "gemini" || c.ModelName() != "gemini-2.5-flash" || c.EmbeddingModelName() != "text-embedding-004" {
		t.Errorf("defaults: %s %s %s", c.Name(), c.ModelName(), c.EmbeddingModelName())
	}
}

func TestEmbedBatches(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Gemini, llmtest.Script{EmbeddingDim: 8})
	c := New(Options{APIKey: "k", BaseURL: srv.URL, EmbeddingModel: "text-embedding-004"})
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = strings.Repeat("word ", i%7)
	}
	vecs, err := c.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 150 || !reflect.DeepEqual(vecs[149], llmtest.Vector(texts[149], 8)) {
		t.Fatalf("got %d vectors", len(vecs))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || len(reqs[0].Inputs) != 100 || len(reqs[1].Inputs) != 50 || !strings.HasSuffix(reqs[0].Path, "/models/text-embedding-004:batchEmbedContents") {
		t.Errorf("requests: %d, first %s", len(reqs), reqs[0].Path)
	}
	if m := reqs[0].Body["requests"].([]any)[0].(map[string]any)["model"]; m != "models/text-embedding-004" {
		t.Errorf("per-request model: got %v", m)
	}
}

func FuzzDecodeStream(f *testing.F) {
	for _, name := range []string{"gemini_stream_text_after_function_response.sse", "gemini_stream_function_call_parallel.sse", "gemini_stream_function_call_single.sse"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"error\": {\"code\": 503, \"message\": \"overloaded\"}}\r\n\r\n"))
	f.Add([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\", \"args\": [1]}}]}}]}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out := llm.NewOutput(context.Background(), func(ev datachat.ModelEvent) error {
			if ev.ToolCall != nil && !json.Valid(ev.ToolCall.Args) {
				t.Fatalf("invalid args %q", ev.ToolCall.Args)
			}
			return nil
		})
		err := decodeStream(bytes.NewReader(data), out, func() string { return "call_x" })
		var pe *datachat.ProviderError
		if err != nil && !errors.Is(err, llm.ErrIncomplete) && !errors.As(err, &pe) && !errors.Is(err, llm.ErrLineTooLong) {
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
	})
}
