package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"datachat"
	"datachat/internal/llm"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	userKey
)

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// WithRequestID returns ctx carrying a request id, for our logs and the LLM
// clients' logs alike.
func WithRequestID(ctx context.Context, id string) context.Context {
	return llm.WithRequestID(context.WithValue(ctx, requestIDKey, id), id)
}

// UserFrom returns the authenticated user of a request's context.
func UserFrom(ctx context.Context) *datachat.User {
	u, _ := ctx.Value(userKey).(*datachat.User)
	return u
}

// NewRequestID returns a random request id.
func NewRequestID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// withRequestID echoes a sane client X-Request-ID or makes one, and puts it on
// the response and the request's context.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if !validRequestID(id) {
			id = NewRequestID()
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(WithRequestID(r.Context(), id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// statusWriter records the status a handler wrote, for the access log. It keeps
// http.Flusher and the connection hijack reachable through Unwrap.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (s *Server) withLogging(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || strings.HasPrefix(r.URL.Path, "/assets/") {
			level = slog.LevelDebug
		}
		s.logger(r).Log(r.Context(), level, "http_request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes),
			slog.Int64("duration_ms", time.Since(start).Milliseconds()),
		)
	})
}

func (s *Server) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.error(w, r, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// logger returns the server's logger with the request id of r.
func (s *Server) logger(r *http.Request) *slog.Logger {
	return s.Logger.With(slog.String("request_id", RequestID(r.Context())))
}

// auth requires an API key: X-API-Key, Authorization: Bearer, or, for the
// WebSocket only, the api_key query parameter.
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKey(r)
		if key == "" {
			s.error(w, r, datachat.Errorf(datachat.EUNAUTHORIZED, "Missing API key: send it in the X-API-Key header or as Authorization: Bearer KEY."))
			return
		}
		u, err := s.Store.Authenticate(r.Context(), datachat.HashAPIKey(key))
		if err != nil {
			if datachat.ErrorCode(err) == datachat.EUNAUTHORIZED {
				err = datachat.Errorf(datachat.EUNAUTHORIZED, "Invalid or revoked API key.")
			}
			s.error(w, r, err)
			return
		}
		// The user goes in the context for the handlers, and by ID for the
		// shared resources that share fairly between users (the SQL engine).
		ctx := datachat.WithUserID(context.WithValue(r.Context(), userKey, u), u.ID)
		h(w, r.WithContext(ctx))
	})
}

func apiKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	if r.URL.Path == "/ws" {
		return r.URL.Query().Get("api_key")
	}
	return ""
}
