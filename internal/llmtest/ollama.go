package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ollamaWire speaks Ollama's native API: /api/chat answered with one JSON
// object a line (application/x-ndjson), tool calls whole with object
// arguments, and a final done:true line with the counts and durations.
type ollamaWire struct{}

func (ollamaWire) basePath() string     { return "" }
func (ollamaWire) defaultModel() string { return "llama3.1" }

func (ollamaWire) route(method, path string) string {
	if method != http.MethodPost {
		return KindOther
	}
	switch path {
	case "/api/chat":
		return KindChat
	case "/api/embed", "/api/embeddings":
		return KindEmbed
	}
	return KindOther
}

func (ollamaWire) parseChat(req *Request) {
	b := req.Body
	req.Model = str(b["model"])
	req.Stream = b["stream"] != false // Ollama streams unless told not to
	for _, m := range list(b["messages"]) {
		msg := obj(m)
		out := Message{Role: str(msg["role"]), Text: str(msg["content"]), ToolCallID: str(msg["tool_call_id"]), ToolName: str(msg["tool_name"])}
		out.ToolCalls = functionCalls(msg["tool_calls"])
		req.Messages = append(req.Messages, out)
	}
	req.Tools = functionNames(b["tools"])
}

func (ollamaWire) parseEmbed(req *Request) {
	req.Model = str(req.Body["model"])
	if p, ok := req.Body["prompt"].(string); ok && req.Path == "/api/embeddings" {
		req.Inputs = []string{p}
		return
	}
	req.Inputs = embedInputs(req.Body["input"])
}

func (ollamaWire) apiKey(r *http.Request) string { return bearer(r) }

func (ollamaWire) streamContentType() string { return "application/x-ndjson" }

