package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"datachat"
	"datachat/internal/chat"
)

// OpenAI's Responses API (POST /v1/responses), the wire format of OpenAI's
// newer clients and of the Vercel AI SDK's default OpenAI provider: the
// request as a turn, and the pure conversions to the Response object and
// its streaming events. Text in, text out: datachat runs its own tools, so
// the output is one assistant message.

// responseRequest is the part of a Responses API request datachat reads.
// Fields it cannot honour are refused (checkResponseRequest); the rest
// (instructions, top_p, tools with a tool_choice that does not force them,
// metadata, user…) are accepted and not used, except as echoed back.
type responseRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Stream             bool            `json:"stream"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	PreviousResponseID *string         `json:"previous_response_id"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
	Background   *bool           `json:"background"`
	Conversation json.RawMessage `json:"conversation"`
	Store        *bool           `json:"store"`
	Metadata     json.RawMessage `json:"metadata"`
	// ShowSQL (extension) puts each SQL query into the answer, as for chat
	// completions.
	ShowSQL bool `json:"datachat_show_sql"`
}

// responseTurn is a validated Responses request.
type responseTurn struct {
	*completionTurn
	// conversation is the one the request continues, from its
	// previous_response_id or an item_reference (named by param); "" for a
	// new one (or the X-Conversation-ID header's).
	conversation, param string
	meta                responseMeta
}

// inputItem is one item of a request's input list.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

// ignoredItems are items of the client's own tool rounds, which datachat's
// answers never ask for: they are passed over, as a chat completion's tool
// messages are.
var ignoredItems = map[string]bool{
	"function_call": true, "function_call_output": true, "custom_tool_call": true, "custom_tool_call_output": true, "reasoning": true,
}

// responseTurnOf checks a Responses request and turns it into a turn.
func responseTurnOf(req responseRequest, showSQL bool, maxQueryChars int) (*responseTurn, error) {
	if strings.TrimSpace(req.Model) == "" {
		return nil, invalidParam("model", "You must provide a model parameter (datachat serves %q).", openaiModelID)
	}
	rt := &responseTurn{completionTurn: &completionTurn{stream: req.Stream, showSQL: req.ShowSQL || showSQL}}
	if err := checkResponseRequest(req); err != nil {
		return nil, err
	}
	if err := checkToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	if t := req.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, invalidParam("temperature", "temperature must be from 0 to 2, got %g.", *t)
		}
		rt.opts.Temperature = t
	}
	if n := req.MaxOutputTokens; n != nil {
		if *n <= 0 {
			return nil, invalidParam("max_output_tokens", "max_output_tokens must be a positive integer, got %d.", *n)
		}
		rt.opts.MaxOutputTokens = *n
	}
	if p := req.PreviousResponseID; p != nil && *p != "" {
		conv, ok := conversationOfID("resp_", *p)
		if !ok {
			return nil, previousNotFound(*p)
		}
		rt.conversation, rt.param = conv, "previous_response_id"
	}
	if err := rt.readInput(req.Input, maxQueryChars); err != nil {
		return nil, err
	}
	rt.meta = responseMeta{previous: req.PreviousResponseID, temperature: req.Temperature, topP: req.TopP,
		maxOutputTokens: req.MaxOutputTokens, toolChoice: "auto", metadata: req.Metadata}
	var choice string
	if json.Unmarshal(req.ToolChoice, &choice) == nil && choice != "" {
		rt.meta.toolChoice = choice
	}
	if m := strings.TrimSpace(string(req.Metadata)); m == "" || m[0] != '{' {
		rt.meta.metadata = json.RawMessage("{}")
	}
	return rt, nil
}

