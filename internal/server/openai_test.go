package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/nodetest"
)

// sqlTurns scripts n questions answered through SQL: the model runs
// adelieSQL, then reads the count from the result it got back.
func sqlTurns(n int) llmtest.Script {
	var turns []llmtest.Turn
	for range n {
		turns = append(turns,
			llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Counting. "},
				ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+adelieSQL+`"}`)},
				Usage:     &llmtest.Usage{Input: 100, Output: 10}},
			llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
				return "There are " + cell(r.LastToolResult(), 0, 0) + " Adelie penguins."
			}, Usage: &llmtest.Usage{Input: 200, Output: 20}},
		)
	}
	return llmtest.Script{Turns: turns}
}

// newObservedChatServer is newChatServer with the chat runner reporting to
// the server's metrics, as serve wires it.
func newObservedChatServer(t *testing.T, p llmtest.Protocol, script llmtest.Script, tweak ...func(*chat.Runner)) *chatServer {
	t.Helper()
	cs := newChatServer(t, p, script, tweak...)
	cs.Chat.Observer = cs.Metrics.Chat()
	return cs
}

// completionReq posts a chat completion request with alice's key unless
// headers set another.
func (ts *testServer) completionReq(t *testing.T, body string, headers map[string]string) *http.Response {
	t.Helper()
	return ts.postV1(t, "/v1/chat/completions", body, headers)
}

// postV1 posts a JSON body to path with alice's key as a bearer token
// unless headers set another; the answer's body is closed at the end.
func (ts *testServer) postV1(t *testing.T, path, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ts.alice)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvents reads a server-sent event stream's data lines.
func sseEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, data)
	}
	return out
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

