package ollama

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"datachat"
	"datachat/internal/llm"
)

// The native /api/chat and /api/embed wire format, only the fields datachat
// uses.

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []message     `json:"messages"`
	Tools    []tool        `json:"tools,omitempty"`
	Stream   bool          `json:"stream"`
	Options  *modelOptions `json:"options,omitempty"`
}

type modelOptions struct {
	Temperature *float64 `json:"temperature,omitempty"`
	NumCtx      int      `json:"num_ctx,omitempty"`
	NumPredict  int      `json:"num_predict,omitempty"`
}

type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Thinking   string     `json:"thinking,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
}

type toolCall struct {
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function toolCallFunction `json:"function"`
}

type toolCallFunction struct {
	Index     *int            `json:"index,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
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

type chatResponse struct {
	Message         *message `json:"message"`
	Done            bool     `json:"done"`
	DoneReason      string   `json:"done_reason"`
	PromptEvalCount int64    `json:"prompt_eval_count"`
	EvalCount       int64    `json:"eval_count"`
	Error           *string  `json:"error"`
}

type embedRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embedResponse struct {
	Embeddings [][]float32 `json:"embeddings"`
}

// toRequest converts a model request to a streaming /api/chat request.
func toRequest(req *datachat.ModelRequest, model string, numCtx int) (*chatRequest, error) {
	out := &chatRequest{Model: model, Stream: true, Messages: []message{}}
	if req.System != "" {
		out.Messages = append(out.Messages, message{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case datachat.ModelRoleAssistant:
			msg := message{Role: "assistant", Content: m.Content}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, toolCall{
					ID: tc.ID, Type: "function",
					Function: toolCallFunction{Name: tc.Name, Arguments: llm.ObjectOrEmpty(tc.Args)},
				})
			}
			out.Messages = append(out.Messages, msg)
		case datachat.ModelRoleTool:
			out.Messages = append(out.Messages, message{Role: "tool", Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName})
		default:
			out.Messages = append(out.Messages, message{Role: "user", Content: m.Content})
		}
	}
	for _, t := range req.Tools {
		params, err := llm.ToolParameters(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		out.Tools = append(out.Tools, tool{Type: "function", Function: functionDefinition{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if req.Temperature != nil || numCtx > 0 || req.MaxOutputTokens > 0 {
		out.Options = &modelOptions{Temperature: req.Temperature, NumCtx: numCtx, NumPredict: req.MaxOutputTokens}
	}
	return out, nil
}

// mapError maps an error answer ({"error":"…"}), or an error line in a stream
// (status 0), to a ProviderError.
func mapError(status int, header http.Header, body []byte) *datachat.ProviderError {
	message := strings.TrimSpace(string(body))
	var eb struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
		message = eb.Error
	}
	lower := strings.ToLower(message)
	var pe *datachat.ProviderError
	switch {
	case llm.MentionsContextLimit(message):
		return llm.ContextTooLargeError(provider, status, message)
	case status == 0:
		pe = llm.StatusError(provider, http.StatusInternalServerError, message)
		pe.Status = 0 // an error line in a stream the server had answered with 200
		pe.Reason = "Ollama reported an error while answering: " + message
		return pe
	case status == http.StatusTooManyRequests:
		return llm.RateLimitError(provider, status, message, llm.RetryAfter(header))
	}
	pe = llm.StatusError(provider, status, message)
	switch {
	case pe.Kind == datachat.ProviderAuth:
		pe.SuggestedAction = "Check the Ollama API key and OLLAMA_HOST"
	case status == http.StatusNotFound && strings.Contains(lower, "not found"):
		pe.SuggestedAction = "Pull the model (ollama pull MODEL) or set CHAT_MODEL to one that is installed"
	case strings.Contains(lower, "does not support tools"):
		pe.SuggestedAction = "Set CHAT_MODEL to a model that supports tools (llama3.1, qwen2.5, …)"
	}
	return pe
}
