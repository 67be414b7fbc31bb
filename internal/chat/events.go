package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"datachat"
)

// Event is one thing a turn tells its client. Data's type follows Type (a
// TokenEvent for EventToken, and so on); internal/server names each type on
// the WebSocket.
type Event struct {
	Type EventType
	Data any
}

// EventType is the kind of an [Event].
type EventType string

// The events of a turn. Send, Confirm and CancelPending emit the first three
// through the [Sink]; the last three are what their caller sends once the turn
// has ended (from [Outcome] or the error).
const (
	EventToken          EventType = "token"            // TokenEvent
	EventToolCallStart  EventType = "tool_call_start"  // ToolCallStartEvent
	EventToolCallResult EventType = "tool_call_result" // ToolCallResultEvent
	EventConfirmation   EventType = "confirmation"     // ConfirmationEvent
	EventComplete       EventType = "complete"         // CompleteEvent
	EventError          EventType = "error"            // ErrorEvent
)

// Sink receives a turn's events in order. It may block (the turn waits); it
// must not keep the event's data.
type Sink func(Event)

// Event payloads, as the WebSocket sends them.
type (
	TokenEvent struct {
		Token string `json:"token"`
	}
	ToolCallStartEvent struct {
		ID   string          `json:"id"`
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	ToolCallResultEvent struct {
		ID        string            `json:"id"`
		Tool      string            `json:"tool"`
		OK        bool              `json:"ok"`
		Content   string            `json:"content"`
		Error     string            `json:"error,omitempty"`
		Columns   []datachat.Column `json:"columns,omitempty"`
		Rows      [][]any           `json:"rows,omitempty"`
		RowCount  *int              `json:"row_count,omitempty"`
		Truncated *bool             `json:"truncated,omitempty"`
		ElapsedMS *float64          `json:"elapsed_ms,omitempty"`
	}
	ConfirmationEvent struct {
		ID          string          `json:"id"`
		Action      string          `json:"action"`
		Parameters  json.RawMessage `json:"parameters"`
		Explanation string          `json:"explanation"`
	}
	CompleteEvent struct {
		MessageID    string                 `json:"message_id"`
		Status       string                 `json:"status"`
		InputTokens  int64                  `json:"input_tokens"`
		OutputTokens int64                  `json:"output_tokens"`
		TotalTokens  int64                  `json:"total_tokens"`
		Sources      []datachat.Source      `json:"sources"`
		NumberChecks []datachat.NumberCheck `json:"number_checks"`
	}
	ErrorEvent struct {
		Message         string `json:"message"`
		Reason          string `json:"reason,omitempty"`
		SuggestedAction string `json:"suggested_action,omitempty"`
	}
)

// Text is the event as one message: its message, reason and suggested
// action as sentences, each given a period where it has no stop of its own
// ("… (503 Service Unavailable). Wait a minute and try again.").
func (e ErrorEvent) Text() string {
	var out []string
	for _, s := range []string{e.Message, e.Reason, e.SuggestedAction} {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "…") {
			s += "."
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// PartBreak is what to write after answer text ending in tail (its last
// characters) so that the next part of the answer, after a tool call,
// starts a paragraph of its own instead of running on ("…by day.Tips…"),
// as the page shows the parts.
func PartBreak(tail string) string {
	switch {
	case tail == "" || strings.HasSuffix(tail, "\n\n"):
		return ""
	case strings.HasSuffix(tail, "\n"):
		return "\n"
	}
	return "\n\n"
}

// ErrorEventFor turns an error from Send or Confirm into an EventError payload.
func ErrorEventFor(err error) ErrorEvent {
	var pe *datachat.ProviderError
	if errors.As(err, &pe) {
		msg := "The language model request failed."
		switch pe.Kind {
		case datachat.ProviderNotConfigured:
			msg = "No language model is configured."
		case datachat.ProviderContextTooLarge:
			msg = ErrContextTooLarge
		}
		return ErrorEvent{Message: msg, Reason: pe.Reason, SuggestedAction: pe.SuggestedAction}
	}
	var se *SaveError
	if errors.As(err, &se) {
		ev := ErrorEvent{
			Message:         "The answer could not be saved.",
			Reason:          "The database did not answer when the answer ended.",
			SuggestedAction: "The answer above is kept here and is saved as soon as the database answers again; reload the page in a moment to check before you go on.",
		}
		// A named condition (the database unavailable, the disk full) is the
		// message; that this answer waits to be saved is its reason.
		var c *datachat.Condition
		if errors.As(se.Err, &c) {
			ev.Message = datachat.ErrorMessage(se.Err)
			ev.Reason = c.Reason + " The answer above could not be saved yet."
		}
		return ev
	}
	var de *datachat.Error
	if errors.As(err, &de) && de.Code == datachat.ERATELIMIT {
		return ErrorEvent{Message: de.Message, Reason: datachat.ERATELIMIT, SuggestedAction: fmt.Sprintf("Try again in %s.", de.RetryAfter.Round(time.Second))}
	}
	// A condition of the server (its database unavailable, its disk full),
	// classified where it was recognised.
	var c *datachat.Condition
	if errors.As(err, &c) {
		return ErrorEvent{Message: datachat.ErrorMessage(err), Reason: c.Reason, SuggestedAction: c.SuggestedAction}
	}
	return ErrorEvent{Message: datachat.ErrorMessage(err)}
}

// Outcome is what a turn ended with.
type Outcome struct {
	Message      *datachat.Message // the assistant message
	Usage        datachat.TokenCount
	Sources      []datachat.Source
	Confirmation *datachat.Confirmation // set when the turn waits for the user: send an EventConfirmation
	// PromptTables are the tables the turn's prompt described (a dataset's
	// name, a database's table as SOURCE.SCHEMA.TABLE), for measures of
	// the schema's retrieval (datachat eval's recall@prompt).
	PromptTables []string
	// SystemChars is the size of the turn's system prompt, in characters.
	SystemChars int
	// Complete is the EventComplete to send when the turn completed or was
	// cancelled. The caller sends it once it is ready for the next turn, so a
	// client answering it at once is never told a turn still runs.
	Complete    *CompleteEvent
	EmbeddingMS float64 // spent embedding the retrieval query
	RetrievalMS float64 // spent retrieving excerpts, embedding included
}
