package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"datachat"
	"datachat/internal/chat"
)

// The OpenAI-compatible edge: GET /v1/models and POST /v1/chat/completions,
// so chat clients made for OpenAI can use datachat as a model. The tool loop
// runs inside datachat; the client sees the answer's text (and, on request,
// the SQL that produced it). Errors answer in OpenAI's shape.

// openaiModelID is the one model datachat lists. Completions accept whatever
// model a client names: clients often insist on their own default.
const openaiModelID = "datachat"

// openaiModelCreated is the creation time /v1/models reports (2025-01-01).
const openaiModelCreated = 1735689600

// maxCompletionBody caps a completion request; whole chat histories come in it.
const maxCompletionBody = 4 << 20

type openaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

var datachatModel = openaiModel{ID: openaiModelID, Object: "model", Created: openaiModelCreated, OwnedBy: "datachat"}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []openaiModel{datachatModel}})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("model"); id != openaiModelID {
		s.openaiError(w, r, &openaiParamError{Param: "model", Code: "model_not_found",
			Err: datachat.Errorf(datachat.ENOTFOUND, "The model %q does not exist; datachat serves %q.", id, openaiModelID)})
		return
	}
	writeJSON(w, http.StatusOK, datachatModel)
}

// completionRequest is the part of OpenAI's chat completion request datachat
// uses; other fields (tools, logprobs, user…) are accepted and ignored.
type completionRequest struct {
	Model         string          `json:"model"`
	Messages      []openaiMessage `json:"messages"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	N                   *int     `json:"n"`
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

// openaiError writes err as {"error":{"message","type","param","code"}}.
func (s *Server) openaiError(w http.ResponseWriter, r *http.Request, err error) {
	err = s.startError(w, r, err)
	writeJSON(w, ErrorStatus(err), map[string]any{"error": openaiErrorOf(err)})
}

// openaiAuth is auth answering in OpenAI's error shape.
func (s *Server) openaiAuth(h http.HandlerFunc) http.Handler {
	missing := func(*http.Request) string {
		return "You didn't provide an API key: send it as Authorization: Bearer KEY (or in the X-API-Key header)."
	}
	return s.authenticated(h, s.openaiError, missing, "Incorrect or revoked API key provided.")
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

func (s *Server) parseCompletion(w http.ResponseWriter, r *http.Request) (*completionTurn, error) {
	var req completionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCompletionBody))
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, datachat.Errorf(datachat.EINVALID, "Request body is larger than %d bytes.", mbe.Limit)
		case errors.Is(err, io.EOF):
			return nil, datachat.Errorf(datachat.EINVALID, "Request body is empty; send a JSON object.")
		default:
			return nil, datachat.Errorf(datachat.EINVALID, "We could not parse the JSON body of your request: %v.", err)
		}
	}
	if strings.TrimSpace(req.Model) == "" {
		return nil, invalidParam("model", "You must provide a model parameter (datachat serves %q).", openaiModelID)
	}
	if len(req.Messages) == 0 {
		return nil, invalidParam("messages", "messages must hold at least one message.")
	}
	if req.N != nil && *req.N != 1 {
		return nil, invalidParam("n", "n must be 1: datachat writes one answer per request.")
	}
	ct := &completionTurn{stream: req.Stream, showSQL: req.ShowSQL}
	if v := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Datachat-Show-SQL"))); v == "1" || v == "true" {
		ct.showSQL = true
	}
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
			q, err := chat.CleanQuery(text, s.Chat.MaxQueryChars)
			if err != nil {
				return nil, &openaiParamError{Param: fmt.Sprintf("messages[%d].content", i), Err: err}
			}
			ct.content = q
		}
	}
	return ct, nil
}

// chatCompletions answers POST /v1/chat/completions with one chat turn. The
// X-Conversation-ID header picks a stored conversation (its stored history
// stands; the request's earlier messages are ignored); without it the
// request's messages start a new conversation, whose id comes back in the
// X-Conversation-ID response header.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user := UserFrom(ctx)
	if s.Chat == nil || s.Chat.Model == nil {
		s.openaiError(w, r, turnError(chat.NotConfiguredError()))
		return
	}
	ct, err := s.parseCompletion(w, r)
	if err != nil {
		s.openaiError(w, r, err)
		return
	}
	convID, created, err := s.completionConversation(ctx, user, r.Header.Get("X-Conversation-ID"), ct)
	if err != nil {
		s.openaiError(w, r, err)
		return
	}
	w.Header().Set("X-Conversation-ID", convID)
	// A new conversation refused before its turn started (limits, busy) is
	// removed again, so refusals leave nothing behind.
	discard := func(out *chat.Outcome) {
		if created && out == nil {
			if err := s.Workspace.DeleteConversation(context.WithoutCancel(ctx), user.ID, convID); err != nil {
				s.logger(r).Warn("remove refused conversation", slog.String("conversation_id", convID), slog.String("error", err.Error()))
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pieces := s.produceCompletion(ctx, user, convID, ct)
	defer func() {
		cancel()
		for range pieces { // let the turn end before the handler does
		}
	}()
	c := &completion{id: "chatcmpl-" + RequestID(ctx), created: time.Now().Unix(), model: openaiModelID, conversationID: convID}
	if ct.stream {
		s.streamCompletion(w, r, c, pieces, ct.includeUsage, discard)
	} else {
		s.wholeCompletion(w, r, c, pieces, discard)
	}
}

// completionConversation returns the conversation a request continues, or a
// new one holding the request's earlier messages.
func (s *Server) completionConversation(ctx context.Context, user *datachat.User, id string, ct *completionTurn) (string, bool, error) {
	c, created, err := s.conversationFor(ctx, user, id, ct.content)
	if err != nil {
		return "", false, err
	}
	if !created {
		return c.ID, false, nil
	}
	for _, m := range ct.history {
		m.ConversationID = c.ID
		if err := s.Store.CreateMessage(ctx, m); err != nil {
			return "", false, err
		}
	}
	return c.ID, true, nil
}

// piece is what the turn produced next: answer text (possibly empty, to say
// the turn started), or, last, its outcome.
type piece struct {
	text string
	end  bool
	out  *chat.Outcome
	err  error
}

// produceCompletion runs the turn in a goroutine, sending its text to the
// channel it returns and closes.
func (s *Server) produceCompletion(ctx context.Context, user *datachat.User, convID string, ct *completionTurn) <-chan piece {
	ch := make(chan piece, 64)
	go func() {
		defer close(ch)
		send := func(p piece) {
			select {
			case ch <- p:
			case <-ctx.Done():
			}
		}
		sink := func(ev chat.Event) {
			switch d := ev.Data.(type) {
			case chat.TokenEvent:
				send(piece{text: d.Token})
			case chat.ToolCallStartEvent:
				p := piece{}
				if ct.showSQL && d.Tool == chat.ToolExecuteSQL {
					p.text = sqlBlock(d.Args)
				}
				send(p)
			}
		}
		out, err := s.Chat.Send(ctx, user, convID, ct.content, ct.opts, sink)
		send(piece{end: true, out: out, err: err})
	}()
	return ch
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

// streamCompletion writes the turn as server-sent events: a chunk per text
// delta, a last chunk with finish_reason, the usage chunk if asked, and
// [DONE]. An error before the first chunk is a proper error response; after
// it, an error event ends the stream.
func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, c *completion, pieces <-chan piece, includeUsage bool, discard func(*chat.Outcome)) {
	rc := http.NewResponseController(w)
	started := false
	var nullUsage any
	if includeUsage {
		nullUsage = json.RawMessage("null")
	}
	event := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			s.logger(r).Error("encode completion chunk", slog.String("error", err.Error()))
			return
		}
		w.Write([]byte("data: "))
		w.Write(b)
		w.Write([]byte("\n\n"))
	}
	chunk := func(d chunkDelta, finish *string) {
		event(completionChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
			Choices: []chunkChoice{{Delta: d, FinishReason: finish}}, Usage: nullUsage})
	}
	text := func(t string) { chunk(chunkDelta{Content: &t}, nil) }
	start := func() {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		empty := ""
		chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
		started = true
	}
	for p := range pieces {
		if !p.end {
			if !started {
				start()
			}
			if p.text != "" {
				text(p.text)
			}
			rc.Flush()
			continue
		}
		if p.err != nil {
			err := turnError(p.err)
			if !started {
				discard(p.out)
				s.openaiError(w, r, err)
				return
			}
			s.logger(r).Warn("chat completion failed mid-stream", slog.String("conversation_id", c.conversationID), slog.String("error", p.err.Error()))
			s.logError(r, err)
			event(map[string]any{"error": openaiErrorOf(err)})
			rc.Flush()
			return
		}
		if !started {
			start()
		}
		if t := pausedText(p.out, c.conversationID); t != "" {
			text(t)
		}
		stop := "stop"
		chunk(chunkDelta{}, &stop)
		if includeUsage {
			event(completionChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
				Choices: []chunkChoice{}, Usage: usageOf(p.out)})
		}
		w.Write([]byte("data: [DONE]\n\n"))
		rc.Flush()
		return
	}
}

// wholeCompletion drains the turn and answers with one chat.completion.
func (s *Server) wholeCompletion(w http.ResponseWriter, r *http.Request, c *completion, pieces <-chan piece, discard func(*chat.Outcome)) {
	var b strings.Builder
	for p := range pieces {
		if !p.end {
			b.WriteString(p.text)
			continue
		}
		if p.err != nil {
			discard(p.out)
			s.openaiError(w, r, turnError(p.err))
			return
		}
		b.WriteString(pausedText(p.out, c.conversationID))
		writeJSON(w, http.StatusOK, map[string]any{
			"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
			"choices": []map[string]any{{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": strings.TrimSpace(b.String()), "refusal": nil},
				"logprobs":      nil,
				"finish_reason": "stop",
			}},
			"usage": usageOf(p.out),
		})
		return
	}
}
