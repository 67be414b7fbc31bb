package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"datachat"
	"datachat/internal/chat"
)

// POST /v1/responses: OpenAI's Responses API over one chat turn, as
// /v1/chat/completions is (responseswire.go holds the wire format). The
// conversation is the X-Conversation-ID header's, or the one the request's
// previous_response_id or item_reference names, whose stored history stands;
// else the request's messages start a new one.

// parseResponseRequest reads and checks a Responses request.
func (s *Server) parseResponseRequest(w http.ResponseWriter, r *http.Request) (*responseTurn, error) {
	var req responseRequest
	if err := decodeOpenAIBody(w, r, &req); err != nil {
		return nil, err
	}
	return responseTurnOf(req, showSQLHeader(r), s.Chat.MaxQueryChars)
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user := UserFrom(ctx)
	if s.Chat == nil || s.Chat.Model == nil {
		s.openaiError(w, r, turnError(chat.NotConfiguredError()))
		return
	}
	rt, err := s.parseResponseRequest(w, r)
	if err != nil {
		s.openaiError(w, r, err)
		return
	}
	id := strings.TrimSpace(r.Header.Get("X-Conversation-ID"))
	if rt.conversation != "" {
		if id != "" && id != rt.conversation {
			s.openaiError(w, r, invalidParam(rt.param, "%s belongs to another conversation than the X-Conversation-ID header's %s: send one of them.", rt.param, id))
			return
		}
		id = rt.conversation
	}
	convID, created, err := s.completionConversation(ctx, user, id, rt.completionTurn)
	if err != nil {
		if rt.conversation != "" && datachat.ErrorCode(err) == datachat.ENOTFOUND {
			// Another user's, or deleted: as unknown as an id never made.
			err = &openaiParamError{Param: rt.param, Code: "not_found", Err: datachat.Errorf(datachat.ENOTFOUND, "%s: the response or item it names was not found.", rt.param)}
			if rt.param == "previous_response_id" {
				err = previousNotFound(*rt.meta.previous)
			}
		}
		s.openaiError(w, r, err)
		return
	}
	m := rt.meta
	m.id, m.itemID = newResponseIDs(convID)
	m.created = time.Now().Unix()
	s.serveTurn(w, r, user, convID, created, rt.completionTurn, turnWriters{
		what:   "response",
		stream: &responseEvents{s: s, w: w, r: r, m: &m},
		whole: func(text string, out *chat.Outcome) any {
			text = strings.TrimSpace(text)
			return m.object("completed", &text, out, nil)
		},
	})
}

// responseEvents write the Responses API's stream: response.created and
// response.in_progress, the message item and its text part added, a
// response.output_text.delta per piece of text, the text, part and item
// done, and response.completed with the usage; response.failed if the turn
// fails.
type responseEvents struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	m     *responseMeta
	seq   int
	sofar strings.Builder // the text sent
}

func (e *responseEvents) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = e.seq
	e.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		e.s.logger(e.r).Error("encode response event", slog.String("error", err.Error()))
		return
	}
	e.w.Write([]byte("event: " + typ + "\ndata: "))
	e.w.Write(b)
	e.w.Write([]byte("\n\n"))
}

func (e *responseEvents) start() {
	m := e.m
	e.event("response.created", map[string]any{"response": m.object("in_progress", nil, nil, nil)})
	e.event("response.in_progress", map[string]any{"response": m.object("in_progress", nil, nil, nil)})
	e.event("response.output_item.added", map[string]any{"output_index": 0, "item": m.message("in_progress", nil)})
	e.event("response.content_part.added", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "part": textPart("")})
}

func (e *responseEvents) text(t string) {
	e.sofar.WriteString(t)
	e.event("response.output_text.delta", map[string]any{"item_id": e.m.itemID, "output_index": 0, "content_index": 0, "delta": t, "logprobs": []any{}})
}

func (e *responseEvents) end(out *chat.Outcome) {
	m, final := e.m, e.sofar.String()
	e.event("response.output_text.done", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "text": final, "logprobs": []any{}})
	e.event("response.content_part.done", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "part": textPart(final)})
	e.event("response.output_item.done", map[string]any{"output_index": 0, "item": m.message("completed", []outputText{textPart(final)})})
	e.event("response.completed", map[string]any{"response": m.object("completed", &final, out, nil)})
}

func (e *responseEvents) fail(err error, out *chat.Outcome) {
	sofar := e.sofar.String()
	e.event("response.failed", map[string]any{"response": e.m.object("failed", &sofar, out, failureOf(err))})
}
