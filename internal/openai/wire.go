package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"datachat"
	"datachat/internal/llm"
)

// The Chat Completions wire format, only the fields datachat uses.

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []message      `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	Tools               []tool         `json:"tools,omitempty"`
	ToolChoice          string         `json:"tool_choice,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string             `json:"type"`
	Function functionDefinition `json:"function"`
}

type functionDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chunk struct {
	Choices []choice        `json:"choices"`
	Usage   *usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type choice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Content   *string         `json:"content"`
	Refusal   *string         `json:"refusal"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int          `json:"index"`
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type embedRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type embedResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// wireOptions are the request settings that depend on the server.
type wireOptions struct {
	model string
	// maxCompletionTokens sends the output limit as max_completion_tokens,
	// which OpenAI's newer models require; compatible servers know max_tokens.
	maxCompletionTokens bool
}

// toRequest converts a model request to a streaming Chat Completions request.
func toRequest(req *datachat.ModelRequest, o wireOptions) (*chatRequest, error) {
	out := &chatRequest{
		Model:         o.model,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
		Temperature:   req.Temperature,
	}
	if req.MaxOutputTokens > 0 {
		if o.maxCompletionTokens {
			out.MaxCompletionTokens = req.MaxOutputTokens
		} else {
			out.MaxTokens = req.MaxOutputTokens
		}
	}
	if req.System != "" {
		out.Messages = append(out.Messages, message{Role: "system", Content: ptr(req.System)})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case datachat.ModelRoleAssistant:
			msg := message{Role: "assistant"}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				msg.Content = ptr(m.Content)
			}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, toolCall{
					ID: tc.ID, Type: "function",
					Function: functionCall{Name: tc.Name, Arguments: string(llm.ObjectOrEmpty(tc.Args))},
				})
			}
			out.Messages = append(out.Messages, msg)
		case datachat.ModelRoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("tool result for %q has no tool call id", m.ToolName)
			}
			out.Messages = append(out.Messages, message{Role: "tool", Content: ptr(m.Content), ToolCallID: m.ToolCallID})
		default:
			out.Messages = append(out.Messages, message{Role: "user", Content: ptr(m.Content)})
		}
	}
	for _, t := range req.Tools {
		params, err := llm.ToolParameters(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		out.Tools = append(out.Tools, tool{Type: "function", Function: functionDefinition{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = "auto"
	}
	return out, nil
}

func ptr(s string) *string { return &s }

// apiError is OpenAI's error object; compatible servers vary ("error" as a
// plain string, "code" as a number).
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

func parseError(body []byte) (apiError, bool) {
	var eb struct {
		Error  json.RawMessage `json:"error"`
		Detail any             `json:"detail"`
	}
	if json.Unmarshal(body, &eb) != nil {
		return apiError{}, false
	}
	var ae apiError
	switch {
	case len(eb.Error) > 0 && eb.Error[0] == '{':
		if json.Unmarshal(eb.Error, &ae) != nil {
			return apiError{}, false
		}
	case len(eb.Error) > 0 && eb.Error[0] == '"':
		_ = json.Unmarshal(eb.Error, &ae.Message)
	case eb.Detail != nil:
		ae.Message = fmt.Sprint(eb.Detail)
	default:
		return apiError{}, false
	}
	return ae, true
}

// mapError maps an error answer (or an error event in a stream, status 0) to a
// ProviderError.
func mapError(status int, header http.Header, body []byte) *datachat.ProviderError {
	message := strings.TrimSpace(string(body))
	ae, ok := parseError(body)
	if ok {
		message = ae.Message
	}
	code := fmt.Sprint(ae.Code)
	if ae.Code == nil {
		code = ""
	}
	switch {
	case code == "context_length_exceeded" || (status == 0 || status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge) && llm.MentionsContextLimit(message):
		return llm.ContextTooLargeError(provider, status, message)
	case code == "invalid_api_key" || status == http.StatusUnauthorized || status == http.StatusForbidden:
		if status == 0 {
			status = http.StatusUnauthorized
		}
		return llm.AuthError(provider, status, message)
	case status == http.StatusTooManyRequests || status == 0 && (code == "rate_limit_exceeded" || ae.Type == "rate_limit_exceeded" || code == "insufficient_quota"):
		if status == 0 {
			status = http.StatusTooManyRequests
		}
		pe := llm.RateLimitError(provider, status, message, llm.RetryAfter(header))
		if code == "insufficient_quota" || ae.Type == "insufficient_quota" {
			pe.Reason = "The account's quota is used up (" + fmt.Sprint(status) + " Too Many Requests)"
			pe.SuggestedAction = "Check the plan and billing of the account behind OPENAI_API_KEY"
		}
		return pe
	case status == 0:
		pe := llm.StatusError(provider, http.StatusInternalServerError, message)
		pe.Status = 0 // an error event in a stream the server had answered with 200
		pe.Reason = "The provider reported an error while answering"
		return pe
	}
	return llm.StatusError(provider, status, message)
}
