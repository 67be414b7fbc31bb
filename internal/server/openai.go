package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/chat"
)

// The OpenAI-compatible edge: GET /v1/models and POST /v1/chat/completions,
// so chat clients made for OpenAI can use datachat as a model. The tool loop
// runs inside datachat; the client sees the answer's text (and, on request,
// the SQL that produced it). Errors answer in OpenAI's shape. This file is the
// HTTP side (auth, the producer, the SSE writer); openaiwire.go holds the
// wire types and the pure conversions.

// maxCompletionBody caps a completion request; whole chat histories come in it.
const maxCompletionBody = 4 << 20

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
	return s.authenticated(h, s.openaiError, missing, "Incorrect or revoked API key provided.", false)
}

// parseCompletion reads and checks a completion request.
func (s *Server) parseCompletion(w http.ResponseWriter, r *http.Request) (*completionTurn, error) {
	var req completionRequest
	if err := decodeOpenAIBody(w, r, &req); err != nil {
		return nil, err
	}
	return completionTurnOf(req, showSQLHeader(r), s.Chat.MaxQueryChars)
}

// decodeOpenAIBody reads the JSON body of a /v1 request into v, up to
// maxCompletionBody bytes, with errors in words an API client can act on.
func decodeOpenAIBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCompletionBody)).Decode(v); err != nil {
		return bodyError(err, "We could not parse the JSON body of your request: %v.")
	}
	return nil
}

// showSQLHeader reports whether a /v1 request asks for the SQL in the
// answer's text (X-Datachat-Show-SQL: 1 or true).
func showSQLHeader(r *http.Request) bool {
	v := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Datachat-Show-SQL")))
	return v == "1" || v == "true"
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
	c := &completion{id: "chatcmpl-" + RequestID(ctx), created: time.Now().Unix(), model: openaiModelID, conversationID: convID}
	s.serveTurn(w, r, user, convID, created, ct, turnWriters{
		what:   "chat completion",
		stream: newCompletionEvents(s, w, r, c, ct.includeUsage),
		whole: func(text string, out *chat.Outcome) any {
			return wholeCompletionOf(c, text, out)
		},
	})
}

// turnWriters write a /v1 turn to the client in one wire format: stream as
// server-sent events, whole as the JSON of one answer with the turn's text.
// what names the answer in the log.
type turnWriters struct {
	what   string
	stream turnEvents
	whole  func(text string, out *chat.Outcome) any
}

// turnEvents write a streamed turn's server-sent events in one wire format
// (after the stream's headers): start the events before its first text,
// text one piece of it, and at its end, end those after its last text or
// fail the error event of a turn that failed (err as turnError made it).
type turnEvents interface {
	start()
	text(t string)
	end(out *chat.Outcome)
	fail(err error, out *chat.Outcome)
}

// serveTurn runs a /v1 request's turn in conversation convID (created: by
// this request) and writes it with out, streamed when ct asks. A client cut
// mid-stream leaves the turn to finish and be stored; otherwise the turn
// ends before the handler does.
func (s *Server) serveTurn(w http.ResponseWriter, r *http.Request, user *datachat.User, convID string, created bool, ct *completionTurn, out turnWriters) {
	ctx := r.Context()
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
	st := s.newStreamTurn(ctx)
	pieces := s.produceCompletion(st.ctx, user, convID, ct)
	cut := false
	defer func() {
		if !cut {
			st.stop()
			for range pieces { // let the turn end before the handler does
			}
		}
	}()
	if !ct.stream {
		s.wholeTurn(w, r, convID, pieces, discard, out.whole)
		return
	}
	if err := s.streamPieces(w, r, convID, out, pieces, st, discard); err != nil {
		cut = true
		s.finishCut(r, convID, err, pieces, st)
	}
}

// startEventStream sends the headers of a server-sent event stream.
func startEventStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
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
// channel it returns and closes, the turn's end last; its reader must read
// it to its end.
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
		// The answer's parts that a tool call separates are paragraphs of
		// their own, as the page shows them, not run together.
		var tail string // the last characters of the text sent
		afterTool := false
		text := func(t string) {
			send(piece{text: t})
			tail = lastChars(tail+t, 2)
		}
		sink := func(ev chat.Event) {
			switch d := ev.Data.(type) {
			case chat.TokenEvent:
				if d.Token == "" {
					return
				}
				if afterTool {
					if b := chat.PartBreak(tail); b != "" {
						text(b)
					}
					afterTool = false
				}
				text(d.Token)
			case chat.ToolCallStartEvent:
				afterTool = true
				if ct.showSQL && d.Tool == datachat.ToolExecuteSQL {
					if b := sqlBlock(d.Args); b != "" {
						text(b)
						return
					}
				}
				send(piece{}) // the turn started
			}
		}
		out, err := s.Chat.Send(ctx, user, convID, ct.content, ct.opts, sink)
		if rev := revocation(ctx); rev != nil {
			err = rev // the turn stopped (stored cancelled) because the key was revoked
		}
		// The last piece is never dropped: the writer reads the channel to
		// its end, and must say how the turn ended.
		ch <- piece{end: true, out: out, err: err}
	}()
	return ch
}

