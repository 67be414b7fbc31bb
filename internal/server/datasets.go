package server

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"

	"datachat"
)

// conversation returns the request's conversation ({id}) if it is the user's.
func (s *Server) conversation(r *http.Request) (*datachat.Conversation, error) {
	return s.Store.Conversation(r.Context(), UserFrom(r.Context()).ID, r.PathValue("id"))
}

// createDataset adds a dataset from JSON {url, name?} or a multipart upload
// (field file, optional field name), streamed to disk.
func (s *Server) createDataset(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var ds []*datachat.Dataset
	switch mt {
	case "multipart/form-data":
		ds, err = s.uploadDataset(w, r, conv.ID)
	case "application/json", "":
		var req struct {
			URL  string `json:"url"`
			Name string `json:"name"`
		}
		if err = decodeJSON(w, r, &req); err != nil {
			break
		}
		if strings.TrimSpace(req.URL) == "" {
			err = datachat.Errorf(datachat.EINVALID, "Send {\"url\": \"https://…\"} or upload the file as multipart field \"file\".")
			break
		}
		ds, err = s.Workspace.AddURL(r.Context(), conv.ID, strings.TrimSpace(req.URL), req.Name)
	default:
		err = datachat.Errorf(datachat.EINVALID, "Content-Type must be application/json or multipart/form-data, got %q.", mt)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	// The first table, as before files could hold several; then every table
	// the file gave (one per array of records of a JSON object).
	writeJSON(w, http.StatusCreated, struct {
		*datachat.Dataset
		Datasets []*datachat.Dataset `json:"datasets"`
	}{ds[0], ds})
}

// uploadDataset streams the multipart field "file" into the loader without
// holding it in memory. A "name" field must come before the file to be used.
func (s *Server) uploadDataset(w http.ResponseWriter, r *http.Request, conversationID string) ([]*datachat.Dataset, error) {
	part, fields, err := s.filePart(w, r, s.MaxDatasetBytes)
	if err != nil {
		return nil, err
	}
	defer part.Close()
	return s.Workspace.AddUpload(r.Context(), conversationID, capReader(part, s.MaxDatasetBytes), part.FileName(), fields["name"])
}

// capReader fails a read once more than max bytes came through (max ≤ 0: no cap).
func capReader(r io.Reader, max int64) io.Reader {
	if max <= 0 {
		return r
	}
	return &capped{r: r, left: max, max: max}
}

type capped struct {
	r    io.Reader
	left int64
	max  int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, datachat.Errorf(datachat.EINVALID, "The upload is larger than the limit of %d bytes.", c.max)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, datachat.Errorf(datachat.EINVALID, "The upload is larger than the limit of %d bytes.", c.max)
	}
	return n, err
}

// filePart reads a multipart body up to its field "file" and returns that part
// unread, with the small text fields that came before it.
func (s *Server) filePart(w http.ResponseWriter, r *http.Request, maxBytes int64) (*multipart.Part, map[string]string, error) {
	if maxBytes > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, maxBytes+1<<20) // room for the multipart framing
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, datachat.Errorf(datachat.EINVALID, "Bad multipart body: %v.", err)
	}
	fields := map[string]string{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, nil, datachat.Errorf(datachat.EINVALID, "No file: upload it as multipart field \"file\".")
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, nil, datachat.Errorf(datachat.EINVALID, "The upload is larger than the limit of %d bytes.", maxBytes)
			}
			return nil, nil, datachat.Errorf(datachat.EINVALID, "Bad multipart body: %v.", err)
		}
		if part.FormName() == "file" {
			if filepath.Base(part.FileName()) == "." || part.FileName() == "" {
				part.Close()
				return nil, nil, datachat.Errorf(datachat.EINVALID, "The file part has no file name.")
			}
			return part, fields, nil
		}
		b, err := io.ReadAll(io.LimitReader(part, 64<<10))
		part.Close()
		if err != nil {
			return nil, nil, datachat.Errorf(datachat.EINVALID, "Bad multipart body: %v.", err)
		}
		fields[part.FormName()] = strings.TrimSpace(string(b))
	}
}

func (s *Server) listDatasets(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	ds, err := s.Workspace.Datasets(r.Context(), conv.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if ds == nil {
		ds = []*datachat.Dataset{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"datasets": ds})
}

func (s *Server) deleteDataset(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	if err := s.Workspace.DeleteDataset(r.Context(), conv.ID, r.PathValue("dataset_id")); err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// runSQL runs {query} over the conversation's datasets in the sandbox.
func (s *Server) runSQL(w http.ResponseWriter, r *http.Request) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var req struct {
		Query string `json:"query"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "Send {\"query\": \"SELECT …\"}."))
		return
	}
	res, err := s.Workspace.Query(r.Context(), conv.ID, req.Query)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