func TestOpenAICompletionWhole(t *testing.T) {
	wantCount, _ := penguinsOracle(t)
	cs := newObservedChatServer(t, llmtest.Gemini, sqlTurns(1))
	conv := cs.withPenguins(t)
	resp := cs.completionReq(t, `{"model":"datachat","messages":[{"role":"user","content":"How many Adelie penguins?"}]}`,
		map[string]string{"X-Conversation-ID": conv})
	var body struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens, CompletionTokens, TotalTokens int64
		} `json:"usage"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %d %s (%v)", resp.StatusCode, b, err)
	}
	// The parts around the tool call are paragraphs, as on the page; the
	// stored text is the parts' text as they streamed.
	want := fmt.Sprintf("Counting. \n\nThere are %d Adelie penguins.", wantCount)
	stored := fmt.Sprintf("Counting. There are %d Adelie penguins.", wantCount)
	if body.Object != "chat.completion" || body.Model != "datachat" || !strings.HasPrefix(body.ID, "chatcmpl-") ||
		len(body.Choices) != 1 || body.Choices[0].Message.Role != "assistant" || body.Choices[0].Message.Content != want ||
		body.Choices[0].FinishReason != "stop" {
		t.Errorf("got %s, want content %q", b, want)
	}
	if !strings.Contains(string(b), `"prompt_tokens":300`) || !strings.Contains(string(b), `"completion_tokens":30`) || !strings.Contains(string(b), `"total_tokens":330`) {
		t.Errorf("usage: %s", b)
	}
	if got := resp.Header.Get("X-Conversation-ID"); got != conv {
		t.Errorf("X-Conversation-ID %q, want %q", got, conv)
	}
	if msgs := cs.messages(t, conv); len(msgs) != 2 || msgs[1].Content != stored || msgs[1].Status != "complete" {
		t.Errorf("stored messages %+v", msgs)
	}
}

func TestOpenAICompletionStream(t *testing.T) {
	wantCount, _ := penguinsOracle(t)
	for _, tc := range []struct {
		name         string
		body         string
		headers      map[string]string
		includeUsage bool
		showSQL      bool
	}{
		{name: "plain", body: `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"How many?"}]}`},
		{name: "usage and SQL by field", body: `{"model":"datachat","stream":true,"stream_options":{"include_usage":true},"datachat_show_sql":true,"messages":[{"role":"user","content":[{"type":"text","text":"How many?"}]}]}`,
			includeUsage: true, showSQL: true},
		{name: "SQL by header", body: `{"model":"any-model","stream":true,"messages":[{"role":"user","content":"How many?"}]}`,
			headers: map[string]string{"X-Datachat-Show-SQL": "1"}, showSQL: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newObservedChatServer(t, llmtest.OpenAI, sqlTurns(1))
			conv := cs.withPenguins(t)
			headers := map[string]string{"X-Conversation-ID": conv}
			for k, v := range tc.headers {
				headers[k] = v
			}
			resp := cs.completionReq(t, tc.body, headers)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("got %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			events := sseEvents(t, resp.Body)
			if len(events) < 4 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("events %q: want chunks then [DONE]", events)
			}
			var chunks []wireChunk
			for _, e := range events[:len(events)-1] {
				var c wireChunk
				if err := json.Unmarshal([]byte(e), &c); err != nil {
					t.Fatalf("chunk %s: %v", e, err)
				}
				if c.Object != "chat.completion.chunk" || c.ID != chunks0ID(chunks, c.ID) {
					t.Errorf("chunk %s", e)
				}
				if hasUsageKey := strings.Contains(e, `"usage"`); hasUsageKey != tc.includeUsage {
					t.Errorf("chunk %s: usage key present %v, want %v", e, hasUsageKey, tc.includeUsage)
				}
				chunks = append(chunks, c)
			}
			if first := chunks[0]; len(first.Choices) != 1 || first.Choices[0].Delta.Role != "assistant" {
				t.Errorf("first chunk does not carry the role: %+v", first)
			}
			last := len(chunks) - 1
			if tc.includeUsage {
				u := chunks[last]
				if len(u.Choices) != 0 || u.Usage == nil || u.Usage.PromptTokens != 300 || u.Usage.CompletionTokens != 30 || u.Usage.TotalTokens != 330 {
					t.Errorf("usage chunk %+v", u)
				}
				last--
			}
			if f := chunks[last].Choices[0].FinishReason; f == nil || *f != "stop" {
				t.Errorf("last chunk %+v has no finish_reason stop", chunks[last])
			}
			var text strings.Builder
			for _, c := range chunks {
				for _, ch := range c.Choices {
					if ch.Delta.Content != nil {
						text.WriteString(*ch.Delta.Content)
					}
				}
			}
			answer := fmt.Sprintf("There are %d Adelie penguins.", wantCount)
			if !strings.HasSuffix(text.String(), answer) {
				t.Errorf("streamed %q, want it to end with %q", text.String(), answer)
			}
			sqlShown := strings.Contains(text.String(), "```sql\n"+adelieSQL+"\n```")
			if sqlShown != tc.showSQL {
				t.Errorf("streamed %q: SQL shown %v, want %v", text.String(), sqlShown, tc.showSQL)
			}
			if msgs := cs.messages(t, conv); msgs[1].Content != "Counting. "+answer {
				t.Errorf("stored %q: the SQL block must not be stored", msgs[1].Content)
			}
		})
	}
}

// chunks0ID is the id every chunk must share: the first one's.
func chunks0ID(chunks []wireChunk, id string) string {
	if len(chunks) == 0 {
		return id
	}
	return chunks[0].ID
}

func TestOpenAINewConversationFromMessages(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.Ollama, llmtest.Script{Turns: []llmtest.Turn{{Text: []string{"Hello again."}}}})
	resp := cs.completionReq(t, `{"model":"datachat","messages":[
		{"role":"system","content":"You are a pirate."},
		{"role":"user","content":"Hi, I'm Ann."},
		{"role":"assistant","content":"Hello Ann."},
		{"role":"user","content":"What is my name?"}]}`, nil)
	b, _ := io.ReadAll(resp.Body)
	conv := resp.Header.Get("X-Conversation-ID")
	if resp.StatusCode != 200 || conv == "" || !strings.Contains(string(b), "Hello again.") {
		t.Fatalf("got %d %s, conversation %q", resp.StatusCode, b, conv)
	}
	var got []string
	for _, m := range cs.fake.ChatRequests()[0].Messages {
		got = append(got, m.Role+": "+m.Text)
	}
	want := []string{"user: Hi, I'm Ann.", "assistant: Hello Ann.", "user: What is my name?"}
	if len(got) != 4 || strings.Contains(got[0], "pirate") || strings.Join(got[1:], "|") != strings.Join(want, "|") {
		t.Errorf("the model saw %q, want datachat's system prompt then %q", got, want)
	}
	msgs := cs.messages(t, conv)
	if len(msgs) != 4 || msgs[0].Content != "Hi, I'm Ann." || msgs[3].Content != "Hello again." {
		t.Errorf("stored %d messages: %+v", len(msgs), msgs)
	}
	c, err := cs.Store.Conversation(context.Background(), cs.aliceID, conv)
	if err != nil || c.Title != "What is my name?" {
		t.Errorf("conversation %+v %v", c, err)
	}
}

func TestOpenAILoadsURLFromMessage(t *testing.T) {
	url := servePenguins(t) + "/penguins.csv"
	cs := newObservedChatServer(t, llmtest.OpenAI, countRowsScript(url))
	resp := cs.completionReq(t, `{"model":"datachat","messages":[{"role":"user","content":"How many rows in `+url+` ?"}]}`, nil)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"344 rows."`) {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	if ds, _ := cs.Store.Datasets(context.Background(), resp.Header.Get("X-Conversation-ID")); len(ds) != 1 || ds[0].Name != "penguins" {
		t.Errorf("datasets of the new conversation: %+v", ds)
	}
}

