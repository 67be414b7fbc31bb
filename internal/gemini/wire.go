package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"datachat"
	"datachat/internal/llm"
)

// The generateContent wire format (REST v1beta), only the fields datachat uses.

type generateRequest struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Parameters  any    `json:"parameters,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode string `json:"mode"`
}

type generationConfig struct {
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int      `json:"maxOutputTokens,omitempty"`
}

type generateResponse struct {
	Candidates     []candidate     `json:"candidates"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	UsageMetadata  *usageMetadata  `json:"usageMetadata"`
	Error          *apiError       `json:"error"`
}

type candidate struct {
	Content      *content `json:"content"`
	FinishReason string   `json:"finishReason"`
	Index        int      `json:"index"`
}

type promptFeedback struct {
	BlockReason string `json:"blockReason"`
}

type usageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

type apiError struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Status  string            `json:"status"`
	Details []json.RawMessage `json:"details"`
}

type errorBody struct {
	Error *apiError `json:"error"`
}

type embedRequest struct {
	Requests []embedContentRequest `json:"requests"`
}

type embedContentRequest struct {
	Model   string  `json:"model"`
	Content content `json:"content"`
}

type embedResponse struct {
	Embeddings []struct {
		Values []float32 `json:"values"`
	} `json:"embeddings"`
}

