package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
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
		Protocol: llmtest.Gemini,
		KeyVar:   "GEMINI_API_KEY",
		New: func(s llmtest.ClientSettings) llmtest.Model {
			return New(Options{
				APIKey:    s.APIKey,
				BaseURL:   s.BaseURL,
				Transport: s.Transport,
			})
		},
	})
}

// serveBody answers every request with body, byte for byte.
func serveBody(t *testing.T, body []byte, status int, contentType string) (*Client, *llmtest.Replay) {
	t.Helper()
	srv := llmtest.ServeBody(t, body, status, contentType)
	return New(Options{APIKey: "test-key", BaseURL: srv.URL, Transport: llm.Transport{RetryDelay: 10 * time.Millisecond}}), srv
}

// wantStream is what the client must make of one streamed answer.
type wantStream struct {
	text   []string
	calls  []datachat.ModelToolCall
	finish string
	usage  datachat.TokenCount
}

func checkStream(t *testing.T, c *Client, want wantStream) {
	t.Helper()
	evs, err := llmtest.Collect(context.Background(), c, llmtest.Hello())
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, ev := range evs {
		if ev.Text != "" {
			texts = append(texts, ev.Text)
		}
	}
	if !reflect.DeepEqual(texts, want.text) {
		t.Errorf("text chunks: got %q, want %q", texts, want.text)
	}
	calls := evs.ToolCalls()
	if len(calls) != len(want.calls) {
		t.Fatalf("got %d calls, want %d", len(calls), len(want.calls))
	}
	for i, w := range want.calls {
		got := calls[i]
		if got.Name != w.Name || string(got.Args) != string(w.Args) || got.Signature != w.Signature || !strings.HasPrefix(got.ID, "call_") {
			t.Errorf("call %d: got %+v, want %+v with a generated id", i, got, w)
		}
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
	if evs.Finish() != want.finish || *evs.Usage() != want.usage {
		t.Errorf("end: got %q %+v, want %q %+v", evs.Finish(), *evs.Usage(), want.finish, want.usage)
	}
}

// checkStreamRequest checks where and how the answer was asked for.
func checkStreamRequest(t *testing.T, path string, query url.Values, header http.Header) {
	t.Helper()
	if path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || query.Get("alt") != "sse" || header.Get("x-goog-api-key") != "test-key" {
		t.Errorf("request: %s?%s key %q", path, query.Encode(), header.Get("x-goog-api-key"))
	}
}

// The recorded streams, parsed from their exact bytes.
func TestRecordedStreams(t *testing.T) {
	tests := []struct {
		file string
		want wantStream
	}{
		{
			file: "gemini_stream_text_after_function_response.sse",
			want: wantStream{
				text: []string{"The sum of ", "2 and 3 is 5. The product of 2 and 3 is", " 6."},
				// usageMetadata repeats with growing counts: the last one counts.
				finish: "stop", usage: datachat.TokenCount{Input: 218, Output: 22},
			},
		},
		{
			file: "gemini_stream_function_call_parallel.sse",
			want: wantStream{
				calls: []datachat.ModelToolCall{
					{Name: "add", Args: json.RawMessage(`{"b":3,"a":2}`), Signature: "CloBvj72+4/aTlyeodvVsF6WQseQLaqynO0Ocu6hCxSIV1rJCGFv67dtpjtFqWaborKte+82ZXWG2DaoPZaL+k7ONU3tUVwUXH0yI3ADtb46NJAqGWp2V/Ht3uMKhQEBvj72+53r7rtJS2JS+RSr/gNHTgRy4DDPTPtEEj+K6F4GFNMQEXVmXPYPa87j/74GGwi14Qwvde1kfemWz/+cRwpf2EDDKELVYuZ56LWb6pmPj4kyXPBERjn3dCiTrAhaysdd21dD0/t3xSXCKNFbPTDjK6IeGzqAGRFeL5D37oKPrh2N"},
					{Name: "multiply", Args: json.RawMessage(`{"a":2,"b":3}`)},
				},
				// Thinking tokens are output tokens: 36 candidates + 38 thoughts.
				finish: "tool_calls", usage: datachat.TokenCount{Input: 121, Output: 74},
			},
		},
		{
			file: "gemini_stream_function_call_single.sse",
			want: wantStream{
				calls:  []datachat.ModelToolCall{{Name: "get_capital", Args: json.RawMessage(`{"country":"France"}`)}},
				finish: "tool_calls", usage: datachat.TokenCount{Input: 52, Output: 5},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, seen := serveBody(t, llmtest.Recording(t, tt.file), 200, "text/event-stream")
			checkStream(t, c, tt.want)
			r := seen.Requests()[0]
			query, _ := url.ParseQuery(r.Query)
			checkStreamRequest(t, r.Path, query, r.Header)
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
		want wantStream
	}{
		{
			name: "text",
			turn: llmtest.Turn{Text: []string{"Two plus three", " is five; two times three", " is six."}, Usage: &llmtest.Usage{Input: 30, Output: 12}},
			// The fake's usageMetadata grows event by event too.
			want: wantStream{text: []string{"Two plus three", " is five; two times three", " is six."}, finish: "stop", usage: datachat.TokenCount{Input: 30, Output: 12}},
		},
		{
			name: "two function calls with thoughts",
			turn: llmtest.Turn{
				ToolCalls: []llmtest.ToolCall{
					{Name: "add", Args: json.RawMessage(`{"b": 3, "a": 2}`), Signature: "c2lnbmF0dXJlLW9mLWFkZA=="},
					{Name: "multiply", Args: json.RawMessage(`{"a":2,"b":3}`)},
				},
				Usage: &llmtest.Usage{Input: 40, Output: 10, Thoughts: 7},
			},
			want: wantStream{
				calls: []datachat.ModelToolCall{
					{Name: "add", Args: json.RawMessage(`{"b":3,"a":2}`), Signature: "c2lnbmF0dXJlLW9mLWFkZA=="},
					{Name: "multiply", Args: json.RawMessage(`{"a":2,"b":3}`)},
				},
				finish: "tool_calls", usage: datachat.TokenCount{Input: 40, Output: 17},
			},
		},
		{
			name: "one function call",
			turn: llmtest.Turn{
				ToolCalls: []llmtest.ToolCall{{Name: "get_capital", Args: json.RawMessage(`{"country":"France"}`), Signature: "c2ln"}},
				Usage:     &llmtest.Usage{Input: 52, Output: 5},
			},
			want: wantStream{
				calls:  []datachat.ModelToolCall{{Name: "get_capital", Args: json.RawMessage(`{"country":"France"}`), Signature: "c2ln"}},
				finish: "tool_calls", usage: datachat.TokenCount{Input: 52, Output: 5},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{tt.turn}})
			checkStream(t, New(Options{APIKey: "test-key", BaseURL: srv.URL, Transport: llm.Transport{RetryDelay: 10 * time.Millisecond}}), tt.want)
			reqs := srv.ChatRequests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			query, _ := url.ParseQuery(reqs[0].Query)
			checkStreamRequest(t, reqs[0].Path, query, reqs[0].Header)
		})
	}
}

// checkError checks that c fails with a typed error at once, without retrying.
func checkError(t *testing.T, c *Client, requests func() int, status int, kind, action string) {
	t.Helper()
	_, err := llmtest.Collect(context.Background(), c, llmtest.Hello())
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != kind || pe.Status != status || pe.SuggestedAction != action {
		t.Fatalf("got %#v, want kind %s, status %d, action %q", err, kind, status, action)
	}
	if n := requests(); n != 1 {
		t.Errorf("got %d requests, want 1 (no retry)", n)
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
			c, seen := serveBody(t, llmtest.Recording(t, tt.file), tt.status, "application/json; charset=UTF-8")
			checkError(t, c, seen.Count, tt.status, tt.kind, tt.action)
		})
	}
}