func TestOpenAIModels(t *testing.T) {
	ts := newTestServer(t)
	bearer := map[string]string{"Authorization": "Bearer " + ts.alice}
	for _, sc := range []scenario{
		{name: "list", method: "GET", url: "/v1/models", headers: bearer, wantStatus: 200,
			wantContent: []string{`"object":"list"`, `"id":"datachat"`, `"object":"model"`, `"owned_by":"datachat"`}},
		{name: "retrieve", method: "GET", url: "/v1/models/datachat", headers: bearer, wantStatus: 200, wantContent: []string{`"id":"datachat"`}},
		{name: "unknown model", method: "GET", url: "/v1/models/gpt-4o", headers: bearer, wantStatus: 404,
			wantContent: []string{`"code":"model_not_found"`, `"param":"model"`, `"type":"invalid_request_error"`}},
		{name: "no key", method: "GET", url: "/v1/models", wantStatus: 401,
			wantContent: []string{`"code":"invalid_api_key"`, `"param":null`, `"type":"invalid_request_error"`}},
		{name: "X-API-Key works too", method: "GET", url: "/v1/models", headers: map[string]string{"X-API-Key": ts.alice}, wantStatus: 200},
	} {
		ts.run(t, sc)
	}
}

func TestOpenAIErrors(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}}, func(r *chat.Runner) { r.MaxQueryChars = 50 })
	conv := cs.newConversation(t, cs.alice)
	bobConv := cs.newConversation(t, cs.bob)
	msg := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name      string
		body      string
		headers   map[string]string
		status    int
		typ, code string
		param     any
		contains  string
	}{
		{name: "wrong key", body: `{"model":"datachat",` + msg + `}`, headers: map[string]string{"Authorization": "Bearer dck_wrong"}, status: 401, typ: "invalid_request_error", code: "invalid_api_key"},
		{name: "bad JSON", body: `{"model":`, status: 400, typ: "invalid_request_error", contains: "JSON"},
		{name: "no model", body: `{` + msg + `}`, status: 400, typ: "invalid_request_error", param: "model"},
		{name: "no messages", body: `{"model":"datachat","messages":[]}`, status: 400, typ: "invalid_request_error", param: "messages"},
		{name: "last is not the user's", body: `{"model":"datachat","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, status: 400, param: "messages[1].role", typ: "invalid_request_error"},
		{name: "unknown role", body: `{"model":"datachat","messages":[{"role":"wizard","content":"hi"}]}`, status: 400, param: "messages[0].role", typ: "invalid_request_error"},
		{name: "bad content", body: `{"model":"datachat","messages":[{"role":"user","content":42}]}`, status: 400, param: "messages[0].content", typ: "invalid_request_error"},
		{name: "empty question", body: `{"model":"datachat","messages":[{"role":"user","content":"  "}]}`, status: 400, param: "messages[0].content", typ: "invalid_request_error", contains: "empty"},
		{name: "too long", body: `{"model":"datachat","messages":[{"role":"user","content":"` + strings.Repeat("x", 51) + `"}]}`, status: 400, param: "messages[0].content", typ: "invalid_request_error", contains: "50"},
		{name: "temperature", body: `{"model":"datachat","temperature":3,` + msg + `}`, status: 400, param: "temperature", typ: "invalid_request_error"},
		{name: "max_tokens", body: `{"model":"datachat","max_tokens":0,` + msg + `}`, status: 400, param: "max_tokens", typ: "invalid_request_error"},
		{name: "n", body: `{"model":"datachat","n":2,` + msg + `}`, status: 400, param: "n", typ: "invalid_request_error"},
		{name: "another user's conversation", body: `{"model":"datachat",` + msg + `}`, headers: map[string]string{"X-Conversation-ID": bobConv}, status: 404, typ: "invalid_request_error", code: "not_found"},
		{name: "unknown conversation", body: `{"model":"datachat",` + msg + `}`, headers: map[string]string{"X-Conversation-ID": "nope"}, status: 404, typ: "invalid_request_error", code: "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := cs.completionReq(t, tc.body, tc.headers)
			var body struct {
				Error map[string]any `json:"error"`
			}
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, b, tc.status)
			}
			e := body.Error
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e[k]; !ok {
					t.Errorf("error %s lacks %q", b, k)
				}
			}
			if e["type"] != tc.typ || tc.code != "" && e["code"] != tc.code || e["param"] != tc.param ||
				!strings.Contains(e["message"].(string), tc.contains) {
				t.Errorf("got %s, want type %s code %s param %v containing %q", b, tc.typ, tc.code, tc.param, tc.contains)
			}
		})
	}
	if reqs := cs.fake.ChatRequests(); len(reqs) != 0 {
		t.Errorf("refused requests reached the model %d times", len(reqs))
	}
	if msgs := cs.messages(t, conv); len(msgs) != 0 {
		t.Errorf("refused requests stored messages: %+v", msgs)
	}
}

func TestOpenAIRateLimit(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}}, func(r *chat.Runner) { r.RateLimitRPM = 1 })
	body := `{"model":"datachat","messages":[{"role":"user","content":"hi"}]}`
	if resp := cs.completionReq(t, body, nil); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	for _, stream := range []bool{false, true} {
		b := body
		if stream {
			b = `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp := cs.completionReq(t, b, nil)
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(got), `"code":"rate_limit_exceeded"`) || !strings.Contains(string(got), `"type":"rate_limit_error"`) {
			t.Errorf("stream %v: got %d (Retry-After %q) %s", stream, resp.StatusCode, resp.Header.Get("Retry-After"), got)
		}
	}
	// Refused requests leave no conversation behind.
	if convs, _ := cs.Store.Conversations(context.Background(), cs.aliceID); len(convs) != 1 {
		t.Errorf("%d conversations, want the one answered", len(convs))
	}
}

