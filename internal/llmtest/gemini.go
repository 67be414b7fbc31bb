package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// geminiWire speaks generativelanguage.googleapis.com v1beta:
// models/M:streamGenerateContent?alt=sse answered with "data: {…}\r\n\r\n"
// events whose JSON has a space after each colon, usageMetadata in every
// event, no end marker.
type geminiWire struct{}

func (geminiWire) basePath() string     { return "" }
func (geminiWire) defaultModel() string { return "gemini-2.5-flash" }

func (geminiWire) route(method, path string) string {
	if method != http.MethodPost {
		return KindOther
	}
	switch {
	case strings.HasSuffix(path, ":streamGenerateContent"), strings.HasSuffix(path, ":generateContent"):
		return KindChat
	case strings.HasSuffix(path, ":batchEmbedContents"), strings.HasSuffix(path, ":embedContent"):
		return KindEmbed
	}
	return KindOther
}

// geminiModel reads M from …/models/M:method.
func geminiModel(path string) string {
	_, after, ok := strings.Cut(path, "/models/")
	if !ok {
		return ""
	}
	m, _, _ := strings.Cut(after, ":")
	return m
}

func (geminiWire) parseChat(req *Request) {
	req.Model = geminiModel(req.Path)
	req.Stream = strings.HasSuffix(req.Path, ":streamGenerateContent")
	b := req.Body
	if si := obj(b["systemInstruction"]); si != nil {
		req.Messages = append(req.Messages, Message{Role: "system", Text: partsText(si)})
	}
	for _, c := range list(b["contents"]) {
		content := obj(c)
		role := "user"
		if str(content["role"]) == "model" {
			role = "assistant"
		}
		msg := Message{Role: role}
		var results []Message
		for _, p := range list(content["parts"]) {
			part := obj(p)
			switch {
			case part["functionCall"] != nil:
				fc := obj(part["functionCall"])
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{
					ID: str(fc["id"]), Name: str(fc["name"]), Args: rawArgs(fc["args"]),
					Signature: str(part["thoughtSignature"]),
				})
			case part["functionResponse"] != nil:
				fr := obj(part["functionResponse"])
				results = append(results, Message{
					Role: "tool", ToolCallID: str(fr["id"]), ToolName: str(fr["name"]),
					Text: functionResult(obj(fr["response"])),
				})
			default:
				msg.Text += str(part["text"])
			}
		}
		if msg.Text != "" || len(msg.ToolCalls) > 0 || len(results) == 0 {
			req.Messages = append(req.Messages, msg)
		}
		req.Messages = append(req.Messages, results...)
	}
	for _, t := range list(b["tools"]) {
		for _, fd := range list(obj(t)["functionDeclarations"]) {
			req.Tools = append(req.Tools, str(obj(fd)["name"]))
		}
	}
}

func partsText(content map[string]any) string {
	var b strings.Builder
	for _, p := range list(content["parts"]) {
		b.WriteString(str(obj(p)["text"]))
	}
	return b.String()
}

// functionResult reads a functionResponse's response: the string under
// "result" (or "output", "content"), else the whole object as JSON.
func functionResult(resp map[string]any) string {
	if len(resp) == 1 {
		for _, k := range []string{"result", "output", "content"} {
			if s, ok := resp[k].(string); ok {
				return s
			}
		}
	}
	return string(marshal(resp))
}

func (geminiWire) parseEmbed(req *Request) {
	req.Model = geminiModel(req.Path)
	if rs := list(req.Body["requests"]); rs != nil {
		for _, r := range rs {
			req.Inputs = append(req.Inputs, partsText(obj(obj(r)["content"])))
		}
		return
	}
	req.Inputs = []string{partsText(obj(req.Body["content"]))}
}

func (geminiWire) apiKey(r *http.Request) string {
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	return queryValue(r.URL.RawQuery, "key")
}

func (geminiWire) streamContentType() string { return "text/event-stream" }

type gResponse struct {
	Candidates    []gCandidate `json:"candidates"`
	UsageMetadata *gUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string       `json:"modelVersion"`
	ResponseID    string       `json:"responseId"`
}

type gCandidate struct {
	Content       gContent `json:"content"`
	FinishReason  string   `json:"finishReason,omitempty"`
	Index         int      `json:"index"`
	FinishMessage string   `json:"finishMessage,omitempty"`
}

