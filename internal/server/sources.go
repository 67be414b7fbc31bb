package server

import (
	"context"
	"net/http"
	"strings"

	"datachat"
)

// sourceView is a database source as a user sees it: never its URL, nor whom
// else it is granted to. Tables are the operator's patterns of the tables
// queries may read (SCHEMA.TABLE, * for any).
type sourceView struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Tables []string `json:"tables"`
}

func sourceViews(list []*datachat.DBSource) []sourceView {
	out := make([]sourceView, len(list))
	for i, s := range list {
		out[i] = sourceView{Name: s.Name, Kind: s.Kind, Tables: s.Tables}
		if out[i].Tables == nil {
			out[i].Tables = []string{}
		}
	}
	return out
}

// listSources is GET /api/sources: the sources granted to the user.
func (s *Server) listSources(w http.ResponseWriter, r *http.Request) {
	list := []*datachat.DBSource{}
	if s.Sources != nil {
		var err error
		if list, err = s.Sources.Granted(r.Context(), UserFrom(r.Context())); err != nil {
			s.error(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": sourceViews(list)})
}

// attachedSources lists the sources attached to the user's conversation.
func (s *Server) attachedSources(ctx context.Context, conversationID string) ([]sourceView, error) {
	if s.Sources == nil {
		if _, err := s.Store.Conversation(ctx, UserFrom(ctx).ID, conversationID); err != nil {
			return nil, err
		}
		return []sourceView{}, nil
	}
	list, err := s.Sources.Attached(ctx, UserFrom(ctx), conversationID)
	if err != nil {
		return nil, err
	}
	return sourceViews(list), nil
}

// listConversationSources is GET /api/conversations/{id}/sources.
func (s *Server) listConversationSources(w http.ResponseWriter, r *http.Request) {
	list, err := s.attachedSources(r.Context(), r.PathValue("id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": list})
}

// attachSource is POST /api/conversations/{id}/sources {"name"}: 201 with
// the source; 404 for a source that does not exist or is not granted to the
// user, alike.
func (s *Server) attachSource(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `name is required: {"name": "SOURCE"}, one of GET /api/sources.`))
		return
	}
	if s.Sources == nil {
		s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "No database source named %q.", name))
		return
	}
	src, err := s.Sources.Attach(r.Context(), UserFrom(r.Context()), r.PathValue("id"), name)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, sourceViews([]*datachat.DBSource{src})[0])
}

// detachSource is DELETE /api/conversations/{id}/sources/{name}.
func (s *Server) detachSource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.Sources == nil {
		s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "No database source named %q is attached to this conversation.", name))
		return
	}
	if err := s.Sources.Detach(r.Context(), UserFrom(r.Context()), r.PathValue("id"), name); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// mcpSources is what the MCP tools query sources through: nil when there
// are none (a nil *workspace.Sources in the interface would not be nil).
func (s *Server) mcpSources() datachat.DBSourceService {
	if s.Sources == nil {
		return nil
	}
	return s.Sources
}