func TestOpenAIProviderErrors(t *testing.T) {
	after := 2
	cs := newObservedChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Error: &llmtest.ErrorReply{Preset: "auth"}},
		{Error: &llmtest.ErrorReply{Preset: "auth"}},
		{Text: []string{"Partial ", "answer ", "cut"}, Error: &llmtest.ErrorReply{Preset: "server_error", After: &after}},
	}})
	body := `{"model":"datachat","messages":[{"role":"user","content":"hi"}]}`
	resp := cs.completionReq(t, body, nil)
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || !strings.Contains(string(got), `"code":"provider_error"`) || !strings.Contains(string(got), `"type":"api_error"`) {
		t.Errorf("provider auth failure: got %d %s", resp.StatusCode, got)
	}
	// Streaming, before any token: still a proper status.
	resp = cs.completionReq(t, `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	got, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || !strings.Contains(string(got), `"code":"provider_error"`) {
		t.Errorf("streaming provider failure: got %d %s", resp.StatusCode, got)
	}
	// After tokens: the stream ends with an error event, which the client
	// sees as an error.
	resp = cs.completionReq(t, `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("mid-stream failure: status %d", resp.StatusCode)
	}
	events := sseEvents(t, resp.Body)
	lastEvent := events[len(events)-1]
	if !strings.Contains(strings.Join(events, "\n"), "Partial ") || !strings.HasPrefix(lastEvent, `{"error":`) || !strings.Contains(lastEvent, `"code":"provider_error"`) {
		t.Errorf("mid-stream failure: events %q", events)
	}
	m := cs.scrape(t)
	if n := metricValue(m, "datachat_provider_errors_total"); n < 3 {
		t.Errorf("provider errors counted %v, want ≥ 3:\n%s", n, grepLines(m, "provider_errors"))
	}
}

