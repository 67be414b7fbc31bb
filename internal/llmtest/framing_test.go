package llmtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// volatile matches the values that differ between any two answers (ids,
// times, padding, intermediate token counts); normalize replaces them with X
// and keeps everything else: framing, field order, spacing.
var volatile = regexp.MustCompile(`"(responseId|thoughtSignature|id|created|created_at|system_fingerprint|obfuscation|total_duration|load_duration|prompt_eval_duration|eval_duration|candidatesTokenCount|totalTokenCount)":( ?)("(?:[^"\\]|\\.)*"|\d+)`)

func normalize(b []byte) string {
	return volatile.ReplaceAllString(string(b), `"$1":${2}X`)
}

// post sends a JSON body to the fake and returns the raw answer.
func post(t *testing.T, url string, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func sameFraming(t *testing.T, got, want []byte) {
	t.Helper()
	g, w := normalize(got), normalize(want)
	if g == w {
		return
	}
	gl, wl := strings.SplitAfter(g, "\n"), strings.SplitAfter(w, "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var a, b string
		if i < len(gl) {
			a = gl[i]
		}
		if i < len(wl) {
			b = wl[i]
		}
		if a != b {
			t.Fatalf("line %d differs:\ngot  %q\nwant %q", i+1, a, b)
		}
	}
}

// contentDeltas reads the text chunks of a recorded OpenAI stream.
func contentDeltas(t *testing.T, sse []byte) []string {
	var out []string
	for _, line := range strings.Split(string(sse), "\n") {
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line[6:]), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil && *c.Choices[0].Delta.Content != "" {
			out = append(out, *c.Choices[0].Delta.Content)
		}
	}
	return out
}