// lastChars is the end of s, at most n bytes of it (whole characters).
func lastChars(s string, n int) string {
	for i := max(0, len(s)-n); i < len(s); i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return ""
}

// streamPieces writes the turn as server-sent events in out's format. An
// error before the first event is a proper error response; after it, the
// format's error event ends the stream. It returns the error of a write
// that failed or outlasted the write timeout before the turn ended: the
// client is cut, and pieces not read to their end.
func (s *Server) streamPieces(w http.ResponseWriter, r *http.Request, convID string, out turnWriters, pieces <-chan piece, st *streamTurn, discard func(*chat.Outcome)) error {
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	ev := out.stream
	started := false
	start := func() {
		startEventStream(w)
		ev.start()
		started = true
	}
	for p := range pieces {
		if !p.end {
			st.writing.Store(true)
			if !started {
				start()
			}
			if p.text != "" {
				ev.text(p.text)
			}
			if err := s.flushWithin(rc); err != nil {
				return err
			}
			st.writing.Store(false)
			continue
		}
		if p.err != nil {
			err := turnError(p.err)
			if !started {
				discard(p.out)
				s.openaiError(w, r, err)
				return nil
			}
			s.logger(r).Warn(out.what+" failed mid-stream", slog.String("conversation_id", convID), slog.String("error", p.err.Error()))
			s.logError(r, err)
			ev.fail(err, p.out)
			s.flushWithin(rc)
			return nil
		}
		if !started {
			start()
		}
		if t := pausedText(p.out, convID); t != "" {
			ev.text(t)
		}
		ev.end(p.out)
		s.flushWithin(rc)
		return nil
	}
	return nil
}

// wholeTurn drains the turn and answers with the JSON answer makes of its
// text.
func (s *Server) wholeTurn(w http.ResponseWriter, r *http.Request, convID string, pieces <-chan piece, discard func(*chat.Outcome), answer func(text string, out *chat.Outcome) any) {
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
		b.WriteString(pausedText(p.out, convID))
		writeJSON(w, http.StatusOK, answer(b.String(), p.out))
		return
	}
}

// completionEvents write a chat completion's stream: a chunk per text
// delta, a last chunk with finish_reason, the usage chunk if asked, and
// [DONE]; an error event if the turn fails.
type completionEvents struct {
	s            *Server
	w            http.ResponseWriter
	r            *http.Request
	c            *completion
	includeUsage bool
	nullUsage    any
}

func newCompletionEvents(s *Server, w http.ResponseWriter, r *http.Request, c *completion, includeUsage bool) *completionEvents {
	e := &completionEvents{s: s, w: w, r: r, c: c, includeUsage: includeUsage}
	if includeUsage {
		e.nullUsage = json.RawMessage("null")
	}
	return e
}

func (e *completionEvents) event(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		e.s.logger(e.r).Error("encode completion chunk", slog.String("error", err.Error()))
		return
	}
	e.w.Write([]byte("data: "))
	e.w.Write(b)
	e.w.Write([]byte("\n\n"))
}

func (e *completionEvents) chunk(d chunkDelta, finish *string) {
	e.event(completionChunk{ID: e.c.id, Object: "chat.completion.chunk", Created: e.c.created, Model: e.c.model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}, Usage: e.nullUsage})
}

func (e *completionEvents) start() {
	empty := ""
	e.chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)
}

func (e *completionEvents) text(t string) { e.chunk(chunkDelta{Content: &t}, nil) }

func (e *completionEvents) end(out *chat.Outcome) {
	stop := "stop"
	e.chunk(chunkDelta{}, &stop)
	if e.includeUsage {
		e.event(completionChunk{ID: e.c.id, Object: "chat.completion.chunk", Created: e.c.created, Model: e.c.model,
			Choices: []chunkChoice{}, Usage: usageOf(out)})
	}
	e.w.Write([]byte("data: [DONE]\n\n"))
}

func (e *completionEvents) fail(err error, _ *chat.Outcome) {
	e.event(map[string]any{"error": openaiErrorOf(err)})
}