func TestOpenAIClientNode(t *testing.T) {
	nodetest.Require(t)
	wantCount, _ := penguinsOracle(t)
	cs := newObservedChatServer(t, llmtest.Gemini, sqlTurns(2))
	conv := cs.withPenguins(t)
	before := cs.scrape(t)
	out := nodetest.Run(t, nil, "openai_client.mjs", cs.URL+"/v1", cs.alice, conv, "How many Adelie penguins are there?")
	var got struct {
		Models []string `json:"models"`
		Whole  struct {
			Content, FinishReason string
			Usage                 map[string]int64
		} `json:"whole"`
		Streamed struct {
			Content      string           `json:"content"`
			Chunks       int              `json:"chunks"`
			FinishReason string           `json:"finish_reason"`
			Usage        map[string]int64 `json:"usage"`
			Roles        []string         `json:"roles"`
		} `json:"streamed"`
		WrongKey struct {
			Name   string `json:"name"`
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"wrongKey"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	answer := fmt.Sprintf("There are %d Adelie penguins.", wantCount)
	if len(got.Models) != 1 || got.Models[0] != "datachat" {
		t.Errorf("models %v", got.Models)
	}
	if !strings.Contains(got.Whole.Content, answer) || got.Whole.Usage["total_tokens"] != 330 {
		t.Errorf("non-streaming: %+v, want %q", got.Whole, answer)
	}
	s := got.Streamed
	if !strings.Contains(s.Content, answer) || !strings.Contains(s.Content, "```sql\n"+adelieSQL) || s.FinishReason != "stop" ||
		s.Usage["prompt_tokens"] != 300 || s.Usage["completion_tokens"] != 30 || s.Chunks < 4 || len(s.Roles) != 1 {
		t.Errorf("streaming: %+v, want %q with its SQL", s, answer)
	}
	if w := got.WrongKey; w.Name != "AuthenticationError" || w.Status != 401 || w.Code != "invalid_api_key" {
		t.Errorf("wrong key: %+v", w)
	}
	if msgs := cs.messages(t, conv); len(msgs) != 4 {
		t.Errorf("the conversation holds %d messages, want 4", len(msgs))
	}

	// The client's traffic moved the counters.
	after := cs.scrape(t)
	for _, c := range []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"datachat_http_requests_total", []string{`route="POST /v1/chat/completions"`, `status="200"`}, 2},
		{"datachat_http_requests_total", []string{`route="POST /v1/chat/completions"`, `status="401"`}, 1},
		{"datachat_http_requests_total", []string{`route="GET /v1/models"`, `status="200"`}, 1},
		{"datachat_tool_calls_total", []string{`source="chat"`, `tool="execute_sql"`, `outcome="ok"`}, 2},
		{"datachat_sql_query_duration_seconds_count", []string{`source="chat"`, `outcome="ok"`}, 2},
		{"datachat_chat_turn_duration_seconds_count", []string{`status="complete"`}, 2},
		{"datachat_chat_time_to_first_token_seconds_count", nil, 2},
		{"datachat_tokens_total", []string{`provider="gemini"`, `model="test-model"`, `direction="input"`}, 600},
		{"datachat_tokens_total", []string{`provider="gemini"`, `model="test-model"`, `direction="output"`}, 60},
	} {
		if d := metricValue(after, c.name, c.labels...) - metricValue(before, c.name, c.labels...); d != c.delta {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, d, c.delta)
		}
	}
}
