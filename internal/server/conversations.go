package server

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"datachat"
)

const maxTitleChars = 200

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title *string `json:"title"`
	}
	if err := decodeOptionalJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	title := "New conversation"
	if req.Title != nil {
		t, err := cleanTitle(*req.Title)
		if err != nil {
			s.error(w, r, err)
			return
		}
		title = t
	}
	c := &datachat.Conversation{UserID: UserFrom(r.Context()).ID, Title: title}
	if err := s.Store.CreateConversation(r.Context(), c); err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func cleanTitle(t string) (string, error) {
	t = strings.TrimSpace(t)
	switch {
	case t == "":
		return "", datachat.Errorf(datachat.EINVALID, "title must not be empty.")
	case !utf8.ValidString(t):
		return "", datachat.Errorf(datachat.EINVALID, "title must be valid UTF-8.")
	case utf8.RuneCountInString(t) > maxTitleChars:
		return "", datachat.Errorf(datachat.EINVALID, "title must be at most %d characters.", maxTitleChars)
	}
	return t, nil
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	cs, err := s.Store.Conversations(r.Context(), UserFrom(r.Context()).ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, "conversations", cs)
}

// conversationDetail is a conversation with its messages (each with its status and
// tool rounds) and the pending confirmation, if any.
type conversationDetail struct {
	*datachat.Conversation
	Messages            []*datachat.Message    `json:"messages"`
	PendingConfirmation *datachat.Confirmation `json:"pending_confirmation"`
	Sources             []sourceView           `json:"sources"` // the database sources attached
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := s.Store.Conversation(ctx, UserFrom(ctx).ID, r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	sources, err := s.attachedSources(ctx, c.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	d, err := s.detailOf(ctx, c, sources, true)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// detailOf is conversation c as GET /api/conversations/{id} answers it, with
// its messages, the database sources given and, when withPending, its
// pending confirmation (else none). A conversation shared read-only is
// answered with it too (shares.go).
func (s *Server) detailOf(ctx context.Context, c *datachat.Conversation, sources []sourceView, withPending bool) (*conversationDetail, error) {
	msgs, err := s.Store.Messages(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	if msgs == nil {
		msgs = []*datachat.Message{}
	}
	d := &conversationDetail{Conversation: c, Messages: msgs, Sources: sources}
	if !withPending {
		return d, nil
	}
	switch p, err := s.Store.PendingConfirmation(ctx, c.ID); {
	case err == nil:
		d.PendingConfirmation = p
	case datachat.ErrorCode(err) != datachat.ENOTFOUND:
		return nil, err
	}
	return d, nil
}

func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) {
	if err := s.Workspace.DeleteConversation(r.Context(), UserFrom(r.Context()).ID, r.PathValue("id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