func TestGeminiFramingMatchesRecordings(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		srv := NewServer(t, Gemini, Script{Turns: []Turn{{
			Text:  []string{"The sum of ", "2 and 3 is 5. The product of 2 and 3 is", " 6."},
			Usage: &Usage{Input: 218, Output: 22},
		}}})
		resp, got := post(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Content-Type: %s", ct)
		}
		if !bytes.Contains(got, []byte(`"candidatesTokenCount": 22,"totalTokenCount": 240,`)) {
			t.Errorf("the last event does not carry the final usage:\n%s", got)
		}
		sameFraming(t, got, Recording(t, "gemini_stream_text_after_function_response.sse"))
	})
	t.Run("two function calls", func(t *testing.T) {
		srv := NewServer(t, Gemini, Script{Turns: []Turn{{
			ToolCalls: []ToolCall{
				{Name: "add", Args: json.RawMessage(`{"b": 3,"a": 2}`)},
				{Name: "multiply", Args: json.RawMessage(`{"a":2,"b":3}`)},
			},
			Usage: &Usage{Input: 121, Output: 36, Thoughts: 38},
		}}})
		_, got := post(t, srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[]}`)
		sameFraming(t, got, Recording(t, "gemini_stream_function_call_parallel.sse"))
	})
}

func TestOpenAIFramingMatchesRecordings(t *testing.T) {
	t.Run("two tool calls", func(t *testing.T) {
		frags := []string{`{"a"`, `: 2, `, `"b": 3`, `}`}
		srv := NewServer(t, OpenAI, Script{Turns: []Turn{{
			ToolCalls: []ToolCall{
				{ID: "call_ehIWdjL1abZk1h8FWGLQ0Hie", Name: "add", ArgChunks: frags},
				{ID: "call_fBSgA47J5VeONggizTIvl7AH", Name: "multiply", ArgChunks: frags},
			},
			Usage: &Usage{Input: 106, Output: 50},
		}}})
		resp, got := post(t, srv.URL+"/chat/completions", `{"model":"gpt-4o-2024-08-06","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
			t.Errorf("Content-Type: %s", ct)
		}
		sameFraming(t, got, Recording(t, "openai_stream_tool_calls_parallel.sse"))
	})
	t.Run("text", func(t *testing.T) {
		want := Recording(t, "openai_stream_text_after_tool_results.sse")
		srv := NewServer(t, OpenAI, Script{Turns: []Turn{{Text: contentDeltas(t, want), Usage: &Usage{Input: 172, Output: 20}}}})
		_, got := post(t, srv.URL+"/chat/completions", `{"model":"gpt-4o-2024-08-06","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
		sameFraming(t, got, want)
	})
	t.Run("no usage unless asked", func(t *testing.T) {
		srv := NewServer(t, OpenAI, Script{Turns: []Turn{Texts("a")}})
		_, got := post(t, srv.URL+"/chat/completions", `{"model":"m","stream":true,"messages":[]}`)
		if bytes.Contains(got, []byte(`"usage"`)) || !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) {
			t.Errorf("got:\n%s", got)
		}
	})
}

func TestOllamaFramingMatchesRecordings(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		want := Recording(t, "ollama_chat_stream_text.ndjson")
		var chunks []string
		for _, line := range bytes.Split(bytes.TrimSpace(want), []byte("\n")) {
			var l olLine
			if err := json.Unmarshal(line, &l); err != nil {
				t.Fatal(err)
			}
			if !l.Done {
				chunks = append(chunks, l.Message.Content)
			}
		}
		srv := NewServer(t, Ollama, Script{Turns: []Turn{{Text: chunks, Usage: &Usage{Input: 16, Output: 22}}}})
		resp, got := post(t, srv.URL+"/api/chat", `{"model":"gemma3:1b","messages":[{"role":"user","content":"count"}]}`)
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type: %s", ct)
		}
		sameFraming(t, got, want)
	})
	t.Run("thinking then a tool call", func(t *testing.T) {
		want := Recording(t, "ollama_chat_stream_tool_call.ndjson")
		lines := bytes.SplitAfter(want, []byte("\n"))
		var thinking []string
		for _, line := range lines {
			var l olLine
			if json.Unmarshal(line, &l) == nil && l.Message.Thinking != "" {
				thinking = append(thinking, l.Message.Thinking)
			}
		}
		srv := NewServer(t, Ollama, Script{Turns: []Turn{{
			Thinking:  thinking,
			ToolCalls: []ToolCall{{ID: "call_wi63dj03", Name: "weather", Args: json.RawMessage(`{"location":"Florence, Italy"}`)}},
		}}})
		_, got := post(t, srv.URL+"/api/chat", `{"model":"gpt-oss:120b","messages":[]}`)
		// The recording is from Ollama Cloud, whose final line lacks the local
		// server's durations; the fake is a local server. Compare the rest.
		gotLines := bytes.SplitAfter(got, []byte("\n"))
		if len(gotLines) != len(lines) {
			t.Fatalf("got %d lines, want %d", len(gotLines), len(lines))
		}
		n := len(lines) - 2 // the last element is "" after the final "\n"
		sameFraming(t, bytes.Join(gotLines[:n], nil), bytes.Join(lines[:n], nil))
		if !bytes.Contains(gotLines[n], []byte(`"done_reason":"stop","done":true`)) {
			t.Errorf("final line: %s", gotLines[n])
		}
	})
}

func TestErrorBodiesMatchRecordings(t *testing.T) {
	for _, tt := range []struct {
		p      Protocol
		preset string
		path   string
		status int
		file   string
		model  string
	}{
		{Gemini, "permission_denied", "/v1beta/models/m:streamGenerateContent?alt=sse", 403, "gemini_error_403_permission_denied.json", ""},
		{OpenAI, "auth", "/v1/chat/completions", 401, "", ""},
		{Ollama, "tools_unsupported", "/api/chat", 400, "ollama_error_400_tools_unsupported.json", "gemma3:1b"},
	} {
		t.Run(string(tt.p)+"/"+tt.preset, func(t *testing.T) {
			srv := NewServer(t, tt.p, Script{Turns: []Turn{Preset(tt.preset)}})
			resp, got := post(t, "http://"+srv.Addr+tt.path, `{"model":"`+tt.model+`"}`)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.p == OpenAI && (!bytes.HasPrefix(got, []byte("{\n    \"error\": {\n        \"message\": ")) || !bytes.HasSuffix(got, []byte("\n}\n"))) {
				t.Errorf("OpenAI error layout: %q", got)
			}
			if tt.file == "" {
				return
			}
			if want := Recording(t, tt.file); !bytes.Equal(got, want) {
				t.Errorf("body\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// keys lists the key paths of a JSON value, for comparing shapes.
func keys(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[prefix+"."+k] = true
			keys(prefix+"."+k, e, out)
		}
	case []any:
		for _, e := range x {
			keys(prefix+"[]", e, out)
		}
	}
}

// The non-streaming OpenAI-compatible answer has the shape of the recorded
// Ollama /v1 answer, less Ollama's reasoning field and the index it puts in
// tool calls, which OpenAI sends only in streamed deltas.
func TestOpenAIWholeAnswerShape(t *testing.T) {
	srv := NewServer(t, OpenAI, Script{Turns: []Turn{Calls(Call("final_result", `{"city":"Paris","country":"France"}`))}})
	_, got := post(t, srv.URL+"/chat/completions", `{"model":"gpt-oss:20b","messages":[]}`)
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	args := g.(map[string]any)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"]
	if args != `{"city":"Paris","country":"France"}` {
		t.Errorf("arguments: got %v, want a JSON string", args)
	}
	if err := json.Unmarshal(Recording(t, "ollama_openai_compat_tool_call.json"), &w); err != nil {
		t.Fatal(err)
	}
	gk, wk := map[string]bool{}, map[string]bool{}
	keys("", g, gk)
	keys("", w, wk)
	var missing []string
	for k := range wk {
		if !gk[k] && !strings.Contains(k, "reasoning") && k != ".choices[].message.tool_calls[].index" {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the fake's answer lacks %v", missing)
	}
}