// toRequest converts a model request to Gemini's wire format. Tool results go
// back as functionResponse parts {"result": content}; consecutive messages of
// one role are merged into one content, as Gemini expects.
func toRequest(req *datachat.ModelRequest) (*generateRequest, error) {
	out := &generateRequest{Contents: []content{}}
	if s := strings.TrimSpace(req.System); s != "" {
		out.SystemInstruction = &content{Role: "user", Parts: []part{{Text: req.System}}}
	}
	names := map[string]string{} // tool call id → tool name
	for _, m := range req.Messages {
		var c content
		switch m.Role {
		case datachat.ModelRoleAssistant:
			c.Role = "model"
			if m.Content != "" {
				c.Parts = append(c.Parts, part{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				c.Parts = append(c.Parts, part{
					FunctionCall:     &functionCall{ID: tc.ID, Name: tc.Name, Args: llm.ObjectOrEmpty(tc.Args)},
					ThoughtSignature: tc.Signature,
				})
			}
		case datachat.ModelRoleTool:
			c.Role = "user"
			name := m.ToolName
			if name == "" {
				name = names[m.ToolCallID]
			}
			if name == "" {
				return nil, fmt.Errorf("tool result %q answers no known tool call", m.ToolCallID)
			}
			c.Parts = []part{{FunctionResponse: &functionResponse{
				ID: m.ToolCallID, Name: name, Response: map[string]any{"result": m.Content},
			}}}
		default:
			c.Role = "user"
			if m.Content != "" {
				c.Parts = []part{{Text: m.Content}}
			}
		}
		if len(c.Parts) == 0 {
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == c.Role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, c.Parts...)
			continue
		}
		out.Contents = append(out.Contents, c)
	}
	if len(req.Tools) > 0 {
		decls := make([]functionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			params, err := toSchema(t.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			decls = append(decls, functionDeclaration{Name: t.Name, Description: t.Description, Parameters: params})
		}
		out.Tools = []tool{{FunctionDeclarations: decls}}
		out.ToolConfig = &toolConfig{FunctionCallingConfig: functionCallingConfig{Mode: "AUTO"}}
	}
	if req.Temperature != nil || req.MaxOutputTokens > 0 {
		out.GenerationConfig = &generationConfig{Temperature: req.Temperature, MaxOutputTokens: req.MaxOutputTokens}
	}
	return out, nil
}

// schemaKeys are the JSON Schema keywords Gemini's OpenAPI-subset Schema
// accepts; it rejects a request with any other ("Unknown name").
var schemaKeys = map[string]bool{
	"description": true, "title": true, "nullable": true, "enum": true, "required": true,
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "pattern": true,
	"minimum": true, "maximum": true, "minProperties": true, "maxProperties": true,
	"example": true, "default": true, "propertyOrdering": true,
}

// schemaFormats are the formats Gemini accepts.
var schemaFormats = map[string]bool{"enum": true, "date-time": true, "int32": true, "int64": true, "float": true, "double": true}

// toSchema converts a JSON Schema object to Gemini's Schema: upper-case type
// names, ["T","null"] as nullable, unsupported keywords dropped.
func toSchema(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("parameters are not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("parameters are not a JSON object")
	}
	return convertSchema(v), nil
}

func convertSchema(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		switch {
		case k == "type":
			switch t := val.(type) {
			case string:
				out["type"] = strings.ToUpper(t)
			case []any:
				for _, e := range t {
					if s, _ := e.(string); s == "null" {
						out["nullable"] = true
					} else if s != "" && out["type"] == nil {
						out["type"] = strings.ToUpper(s)
					}
				}
			}
		case k == "format":
			if s, _ := val.(string); schemaFormats[s] {
				out[k] = s
			}
		case k == "properties":
			if props, ok := val.(map[string]any); ok {
				conv := make(map[string]any, len(props))
				for name, p := range props {
					conv[name] = convertSchema(p)
				}
				out[k] = conv
			}
		case k == "items":
			out[k] = convertSchema(val)
		case k == "anyOf":
			if list, ok := val.([]any); ok {
				conv := make([]any, len(list))
				for i, e := range list {
					conv[i] = convertSchema(e)
				}
				out[k] = conv
			}
		case schemaKeys[k]:
			out[k] = val
		}
	}
	if _, ok := out["type"]; !ok {
		if _, hasEnum := out["enum"]; hasEnum {
			out["type"] = "STRING"
		} else if _, hasProps := out["properties"]; hasProps {
			out["type"] = "OBJECT"
		}
	}
	return out
}

// mapError maps a Gemini error (an HTTP failure's body, or an error event in a
// stream) to a ProviderError. A bad key comes back as 400 API_KEY_INVALID.
func mapError(status int, header http.Header, body []byte) *datachat.ProviderError {
	var eb errorBody
	message := strings.TrimSpace(string(body))
	var ae *apiError
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		ae = eb.Error
		message = ae.Message
		if status == 0 {
			status = ae.Code
		}
	}
	reasons, retryDelay := errorDetails(ae)
	switch {
	case reasons["API_KEY_INVALID"] || reasons["API_KEY_EXPIRED"] || strings.Contains(message, "API key not valid") ||
		ae != nil && ae.Status == "UNAUTHENTICATED":
		return llm.AuthError(provider, status, message)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.AuthError(provider, status, message)
	case status == http.StatusBadRequest && llm.MentionsContextLimit(message):
		return llm.ContextTooLargeError(provider, status, message)
	case status == http.StatusTooManyRequests:
		wait := llm.RetryAfter(header)
		if wait == 0 {
			wait = retryDelay
		}
		return llm.RateLimitError(provider, status, message, wait)
	case status == 0:
		return llm.StatusError(provider, http.StatusInternalServerError, message)
	}
	return llm.StatusError(provider, status, message)
}

// errorDetails reads the ErrorInfo reasons and the RetryInfo delay of an error.
func errorDetails(ae *apiError) (map[string]bool, time.Duration) {
	reasons := map[string]bool{}
	var delay time.Duration
	if ae == nil {
		return reasons, 0
	}
	for _, raw := range ae.Details {
		var d struct {
			Type       string `json:"@type"`
			Reason     string `json:"reason"`
			RetryDelay string `json:"retryDelay"`
		}
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		if d.Reason != "" {
			reasons[d.Reason] = true
		}
		if d.RetryDelay != "" {
			// A wait that is not positive says nothing; a day is already absurd.
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
				delay = min(v, 24*time.Hour)
			}
		}
	}
	return reasons, delay
}