type gContent struct {
	Parts []gPart `json:"parts"`
	Role  string  `json:"role"`
}

type gPart struct {
	Text             *string       `json:"text,omitempty"`
	FunctionCall     *gFunctionCal `json:"functionCall,omitempty"`
	ThoughtSignature string        `json:"thoughtSignature,omitempty"`
}

type gFunctionCal struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
	ID   string          `json:"id,omitempty"`
}

type gUsage struct {
	PromptTokenCount     int64          `json:"promptTokenCount"`
	CandidatesTokenCount int64          `json:"candidatesTokenCount"`
	TotalTokenCount      int64          `json:"totalTokenCount"`
	PromptTokensDetails  []gTokenDetail `json:"promptTokensDetails"`
	ThoughtsTokenCount   int64          `json:"thoughtsTokenCount,omitempty"`
}

type gTokenDetail struct {
	Modality   string `json:"modality"`
	TokenCount int64  `json:"tokenCount"`
}

func (a *answer) geminiUsage(output int64) *gUsage {
	return &gUsage{
		PromptTokenCount:     a.usage.Input,
		CandidatesTokenCount: output,
		TotalTokenCount:      a.usage.Input + output + a.usage.Thoughts,
		PromptTokensDetails:  []gTokenDetail{{Modality: "TEXT", TokenCount: a.usage.Input}},
		ThoughtsTokenCount:   a.usage.Thoughts,
	}
}

func (a *answer) geminiFinish() string {
	if a.finish != "" {
		return a.finish
	}
	return "STOP"
}

func (a *answer) responseID() string { return "llmtest" + shortID(a.seq) }

func (w geminiWire) frames(req *Request, a *answer) []frame {
	// candidatesTokenCount grows with what was sent; the last event has the total.
	total := 0
	for _, t := range a.texts {
		total += len(t)
	}
	for _, c := range a.calls {
		total += len(c.Name) + len(c.Args)
	}
	var frames []frame
	sent := 0
	for i, t := range a.texts {
		sent += len(t)
		out := a.usage.Output
		if len(a.calls) > 0 || i < len(a.texts)-1 {
			out = max(1, a.usage.Output*int64(sent)/int64(max(total, 1)))
		}
		last := i == len(a.texts)-1 && len(a.calls) == 0
		frames = append(frames, func() []byte {
			text := a.text(i)
			c := gCandidate{Content: gContent{Parts: []gPart{{Text: &text}}, Role: "model"}}
			if last && a.complete {
				c.FinishReason = a.geminiFinish()
			}
			return w.event(a, c, out)
		})
	}
	if len(a.calls) > 0 || len(a.texts) == 0 {
		frames = append(frames, func() []byte {
			c := gCandidate{Content: gContent{Role: "model"}}
			for _, call := range a.calls {
				c.Content.Parts = append(c.Content.Parts, gPart{
					FunctionCall:     &gFunctionCal{Name: call.Name, Args: call.Args, ID: call.ID},
					ThoughtSignature: call.Signature,
				})
			}
			if len(a.calls) == 0 {
				empty := ""
				c.Content.Parts = []gPart{{Text: &empty}}
			}
			if a.complete {
				c.FinishReason = a.geminiFinish()
				if len(a.calls) > 0 {
					c.FinishMessage = "Model generated function call(s)."
				}
			}
			return w.event(a, c, a.usage.Output)
		})
	}
	return frames
}

func (geminiWire) event(a *answer, c gCandidate, output int64) []byte {
	r := gResponse{Candidates: []gCandidate{c}, UsageMetadata: a.geminiUsage(output), ModelVersion: a.model, ResponseID: a.responseID()}
	return sseFrame(googleJSON(r), "\r\n")
}

func (geminiWire) whole(req *Request, a *answer) (string, []byte) {
	c := gCandidate{Content: gContent{Role: "model"}, FinishReason: a.geminiFinish()}
	if text := strings.Join(a.texts, ""); text != "" || len(a.calls) == 0 {
		c.Content.Parts = append(c.Content.Parts, gPart{Text: &text})
	}
	for _, call := range a.calls {
		c.Content.Parts = append(c.Content.Parts, gPart{
			FunctionCall:     &gFunctionCal{Name: call.Name, Args: call.Args, ID: call.ID},
			ThoughtSignature: call.Signature,
		})
	}
	r := gResponse{Candidates: []gCandidate{c}, UsageMetadata: a.geminiUsage(a.usage.Output), ModelVersion: a.model, ResponseID: a.responseID()}
	return "application/json; charset=UTF-8", indentJSON(r, "  ")
}

