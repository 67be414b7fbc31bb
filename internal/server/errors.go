package server

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"datachat"
)

// statuses maps each error code to its HTTP status: the one place that does.
var statuses = map[string]int{
	datachat.EINVALID:      http.StatusBadRequest,
	datachat.EUNAUTHORIZED: http.StatusUnauthorized,
	datachat.ENOTFOUND:     http.StatusNotFound,
	datachat.ECONFLICT:     http.StatusConflict,
	datachat.ERATELIMIT:    http.StatusTooManyRequests,
	datachat.EPROVIDER:     http.StatusBadGateway,
	datachat.EBUSY:         http.StatusServiceUnavailable,
	datachat.EINTERNAL:     http.StatusInternalServerError,
}

// ErrorStatus returns the HTTP status for an error's code.
func ErrorStatus(err error) int {
	if st, ok := statuses[datachat.ErrorCode(err)]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// RetryAfterError is an error that tells the client when to try again.
type RetryAfterError interface {
	RetryAfter() time.Duration
}

// error writes err as {"error":{"message","type"}}. Internal errors are logged
// with their detail and answered with "Internal error." only.
func (s *Server) error(w http.ResponseWriter, r *http.Request, err error) {
	err = refuseBody(w, r, err) // refused before its body was read: close, do not read it
	code := datachat.ErrorCode(err)
	s.logError(r, err)
	var ra RetryAfterError
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(ra.RetryAfter())))
	}
	writeJSON(w, ErrorStatus(err), map[string]any{
		"error": map[string]string{"message": datachat.ErrorMessage(err), "type": code},
	})
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

// maxJSONBody caps request bodies of JSON endpoints.
const maxJSONBody = 1 << 20

// decodeJSON reads a JSON request body into v, refusing unknown fields, trailing
// data and bodies over maxJSONBody with EINVALID errors a client can act on.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" {
			return datachat.Errorf(datachat.EINVALID, "Content-Type must be application/json, got %q.", mt)
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var de *datachat.Error
		switch {
		case errors.As(err, &de):
			return err // the body was too slow
		case errors.As(err, &mbe):
			return datachat.Errorf(datachat.EINVALID, "Request body is larger than %d bytes.", mbe.Limit)
		case errors.Is(err, io.EOF):
			return datachat.Errorf(datachat.EINVALID, "Request body is empty; send a JSON object.")
		default:
			return datachat.Errorf(datachat.EINVALID, "Request body is not valid JSON: %v.", err)
		}
	}
	if dec.More() {
		return datachat.Errorf(datachat.EINVALID, "Request body has data after the JSON object.")
	}
	return nil
}
