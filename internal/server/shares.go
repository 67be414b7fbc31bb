package server

import (
	"context"
	"net/http"
	"time"

	"datachat"
	"datachat/internal/workspace"
)

// shareRoutes registers sharing: the owner shares a conversation read-only
// with named users or everyone signed in, lists and revokes the shares; a
// viewer lists what is shared with them, reads it, and copies it into a
// conversation of their own. A viewer acts only through /api/shared: every
// route under /api/conversations/{id} stays the owner's alone (404 to
// anyone else).
func (s *Server) shareRoutes(mux router) {
	mux.Handle("POST /api/conversations/{id}/shares", s.auth(s.createShares))
	mux.Handle("GET /api/conversations/{id}/shares", s.auth(s.listShares))
	mux.Handle("DELETE /api/conversations/{id}/shares/{share_id}", s.auth(s.deleteShare))
	mux.Handle("GET /api/shared", s.auth(s.listShared))
	mux.Handle("GET /api/shared/{id}", s.auth(s.getShared))
	mux.Handle("POST /api/shared/{id}/copy", s.auth(s.copyShared))
}

// createShares is POST /api/conversations/{id}/shares {"users": [NAME…]}
// or {"everyone": true} (or both): 201 {"shares": [SHARE…]}, the shares
// asked for, those that were there already included. Each new share is
// recorded (share.created); when a record cannot be written, the shares it
// and those after it account for are revoked again, and the answer says so.
func (s *Server) createShares(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Users    []string `json:"users"`
		Everyone bool     `json:"everyone"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	owner := UserFrom(ctx)
	convID := r.PathValue("id")
	shares, created, err := s.Store.CreateShares(ctx, owner.ID, convID, req.Users, req.Everyone)
	if err != nil {
		s.error(w, r, err)
		return
	}
	for i, sh := range created {
		rest := created[i:]
		undo := func(ctx context.Context) error {
			for _, sh := range rest {
				if _, err := s.Store.DeleteShare(ctx, owner.ID, convID, sh.ID); err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
					return err
				}
			}
			return nil
		}
		if err := s.record(r, shareEvent(datachat.AuditShareCreated, sh), undo); err != nil {
			s.error(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"shares": shares})
}

// shareEvent is the audit record of a share made or revoked: its id, its
// conversation and whom it was with.
func shareEvent(kind string, sh *datachat.Share) *datachat.AuditEvent {
	detail := "with everyone signed in"
	if !sh.Everyone {
		detail = "with " + sh.UserName
	}
	return &datachat.AuditEvent{Kind: kind, Outcome: datachat.AuditOK, Target: sh.ID, ConversationID: sh.ConversationID, Detail: detail}
}

// listShares is GET /api/conversations/{id}/shares: {"shares": [SHARE…]},
// oldest first.
func (s *Server) listShares(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.Shares(r.Context(), UserFrom(r.Context()).ID, r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, "shares", list)
}

// deleteShare is DELETE /api/conversations/{id}/shares/{share_id}: 204. The
// viewer loses the conversation at once; the revocation stands even when
// its record (share.revoked) cannot be written, which is then logged, as
// for every change that takes access away.
func (s *Server) deleteShare(w http.ResponseWriter, r *http.Request) {
	sh, err := s.Store.DeleteShare(r.Context(), UserFrom(r.Context()).ID, r.PathValue("id"), r.PathValue("share_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.record(r, shareEvent(datachat.AuditShareRevoked, sh), nil)
	w.WriteHeader(http.StatusNoContent)
}

// sharedItem is a conversation in GET /api/shared.
type sharedItem struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Owner     string    `json:"owner"`
	UpdatedAt time.Time `json:"updated_at"`
	SharedAt  time.Time `json:"shared_at"`
}

// listShared is GET /api/shared: {"conversations": [{id, title, owner,
// updated_at, shared_at}…]}, the conversations others share with the user,
// most recently shared first.
func (s *Server) listShared(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.SharedWithMe(r.Context(), UserFrom(r.Context()).ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	out := make([]sharedItem, len(list))
	for i, sc := range list {
		out[i] = sharedItem{ID: sc.ID, Title: sc.Title, Owner: sc.Owner, UpdatedAt: sc.UpdatedAt, SharedAt: sc.SharedAt}
	}
	writeList(w, "conversations", out)
}

// sharedDetail is a conversation as a viewer it is shared with reads it:
// what GET /api/conversations/{id} answers its owner (no pending
// confirmation: a viewer confirms nothing), with its datasets and documents
// (which the viewer cannot list through the owner's routes), whose it is,
// and that it is read-only.
type sharedDetail struct {
	*conversationDetail
	Datasets  []*datachat.Dataset  `json:"datasets"`
	Documents []*datachat.Document `json:"documents"`
	Owner     string               `json:"owner"`
	ReadOnly  bool                 `json:"read_only"`
}

// getShared is GET /api/shared/{id}: the conversation, read-only; 404 as
// for an unknown id unless it is shared with the user (by name or with
// everyone) and its owner is not disabled.
func (s *Server) getShared(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	viewer := UserFrom(ctx)
	sc, err := s.Store.SharedConversation(ctx, viewer.ID, r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	sources, err := s.sharedSources(ctx, sc, viewer)
	if err != nil {
		s.error(w, r, err)
		return
	}
	d := sharedDetail{Owner: sc.Owner, ReadOnly: true}
	if d.conversationDetail, err = s.detailOf(ctx, sc.Conversation, sources, false); err != nil {
		s.error(w, r, err)
		return
	}
	if d.Datasets, err = s.Store.Datasets(ctx, sc.ID); err != nil {
		s.error(w, r, err)
		return
	}
	if d.Documents, err = s.Store.Documents(ctx, sc.ID); err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// sharedSources are the database sources of a shared conversation as its
// owner sees them (those attached that the owner may use), each with the
// tables it may read only when the viewer may use it too: a viewer learns
// no more of a source they are not granted than its name and kind.
func (s *Server) sharedSources(ctx context.Context, sc *datachat.SharedConversation, viewer *datachat.User) ([]sourceView, error) {
	if s.Sources == nil {
		return []sourceView{}, nil
	}
	list, err := s.Store.ConversationDBSources(ctx, sc.ID)
	if err != nil {
		return nil, err
	}
	out := []sourceView{}
	for _, src := range list {
		if !src.Allows(sc.Owner) {
			continue
		}
		v := sourceViews([]*datachat.DBSource{src})[0]
		if !src.Allows(viewer.Name) {
			v.Tables = []string{}
		}
		out = append(out, v)
	}
	return out, nil
}

// copyShared is POST /api/shared/{id}/copy: 201 {"conversation":
// CONVERSATION, "not_copied": [{kind, name, reason}…]}, a new conversation
// of the user holding the shared one's messages, datasets and documents
// (copied, not linked) and the sources attached that the user is granted
// (workspace.CopyShared). It counts as an upload (DATACHAT_UPLOADS_PER_HOUR):
// it writes files.
func (s *Server) copyShared(w http.ResponseWriter, r *http.Request) {
	if err := decodeOptionalJSON(w, r, &struct{}{}); err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	viewer := UserFrom(ctx)
	// Whether it is shared is checked before the budget is spent, and
	// again, in one transaction, as the copy is made.
	if _, err := s.Store.SharedConversation(ctx, viewer.ID, r.PathValue("id")); err != nil {
		s.error(w, r, err)
		return
	}
	if err := s.budgets.uploads.take(viewer.ID); err != nil {
		s.error(w, r, err)
		return
	}
	conv, notCopied, err := s.Workspace.CopyShared(ctx, viewer, r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, struct {
		Conversation *datachat.Conversation `json:"conversation"`
		NotCopied    []workspace.NotCopied  `json:"not_copied"`
	}{conv, notCopied})
}
