package llmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Script drives a fake server: each chat request is answered by a [Turn].
// Turns are played in order: a request gets the first unused turn whose
// Match it satisfies (a turn without Match satisfies any request); when none
// is left, Default answers (and is never used up); without Default the fake
// answers 500. Embedding requests do not use turns. A Script is plain JSON so
// files (cmd/llmfake -script) and Go tests share it.
type Script struct {
	Turns   []Turn `json:"turns,omitempty"`
	Default *Turn  `json:"default,omitempty"`
	// APIKey, when set, is required on every request (x-goog-api-key or ?key=
	// for Gemini, a Bearer token otherwise); a wrong or missing key gets the
	// protocol's real "bad key" answer (Gemini: 400 API_KEY_INVALID).
	APIKey string `json:"api_key,omitempty"`
	// Model is the model name put in answers when the request names none.
	Model string `json:"model,omitempty"`
	// Delay is the pause between streamed frames for turns that set none.
	Delay Duration `json:"delay,omitempty"`
	// StampTime prefixes every streamed text chunk with the time it was sent,
	// "[ts:UNIX_NANOS]" (see [ParseStamp]), for measuring relay latency.
	StampTime bool `json:"stamp_time,omitempty"`
	// EmbeddingDim is the length of the vectors the embedding endpoints
	// return (default 64); see [Vector].
	EmbeddingDim int `json:"embedding_dim,omitempty"`
	// EmbedError, when set, is how every embedding request fails.
	EmbedError *ErrorReply `json:"embed_error,omitempty"`
}

// Turn is the answer to one chat request. Text, Reply/ReplyFunc and ToolCalls
// may be combined (text first); Error replaces the answer (or interrupts it,
// with Error.After); Fault spoils it.
type Turn struct {
	Match *Match `json:"match,omitempty"`
	// Text is streamed as these chunks, in order.
	Text []string `json:"text,omitempty"`
	// Reply is a text/template rendered against the [Request] (for example
	// {{.LastToolResult}}, {{field .LastToolResult "rows.0.0"}}) and streamed
	// word by word after Text.
	Reply string `json:"reply,omitempty"`
	// ReplyFunc, from Go only, computes text to stream after Reply.
	ReplyFunc func(*Request) string `json:"-"`
	// Thinking is streamed as reasoning before the answer (Ollama's
	// message.thinking; the other protocols do not stream thoughts).
	Thinking []string `json:"thinking,omitempty"`
	// ToolCalls are called in this one answer.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallsFunc, from Go only, computes more calls to make after
	// ToolCalls (a model that acts on what the request holds).
	ToolCallsFunc func(*Request) []ToolCall `json:"-"`
	// Usage is the token usage reported; zero fields are estimated (request
	// bytes / 4, answer bytes / 4).
	Usage *Usage `json:"usage,omitempty"`
	// FinishReason overrides the protocol's own (e.g. "length", "MAX_TOKENS").
	FinishReason string `json:"finish_reason,omitempty"`
	// Delay is the pause between streamed frames.
	Delay Duration    `json:"delay,omitempty"`
	Error *ErrorReply `json:"error,omitempty"`
	Fault *Fault      `json:"fault,omitempty"`
}

// Match selects a turn by what the request holds. All set fields must hold.
type Match struct {
	// LastRole is the role of the request's last message: "user", "tool" or
	// "assistant".
	LastRole string `json:"last_role,omitempty"`
	// Contains must occur in the last message's text (for a tool result, its
	// content).
	Contains string `json:"contains,omitempty"`
	// Tool must be among the tools the request declares.
	Tool string `json:"tool,omitempty"`
	// NoTools requires a request declaring no tools.
	NoTools bool `json:"no_tools,omitempty"`
}

// ToolCall is a call the fake model makes.
type ToolCall struct {
	ID   string          `json:"id,omitempty"` // default: generated (Gemini: none, as the real API)
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"` // a JSON object; default {}
	// ArgChunks splits the arguments into these streamed fragments (OpenAI);
	// their concatenation is sent instead of Args.
	ArgChunks []string `json:"arg_chunks,omitempty"`
	// Signature is Gemini's thoughtSignature; by default the first call of an
	// answer gets a generated one, as gemini-2.5 does.
	Signature string `json:"signature,omitempty"`
}

