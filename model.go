package datachat

import (
	"encoding/json"
	"fmt"
	"time"
)

// ModelRequest is one call to a chat model, in provider-neutral form. Provider
// packages convert it to their wire format at the edge.
type ModelRequest struct {
	Model           string
	System          string
	Messages        []ModelMessage
	Tools           []ToolSpec
	Temperature     *float64
	MaxOutputTokens int
}

// Roles of a ModelMessage.
const (
	ModelRoleUser      = "user"
	ModelRoleAssistant = "assistant"
	ModelRoleTool      = "tool"
)

// ModelMessage is a message of a model conversation. An assistant message may
// carry tool calls; a tool message carries the result of one call (ToolCallID
// and ToolName name the call it answers).
type ModelMessage struct {
	Role       string
	Content    string
	ToolCalls  []ModelToolCall
	ToolCallID string
	ToolName   string
}

// ModelToolCall is a complete tool call made by the model.
type ModelToolCall struct {
	ID   string
	Name string
	Args json.RawMessage // a JSON object
	// Signature is opaque provider data to send back with the call in the
	// follow-up request (Gemini's thought signature); usually empty.
	Signature string
}

// ToolSpec declares a tool to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// TokenCount is the usage a provider reported for one call.
type TokenCount struct {
	Input  int64
	Output int64
}

// ModelEvent is one event of a streamed model answer: exactly one of Text,
// ToolCall, Usage or FinishReason is set.
type ModelEvent struct {
	Text         string
	ToolCall     *ModelToolCall
	Usage        *TokenCount
	FinishReason string
}

// Kinds of ProviderError.
const (
	ProviderAuth            = "auth"              // 401/403, bad key
	ProviderRateLimited     = "rate_limited"      // 429
	ProviderUnavailable     = "unavailable"       // 5xx
	ProviderBadRequest      = "bad_request"       // other 4xx
	ProviderContextTooLarge = "context_too_large" // prompt exceeds the model's window
	ProviderMalformed       = "malformed"         // undecodable stream data
	ProviderTimeout         = "timeout"           // connect or stream idle timeout
	ProviderConnection      = "connection"        // connection refused, reset, dropped
	ProviderNotConfigured   = "not_configured"    // no provider set up
)

// ProviderError is a failed model call, with a reason and a suggested action a
// person can act on.
type ProviderError struct {
	Provider        string
	Kind            string
	Status          int // HTTP status, 0 if none
	Reason          string
	SuggestedAction string
	RetryAfter      time.Duration
	Err             error
}

func (e *ProviderError) Error() string {
	s := fmt.Sprintf("%s %s", e.Provider, e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ProviderError) Unwrap() error { return e.Err }
