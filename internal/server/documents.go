package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"datachat"
)

// createDocument adds a document from the multipart field "file", with an
// optional "metadata" field (a JSON object of strings) before it.
func (s *Server) createDocument(w http.ResponseWriter, r *http.Request) {
	conv, err := s.chargedConversation(r, s.budgets.uploads)
	if err != nil {
		s.error(w, r, err)
		return
	}
	part, fields, err := s.filePart(w, r, s.cfg.MaxDocumentBytes, documentFields)
	if err != nil {
		s.error(w, r, err)
		return
	}
	defer part.Close()
	var meta map[string]string
	if m := fields["metadata"]; m != "" {
		if err := json.Unmarshal([]byte(m), &meta); err != nil {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "metadata must be a JSON object of strings, sent before the file: %v.", err))
			return
		}
	}
	d, err := s.Workspace.AddDocument(r.Context(), conv.ID, capReader(part, s.cfg.MaxDocumentBytes), part.FileName(), meta)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, d)
}

func (s *Server) listDocuments(w http.ResponseWriter, r *http.Request) {
	listIn(s, w, r, "documents", s.Workspace.Documents)
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request) {
	s.deleteIn(w, r, s.Workspace.DeleteDocument, r.PathValue("doc_id"))
}

// search is the retrieval the model's search_documents tool uses.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	conv, err := s.chargedConversation(r, s.budgets.search)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var req struct {
		Query           string         `json:"query"`
		TopK            *int           `json:"top_k"`
		MetadataFilters map[string]any `json:"metadata_filters"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "Send {\"query\": \"…\"}."))
		return
	}
	k := datachat.DefaultTopK
	if req.TopK != nil {
		if *req.TopK <= 0 || *req.TopK > datachat.MaxTopK {
			s.error(w, r, datachat.Errorf(datachat.EINVALID, "top_k must be from 1 to %d, got %d.", datachat.MaxTopK, *req.TopK))
			return
		}
		k = *req.TopK
	}
	if err := s.checkFilters(req.MetadataFilters); err != nil {
		s.error(w, r, err)
		return
	}
	res, err := s.Workspace.Search(r.Context(), conv.ID, datachat.SearchQuery{Text: req.Query, TopK: k, Filters: req.MetadataFilters})
	if err != nil {
		s.error(w, r, err)
		return
	}
	sources := res.Sources
	if sources == nil {
		sources = []datachat.Source{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": sources})
}