// Usage is the token usage a turn reports.
type Usage struct {
	Input    int64 `json:"input,omitempty"`
	Output   int64 `json:"output,omitempty"`
	Thoughts int64 `json:"thoughts,omitempty"` // Gemini's thoughtsTokenCount
}

// ErrorReply is a failure answer. Preset picks the protocol's realistic status
// and body for a kind of failure ("auth", "permission_denied", "rate_limit",
// "unavailable", "server_error", "context_too_large", "tools_unsupported",
// "model_not_found"); Status, Message, Code, Body and Headers override it.
type ErrorReply struct {
	Preset  string            `json:"preset,omitempty"`
	Status  int               `json:"status,omitempty"`
	Message string            `json:"message,omitempty"`
	Code    string            `json:"code,omitempty"` // OpenAI code / Gemini ErrorInfo reason
	Body    string            `json:"body,omitempty"` // raw body, sent as is
	Headers map[string]string `json:"headers,omitempty"`
	// After, when set, sends the error inside a 200 stream after this many
	// frames, as providers do when they fail mid-answer.
	After *int `json:"after,omitempty"`
}

// Fault kinds.
const (
	FaultDrop      = "drop"      // close the connection (After 0: before any response)
	FaultStall     = "stall"     // send nothing for For (0: until the client leaves), then go on
	FaultHang      = "hang"      // like stall, before the response headers
	FaultMalformed = "malformed" // send a frame that is not valid JSON, then end
	FaultTruncate  = "truncate"  // end cleanly without the protocol's end marker
)

// Fault spoils an answer after After frames (wire events or lines; OpenAI's
// first frame is a role-only chunk).
type Fault struct {
	Kind  string   `json:"kind"`
	After int      `json:"after,omitempty"`
	For   Duration `json:"for,omitempty"`
	// Release, from Go only, ends a stall (or hang) when it is closed: a
	// test decides when the answer goes on, instead of a duration.
	Release <-chan struct{} `json:"-"`
}

// Duration is a time.Duration written in JSON as a Go duration string ("50ms")
// or a number of nanoseconds.
type Duration time.Duration

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want a string like \"50ms\": %w", err)
	}
	*d = Duration(n)
	return nil
}

// LoadScript reads a JSON script file.
func LoadScript(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	return ParseScript(b)
}

// ParseScript decodes a JSON script, refusing unknown fields.
func ParseScript(b []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("llmtest: parse script: %w", err)
	}
	return s, s.validate()
}

func (s Script) validate() error {
	turns := append([]Turn(nil), s.Turns...)
	if s.Default != nil {
		turns = append(turns, *s.Default)
	}
	for i, t := range turns {
		if t.Fault != nil {
			switch t.Fault.Kind {
			case FaultDrop, FaultStall, FaultHang, FaultMalformed, FaultTruncate:
			default:
				return fmt.Errorf("llmtest: turn %d: unknown fault kind %q", i, t.Fault.Kind)
			}
		}
		for _, c := range t.ToolCalls {
			if c.Name == "" {
				return fmt.Errorf("llmtest: turn %d: tool call without a name", i)
			}
			if len(c.Args) > 0 && !json.Valid(c.Args) {
				return fmt.Errorf("llmtest: turn %d: tool call %s: args are not JSON", i, c.Name)
			}
		}
	}
	return nil
}

// Texts returns a turn streaming these chunks.
func Texts(chunks ...string) Turn { return Turn{Text: chunks} }

// Call returns a tool call with args given as JSON text.
func Call(name, argsJSON string) ToolCall {
	return ToolCall{Name: name, Args: json.RawMessage(argsJSON)}
}

// Calls returns a turn calling these tools in one answer.
func Calls(calls ...ToolCall) Turn { return Turn{ToolCalls: calls} }

// Fail returns a turn answering with status and the protocol's error body
// holding message.
func Fail(status int, message string) Turn {
	return Turn{Error: &ErrorReply{Status: status, Message: message}}
}

// Preset returns a turn failing the protocol's realistic way (see ErrorReply).
func Preset(name string) Turn { return Turn{Error: &ErrorReply{Preset: name}} }

// Faulty returns a turn streaming chunks and spoiled by a fault after
// `after` frames.
func Faulty(kind string, after int, chunks ...string) Turn {
	return Turn{Text: chunks, Fault: &Fault{Kind: kind, After: after}}
}
