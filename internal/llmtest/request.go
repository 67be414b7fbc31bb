package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"text/template"
)

// Request kinds.
const (
	KindChat  = "chat"
	KindEmbed = "embed"
	KindOther = "other"
)

// Request is a request the fake received, its JSON body parsed and, for chat
// requests, its messages put in one shape for every protocol.
type Request struct {
	Index    int // arrival order, from 0
	Protocol Protocol
	Kind     string // KindChat, KindEmbed or KindOther
	Method   string
	Path     string
	Query    string
	Header   http.Header
	Raw      []byte
	Body     map[string]any // the JSON object body (numbers as json.Number); nil if not one
	Model    string
	Stream   bool
	Messages []Message // chat: system first, if any
	Tools    []string  // chat: names of the tools declared
	Inputs   []string  // embed: the texts
	Turn     int       // index of the turn that answered; -1 for Default or none
	// Disconnected reports that the client went away before the answer
	// ended (a cancelled request).
	Disconnected bool
}

// Message is one message of a chat request.
type Message struct {
	Role       string // "system", "user", "assistant" or "tool"
	Text       string
	ToolCalls  []ToolCall
	ToolCallID string // tool: the call answered
	ToolName   string // tool: the tool's name, when the protocol sends it
}

// Last returns the request's last message (zero if none).
func (r *Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUser returns the text of the last user message.
func (r *Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// LastToolResult returns the content of the last tool result message.
func (r *Request) LastToolResult() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// ToolResults returns the contents of the tool results after the last
// assistant message with tool calls (the results of the latest round).
func (r *Request) ToolResults() []string {
	var out []string
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role == "tool"; i-- {
		out = append([]string{r.Messages[i].Text}, out...)
	}
	return out
}

// HasTool reports whether the request declares the tool.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

func (m *Match) matches(r *Request) bool {
	if m == nil {
		return true
	}
	last := r.Last()
	if m.LastRole != "" && last.Role != m.LastRole {
		return false
	}
	if m.Contains != "" && !strings.Contains(last.Text, m.Contains) {
		return false
	}
	if m.Tool != "" && !r.HasTool(m.Tool) {
		return false
	}
	if m.NoTools && len(r.Tools) > 0 {
		return false
	}
	return true
}

var templateFuncs = template.FuncMap{
	"field": Field,
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}

// renderReply renders a turn's Reply template against the request.
func renderReply(text string, r *Request) (string, error) {
	t, err := template.New("reply").Funcs(templateFuncs).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fmt.Errorf("llmtest: reply template: %w", err)
	}
	var b strings.Builder
	if err := t.Execute(&b, r); err != nil {
		return "", fmt.Errorf("llmtest: reply template: %w", err)
	}
	return b.String(), nil
}

// Field returns the value at a dotted path ("rows.0.0", "columns.1.name") in a
// JSON text, formatted for reading: strings as they are, numbers without
// exponent, anything else as JSON. It returns "" when the path is absent.
func Field(jsonText, path string) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(jsonText))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return ""
	}
	for _, key := range strings.Split(path, ".") {
		if key == "" {
			continue
		}
		switch c := v.(type) {
		case map[string]any:
			v = c[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(c) {
				return ""
			}
			v = c[i]
		default:
			return ""
		}
	}
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

var wordRE = regexp.MustCompile(`\s*\S+`)

// words splits text into streamable chunks, each word with the space before
// it, as tokenizers do; the chunks concatenate to text.
func words(text string) []string {
	idx := wordRE.FindAllStringIndex(text, -1)
	if len(idx) == 0 {
		if text == "" {
			return nil
		}
		return []string{text}
	}
	out := make([]string, len(idx))
	for i, loc := range idx {
		out[i] = text[loc[0]:loc[1]]
	}
	out[len(out)-1] += text[idx[len(idx)-1][1]:]
	return out
}

// contentText reads a message content that is a string or a list of parts
// ({"type":"text","text":…}).
func contentText(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if m, ok := p.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					b.WriteString(s)
				}
			}
		}
		return b.String()
	}
	return ""
}

// rawArgs turns arguments sent as an object or as a JSON string into JSON.
func rawArgs(v any) json.RawMessage {
	if s, ok := v.(string); ok {
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
		b, _ := json.Marshal(s)
		return b
	}
	if v == nil {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(v)
	return b
}

// functionCalls reads a message's tool_calls in the layout Chat
// Completions and Ollama share: {"id", "function": {"name", "arguments"}}.
func functionCalls(v any) []ToolCall {
	var calls []ToolCall
	for _, tc := range list(v) {
		call := obj(tc)
		fn := obj(call["function"])
		calls = append(calls, ToolCall{ID: str(call["id"]), Name: str(fn["name"]), Args: rawArgs(fn["arguments"])})
	}
	return calls
}

// functionNames reads the names of the tools offered in the same layout:
// {"function": {"name"}}.
func functionNames(v any) []string {
	var names []string
	for _, t := range list(v) {
		names = append(names, str(obj(obj(t)["function"])["name"]))
	}
	return names
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// parseBody decodes a JSON object body, keeping numbers exact.
func parseBody(raw []byte) map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// embedInputs reads "input" given as a string or a list of strings.
func embedInputs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			out = append(out, str(e))
		}
		return out
	}
	return nil
}
