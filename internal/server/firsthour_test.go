package server

// Tests of the OpenAI-compatible edge and the messages a new user meets in
// the first hour (issue 24): POST /v1/responses, forced tool choices, /v1's
// own 404s, provider errors as sentences, and what an upload's refusal says.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/nodetest"
	"datachat/internal/sharedtest"
)

// responsesReq posts to /v1/responses with alice's key unless headers set
// another.
func (ts *testServer) responsesReq(t *testing.T, body string, headers map[string]string) *http.Response {
	t.Helper()
	return ts.postV1(t, "/v1/responses", body, headers)
}

// wireResponse is the part of a Response object the tests read.
type wireResponse struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	CreatedAt          int64   `json:"created_at"`
	Status             string  `json:"status"`
	Model              string  `json:"model"`
	PreviousResponseID *string `json:"previous_response_id"`
	Error              *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Output []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content []struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Annotations []any  `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		TotalTokens        int64 `json:"total_tokens"`
		InputTokensDetails struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	} `json:"usage"`
}

// text is the response's output text, as OpenAI's clients join it.
func (r *wireResponse) text() string {
	var b strings.Builder
	for _, o := range r.Output {
		for _, c := range o.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// namedEvent is one server-sent event with its event name.
type namedEvent struct {
	name string
	data string
}

// namedEvents reads a stream of "event: NAME" / "data: JSON" events.
func namedEvents(t *testing.T, r io.Reader) []namedEvent {
	t.Helper()
	var out []namedEvent
	var cur namedEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = namedEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("not an SSE line: %q", line)
		}
	}
	return out
}

func TestResponsesWhole(t *testing.T) {
	wantCount, _ := penguinsOracle(t)
	cs := newObservedChatServer(t, llmtest.Gemini, sqlTurns(1))
	conv := cs.withPenguins(t)
	resp := cs.responsesReq(t, `{"model":"datachat","input":"How many Adelie penguins?"}`, map[string]string{"X-Conversation-ID": conv})
	b, _ := io.ReadAll(resp.Body)
	var r wireResponse
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %d %s (%v)", resp.StatusCode, b, err)
	}
	want := fmt.Sprintf("Counting. \n\nThere are %d Adelie penguins.", wantCount)
	if r.Object != "response" || !strings.HasPrefix(r.ID, "resp_") || r.Status != "completed" || r.Model != "datachat" || r.CreatedAt == 0 ||
		len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" || r.Output[0].Status != "completed" ||
		!strings.HasPrefix(r.Output[0].ID, "msg_") || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Annotations == nil || r.text() != want {
		t.Errorf("got %s, want the text %q", b, want)
	}
	if u := r.Usage; u == nil || u.InputTokens != 300 || u.OutputTokens != 30 || u.TotalTokens != 330 || u.InputTokensDetails.CachedTokens == nil {
		t.Errorf("usage: %s", b)
	}
	if got := resp.Header.Get("X-Conversation-ID"); got != conv {
		t.Errorf("X-Conversation-ID %q, want %q", got, conv)
	}
	if msgs := cs.messages(t, conv); len(msgs) != 2 || msgs[1].Status != "complete" {
		t.Errorf("stored messages %+v", msgs)
	}
	for _, field := range []string{`"error":null`, `"incomplete_details":null`, `"tools":[]`, `"tool_choice":"auto"`, `"text":{"format":{"type":"text"}}`, `"parallel_tool_calls":`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("the response lacks %s: %s", field, b)
		}
	}
}

func TestResponsesStream(t *testing.T) {
	wantCount, _ := penguinsOracle(t)
	cs := newObservedChatServer(t, llmtest.OpenAI, sqlTurns(1))
	conv := cs.withPenguins(t)
	resp := cs.responsesReq(t, `{"model":"datachat","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"How many Adelie penguins?"}]}]}`,
		map[string]string{"X-Conversation-ID": conv})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("got %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	events := namedEvents(t, resp.Body)
	var types []string
	var deltas strings.Builder
	var done, completed wireResponse
	var doneText string
	itemIDs := map[string]bool{}
	for i, e := range events {
		var ev struct {
			Type     string          `json:"type"`
			Seq      *int            `json:"sequence_number"`
			Delta    string          `json:"delta"`
			Text     string          `json:"text"`
			ItemID   string          `json:"item_id"`
			Item     json.RawMessage `json:"item"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
			t.Fatalf("event %s: %v", e.data, err)
		}
		if ev.Type != e.name || ev.Seq == nil || *ev.Seq != i {
			t.Errorf("event %d named %q: type %q, sequence %v", i, e.name, ev.Type, ev.Seq)
		}
		types = append(types, ev.Type)
		if ev.ItemID != "" {
			itemIDs[ev.ItemID] = true
		}
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.output_text.done":
			doneText = ev.Text
		case "response.created":
			json.Unmarshal(ev.Response, &done)
		case "response.completed":
			json.Unmarshal(ev.Response, &completed)
		}
	}
	compact := slices.Compact(slices.Clone(types))
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(compact, want) {
		t.Errorf("event types %q, want %q (deltas repeated)", compact, want)
	}
	answer := fmt.Sprintf("Counting. \n\nThere are %d Adelie penguins.", wantCount)
	if deltas.String() != answer || doneText != answer || completed.text() != answer {
		t.Errorf("deltas %q, done %q, completed %q; want %q", deltas.String(), doneText, completed.text(), answer)
	}
	if done.Status != "in_progress" || done.ID == "" || completed.ID != done.ID || completed.Status != "completed" || len(itemIDs) != 1 {
		t.Errorf("created %+v, completed %+v, item ids %v", done, completed, itemIDs)
	}
	if u := completed.Usage; u == nil || u.InputTokens != 300 || u.OutputTokens != 30 || u.TotalTokens != 330 {
		t.Errorf("completed usage %+v", completed.Usage)
	}
}

// TestResponsesConversation: a response continues the conversation of the
// previous_response_id (or of an item_reference) it names; a new one starts
// with the request's earlier messages.
func TestResponsesConversation(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{ReplyFunc: func(r *llmtest.Request) string {
		return fmt.Sprintf("Seen %d messages.", len(r.Messages))
	}}})
	decode := func(resp *http.Response) wireResponse {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		var r wireResponse
		if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
		return r
	}
	first := cs.responsesReq(t, `{"model":"datachat","input":[
		{"role":"developer","content":"Be brief."},
		{"role":"user","content":"I'm Ann."},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello Ann."}]},
		{"role":"user","content":"What is my name?"}]}`, nil)
	conv := first.Header.Get("X-Conversation-ID")
	r1 := decode(first)
	if r1.text() != "Seen 4 messages." || conv == "" {
		t.Fatalf("first: %q in %q; want the system prompt and three messages", r1.text(), conv)
	}
	r2 := decode(cs.responsesReq(t, `{"model":"datachat","previous_response_id":"`+r1.ID+`","input":"And now?"}`, nil))
	if r2.text() != "Seen 6 messages." || r2.PreviousResponseID == nil || *r2.PreviousResponseID != r1.ID {
		t.Errorf("previous_response_id: %+v", r2)
	}
	r3 := decode(cs.responsesReq(t, `{"model":"datachat","input":[{"type":"item_reference","id":"`+r2.Output[0].ID+`"},{"role":"user","content":"Once more?"}]}`, nil))
	if r3.text() != "Seen 8 messages." {
		t.Errorf("item_reference: %q", r3.text())
	}
	if msgs := cs.messages(t, conv); len(msgs) != 8 {
		t.Errorf("the conversation holds %d messages, want 8", len(msgs))
	}
	bobConv := cs.newConversation(t, cs.bob)
	for _, tc := range []struct{ name, body, param string }{
		{"unknown previous response", `{"model":"datachat","previous_response_id":"resp_nope","input":"hi"}`, "previous_response_id"},
		{"bob's conversation", `{"model":"datachat","previous_response_id":"resp_` + bobConv + `_0123456789abcdef","input":"hi"}`, "previous_response_id"},
	} {
		resp := cs.responsesReq(t, tc.body, nil)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 404 || !strings.Contains(string(b), `"param":"`+tc.param+`"`) || !strings.Contains(string(b), "not found") {
			t.Errorf("%s: got %d %s", tc.name, resp.StatusCode, b)
		}
	}
}

// TestOpenAIRefusals: a request datachat cannot honour is refused with a 400
// naming the parameter and saying why, rather than answered as if it had
// been: a forced tool choice (datachat runs its own tools), structured
// output, background and unstored responses, input that is not text.
func TestOpenAIRefusals(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}})
	tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{}}}]`
	ctools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{}}}}]`
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, route, body, param, contains string
	}{
		{"responses: required", "responses", `{"model":"datachat","input":"hi",` + tools + `,"tool_choice":"required"}`, "tool_choice", "datachat runs its own tools"},
		{"responses: a function", "responses", `{"model":"datachat","input":"hi",` + tools + `,"tool_choice":{"type":"function","name":"get_weather"}}`, "tool_choice", "datachat runs its own tools"},
		{"responses: allowed tools, required", "responses", `{"model":"datachat","input":"hi",` + tools + `,"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"get_weather"}]}}`, "tool_choice", "datachat runs its own tools"},
		{"responses: a hosted tool", "responses", `{"model":"datachat","input":"hi","tool_choice":{"type":"web_search_preview"}}`, "tool_choice", "datachat runs its own tools"},
		{"responses: unknown tool_choice", "responses", `{"model":"datachat","input":"hi","tool_choice":"sometimes"}`, "tool_choice", "auto"},
		{"responses: JSON schema", "responses", `{"model":"datachat","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{}}}}`, "text.format", "text"},
		{"responses: background", "responses", `{"model":"datachat","input":"hi","background":true}`, "background", "stream"},
		{"responses: not stored", "responses", `{"model":"datachat","input":"hi","store":false}`, "store", "keeps"},
		{"responses: conversation object", "responses", `{"model":"datachat","input":"hi","conversation":"conv_1"}`, "conversation", "previous_response_id"},
		{"responses: an image", "responses", `{"model":"datachat","input":[{"role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"https://x/y.png"}]}]}`, "input[0].content[1]", "text"},
		{"responses: no model", "responses", `{"input":"hi"}`, "model", "model"},
		{"responses: no input", "responses", `{"model":"datachat"}`, "input", "input"},
		{"responses: empty input", "responses", `{"model":"datachat","input":[]}`, "input", "input"},
		{"responses: last is not the user's", "responses", `{"model":"datachat","input":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, "input[1].role", "user"},
		{"responses: unknown item", "responses", `{"model":"datachat","input":[{"type":"computer_call_output","call_id":"x"},{"role":"user","content":"hi"}]}`, "input[0].type", "computer_call_output"},
		{"responses: foreign item_reference", "responses", `{"model":"datachat","input":[{"type":"item_reference","id":"msg_abc"},{"role":"user","content":"hi"}]}`, "input[0].id", "msg_abc"},
		{"responses: temperature", "responses", `{"model":"datachat","input":"hi","temperature":9}`, "temperature", "0 to 2"},
		{"responses: max_output_tokens", "responses", `{"model":"datachat","input":"hi","max_output_tokens":0}`, "max_output_tokens", "positive"},
		{"completions: required", "chat/completions", `{"model":"datachat",` + msgs + `,` + ctools + `,"tool_choice":"required"}`, "tool_choice", "datachat runs its own tools"},
		{"completions: a function", "chat/completions", `{"model":"datachat",` + msgs + `,` + ctools + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`, "tool_choice", "datachat runs its own tools"},
		{"completions: JSON schema", "chat/completions", `{"model":"datachat",` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`, "response_format", "text"},
		{"completions: JSON object", "chat/completions", `{"model":"datachat",` + msgs + `,"response_format":{"type":"json_object"}}`, "response_format", "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			if tc.route == "responses" {
				resp = cs.responsesReq(t, tc.body, nil)
			} else {
				resp = cs.completionReq(t, tc.body, nil)
			}
			b, _ := io.ReadAll(resp.Body)
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			json.Unmarshal(b, &body)
			e := body.Error
			if resp.StatusCode != 400 || e.Type != "invalid_request_error" || e.Param == nil || *e.Param != tc.param || !strings.Contains(e.Message, tc.contains) {
				t.Errorf("got %d %s; want 400 with param %q and %q", resp.StatusCode, b, tc.param, tc.contains)
			}
		})
	}
	if reqs := cs.fake.ChatRequests(); len(reqs) != 0 {
		t.Errorf("refused requests reached the model %d times", len(reqs))
	}
	if convs, _ := cs.Store.Conversations(context.Background(), cs.aliceID); len(convs) != 0 {
		t.Errorf("refused requests left %d conversations", len(convs))
	}
	// Tools the client declares without forcing them are accepted (and not
	// used: datachat answers with its own).
	for _, body := range []string{
		`{"model":"datachat","input":"hi",` + tools + `,"tool_choice":"auto"}`,
		`{"model":"datachat","input":"hi",` + tools + `,"tool_choice":"none","text":{"format":{"type":"text"}},"store":true,"instructions":"Be brief.","top_p":0.5}`,
	} {
		if resp := cs.responsesReq(t, body, nil); resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%s: got %d %s", body, resp.StatusCode, b)
		}
	}
	if resp := cs.completionReq(t, `{"model":"datachat",`+msgs+`,`+ctools+`,"tool_choice":"auto","response_format":{"type":"text"}}`, nil); resp.StatusCode != 200 {
		t.Errorf("completions with tools, tool_choice auto: %d", resp.StatusCode)
	}
}

// TestV1NotFoundInOpenAIShape: under /v1, a route datachat does not serve
// answers in OpenAI's error shape, as the routes it serves do.
func TestV1NotFoundInOpenAIShape(t *testing.T) {
	ts := newTestServer(t)
	bearer := map[string]string{"Authorization": "Bearer " + ts.alice}
	for _, sc := range []scenario{
		{name: "unknown route", method: "POST", url: "/v1/embeddings", headers: bearer, wantStatus: 404,
			wantContent: []string{`"type":"invalid_request_error"`, `"param":null`, `"code":"unknown_url"`, "POST /v1/embeddings", "/v1/responses"}},
		{name: "unknown route without a key", method: "GET", url: "/v1/files", wantStatus: 404, wantContent: []string{`"type":"invalid_request_error"`, `"code":"unknown_url"`}},
		{name: "/v1 itself", method: "GET", url: "/v1", headers: bearer, wantStatus: 404, wantContent: []string{`"code":"unknown_url"`}},
		{name: "retrieving a response", method: "GET", url: "/v1/responses/resp_1", headers: bearer, wantStatus: 404, wantContent: []string{`"code":"unknown_url"`}},
		{name: "wrong method", method: "GET", url: "/v1/chat/completions", headers: bearer, wantStatus: 405,
			wantContent: []string{`"type":"invalid_request_error"`, `"param":null`, `"code":"method_not_allowed"`, "POST"}},
		{name: "elsewhere: datachat's shape", method: "GET", url: "/api/nope", headers: bearer, wantStatus: 404,
			wantContent: []string{`"type":"not_found"`}, notContent: []string{`"param"`}},
	} {
		ts.run(t, sc)
	}
}

// TestProviderErrorSentences: a provider's failure reads as sentences, each
// with its period, on /v1 and /chat/query.
func TestProviderErrorSentences(t *testing.T) {
	cs := newObservedChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Error: &llmtest.ErrorReply{Preset: "unavailable"}}})
	want := "The language model request failed. The provider is unavailable or overloaded (503 Service Unavailable). Wait a minute and try again."
	for _, resp := range []*http.Response{
		cs.completionReq(t, `{"model":"datachat","messages":[{"role":"user","content":"hi"}]}`, nil),
		cs.responsesReq(t, `{"model":"datachat","input":"hi"}`, nil),
	} {
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 502 || !strings.Contains(string(b), `"message":"`+want+`"`) {
			t.Errorf("%s: got %d %s, want %q", resp.Request.URL.Path, resp.StatusCode, b, want)
		}
	}
	if ev := (chat.ErrorEvent{Message: "Failed.", Reason: "It broke (500)", SuggestedAction: "Try again?"}); ev.Text() != "Failed. It broke (500). Try again?" {
		t.Errorf("Text: %q", ev.Text())
	}
}

// TestOfficeFileAsDocument: a password-protected workbook uploaded as a
// document is called what it is, not a legacy Office file.
func TestOfficeFileAsDocument(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	b := sharedtest.Read(t, "data/xlsx/encryptSHA1.xlsx")
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "budget.xlsx")
	fw.Write(b)
	mw.Close()
	req, _ := http.NewRequest("POST", ts.URL+"/api/conversations/"+conv+"/documents", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", ts.alice)
	st, body := doJSON(t, req)
	msg := fmt.Sprint(body["error"])
	if st != 400 || !strings.Contains(msg, "password-protected Excel workbook") || strings.Contains(msg, "legacy") {
		t.Errorf("got %d %s", st, msg)
	}
}

// TestDatasetURLRefusalNamesTheSetting: a private address is refused with
// the setting that allows it.
func TestDatasetURLRefusalNamesTheSetting(t *testing.T) {
	ts := newTestServer(t) // allows 127.0.0.1/32 only
	conv := ts.newConversation(t, ts.alice)
	st, body := ts.post(t, "/api/conversations/"+conv+"/datasets", ts.alice, `{"url":"http://127.0.0.2:9/x.csv"}`)
	if msg := fmt.Sprint(body["error"]); st != 400 || !strings.Contains(msg, "127.0.0.2 is a loopback address") || !strings.Contains(msg, "DATACHAT_ALLOW_PRIVATE_URLS") {
		t.Errorf("got %d %s", st, msg)
	}
}

// TestResponsesClientsNode drives /v1/responses with OpenAI's official npm
// client (responses.create, plain and streaming, the stream helper,
// previous_response_id) and the Vercel AI SDK's default OpenAI provider
// (generateText, streamText).
func TestResponsesClientsNode(t *testing.T) {
	nodetest.Require(t)
	wantCount, _ := penguinsOracle(t)
	cs := newObservedChatServer(t, llmtest.OpenAI, sqlTurns(6))
	conv := cs.withPenguins(t)
	out := nodetest.Run(t, nil, "responses_client.mjs", cs.URL+"/v1", cs.alice, conv, "How many Adelie penguins are there?")
	var got struct {
		Plain struct {
			ID         string           `json:"id"`
			Object     string           `json:"object"`
			Status     string           `json:"status"`
			OutputText string           `json:"output_text"`
			Usage      map[string]any   `json:"usage"`
			Output     []map[string]any `json:"output"`
		} `json:"plain"`
		Streamed struct {
			Types     []string `json:"types"`
			Text      string   `json:"text"`
			Completed struct {
				Status     string         `json:"status"`
				OutputText string         `json:"output_text"`
				Usage      map[string]any `json:"usage"`
			} `json:"completed"`
		} `json:"streamed"`
		Helper struct {
			OutputText string `json:"output_text"`
			Deltas     int    `json:"deltas"`
		} `json:"helper"`
		Next struct {
			OutputText         string `json:"output_text"`
			PreviousResponseID string `json:"previous_response_id"`
		} `json:"next"`
		AIGenerate struct {
			Text         string         `json:"text"`
			FinishReason string         `json:"finishReason"`
			Usage        map[string]any `json:"usage"`
		} `json:"aiGenerate"`
		AIStream struct {
			Text         string         `json:"text"`
			FinishReason string         `json:"finishReason"`
			Usage        map[string]any `json:"usage"`
		} `json:"aiStream"`
		Forced struct {
			Status  int    `json:"status"`
			Param   string `json:"param"`
			Message string `json:"message"`
		} `json:"forced"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	answer := fmt.Sprintf("There are %d Adelie penguins.", wantCount)
	p := got.Plain
	if p.Object != "response" || p.Status != "completed" || !strings.HasSuffix(p.OutputText, answer) || fmt.Sprint(p.Usage["total_tokens"]) != "330" {
		t.Errorf("responses.create: %+v", p)
	}
	s := got.Streamed
	if !strings.HasSuffix(s.Text, answer) || s.Completed.OutputText != s.Text || s.Completed.Status != "completed" ||
		fmt.Sprint(s.Completed.Usage["input_tokens"]) != "300" || !slices.Contains(s.Types, "response.output_text.delta") || s.Types[len(s.Types)-1] != "response.completed" {
		t.Errorf("responses.create stream: %+v", s)
	}
	if !strings.HasSuffix(got.Helper.OutputText, answer) || got.Helper.Deltas == 0 {
		t.Errorf("responses.stream: %+v", got.Helper)
	}
	if !strings.HasSuffix(got.Next.OutputText, answer) || got.Next.PreviousResponseID != p.ID {
		t.Errorf("previous_response_id: %+v", got.Next)
	}
	for name, r := range map[string]struct {
		text, finish string
		usage        map[string]any
	}{"generateText": {got.AIGenerate.Text, got.AIGenerate.FinishReason, got.AIGenerate.Usage}, "streamText": {got.AIStream.Text, got.AIStream.FinishReason, got.AIStream.Usage}} {
		if !strings.HasSuffix(r.text, answer) || r.finish != "stop" || fmt.Sprint(r.usage["inputTokens"]) != "300" || fmt.Sprint(r.usage["outputTokens"]) != "30" {
			t.Errorf("AI SDK %s: %+v", name, r)
		}
	}
	if f := got.Forced; f.Status != 400 || f.Param != "tool_choice" || !strings.Contains(f.Message, "datachat runs its own tools") {
		t.Errorf("forced tool_choice through the client: %+v", f)
	}
	if msgs := cs.messages(t, conv); len(msgs) != 12 {
		t.Errorf("the conversation holds %d messages, want 12 (six questions and answers)", len(msgs))
	}
}

// TestChatQueryPartsSeparated: /chat/query's answer separates the parts a
// tool call splits, as the page shows them, and its number checks still
// point at their numbers.
func TestChatQueryPartsSeparated(t *testing.T) {
	wantCount, _ := penguinsOracle(t)
	cs := newChatServer(t, llmtest.Gemini, sqlTurns(1))
	conv := cs.withPenguins(t)
	st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"How many Adelie penguins?","conversation_id":"`+conv+`"}`)
	want := fmt.Sprintf("Counting. \n\nThere are %d Adelie penguins.", wantCount)
	if st != 200 || body["answer"] != want {
		t.Fatalf("got %d %q, want %q", st, body["answer"], want)
	}
	checks, _ := body["number_checks"].([]any)
	if len(checks) != 1 {
		t.Fatalf("number_checks %v", body["number_checks"])
	}
	c := checks[0].(map[string]any)
	runes := []rune(want)
	start, end := int(c["start"].(float64)), int(c["end"].(float64))
	if start < 0 || end > len(runes) || string(runes[start:end]) != fmt.Sprint(wantCount) || c["text"] != fmt.Sprint(wantCount) {
		t.Errorf("the check %v does not point at %d in %q", c, wantCount, want)
	}
}

// TestMCPHTTPMalformed: /mcp answers a body that is not JSON, or not a
// JSON-RPC message, with a JSON-RPC error (as datachat mcp does on stdio),
// not the SDK's plain text.
func TestMCPHTTPMalformed(t *testing.T) {
	ts := newTestServer(t)
	for _, tc := range []struct {
		body, id string
		code     int
	}{
		{"not json", "null", -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"`, "null", -32700},
		{`{"foo":1}`, "null", -32600},
		{`{"jsonrpc":"2.0","id":7,"method":5}`, "7", -32600},
		{`{"jsonrpc":"1.0","id":"a","method":"tools/list"}`, `"a"`, -32600},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-API-Key", ts.alice)
		st, b, h := send(t, req)
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(b), &msg); err != nil || st != 400 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") ||
			msg.JSONRPC != "2.0" || string(msg.ID) != tc.id || msg.Error.Code != tc.code || msg.Error.Message == "" {
			t.Errorf("%s: got %d %s %s; want 400 and a JSON-RPC error %d with id %s", tc.body, st, h.Get("Content-Type"), b, tc.code, tc.id)
		}
	}
	// A good request is still served.
	s := ts.mcpSession(t, ts.alice)
	if tools, err := s.ListTools(context.Background(), nil); err != nil || len(tools.Tools) == 0 {
		t.Errorf("tools/list after malformed requests: %v %v", tools, err)
	}
}

// TestRevokedKeyEndsResponseStream: a streamed /v1/responses whose key is
// revoked ends with response.failed saying so, the text so far in it, and
// its answer stored cancelled.
func TestRevokedKeyEndsResponseStream(t *testing.T) {
	cs := newStalledChatServer(t, llmtest.OpenAI, 3, "Let me ", "think ")
	conv := cs.newConversation(t, cs.alice)
	r := cs.responsesReq(t, `{"model":"datachat","stream":true,"input":"Think hard"}`, map[string]string{"X-Conversation-ID": conv})
	got := cs.revokeWhileStreaming(t, r, "think ")
	var last struct {
		Type     string       `json:"type"`
		Response wireResponse `json:"response"`
	}
	json.Unmarshal([]byte(got[len(got)-1]), &last)
	if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error == nil ||
		last.Response.Error.Code != "invalid_api_key" || last.Response.Error.Message != revokedMessage || last.Response.text() != "Let me think " {
		t.Errorf("the stream ended with %s, want response.failed saying the key was revoked", got[len(got)-1])
	}
	if m := cs.messages(t, conv); len(m) != 2 || m[1].Status != datachat.StatusCancelled {
		t.Errorf("stored %v, want the answer cancelled", m)
	}
}
