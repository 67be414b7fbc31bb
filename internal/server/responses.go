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
		stream: func(pieces <-chan piece, st *streamTurn, discard func(*chat.Outcome)) error {
			return s.streamResponse(w, r, &m, convID, pieces, st, discard)
		},
		whole: func(pieces <-chan piece, discard func(*chat.Outcome)) {
			s.wholeResponse(w, r, &m, convID, pieces, discard)
		},
	})
}

// wholeResponse drains the turn and answers with one Response.
func (s *Server) wholeResponse(w http.ResponseWriter, r *http.Request, m *responseMeta, convID string, pieces <-chan piece, discard func(*chat.Outcome)) {
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
		text := strings.TrimSpace(b.String())
		writeJSON(w, http.StatusOK, m.object("completed", &text, p.out, nil))
		return
	}
}

// streamResponse writes the turn as the Responses API's server-sent events:
// response.created and response.in_progress, the message item and its text
// part added, a response.output_text.delta per piece of text, the text, part
// and item done, and response.completed with the usage. An error before the
// first event is a proper error response; after it, response.failed ends the
// stream. It returns the error of a write that failed or outlasted the
// write timeout before the turn ended: the client is cut, and pieces not
// read to their end.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, m *responseMeta, convID string, pieces <-chan piece, st *streamTurn, discard func(*chat.Outcome)) error {
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, err := json.Marshal(fields)
		if err != nil {
			s.logger(r).Error("encode response event", slog.String("error", err.Error()))
			return
		}
		w.Write([]byte("event: " + typ + "\ndata: "))
		w.Write(b)
		w.Write([]byte("\n\n"))
	}
	var text strings.Builder
	delta := func(t string) {
		text.WriteString(t)
		event("response.output_text.delta", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "delta": t, "logprobs": []any{}})
	}
	started := false
	start := func() {
		startEventStream(w)
		event("response.created", map[string]any{"response": m.object("in_progress", nil, nil, nil)})
		event("response.in_progress", map[string]any{"response": m.object("in_progress", nil, nil, nil)})
		event("response.output_item.added", map[string]any{"output_index": 0, "item": m.message("in_progress", nil)})
		event("response.content_part.added", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "part": textPart("")})
		started = true
	}
	for p := range pieces {
		if !p.end {
			st.writing.Store(true)
			if !started {
				start()
			}
			if p.text != "" {
				delta(p.text)
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
			s.logger(r).Warn("response failed mid-stream", slog.String("conversation_id", convID), slog.String("error", p.err.Error()))
			s.logError(r, err)
			sofar := text.String()
			event("response.failed", map[string]any{"response": m.object("failed", &sofar, p.out, failureOf(err))})
			s.flushWithin(rc)
			return nil
		}
		if !started {
			start()
		}
		if t := pausedText(p.out, convID); t != "" {
			delta(t)
		}
		final := text.String()
		event("response.output_text.done", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "text": final, "logprobs": []any{}})
		event("response.content_part.done", map[string]any{"item_id": m.itemID, "output_index": 0, "content_index": 0, "part": textPart(final)})
		event("response.output_item.done", map[string]any{"output_index": 0, "item": m.message("completed", []outputText{textPart(final)})})
		event("response.completed", map[string]any{"response": m.object("completed", &final, p.out, nil)})
		s.flushWithin(rc)
		return nil
	}
	return nil
}
