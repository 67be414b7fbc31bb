package server

import (
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"datachat"
)

// conversation returns the request's conversation ({id}) if it is the user's.
func (s *Server) conversation(r *http.Request) (*datachat.Conversation, error) {
	return s.Store.Conversation(r.Context(), UserFrom(r.Context()).ID, r.PathValue("id"))
}

// chargedConversation is the request's conversation, once b (one of the
// user's budgets) has allowed one more use.
func (s *Server) chargedConversation(r *http.Request, b *budget) (*datachat.Conversation, error) {
	conv, err := s.conversation(r)
	if err != nil {
		return nil, err
	}
	return conv, b.take(conv.UserID)
}

// listIn answers the listing of one kind of the request's conversation's
// items (datasets, documents) as {"<key>": [...]}.
func listIn[T any](s *Server, w http.ResponseWriter, r *http.Request, key string, list func(ctx context.Context, conversationID string) ([]T, error)) {
	conv, err := s.conversation(r)
	if err != nil {
		s.error(w, r, err)
		return
	}
	items, err := list(r.Context(), conv.ID)
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeList(w, key, items)
}

// deleteIn deletes the item id of the request's conversation with del:
// 204 No Content.
func (s *Server) deleteIn(w http.ResponseWriter, r *http.Request, del func(ctx context.Context, conversationID, id string) error, id string) {
	conv, err := s.conversation(r)
	if err == nil {
		err = del(r.Context(), conv.ID, id)
	}
	if err != nil {
		s.error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// createDataset adds a dataset from JSON {url, name?} or a multipart upload
// (field file, optional field name), streamed to disk.
func (s *Server) createDataset(w http.ResponseWriter, r *http.Request) {
	conv, err := s.chargedConversation(r, s.budgets.uploads)
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
		if err = checkName("name", req.Name); err != nil {
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
	part, fields, err := s.filePart(w, r, s.cfg.MaxDatasetBytes, datasetFields)
	if err != nil {
		return nil, err
	}
	defer part.Close()
	if err := checkName("name", fields["name"]); err != nil {
		return nil, err
	}
	return s.Workspace.AddUpload(r.Context(), conversationID, capReader(part, s.cfg.MaxDatasetBytes), part.FileName(), fields["name"])
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

// Multipart uploads take their field "file" and only these text fields
// before it, each at most this many bytes.
var (
	datasetFields  = map[string]int64{"name": 1 << 10}
	documentFields = map[string]int64{"metadata": 64 << 10}
)

// maxNameChars caps the names users give datasets and documents (file names
// and the dataset field name).
const maxNameChars = 255

// checkName refuses a name (what names it) longer than maxNameChars.
func checkName(what, name string) error {
	switch n := utf8.RuneCountInString(name); {
	case !utf8.ValidString(name):
		return datachat.Errorf(datachat.EINVALID, "The %s must be valid UTF-8.", what)
	case n > maxNameChars:
		return datachat.Errorf(datachat.EINVALID, "The %s is %d characters long; at most %d are accepted. Use a shorter one.", what, n, maxNameChars)
	}
	return nil
}

// errFieldsTooLarge ends the read of the fields before a file: the most
// they, their part headers and the framing may take.
var errFieldsTooLarge = errors.New("multipart fields too large")

// filePart reads a multipart body up to its field "file" and returns that part
// unread, with the text fields that came before it. Only the fields named in
// allowed are accepted, once each and within their size; anything else is
// refused, naming the field. The bytes read before the file are capped as a
// whole (part headers included), so no body can pin memory with fields.
func (s *Server) filePart(w http.ResponseWriter, r *http.Request, maxBytes int64, allowed map[string]int64) (*multipart.Part, map[string]string, error) {
	if maxBytes > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, maxBytes+1<<20) // room for the multipart framing
	}
	prelude := int64(16 << 10) // part headers, boundaries, the multipart reader's read-ahead
	for _, n := range allowed {
		prelude += n
	}
	head := &headReader{r: r.Body, left: prelude}
	r.Body = struct {
		io.Reader
		io.Closer
	}{head, r.Body}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, datachat.Errorf(datachat.EINVALID, "Bad multipart body: %v.", err)
	}
	fields := map[string]string{}
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, nil, multipartError(err, maxBytes, prelude)
		}
		name := part.FormName()
		if name == "file" {
			fn := part.FileName()
			if filepath.Base(fn) == "." || fn == "" {
				part.Close()
				return nil, nil, datachat.Errorf(datachat.EINVALID, "The file part has no file name.")
			}
			if err := checkName("file name", filepath.Base(strings.ReplaceAll(fn, `\`, "/"))); err != nil {
				part.Close()
				return nil, nil, err
			}
			head.left = -1 // the file streams on, capped by maxBytes
			return part, fields, nil
		}
		limit, ok := allowed[name] // a refused part is left unread
		switch {
		case !ok:
			return nil, nil, datachat.Errorf(datachat.EINVALID, "Unknown multipart field %q: send the file as field \"file\"%s.", name, otherFields(allowed))
		case fieldSeen(fields, name):
			return nil, nil, datachat.Errorf(datachat.EINVALID, "Multipart field %q is sent twice: send it once.", name)
		}
		b, err := io.ReadAll(io.LimitReader(part, limit+1))
		part.Close()
		if err != nil {
			return nil, nil, multipartError(err, maxBytes, prelude)
		}
		if int64(len(b)) > limit {
			return nil, nil, datachat.Errorf(datachat.EINVALID, "Multipart field %q is larger than %s.", name, byteSize(limit))
		}
		fields[name] = strings.TrimSpace(string(b))
	}
}

func fieldSeen(fields map[string]string, name string) bool {
	_, ok := fields[name]
	return ok
}

// otherFields lists the fields besides "file" an endpoint takes, for an error.
func otherFields(allowed map[string]int64) string {
	names := make([]string, 0, len(allowed))
	for n := range allowed {
		names = append(names, strconv.Quote(n))
	}
	if len(names) == 0 {
		return " and no other field"
	}
	slices.Sort(names)
	return ", with the optional field " + strings.Join(names, ", ") + " before it, and nothing else"
}

// multipartError explains an error reading the parts before the file.
func multipartError(err error, maxBytes, prelude int64) error {
	var mbe *http.MaxBytesError
	var de *datachat.Error
	switch {
	case errors.Is(err, io.EOF):
		return datachat.Errorf(datachat.EINVALID, "No file: upload it as multipart field \"file\".")
	case errors.Is(err, errFieldsTooLarge):
		return datachat.Errorf(datachat.EINVALID, "The multipart fields before the file take more than %s: send only the file and its small fields.", byteSize(prelude))
	case errors.As(err, &mbe):
		return datachat.Errorf(datachat.EINVALID, "The upload is larger than the limit of %d bytes.", maxBytes)
	case errors.As(err, &de):
		return err // the body was too slow
	}
	return datachat.Errorf(datachat.EINVALID, "Bad multipart body: %v.", err)
}

// headReader fails once more than left bytes are read (left < 0: no cap).
type headReader struct {
	r    io.Reader
	left int64
}

func (h *headReader) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		return 0, errFieldsTooLarge
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

func (s *Server) listDatasets(w http.ResponseWriter, r *http.Request) {
	listIn(s, w, r, "datasets", s.Workspace.Datasets)
}

func (s *Server) deleteDataset(w http.ResponseWriter, r *http.Request) {
	s.deleteIn(w, r, s.Workspace.DeleteDataset, r.PathValue("dataset_id"))
}

// runSQL runs {query} over the conversation's datasets in the sandbox.
func (s *Server) runSQL(w http.ResponseWriter, r *http.Request) {
	conv, err := s.chargedConversation(r, s.budgets.sql)
	if err != nil {
		s.error(w, r, err)
		return
	}
	var req struct {
		Query string `json:"query"`
		// Keep stores the query and its result in the conversation, as the
		// page's SQL console does: shown again when it is reopened, and
		// given to the model as the user's own message.
		Keep bool `json:"keep"`
	}
	if err := decodeJSON(w, r, &req); err != nil {
		s.error(w, r, err)
		return
	}
	if strings.TrimSpace(req.Query) == "" {
		s.error(w, r, datachat.Errorf(datachat.EINVALID, "Send {\"query\": \"SELECT …\"}."))
		return
	}
	start := time.Now()
	if req.Keep {
		res, m, err := s.Workspace.QueryKept(r.Context(), conv.ID, req.Query)
		s.Metrics.API().SQLQueried(err == nil && m.ToolCalls[0].OK, time.Since(start))
		if err != nil {
			s.error(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			*datachat.QueryResult
			Error   string            `json:"error,omitempty"`
			Message *datachat.Message `json:"message"`
		}{res, m.ToolCalls[0].Error, m})
		return
	}
	res, err := s.Workspace.Query(r.Context(), conv.ID, req.Query)
	s.Metrics.API().SQLQueried(err == nil, time.Since(start))
	if err != nil {
		s.error(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
