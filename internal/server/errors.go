package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/yamlsafe"
)

// errorKind is how an error code is answered: its HTTP status, and its type
// and code in OpenAI's error shape (the /v1 routes).
type errorKind struct {
	status                 int
	openaiType, openaiCode string
}

// errorKinds maps each error code to its answer: the one place that does.
var errorKinds = map[string]errorKind{
	datachat.EINVALID:      {http.StatusBadRequest, "invalid_request_error", ""},
	datachat.EUNAUTHORIZED: {http.StatusUnauthorized, "invalid_request_error", "invalid_api_key"},
	datachat.EFORBIDDEN:    {http.StatusForbidden, "invalid_request_error", "forbidden"},
	datachat.ENOTFOUND:     {http.StatusNotFound, "invalid_request_error", "not_found"},
	datachat.ECONFLICT:     {http.StatusConflict, "invalid_request_error", "conflict"},
	datachat.ERATELIMIT:    {http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"},
	datachat.EPROVIDER:     {http.StatusBadGateway, "api_error", "provider_error"},
	datachat.EBUSY:         {http.StatusServiceUnavailable, "server_error", "server_busy"},
	datachat.EINTERNAL:     {http.StatusInternalServerError, "server_error", "internal_error"},
}

// kindOf is the answer to err's code; an unknown code is answered as internal.
func kindOf(err error) errorKind {
	if k, ok := errorKinds[datachat.ErrorCode(err)]; ok {
		return k
	}
	return errorKinds[datachat.EINTERNAL]
}

// ErrorStatus returns the HTTP status for an error's code.
func ErrorStatus(err error) int { return kindOf(err).status }

// error writes err as {"error":{"message","type"}}. Internal errors are logged
// with their detail and answered with "Internal error." only.
func (s *Server) error(w http.ResponseWriter, r *http.Request, err error) {
	if isOpenAIPath(r.URL.Path) {
		// /v1 answers in OpenAI's shape whatever refused the request (a
		// route it lacks, the server draining).
		s.openaiError(w, r, err)
		return
	}
	err = s.startError(w, r, err)
	writeJSON(w, ErrorStatus(err), map[string]any{
		"error": map[string]string{"message": datachat.ErrorMessage(err), "type": datachat.ErrorCode(err)},
	})
}

// startError does what every error answer does before its body, whatever its
// shape: it refuses a body not yet read, logs what the client is not told and
// sets Retry-After when err says when to try again. It returns the error to
// answer: the body's own, if it was cut, or, whatever failed, why the
// request's credential was revoked while it ran.
func (s *Server) startError(w http.ResponseWriter, r *http.Request, err error) error {
	err = refuseBody(w, r, err) // refused before its body was read: close, do not read it
	if rev := revocation(r.Context()); rev != nil {
		w.Header().Set("Connection", "close")
		err = rev
	}
	s.logError(r, err)
	if d, ok := datachat.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(d)))
	}
	return err
}

// turnError maps errors of a turn to the HTTP error they answer with, found
// anywhere in err's chain: the same classification as a chat_error
// (chat.ErrorEventFor), rendered as one message.
func turnError(err error) error {
	var pe *datachat.ProviderError
	var se *chat.SaveError
	switch {
	case errors.As(err, &pe):
		return datachat.WrapError(datachat.EPROVIDER, chat.ErrorEventFor(err).Text(), err)
	case errors.As(err, &se) && datachat.ErrorCode(err) == datachat.EINTERNAL:
		// Not saved for a reason the store did not name: the answer is kept
		// and saved when it can be, as the event says.
		return datachat.WrapError(datachat.EBUSY, chat.ErrorEventFor(err).Text(), err)
	}
	return err
}

// logError logs what an error answer does not tell the client: an internal
// error's detail, and the cause of a condition of the server (its database
// unavailable, its disk full), which the operator must see.
func (s *Server) logError(r *http.Request, err error) {
	var c *datachat.Condition
	switch {
	case datachat.ErrorCode(err) == datachat.EINTERNAL:
		s.logger(r).Error("internal error", slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	case errors.As(err, &c):
		s.logger(r).Warn(c.Kind.Error(), slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	}
}

// retryAfterSeconds is a Retry-After value: whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// writeList answers a listing as {"<key>": [...]}: an empty array when there
// is nothing, never null.
func writeList[T any](w http.ResponseWriter, key string, list []T) {
	if list == nil {
		list = []T{}
	}
	writeJSON(w, http.StatusOK, map[string]any{key: list})
}

// maxJSONBody caps request bodies of JSON endpoints.
const maxJSONBody = 1 << 20

// decodeOptionalJSON is decodeJSON for a body the client may leave out: an
// empty one (Content-Length: 0) leaves v as it is.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return decodeJSON(w, r, v)
}

// decodeJSON reads a JSON request body into v, refusing unknown fields, trailing
// data and bodies over maxJSONBody with EINVALID errors a client can act on.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" {
			return datachat.Errorf(datachat.EINVALID, "Content-Type must be application/json, got %q.", mt)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err == nil {
		// encoding/json would turn such text into U+FFFD unseen.
		err = yamlsafe.CheckJSONText(body, "the request body")
		var ye *yamlsafe.Error
		if errors.As(err, &ye) {
			return datachat.Errorf(datachat.EINVALID, "%s.", strings.ToUpper(ye.Error()[:1])+ye.Error()[1:])
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err == nil {
		err = dec.Decode(v)
	}
	if err != nil {
		var de *datachat.Error
		if errors.As(err, &de) {
			return err // the body was too slow
		}
		return bodyError(err, "Request body is not valid JSON: %v.")
	}
	if dec.More() {
		return datachat.Errorf(datachat.EINVALID, "Request body has data after the JSON object.")
	}
	return nil
}

// bodyError is the EINVALID error of a JSON request body that could not be
// read or decoded: too large, empty, or else not JSON, in the words of
// notJSON, a format of err.
func bodyError(err error, notJSON string) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return datachat.Errorf(datachat.EINVALID, "Request body is larger than %d bytes.", mbe.Limit)
	case errors.Is(err, io.EOF):
		return datachat.Errorf(datachat.EINVALID, "Request body is empty; send a JSON object.")
	}
	return datachat.Errorf(datachat.EINVALID, notJSON, err)
}
