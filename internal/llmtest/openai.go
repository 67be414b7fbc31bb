package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// openaiWire speaks Chat Completions: "data: {…}\n\n" chunks ending with
// "data: [DONE]\n\n", in the 2026 layout of the recordings (service_tier,
// usage:null on every chunk when include_usage is asked, obfuscation
// padding; tool-call chunks put usage before choices).
type openaiWire struct{}

func (openaiWire) basePath() string     { return "/v1" }
func (openaiWire) defaultModel() string { return "gpt-4o-mini" }

func (openaiWire) route(method, path string) string {
	switch {
	case method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		return KindChat
	case method == http.MethodPost && strings.HasSuffix(path, "/embeddings"):
		return KindEmbed
	}
	return KindOther
}

func (openaiWire) parseChat(req *Request) {
	b := req.Body
	req.Model = str(b["model"])
	req.Stream = b["stream"] == true
	for _, m := range list(b["messages"]) {
		msg := obj(m)
		role := str(msg["role"])
		if role == "developer" {
			role = "system"
		}
		out := Message{Role: role, Text: contentText(msg["content"]), ToolCallID: str(msg["tool_call_id"]), ToolName: str(msg["name"])}
		out.ToolCalls = functionCalls(msg["tool_calls"])
		req.Messages = append(req.Messages, out)
	}
	req.Tools = functionNames(b["tools"])
}

func (openaiWire) parseEmbed(req *Request) {
	req.Model = str(req.Body["model"])
	req.Inputs = embedInputs(req.Body["input"])
}

func (openaiWire) apiKey(r *http.Request) string { return bearer(r) }

func (openaiWire) streamContentType() string { return "text/event-stream; charset=utf-8" }

func includeUsage(req *Request) bool {
	return obj(req.Body["stream_options"])["include_usage"] == true
}