// The fake's error answers, built like the recorded ones.
func TestErrors(t *testing.T) {
	for _, tt := range []struct {
		preset string
		status int
		kind   string
		action string
	}{
		{"auth", 400, datachat.ProviderAuth, "Check GEMINI_API_KEY"},
		{"permission_denied", 403, datachat.ProviderAuth, "Check GEMINI_API_KEY"},
		{"rate_limit", 429, datachat.ProviderRateLimited, "Wait 7s and try again"}, // the fake sends RetryInfo 7s
	} {
		t.Run(tt.preset, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{llmtest.Preset(tt.preset), llmtest.Texts("must not be reached")}})
			c := New(Options{APIKey: "test-key", BaseURL: srv.URL, Transport: llm.Transport{RetryDelay: 10 * time.Millisecond}})
			checkError(t, c, func() int { return len(srv.ChatRequests()) }, tt.status, tt.kind, tt.action)
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
		if want := llmtest.RecordedRequest(t, name); !reflect.DeepEqual(got, want) {
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
	llmtest.SeedRecordings(f, "gemini_stream_text_after_function_response.sse", "gemini_stream_function_call_parallel.sse", "gemini_stream_function_call_single.sse")
	f.Add([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"One\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 4,\"candidatesTokenCount\": 1,\"totalTokenCount\": 5}}\r\n\r\n" +
		"data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\",\"args\": {\"x\": 1}},\"thoughtSignature\": \"c2ln\"},{\"functionCall\": {\"name\": \"g\",\"args\": {}}}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 4,\"candidatesTokenCount\": 9,\"totalTokenCount\": 20,\"thoughtsTokenCount\": 7}}\r\n\r\n"))
	f.Add([]byte("data: {\"error\": {\"code\": 503, \"message\": \"overloaded\"}}\r\n\r\n"))
	f.Add([]byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"f\", \"args\": [1]}}]}}]}\n\n"))
	llmtest.FuzzDecodeStream(f, decodeStream)
}
