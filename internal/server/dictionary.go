package server

import (
	"io"
	"mime"
	"net/http"
	"strings"

	"datachat"
	"datachat/internal/workspace"
)

// The data dictionary over HTTP: PATCH on a conversation ({title?, notes?})
// and on a dataset ({description?, columns?}), and a whole dictionary file
// (POST …/dictionary, YAML or JSON; GET gives it back in that shape).

// patchConversation changes a conversation's title, notes or both.
func (s *Server) patchConversation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title *string `json:"title"`
		Notes *string `json:"notes"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	user := UserFrom(ctx).ID
	var title string
	switch {
	case req.Title == nil && req.Notes == nil:
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Send {"title": "…"}, {"notes": "…"} or both.`))
		return
	case req.Title != nil:
		t, err := cleanTitle(*req.Title)
		if err != nil {
			s.error(w, r, err)
			return
		}
		title = t
	}
	if req.Notes != nil {
		// Checked before the title changes, so a refused request changes nothing.
		d := datachat.Dictionary{Notes: req.Notes}
		if _, err := d.Resolve(nil); err != nil {
			s.error(w, r, err)
			return
		}
		if err := s.Store.UpdateDictionary(ctx, user, r.PathValue("id"), d); err != nil {
			s.error(w, r, err)
			return
		}
	}
	var (
		c   *datachat.Conversation
		err error
	)
	if req.Title != nil {
		c, err = s.Store.RenameConversation(ctx, user, r.PathValue("id"), title)
	} else {
		c, err = s.Store.Conversation(ctx, user, r.PathValue("id"))
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// patchDataset changes a dataset's description and its columns'.
func (s *Server) patchDataset(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var req struct {
		Description *string           `json:"description"`
		Columns     map[string]string `json:"columns"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if req.Description == nil && len(req.Columns) == 0 {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, `Send {"description": "…"}, {"columns": {"COLUMN": "…"}} or both.`))
		return
	}
	ctx := r.Context()
	d, err := s.Store.Dataset(ctx, conv.ID, r.PathValue("dataset_id"))
	if err != nil {
		s.error(w, r, err)
		return
	}
	err = s.Store.UpdateDictionary(ctx, conv.UserID, conv.ID, datachat.Dictionary{Datasets: map[string]datachat.DatasetDictionary{
		d.Name: {Description: req.Description, Columns: req.Columns},
	}})
	if err == nil {
		d, err = s.Store.Dataset(ctx, conv.ID, d.ID)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// dictionaryResponse is a conversation's dictionary after an import: its
// notes and its datasets with their descriptions.
type dictionaryResponse struct {
	Notes    string              `json:"notes"`
	Datasets []*datachat.Dataset `json:"datasets"`
}

// importDictionary applies a dictionary file to the conversation: the body
// itself (YAML or JSON), or a multipart field "file".
func (s *Server) importDictionary(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var body []byte
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "multipart/form-data":
		part, _, ferr := s.filePart(w, r, workspace.MaxDictionaryBytes, nil)
		if ferr != nil {
			s.error(w, r, ferr)
			return
		}
		body, err = io.ReadAll(io.LimitReader(part, workspace.MaxDictionaryBytes+1))
		part.Close()
	case "", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain", "application/json":
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, workspace.MaxDictionaryBytes))
	default:
		err = datachat.Errorf(datachat.EINVALID, "Send the dictionary as YAML or JSON (Content-Type application/yaml or application/json), or as multipart field \"file\"; got %q.", mt)
	}
	if err != nil {
		if datachat.ErrorCode(err) == datachat.EINTERNAL {
			err = datachat.Errorf(datachat.EINVALID, "The dictionary file could not be read: it is larger than %d bytes, or the upload broke off.", workspace.MaxDictionaryBytes)
		}
		s.error(w, r, err)
		return
	}
	d, err := workspace.ParseDictionary(r.Context(), body)
	if err != nil {
		s.error(w, r, err)
		return
	}
	ctx := r.Context()
	if len(d.Sources) > 0 {
		if s.Sources == nil {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "The dictionary file describes database sources, and this server has none."))
			return
		}
		if d, err = s.Sources.ResolveDictionary(ctx, UserFrom(ctx), conv.ID, d); err != nil {
			s.error(w, r, err)
			return
		}
	}
	if err := s.Store.UpdateDictionary(ctx, conv.UserID, conv.ID, d); err != nil {
		s.error(w, r, err)
		return
	}
	s.writeDictionary(w, r, conv.ID, false)
}

// getDictionary gives the conversation's dictionary in the shape a file
// imports: JSON, or YAML when the client accepts it (Accept:
// application/yaml).
func (s *Server) getDictionary(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	s.writeDictionary(w, r, conv.ID, true)
}

func (s *Server) writeDictionary(w http.ResponseWriter, r *http.Request, conversationID string, asFile bool) {
	ctx := r.Context()
	c, err := s.Store.Conversation(ctx, UserFrom(ctx).ID, conversationID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	ds, err := s.Store.Datasets(ctx, c.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if !asFile {
		if s.Workspace != nil {
			if ds, err = s.Workspace.Datasets(ctx, c.ID); err != nil {
				s.error(w, r, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, dictionaryResponse{Notes: c.Notes, Datasets: ds})
		return
	}
	layer, err := s.Store.SemanticLayer(ctx, c.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	d := workspace.DictionaryOf(c, ds, layer)
	if strings.Contains(r.Header.Get("Accept"), "yaml") {
		b, err := workspace.DictionaryYAML(d)
		if err != nil {
			s.error(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