type oChoice struct {
	Index        int     `json:"index"`
	Delta        any     `json:"delta"`
	Logprobs     *string `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type oRoleText struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type oRoleOnly struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
}

type oContent struct {
	Content string `json:"content"`
}

type oToolDelta struct {
	ToolCalls []oToolCallDelta `json:"tool_calls"`
}

type oToolCallDelta struct {
	Index    int       `json:"index"`
	ID       string    `json:"id,omitempty"`
	Type     string    `json:"type,omitempty"`
	Function oFunction `json:"function"`
}

type oFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

func (a *answer) openaiUsage() []byte {
	// Field order of the recordings: marshal sorts map keys, so write it out.
	return []byte(fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		a.usage.Input, a.usage.Output+a.usage.Thoughts, a.usage.Input+a.usage.Output+a.usage.Thoughts, a.usage.Thoughts))
}

func (a *answer) openaiFinish() string {
	switch {
	case a.finish != "":
		return a.finish
	case len(a.calls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// chunk writes one chat.completion.chunk. usage is raw JSON or nil to leave
// the field out; usageFirst puts it before choices, as tool-call chunks do.
func (a *answer) chunk(n int, choices []byte, usage []byte, usageFirst bool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	b.Write(marshal("chatcmpl-" + shortID(a.seq)))
	b.WriteString(`,"object":"chat.completion.chunk","created":`)
	b.WriteString(strconv.FormatInt(a.created.Unix(), 10))
	b.WriteString(`,"model":`)
	b.Write(marshal(a.model))
	b.WriteString(`,"service_tier":"default","system_fingerprint":"fp_llmtest"`)
	if usageFirst && usage != nil {
		b.WriteString(`,"usage":`)
		b.Write(usage)
	}
	b.WriteString(`,"choices":`)
	b.Write(choices)
	if !usageFirst && usage != nil {
		b.WriteString(`,"usage":`)
		b.Write(usage)
	}
	b.WriteString(`,"obfuscation":`)
	b.Write(marshal(obfuscation(a.seq*31 + n)))
	b.WriteString("}")
	return sseFrame(b.Bytes(), "\n")
}

// obfuscation is padding like OpenAI's, deterministic.
func obfuscation(n int) string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
	length := (n*7 + 3) % 16
	var b strings.Builder
	for i := 0; i < length; i++ {
		b.WriteByte(alphabet[(n*13+i*17)%len(alphabet)])
	}
	return b.String()
}

func (w openaiWire) frames(req *Request, a *answer) []frame {
	var usageNull []byte
	if includeUsage(req) {
		usageNull = []byte("null")
	}
	choice := func(delta any, finish *string) []byte {
		return marshal([]oChoice{{Index: 0, Delta: delta, FinishReason: finish}})
	}
	var frames []frame
	add := func(f func(n int) []byte) {
		n := len(frames)
		frames = append(frames, func() []byte { return f(n) })
	}
	if len(a.texts) > 0 || len(a.calls) == 0 {
		add(func(n int) []byte {
			return a.chunk(n, choice(oRoleText{Role: "assistant"}, nil), usageNull, false)
		})
	} else {
		add(func(n int) []byte {
			return a.chunk(n, choice(oRoleOnly{Role: "assistant"}, nil), usageNull, true)
		})
	}
	for i := range a.texts {
		add(func(n int) []byte {
			return a.chunk(n, choice(oContent{Content: a.text(i)}, nil), usageNull, false)
		})
	}
	for i, call := range a.calls {
		add(func(n int) []byte {
			d := oToolDelta{ToolCalls: []oToolCallDelta{{Index: i, ID: call.ID, Type: "function", Function: oFunction{Name: call.Name}}}}
			return a.chunk(n, choice(d, nil), usageNull, true)
		})
		for _, frag := range argFragments(call) {
			add(func(n int) []byte {
				d := oToolDelta{ToolCalls: []oToolCallDelta{{Index: i, Function: oFunction{Arguments: frag}}}}
				return a.chunk(n, choice(d, nil), usageNull, true)
			})
		}
	}
	if !a.complete {
		return frames
	}
	finish := a.openaiFinish()
	add(func(n int) []byte { return a.chunk(n, choice(struct{}{}, &finish), usageNull, false) })
	if includeUsage(req) {
		add(func(n int) []byte { return a.chunk(n, []byte("[]"), a.openaiUsage(), false) })
	}
	frames = append(frames, func() []byte { return []byte("data: [DONE]\n\n") })
	return frames
}

// argFragments splits a call's arguments as they stream: the script's
// ArgChunks, or pieces of about 8 bytes.
func argFragments(c ToolCall) []string {
	if len(c.ArgChunks) > 0 {
		return c.ArgChunks
	}
	s := string(c.Args)
	var out []string
	for len(s) > 0 {
		n := min(8, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

type oCompletion struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	Choices           []oWholeChoice `json:"choices"`
	Usage             rawJSON        `json:"usage"`
	ServiceTier       string         `json:"service_tier"`
	SystemFingerprint string         `json:"system_fingerprint"`
}

type oWholeChoice struct {
	Index        int      `json:"index"`
	Message      oMessage `json:"message"`
	Logprobs     *string  `json:"logprobs"`
	FinishReason string   `json:"finish_reason"`
}

type oMessage struct {
	Role      string      `json:"role"`
	Content   *string     `json:"content"`
	Refusal   *string     `json:"refusal"`
	ToolCalls []oToolCall `json:"tool_calls,omitempty"`
}

type oToolCall struct {
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	Function oFunction `json:"function"`
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

func (openaiWire) whole(req *Request, a *answer) (string, []byte) {
	msg := oMessage{Role: "assistant"}
	if text := strings.Join(a.texts, ""); text != "" || len(a.calls) == 0 {
		msg.Content = &text
	}
	for _, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, oToolCall{ID: c.ID, Type: "function", Function: oFunction{Name: c.Name, Arguments: string(c.Args)}})
	}
	out := oCompletion{
		ID: "chatcmpl-" + shortID(a.seq), Object: "chat.completion", Created: a.created.Unix(), Model: a.model,
		Choices:     []oWholeChoice{{Index: 0, Message: msg, FinishReason: a.openaiFinish()}},
		Usage:       a.openaiUsage(),
		ServiceTier: "default", SystemFingerprint: "fp_llmtest",
	}
	return "application/json", indentJSON(out, "  ")
}

func (openaiWire) malformedFrame() []byte {
	return []byte("data: {\"id\":\"chatcmpl-cut\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut off\n\n")
}

// openaiInvalidKey is the recorded 401 body (4-space indent, final newline).
const openaiInvalidKey = `{
    "error": {
        "message": "Incorrect API key provided: sk-llmte*****************test. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key"
    }
}
`

type oError struct {
	Error oErrorBody `json:"error"`
}

type oErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (openaiWire) errorReply(e *ErrorReply, model string) errorReply {
	er := errorReply{status: http.StatusInternalServerError, contentType: "application/json; charset=utf-8"}
	var body string
	switch e.Preset {
	case "auth":
		er.status, body = 401, openaiInvalidKey
	case "permission_denied":
		er.status, er.message, er.code = 403, "You are not allowed to access this model.", "model_not_allowed"
	case "rate_limit":
		er.status, er.code = 429, "rate_limit_exceeded"
		er.message = fmt.Sprintf("Rate limit reached for %s in organization org-llmtest on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.", model)
		er.headers = map[string]string{"Retry-After": "20"}
	case "unavailable":
		er.status, er.message = 503, "The server is overloaded or not ready yet."
	case "server_error":
		er.status, er.message = 500, "The server had an error while processing your request. Sorry about that!"
	case "context_too_large":
		er.status, er.code = 400, "context_length_exceeded"
		er.message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages."
	case "model_not_found":
		er.status, er.code = 404, "model_not_found"
		er.message = fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)
	case "tools_unsupported":
		er.status, er.message = 400, fmt.Sprintf("%s does not support tools", model)
	}
	return finishError(er, e, body, func(er errorReply) []byte {
		return append(indentJSON(openaiError(er), "    "), '\n')
	})
}

func openaiError(er errorReply) oError {
	typ := "invalid_request_error"
	switch {
	case er.status == 429:
		typ = "requests"
	case er.status >= 500:
		typ = "server_error"
	}
	o := oError{Error: oErrorBody{Message: er.message, Type: typ}}
	if er.code != "" {
		code := er.code
		o.Error.Code = &code
	}
	if er.code == "context_length_exceeded" {
		p := "messages"
		o.Error.Param = &p
	}
	return o
}

func (openaiWire) errorFrame(er errorReply) []byte {
	return sseFrame(er.bodyCompact(), "\n")
}

// bodyCompact returns the error body on one line, for an in-stream event.
func (er errorReply) bodyCompact() []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, er.body); err != nil {
		return marshal(map[string]string{"error": er.message})
	}
	return b.Bytes()
}

type oEmbedding struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

func (openaiWire) embedAnswer(req *Request, model string, vectors [][]float32) []byte {
	tokens := 0
	for _, in := range req.Inputs {
		tokens += max(1, len(in)/4)
	}
	out := struct {
		Object string       `json:"object"`
		Data   []oEmbedding `json:"data"`
		Model  string       `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: model}
	for i, v := range vectors {
		out.Data = append(out.Data, oEmbedding{Object: "embedding", Index: i, Embedding: v})
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = tokens, tokens
	return indentJSON(out, "  ")
}

func (openaiWire) serveOther(w http.ResponseWriter, r *http.Request, model string) bool {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(marshal(map[string]any{"object": "list", "data": []map[string]any{
			{"id": model, "object": "model", "created": 0, "owned_by": "llmtest"},
		}}))
		return true
	}
	return false
}