func (geminiWire) malformedFrame() []byte {
	return []byte("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"cut off\r\n\r\n")
}

// geminiStatus is google.rpc.Code's name for an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// Gemini's error bodies, from the recordings in ../shared/fixtures/providers
// where one exists.
const (
	geminiAPIKeyInvalid = `{
  "error": {
    "code": 400,
    "message": "API key not valid. Please pass a valid API key.",
    "status": "INVALID_ARGUMENT",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {
          "service": "generativelanguage.googleapis.com"
        }
      },
      {
        "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
        "locale": "en-US",
        "message": "API key not valid. Please pass a valid API key."
      }
    ]
  }
}
`
	geminiPermissionDenied = `{
  "error": {
    "code": 403,
    "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    "status": "PERMISSION_DENIED"
  }
}
`
	geminiQuotaExceeded = `{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
          {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
          }
        ]
      },
      {
        "@type": "type.googleapis.com/google.rpc.RetryInfo",
        "retryDelay": "7s"
      }
    ]
  }
}
`
)

func (geminiWire) errorReply(e *ErrorReply, model string) errorReply {
	er := errorReply{status: http.StatusInternalServerError, contentType: "application/json; charset=UTF-8"}
	var body string
	switch e.Preset {
	case "auth":
		er.status, body = 400, geminiAPIKeyInvalid
	case "permission_denied":
		er.status, body = 403, geminiPermissionDenied
	case "rate_limit":
		er.status, body = 429, geminiQuotaExceeded
	case "unavailable":
		er.status, er.message = 503, "The model is overloaded. Please try again later."
	case "server_error":
		er.status, er.message = 500, "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	case "context_too_large":
		er.status, er.message = 400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
	case "model_not_found":
		er.status, er.message = 404, fmt.Sprintf("models/%s is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", model)
	case "tools_unsupported":
		er.status, er.message = 400, "Function calling is not enabled for models/"+model
	}
	return finishError(er, e, body, func(er errorReply) []byte {
		return append(indentJSON(geminiError(er), "  "), '\n')
	})
}

type gError struct {
	Error gErrorBody `json:"error"`
}

type gErrorBody struct {
	Code    int              `json:"code"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Details []map[string]any `json:"details,omitempty"`
}

func geminiError(er errorReply) gError {
	g := gError{Error: gErrorBody{Code: er.status, Message: er.message, Status: geminiStatus(er.status)}}
	if er.code != "" {
		g.Error.Details = []map[string]any{{
			"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": er.code, "domain": "googleapis.com",
		}}
	}
	return g
}

func (geminiWire) errorFrame(er errorReply) []byte {
	if er.message == "" {
		var g gError
		if json.Unmarshal(er.body, &g) == nil {
			er.message, er.code = g.Error.Message, ""
		}
	}
	return sseFrame(googleJSON(geminiError(er)), "\r\n")
}

type gEmbedding struct {
	Values []float32 `json:"values"`
}

func (geminiWire) embedAnswer(req *Request, model string, vectors [][]float32) []byte {
	if strings.HasSuffix(req.Path, ":embedContent") && len(vectors) == 1 {
		return indentJSON(map[string]gEmbedding{"embedding": {Values: vectors[0]}}, "  ")
	}
	out := struct {
		Embeddings []gEmbedding `json:"embeddings"`
	}{}
	for _, v := range vectors {
		out.Embeddings = append(out.Embeddings, gEmbedding{Values: v})
	}
	return indentJSON(out, "  ")
}

func (geminiWire) serveOther(http.ResponseWriter, *http.Request, string) bool { return false }

// googleJSON encodes v as Gemini's streamed events do: compact, with a space
// after each key's colon.
func googleJSON(v any) []byte {
	compact := marshal(v)
	out := make([]byte, 0, len(compact)+len(compact)/8)
	inString, escaped := false, false
	for _, c := range compact {
		out = append(out, c)
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && c == ':':
			out = append(out, ' ')
		}
	}
	return out
}

func indentJSON(v any, indent string) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, marshal(v), "", indent); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func sseFrame(data []byte, eol string) []byte {
	b := make([]byte, 0, len(data)+16)
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, eol...)
	b = append(b, eol...)
	return b
}
