package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"datachat"
)

// API keys over HTTP: an admin lists and revokes every key under
// /api/admin/keys; a user lists, creates and revokes their own under
// /api/keys.

// listAllKeys is GET /api/admin/keys: every API key, revoked ones too.
func (s *Server) listAllKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.APIKeys(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, "keys", list)
}

// revokeAnyKey is DELETE /api/admin/keys/{id}.
func (s *Server) revokeAnyKey(w http.ResponseWriter, r *http.Request) {
	s.revokeKey(w, r, func(*datachat.APIKey) bool { return true })
}

// listOwnKeys is GET /api/keys: the user's own API keys.
func (s *Server) listOwnKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.Store.APIKeys(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	own := UserFrom(r.Context()).ID
	writeList(w, "keys", slices.DeleteFunc(list, func(k *datachat.APIKey) bool { return k.UserID != own }))
}

// revokeOwnKey is DELETE /api/keys/{id}: another user's key is not found.
func (s *Server) revokeOwnKey(w http.ResponseWriter, r *http.Request) {
	own := UserFrom(r.Context()).ID
	s.revokeKey(w, r, func(k *datachat.APIKey) bool { return k.UserID == own })
}

// revokeKey revokes the key of the route's id if mine says it may: its
// requests and WebSockets end at once. A key already revoked is left as it
// is.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, mine func(*datachat.APIKey) bool) {
	id := r.PathValue("id")
	list, err := s.Store.APIKeys(r.Context())
	if err != nil {
		s.error(w, r, err)
		return
	}
	i := slices.IndexFunc(list, func(k *datachat.APIKey) bool { return k.ID == id && mine(k) })
	if i < 0 {
		s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "No API key with id %q.", datachat.AuditLine(id, 60)))
		return
	}
	k := list[i]
	if k.RevokedAt == nil {
		if err := s.Store.RevokeAPIKey(r.Context(), k.ID); err != nil {
			s.error(w, r, err)
			return
		}
		s.Revoke(datachat.Credential{Kind: datachat.CredentialAPIKey, ID: k.ID, UserID: k.UserID}, datachat.ErrAPIKeyRevoked)
		s.record(r, &datachat.AuditEvent{Kind: datachat.AuditKeyRevoked, Outcome: datachat.AuditOK, Target: k.ID,
			Detail: fmt.Sprintf("key %s… of user %s", k.Prefix, k.UserName)}, nil)
	}
	w.WriteHeader(http.StatusNoContent)
}

// createOwnKey is POST /api/keys: a new API key of the user's, whose secret
// is in this answer only.
func (s *Server) createOwnKey(w http.ResponseWriter, r *http.Request) {
	if err := decodeOptionalJSON(w, r, &struct{}{}); err != nil {
		s.error(w, r, err)
		return
	}
	u := UserFrom(r.Context())
	secret, hash, prefix := datachat.NewAPIKeySecret()
	k := &datachat.APIKey{UserID: u.ID, UserName: u.Name, Hash: hash, Prefix: prefix}
	if err := s.Store.CreateAPIKey(r.Context(), k); err != nil {
		s.error(w, r, err)
		return
	}
	err := s.record(r, &datachat.AuditEvent{Kind: datachat.AuditKeyCreated, Outcome: datachat.AuditOK, Target: k.ID,
		Detail: fmt.Sprintf("key %s… for user %s, through the API", prefix, u.Name)},
		func(ctx context.Context) error { return s.Store.RevokeAPIKey(ctx, k.ID) })
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": secret, "id": k.ID, "prefix": k.Prefix, "created_at": k.CreatedAt})
}