// checkResponseRequest refuses what datachat cannot honour and would
// otherwise answer as if it had.
func checkResponseRequest(req responseRequest) error {
	if t := req.Text; t != nil && t.Format != nil && t.Format.Type != "" && t.Format.Type != "text" {
		return invalidParam("text.format", "text.format %q is not supported: datachat answers in text (text.format type \"text\"), and cannot promise %s output.", t.Format.Type, t.Format.Type)
	}
	if req.Background != nil && *req.Background {
		return invalidParam("background", "Background responses are not supported: send the request without background (with stream: true to read the answer as it is written).")
	}
	if req.Store != nil && !*req.Store {
		return invalidParam("store", "store false is not supported: datachat keeps every conversation (its datasets, documents and answers), so that it can be continued; leave store out or set it to true.")
	}
	if c := strings.TrimSpace(string(req.Conversation)); c != "" && c != "null" {
		return invalidParam("conversation", "conversation is not supported: continue a datachat conversation with previous_response_id (a response's id) or the X-Conversation-ID header.")
	}
	return nil
}

// readInput reads the request's input: a string (the user's question), or
// a list of messages and item references, the last the user's question.
func (rt *responseTurn) readInput(raw json.RawMessage, maxQueryChars int) error {
	in := strings.TrimSpace(string(raw))
	if in == "" || in == "null" {
		return invalidParam("input", "input is required: the user's question, as a string or a list of messages.")
	}
	if in[0] == '"' {
		var q string
		if err := json.Unmarshal(raw, &q); err != nil {
			return invalidParam("input", "input must be a string or a list of messages.")
		}
		return rt.question("input", q, maxQueryChars)
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return invalidParam("input", "input must be a string or a list of messages.")
	}
	if len(items) == 0 {
		return invalidParam("input", "input must hold at least one message.")
	}
	last := len(items) - 1
	for i, it := range items {
		at := fmt.Sprintf("input[%d]", i)
		switch {
		case it.Type == "item_reference":
			conv, ok := conversationOfID("msg_", it.ID)
			if !ok {
				return invalidParam(at+".id", "%s.id %q is not an item of a datachat response: send the message's content instead.", at, it.ID)
			}
			if rt.conversation != "" && rt.conversation != conv {
				return invalidParam(at+".id", "%s.id %q is an item of another conversation than the request's %s: a response continues one conversation.", at, it.ID, rt.param)
			}
			rt.conversation, rt.param = conv, at+".id"
			if i == last {
				return invalidParam(at+".type", "The last input must be the user's message (role user), not an item_reference.")
			}
		case ignoredItems[it.Type]:
			if i == last {
				return invalidParam(at+".type", "The last input must be the user's message (role user), not a %s: datachat runs its own tools, never the request's.", it.Type)
			}
		case it.Type == "" || it.Type == "message":
			text, err := inputText(at, it.Content)
			if err != nil {
				return err
			}
			switch it.Role {
			case "system", "developer":
				// datachat writes its own system prompt.
				if i == last {
					return invalidParam(at+".role", "The last input must be the user's message (role user), got %q.", it.Role)
				}
			case "user", "assistant":
				if i == last {
					if it.Role != "user" {
						return invalidParam(at+".role", "The last input must be the user's message (role user), got %q.", it.Role)
					}
					return rt.question(at+".content", text, maxQueryChars)
				}
				if strings.TrimSpace(text) != "" {
					role := datachat.RoleUser
					if it.Role == "assistant" {
						role = datachat.RoleAssistant
					}
					rt.history = append(rt.history, &datachat.Message{Role: role, Content: text, Status: datachat.StatusComplete})
				}
			default:
				return invalidParam(at+".role", "%s.role %q is not one of user, assistant, system, developer.", at, it.Role)
			}
		default:
			return invalidParam(at+".type", "%s.type %q is not accepted: datachat reads messages (role user or assistant, text content) and item_reference items of its own responses.", at, it.Type)
		}
	}
	return nil
}

// question sets the turn's question from the user's last message.
func (rt *responseTurn) question(param, text string, maxQueryChars int) error {
	q, err := chat.CleanQuery(text, maxQueryChars)
	if err != nil {
		return &openaiParamError{Param: param, Err: err}
	}
	rt.content = q
	return nil
}

