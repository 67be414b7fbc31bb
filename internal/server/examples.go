package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"datachat"
)

// Verified examples over HTTP: POST /api/examples marks an answer's SQL (or
// the user's own) as correct or wrong, GET lists the user's examples, DELETE
// removes one.

// Limits of a verified example.
const (
	maxExampleSQLChars = 20000
	maxExamplesPerUser = 1000
)

// exampleRequest marks an SQL query. Either an answer's query, named by the
// assistant message and its tool call's call_id (question: the user message
// before it, unless given; sql: the call's query, unless given, which edits
// it), or one the user writes (question and sql required).
type exampleRequest struct {
	ConversationID string  `json:"conversation_id"`
	MessageID      string  `json:"message_id"`
	CallID         string  `json:"call_id"`
	Question       *string `json:"question"`
	SQL            *string `json:"sql"`
	Verdict        string  `json:"verdict"`
}

// exampleResponse is a stored example with the result of its query when it
// ran (an edited or hand-written query marked correct).
type exampleResponse struct {
	*datachat.Example
	Result *datachat.QueryResult `json:"result,omitempty"`
}

func (s *Server) createExample(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	user := UserFrom(ctx)
	var req exampleRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if req.Verdict != datachat.VerdictCorrect && req.Verdict != datachat.VerdictWrong {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `verdict must be "correct" or "wrong".`))
		return
	}
	if strings.TrimSpace(req.ConversationID) == "" {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "conversation_id is required: the conversation whose tables the query reads."))
		return
	}
	conv, err := s.Store.Conversation(ctx, user.ID, req.ConversationID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	e := &datachat.Example{UserID: user.ID, ConversationID: conv.ID, Verdict: req.Verdict}
	run := true // a query the user wrote or edited runs before it is marked correct
	switch {
	case req.MessageID != "" || req.CallID != "":
		if req.MessageID == "" || req.CallID == "" {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "Name an answer's query with both message_id and call_id."))
			return
		}
		question, tc, err := s.answerQuery(r, conv.ID, req.MessageID, req.CallID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		var args struct {
			Query  string `json:"query"`
			Source string `json:"source"`
		}
		_ = json.Unmarshal(tc.Args, &args)
		if args.Source != "" {
			// Examples are over the datasets' columns, in DuckDB's SQL.
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "This query ran in the database %s: verified examples are queries over the conversation's datasets.", args.Source))
			return
		}
		e.MessageID, e.CallID, e.Question, e.SQL = req.MessageID, req.CallID, question, args.Query
		if req.SQL == nil || strings.TrimSpace(*req.SQL) == strings.TrimSpace(args.Query) {
			run = false
			if !tc.OK && req.Verdict == datachat.VerdictCorrect {
				s.error(w, r, datachat.Errorf(datachat.EINVALID, "This query failed, so it cannot be marked correct as it is: edit it first."))
				return
			}
		}
	case req.SQL == nil || req.Question == nil:
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "Send message_id and call_id of an answer's query, or a question and its sql."))
		return
	}
	if req.Question != nil {
		e.Question = *req.Question
	}
	if req.SQL != nil {
		e.SQL = *req.SQL
	}
	if err := checkExample(e); err != nil {
		s.error(w, r, err)
		return
	}
	if list, err := s.Store.Examples(ctx, user.ID); err != nil {
		s.error(w, r, err)
		return
	} else if len(list) >= maxExamplesPerUser && !replaces(list, e) {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "You have %d verified examples, the most kept: delete some first.", len(list)))
		return
	}
	if run && e.Verdict == datachat.VerdictCorrect {
		if err := s.budgets.sql.take(user.ID); err != nil {
			s.error(w, r, err)
			return
		}
	}
	res, err := s.Workspace.SaveExample(datachat.WithUserID(ctx, user.ID), e, run)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, exampleResponse{e, res})
}

// answerQuery finds an answer's execute_sql call and the question it
// answered: the user message before it.
func (s *Server) answerQuery(r *http.Request, conversationID, messageID, callID string) (string, *datachat.ToolCall, error) {
	msgs, err := s.Store.Messages(r.Context(), conversationID)
	if err != nil {
		return "", nil, err
	}
	for i, m := range msgs {
		if m.ID != messageID || m.Role != datachat.RoleAssistant {
			continue
		}
		question := ""
		for j := i - 1; j >= 0; j-- {
			if msgs[j].Role == datachat.RoleUser {
				question = msgs[j].Content
				break
			}
		}
		for k := range m.ToolCalls {
			if tc := &m.ToolCalls[k]; tc.CallID == callID && tc.Tool == datachat.ToolExecuteSQL {
				return question, tc, nil
			}
		}
		return "", nil, datachat.Errorf(datachat.ENOTFOUND, "The answer has no SQL query with call_id %q.", callID)
	}
	return "", nil, datachat.Errorf(datachat.ENOTFOUND, "No answer %q in this conversation.", messageID)
}

// checkExample refuses an example's question or SQL that is empty or too
// long.
func checkExample(e *datachat.Example) error {
	e.Question = strings.TrimSpace(e.Question)
	e.SQL = strings.TrimSpace(e.SQL)
	switch {
	case !utf8.ValidString(e.Question) || !utf8.ValidString(e.SQL):
		return datachat.Errorf(datachat.EINVALID, "The question and the SQL must be valid UTF-8.")
	case e.Question == "":
		return datachat.Errorf(datachat.EINVALID, "The question is empty: say what the query answers.")
	case e.SQL == "":
		return datachat.Errorf(datachat.EINVALID, "The SQL is empty.")
	case utf8.RuneCountInString(e.Question) > datachat.MaxDescriptionChars:
		return datachat.Errorf(datachat.EINVALID, "The question is longer than %d characters.", datachat.MaxDescriptionChars)
	case utf8.RuneCountInString(e.SQL) > maxExampleSQLChars:
		return datachat.Errorf(datachat.EINVALID, "The SQL is longer than %d characters.", maxExampleSQLChars)
	}
	return nil
}

// replaces reports whether e would replace one of list (the same call).
func replaces(list []*datachat.Example, e *datachat.Example) bool {
	if e.MessageID == "" {
		return false
	}
	for _, x := range list {
		if x.MessageID == e.MessageID && x.CallID == e.CallID {
			return true
		}
	}
	return false
}

func (s *Server) listExamples(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.Examples(r.Context(), UserFrom(r.Context()).ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if v := r.URL.Query().Get("verdict"); v != "" {
		kept := list[:0]
		for _, e := range list {
			if e.Verdict == v {
				kept = append(kept, e)
			}
		}
		list = kept
	}
	writeJSON(w, http.StatusOK, map[string]any{"examples": list})
}

func (s *Server) deleteExample(w http.ResponseWriter, r *http.Request) {
	if err := s.Store.DeleteExample(r.Context(), UserFrom(r.Context()).ID, r.PathValue("id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