type olLine struct {
	Model              string    `json:"model"`
	CreatedAt          string    `json:"created_at"`
	Message            olMessage `json:"message"`
	DoneReason         string    `json:"done_reason,omitempty"`
	Done               bool      `json:"done"`
	TotalDuration      int64     `json:"total_duration,omitempty"`
	LoadDuration       int64     `json:"load_duration,omitempty"`
	PromptEvalCount    int64     `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64     `json:"prompt_eval_duration,omitempty"`
	EvalCount          int64     `json:"eval_count,omitempty"`
	EvalDuration       int64     `json:"eval_duration,omitempty"`
}

type olMessage struct {
	Role      string   `json:"role"`
	Content   string   `json:"content"`
	Thinking  string   `json:"thinking,omitempty"`
	ToolCalls []olCall `json:"tool_calls,omitempty"`
}

type olCall struct {
	ID       string     `json:"id,omitempty"`
	Function olFunction `json:"function"`
}

type olFunction struct {
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ollamaJSON encodes as Ollama's Go server does (json.Marshal, HTML escaped).
func ollamaJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmtest: encode %T: %v", v, err))
	}
	return b
}

func line(v any) []byte { return append(ollamaJSON(v), '\n') }

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func (a *answer) ollamaCalls() []olCall {
	var calls []olCall
	for i, c := range a.calls {
		calls = append(calls, olCall{ID: c.ID, Function: olFunction{Index: i, Name: c.Name, Arguments: c.Args}})
	}
	return calls
}

func (a *answer) ollamaFinal(l olLine) olLine {
	took := time.Since(a.created).Nanoseconds()
	l.DoneReason = "stop"
	if a.finish != "" {
		l.DoneReason = a.finish
	}
	l.Done = true
	l.TotalDuration = max(took, 1)
	l.LoadDuration = max(took/8, 1)
	l.PromptEvalCount = a.usage.Input
	l.PromptEvalDuration = max(took/8, 1)
	l.EvalCount = a.usage.Output
	l.EvalDuration = max(took*3/4, 1)
	return l
}

func (ollamaWire) frames(req *Request, a *answer) []frame {
	var frames []frame
	msg := func(m olMessage) frame {
		return func() []byte { return line(olLine{Model: a.model, CreatedAt: now(), Message: m}) }
	}
	for _, t := range a.thinking {
		frames = append(frames, msg(olMessage{Role: "assistant", Thinking: t}))
	}
	for i := range a.texts {
		frames = append(frames, func() []byte {
			return line(olLine{Model: a.model, CreatedAt: now(), Message: olMessage{Role: "assistant", Content: a.text(i)}})
		})
	}
	if len(a.calls) > 0 {
		frames = append(frames, msg(olMessage{Role: "assistant", ToolCalls: a.ollamaCalls()}))
	}
	if a.complete {
		frames = append(frames, func() []byte {
			return line(a.ollamaFinal(olLine{Model: a.model, CreatedAt: now(), Message: olMessage{Role: "assistant"}}))
		})
	}
	return frames
}

func (ollamaWire) whole(req *Request, a *answer) (string, []byte) {
	m := olMessage{Role: "assistant", Content: strings.Join(a.texts, ""), Thinking: strings.Join(a.thinking, ""), ToolCalls: a.ollamaCalls()}
	return "application/json; charset=utf-8", ollamaJSON(a.ollamaFinal(olLine{Model: a.model, CreatedAt: now(), Message: m}))
}

func (ollamaWire) malformedFrame() []byte {
	return []byte(`{"model":"cut","created_at":"` + now() + `","message":{"role":"assistant","content":"cut off` + "\n")
}

func (ollamaWire) errorReply(e *ErrorReply, model string) errorReply {
	er := errorReply{status: http.StatusInternalServerError, contentType: "application/json; charset=utf-8"}
	switch e.Preset {
	case "auth", "permission_denied":
		er.status, er.message = 401, "unauthorized"
	case "rate_limit":
		er.status, er.message = 429, "you have reached your usage limit, please wait or upgrade to continue"
	case "unavailable":
		er.status, er.message = 503, "server busy, please try again.  maximum pending requests exceeded"
	case "server_error":
		er.status, er.message = 500, "llama runner process has terminated: exit status 2"
	case "context_too_large":
		er.status, er.message = 400, "the input length exceeds the context length"
	case "model_not_found":
		er.status, er.message = 404, fmt.Sprintf("model %q not found, try pulling it first", model)
	case "tools_unsupported":
		// Recorded from a local Ollama (fixtures/providers).
		er.status, er.message = 400, fmt.Sprintf("registry.ollama.ai/library/%s does not support tools", model)
	}
	return finishError(er, e, "", func(er errorReply) []byte {
		return ollamaJSON(map[string]string{"error": er.message})
	})
}

func (ollamaWire) errorFrame(er errorReply) []byte {
	return line(map[string]string{"error": er.message})
}

func (ollamaWire) embedAnswer(req *Request, model string, vectors [][]float32) []byte {
	if req.Path == "/api/embeddings" && len(vectors) == 1 {
		return ollamaJSON(map[string]any{"embedding": vectors[0]})
	}
	tokens := 0
	for _, in := range req.Inputs {
		tokens += max(1, len(in)/4)
	}
	return ollamaJSON(struct {
		Model           string      `json:"model"`
		Embeddings      [][]float32 `json:"embeddings"`
		TotalDuration   int64       `json:"total_duration"`
		LoadDuration    int64       `json:"load_duration"`
		PromptEvalCount int         `json:"prompt_eval_count"`
	}{Model: model, Embeddings: vectors, TotalDuration: 1000000, LoadDuration: 100000, PromptEvalCount: tokens})
}

func (ollamaWire) serveOther(w http.ResponseWriter, r *http.Request, model string) bool {
	switch {
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Ollama is running"))
	case r.Method == http.MethodGet && r.URL.Path == "/api/version":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write([]byte(`{"version":"0.17.4"}`))
	case r.Method == http.MethodGet && r.URL.Path == "/api/tags":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(ollamaJSON(map[string]any{"models": []map[string]any{
			{"name": model, "model": model, "modified_at": "2025-01-01T00:00:00Z", "size": 4920753328, "digest": "llmtest"},
		}}))
	default:
		return false
	}
	return true
}