// inputText is a message's text: its string content, or its text parts
// joined. Images, files and audio are refused: datachat would answer
// without them.
func inputText(at string, raw json.RawMessage) (string, error) {
	c := strings.TrimSpace(string(raw))
	if c == "" || c == "null" {
		return "", nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalidParam(at+".content", "%s.content must be a string or a list of content parts.", at)
		}
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalidParam(at+".content", "%s.content must be a string or a list of content parts.", at)
	}
	var texts []string
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		case "refusal":
		default:
			return "", invalidParam(fmt.Sprintf("%s.content[%d]", at, j), "%s.content[%d] is %q: datachat reads text only; add files to the conversation as datasets or documents instead.", at, j, p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// previousNotFound is the answer to a previous_response_id datachat does
// not know (or that is another user's), as OpenAI words it.
func previousNotFound(id string) error {
	return &openaiParamError{Param: "previous_response_id", Code: "not_found",
		Err: datachat.Errorf(datachat.ENOTFOUND, "Previous response with id '%s' not found.", id)}
}

// Response and output item ids name the conversation they belong to, so
// that previous_response_id and item_reference continue it:
// resp_CONVERSATION_RANDOM and msg_CONVERSATION_RANDOM.
func newResponseIDs(conversationID string) (resp, item string) {
	b := make([]byte, 8)
	rand.Read(b)
	suffix := conversationID + "_" + hex.EncodeToString(b)
	return "resp_" + suffix, "msg_" + suffix
}

// conversationOfID returns the conversation an id of newResponseIDs names.
func conversationOfID(prefix, id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, prefix)
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 || len(rest)-i-1 != 16 {
		return "", false
	}
	if _, err := hex.DecodeString(rest[i+1:]); err != nil {
		return "", false
	}
	return rest[:i], true
}

// responseMeta is what every Response object of one answer repeats.
type responseMeta struct {
	id, itemID      string
	created         int64
	previous        *string
	temperature     *float64
	topP            *float64
	maxOutputTokens *int
	toolChoice      string
	metadata        json.RawMessage
}

type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *struct{}         `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []responseMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          responseReasoning `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               responseText      `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	Metadata           json.RawMessage   `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type responseReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type responseText struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type responseMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type responseUsage struct {
	InputTokens        int64          `json:"input_tokens"`
	InputTokensDetails map[string]int `json:"input_tokens_details"`
	OutputTokens       int64          `json:"output_tokens"`
	OutputTokenDetails map[string]int `json:"output_tokens_details"`
	TotalTokens        int64          `json:"total_tokens"`
}

func textPart(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// message is the answer as an output item: status in_progress, completed
// or incomplete; content nil for none yet.
func (m *responseMeta) message(status string, content []outputText) responseMessage {
	if content == nil {
		content = []outputText{}
	}
	return responseMessage{ID: m.itemID, Type: "message", Status: status, Role: "assistant", Content: content}
}

// object is the Response in a state: in_progress (no output, no usage
// yet), completed, or failed (with the text so far and the error).
func (m *responseMeta) object(status string, text *string, out *chat.Outcome, fail *responseError) responseObject {
	r := responseObject{
		ID: m.id, Object: "response", CreatedAt: m.created, Status: status, Error: fail,
		MaxOutputTokens: m.maxOutputTokens, Model: openaiModelID, Output: []responseMessage{},
		ParallelToolCalls: true, PreviousResponseID: m.previous, Store: true, Temperature: m.temperature,
		ToolChoice: m.toolChoice, Tools: []any{}, TopP: m.topP, Truncation: "disabled", Metadata: m.metadata,
	}
	r.Text.Format.Type = "text"
	if text != nil {
		itemStatus := "completed"
		if status != "completed" {
			itemStatus = "incomplete"
		}
		r.Output = append(r.Output, m.message(itemStatus, []outputText{textPart(*text)}))
	}
	if status != "in_progress" {
		u := usageOf(out)
		r.Usage = &responseUsage{
			InputTokens: u.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": 0},
			OutputTokens: u.CompletionTokens, OutputTokenDetails: map[string]int{"reasoning_tokens": 0},
			TotalTokens: u.TotalTokens,
		}
	}
	return r
}

// failureOf is a failed response's error: its code in OpenAI's error shape
// (server_error when it has none) and its message.
func failureOf(err error) *responseError {
	d := openaiErrorOf(err)
	code := "server_error"
	if d.Code != nil {
		code = *d.Code
	}
	return &responseError{Code: code, Message: d.Message}
}
