package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"datachat"
	"datachat/internal/chat"
)

// OpenAI's wire format for /v1 and the pure conversions to and from it:
// requests to turns, outcomes to completions and chunks, errors to OpenAI's
// error shape.

// openaiModelID is the one model datachat lists. Completions accept whatever
// model a client names: clients often insist on their own default.
const openaiModelID = "datachat"

// openaiModelCreated is the creation time /v1/models reports (2025-01-01).
const openaiModelCreated = 1735689600

type openaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

var datachatModel = openaiModel{ID: openaiModelID, Object: "model", Created: openaiModelCreated, OwnedBy: "datachat"}

// isOpenAIPath reports whether a request path is under /v1, whose answers,
// errors included, are in OpenAI's shape.
func isOpenAIPath(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// openaiRouteError is OpenAI's error for a route or method /v1 does not
// serve.
func openaiRouteError(msg, code string) openaiErrorDetail {
	return openaiErrorDetail{Message: msg, Type: "invalid_request_error", Code: &code}
}

// completionRequest is the part of OpenAI's chat completion request datachat
// uses; other fields (tools, logprobs, user…) are accepted and ignored.
// Fields datachat cannot honour are refused: a tool_choice that forces a
// call to the client's tools, a response_format other than text.
type completionRequest struct {
	Model         string          `json:"model"`
	Messages      []openaiMessage `json:"messages"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   *int            `json:"n"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	// ShowSQL (extension) puts each SQL query the turn runs into the answer
	// as a fenced code block; so does the header X-Datachat-Show-SQL: 1.
	ShowSQL bool `json:"datachat_show_sql"`
}

type openaiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns a message's text: the string, or its text parts joined.
func (m openaiMessage) text() (string, error) {
	c := strings.TrimSpace(string(m.Content))
	if c == "" || c == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		err := json.Unmarshal(m.Content, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", err
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// openaiParamError is a request error that names the parameter at fault, and
// optionally an OpenAI error code.
type openaiParamError struct {
	Param string
	Code  string
	Err   error // a *datachat.Error
}

func (e *openaiParamError) Error() string { return e.Err.Error() }
func (e *openaiParamError) Unwrap() error { return e.Err }

func invalidParam(param, format string, args ...any) error {
	return &openaiParamError{Param: param, Err: datachat.Errorf(datachat.EINVALID, format, args...)}
}

type openaiErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// openaiErrorOf renders err in OpenAI's shape. Internal errors are answered
// with "Internal error." only.
func openaiErrorOf(err error) openaiErrorDetail {
	kind := kindOf(err)
	d := openaiErrorDetail{Message: datachat.ErrorMessage(err), Type: kind.openaiType}
	if kind.openaiCode != "" {
		d.Code = &kind.openaiCode
	}
	var pe *openaiParamError
	if errors.As(err, &pe) {
		if pe.Param != "" {
			d.Param = &pe.Param
		}
		if pe.Code != "" {
			d.Code = &pe.Code
		}
	}
	return d
}

// completionTurn is a validated completion request: what to send, with what
// options, in which conversation.
type completionTurn struct {
	content      string
	history      []*datachat.Message // earlier messages, for a new conversation
	opts         chat.TurnOptions
	stream       bool
	includeUsage bool
	showSQL      bool
}

// completionTurnOf checks a completion request and turns it into a turn:
// showSQL is the X-Datachat-Show-SQL header's say, maxQueryChars the longest
// question taken.
func completionTurnOf(req completionRequest, showSQL bool, maxQueryChars int) (*completionTurn, error) {
	if strings.TrimSpace(req.Model) == "" {
		return nil, invalidParam("model", "You must provide a model parameter (datachat serves %q).", openaiModelID)
	}
	if len(req.Messages) == 0 {
		return nil, invalidParam("messages", "messages must hold at least one message.")
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalidParam("n", "n must be 1: datachat writes one answer per request.")
	}
	if err := checkToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	if f := req.ResponseFormat; f != nil && f.Type != "" && f.Type != "text" {
		return nil, invalidParam("response_format", "response_format %q is not supported: datachat answers in text (response_format type \"text\"), and cannot promise %s output.", f.Type, f.Type)
	}
	ct := &completionTurn{stream: req.Stream, showSQL: req.ShowSQL || showSQL}
	ct.includeUsage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	if t := req.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, invalidParam("temperature", "temperature must be from 0 to 2, got %g.", *t)
		}
		ct.opts.Temperature = t
	}
	for _, p := range []struct {
		name string
		v    *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if p.v != nil {
			if *p.v <= 0 {
				return nil, invalidParam(p.name, "%s must be a positive integer, got %d.", p.name, *p.v)
			}
			ct.opts.MaxOutputTokens = *p.v
		}
	}
	last := len(req.Messages) - 1
	for i, m := range req.Messages {
		text, err := m.text()
		if err != nil {
			return nil, invalidParam(fmt.Sprintf("messages[%d].content", i), "messages[%d].content must be a string or a list of content parts.", i)
		}
		switch m.Role {
		case "system", "developer", "tool", "function":
			// datachat writes its own system prompt and runs its own tools.
		case "user", "assistant":
			if i < last && strings.TrimSpace(text) != "" {
				role := datachat.RoleUser
				if m.Role == "assistant" {
					role = datachat.RoleAssistant
				}
				ct.history = append(ct.history, &datachat.Message{Role: role, Content: text, Status: datachat.StatusComplete})
			}
		default:
			return nil, invalidParam(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not one of system, developer, user, assistant, tool.", i, m.Role)
		}
		if i == last {
			if m.Role != "user" {
				return nil, invalidParam(fmt.Sprintf("messages[%d].role", i), "The last message must be the user's (role user), got %q.", m.Role)
			}
			q, err := chat.CleanQuery(text, maxQueryChars)
			if err != nil {
				return nil, &openaiParamError{Param: fmt.Sprintf("messages[%d].content", i), Err: err}
			}
			ct.content = q
		}
	}
	return ct, nil
}

// checkToolChoice accepts a tool_choice that leaves the choice to the model
// ("auto", "none", or none at all) and refuses one that forces a tool call:
// datachat's model calls datachat's own tools, never the request's, so such
// a request could only be answered as if the choice had been honoured.
func checkToolChoice(raw json.RawMessage) error {
	c := strings.TrimSpace(string(raw))
	if c == "" || c == "null" {
		return nil
	}
	forced := func(what string) error {
		return invalidParam("tool_choice", "tool_choice %s forces a tool call, but datachat runs its own tools (SQL over the conversation's datasets, document search) and never calls a request's tools: leave tool_choice out or set it to \"auto\" (tools are accepted and not used).", what)
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		switch str {
		case "auto", "none":
			return nil
		case "required":
			return forced(`"required"`)
		}
		return invalidParam("tool_choice", "tool_choice %q is not one of \"auto\", \"none\" or \"required\"; datachat accepts \"auto\" and \"none\".", str)
	}
	var obj struct {
		Type     string `json:"type"`
		Mode     string `json:"mode"`
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return invalidParam("tool_choice", "tool_choice must be \"auto\", \"none\" or \"required\", or an object naming a tool.")
	}
	if obj.Type == "allowed_tools" && obj.Mode == "auto" {
		return nil // the model may call one of them, or answer
	}
	name := obj.Name
	if obj.Function != nil {
		name = obj.Function.Name
	}
	if name != "" {
		return forced(fmt.Sprintf("{\"type\":%q} naming %q", obj.Type, name))
	}
	return forced(fmt.Sprintf("{\"type\":%q}", obj.Type))
}

// sqlBlock renders an execute_sql call's query as fenced code.
func sqlBlock(args json.RawMessage) string {
	var a struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(args, &a) != nil || strings.TrimSpace(a.Query) == "" {
		return ""
	}
	return "\n\n```sql\n" + strings.TrimSpace(a.Query) + "\n```\n\n"
}

// pausedText is the answer of a turn that waits for the user to approve an
// action, which only the web page can do.
func pausedText(out *chat.Outcome, convID string) string {
	if out == nil || out.Confirmation == nil {
		return ""
	}
	return fmt.Sprintf("\n\n%s\n\n(Waiting for your confirmation: approve or decline it in datachat's web page, conversation %s.)",
		strings.TrimSpace(out.Confirmation.Explanation), convID)
}

// completion holds what every chunk of one answer repeats.
type completion struct {
	id             string
	created        int64
	model          string
	conversationID string
}

type openaiUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func usageOf(out *chat.Outcome) *openaiUsage {
	if out == nil {
		return &openaiUsage{}
	}
	return &openaiUsage{PromptTokens: out.Usage.Input, CompletionTokens: out.Usage.Output, TotalTokens: out.Usage.Input + out.Usage.Output}
}

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type completionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for
	// usage, and absent otherwise, as OpenAI does.
	Usage any `json:"usage,omitempty"`
}

// wholeCompletionOf is a chat.completion answering with text.
func wholeCompletionOf(c *completion, text string, out *chat.Outcome) map[string]any {
	return map[string]any{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": strings.TrimSpace(text), "refusal": nil},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": usageOf(out),
	}
}
