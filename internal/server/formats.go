package server

import (
	"net/http"

	"datachat"
	"datachat/internal/extract"
)

// formatsView is GET /api/formats: what a conversation takes in — the
// files, as the code that reads them lists them (datachat.DatasetFormats,
// extract.Formats), and the longest question the chat accepts. The web page
// builds its drop zones, file picker and messages from it, so it never
// refuses a file the server reads, and counts a question's characters
// before sending it.
type formatsView struct {
	Datasets struct {
		Formats     []datachat.FileFormat `json:"formats"`
		Compression []string              `json:"compression"`
	} `json:"datasets"`
	Documents struct {
		Formats []datachat.FileFormat `json:"formats"`
	} `json:"documents"`
	Question struct {
		MaxChars int `json:"max_chars"` // 0: no limit known
	} `json:"question"`
}

func (s *Server) listFormats(w http.ResponseWriter, r *http.Request) {
	var v formatsView
	v.Datasets.Formats = datachat.DatasetFormats
	v.Datasets.Compression = datachat.DatasetCompression
	v.Documents.Formats = extract.Formats
	if s.Chat != nil {
		v.Question.MaxChars = s.Chat.MaxQueryChars
	}
	writeJSON(w, http.StatusOK, v)
}
