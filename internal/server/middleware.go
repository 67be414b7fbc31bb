package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"datachat"
	"datachat/internal/llm"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	userKey
	bodyKey
	signedInKey
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

// withSecurityHeaders marks every response, errors and 404s included, as not
// to be content-sniffed.
func withSecurityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// Request body pace: http.Server has no read deadline once the headers are
// in, so a client trickling a body holds its connection (and the handler
// reading it) for as long as it likes.
const (
	defaultBodyReadTimeout = 30 * time.Second
	defaultBodyMinBytes    = 64 << 10
)

// withBodyPace gives a request body a read deadline that moves with progress:
// the body must deliver at least BodyMinBytes every BodyReadTimeout, so a
// 2 GiB upload over a slow line goes through while a trickle is cut, and a
// body nobody reads cannot hold the connection either. The deadline is lifted
// once the body is read to its end: a long answer (a turn, a stream) is not
// bounded by it.
func (s *Server) withBodyPace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		window, min := s.cfg.BodyReadTimeout, s.cfg.BodyMinBytes
		if window <= 0 {
			window = defaultBodyReadTimeout
		}
		if min <= 0 {
			min = defaultBodyMinBytes
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(window)); err != nil {
			next.ServeHTTP(w, r) // the connection takes no deadline (a test recorder)
			return
		}
		b := &pacedBody{body: r.Body, conn: rc, now: time.Now, window: window, min: min}
		r = r.WithContext(context.WithValue(r.Context(), bodyKey, b))
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// pacedBody is a request body under withBodyPace's deadline.
type pacedBody struct {
	body    io.ReadCloser
	conn    interface{ SetReadDeadline(time.Time) error } // the request's http.ResponseController
	now     func() time.Time
	window  time.Duration
	min     int64
	started bool
	got     int64       // bytes since the deadline last moved
	ended   atomic.Bool // read to its end: the deadline is lifted
	// cut is the error of a body that came too slowly: whatever the
	// handler makes of the failed read (a cancelled context, a wrapped
	// error), this is the answer.
	cut atomic.Pointer[datachat.Error]
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if !b.started {
		// The window starts again when the handler first reads: the time
		// it spent authenticating or looking things up does not count.
		b.started = true
		b.conn.SetReadDeadline(b.now().Add(b.window))
	}
	n, err := b.body.Read(p)
	b.got += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.ended.Store(true)
		b.conn.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		cut := datachat.WrapError(datachat.EINVALID, fmt.Sprintf(
			"The request body arrived too slowly: less than %s in %s. Send it again over a faster or steadier connection.",
			byteSize(b.min), b.window), err)
		b.cut.Store(cut)
		return n, cut
	case b.got >= b.min:
		b.got = 0
		b.conn.SetReadDeadline(b.now().Add(b.window))
	}
	return n, err
}

func (b *pacedBody) Close() error { return b.body.Close() }

// refusedBodyLinger is how long a connection whose request was refused with
// its body unread may still be read from before it closes: the time for the
// answer to reach the client, as http.Server's own rstAvoidanceDelay (a close
// with unread data sends a reset, which can destroy an answer in flight).
const refusedBodyLinger = 500 * time.Millisecond

// refuseBody makes an error answer to r close the connection instead of
// reading the rest of r's body: http.Server would otherwise read up to
// 256 KiB of it after the handler (to reuse the connection), at the client's
// pace; now it reads for refusedBodyLinger at most. It returns the error to
// answer: err, or why the body was cut.
func refuseBody(w http.ResponseWriter, r *http.Request, err error) error {
	b, _ := r.Context().Value(bodyKey).(*pacedBody)
	if b == nil || b.ended.Load() {
		return err
	}
	w.Header().Set("Connection", "close")
	b.conn.SetReadDeadline(time.Now().Add(refusedBodyLinger))
	if cut := b.cut.Load(); cut != nil {
		return cut
	}
	return err
}

// byteSize writes a byte count for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// A browser cannot set headers on a WebSocket, so the page sends its key as a
// subprotocol: it offers wsSubprotocol and wsKeyProtocol+KEY, and the server
// selects wsSubprotocol, never echoing the key. Unlike ?api_key=, the key
// then stays out of URLs, which reverse proxies log.
const (
	wsSubprotocol = "datachat.v1"
	wsKeyProtocol = "datachat.key."
)

// auth requires an API key or a sign-in session: X-API-Key, Authorization:
// Bearer, for the WebSocket only the subprotocol wsKeyProtocol+KEY or (kept
// for existing clients) the api_key query parameter; or the session cookie
// (sessionCookieName) that a sign-in sets (session.go).
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	missing := func(r *http.Request) string {
		if r.URL.Path == "/ws" {
			return "Not signed in: sign in, or send an API key in the X-API-Key header, as Authorization: Bearer KEY, or (from a browser) as the WebSocket subprotocol " + wsKeyProtocol + "KEY offered with " + wsSubprotocol + "."
		}
		return "Not signed in: sign in, or send an API key in the X-API-Key header or as Authorization: Bearer KEY."
	}
	return s.authenticated(h, s.error, missing, "Invalid or revoked API key.", true)
}

// keyAuth is auth for the routes that take API keys only, never the
// session cookie: /mcp and /metrics, which scripts and other programs call.
func (s *Server) keyAuth(h http.HandlerFunc) http.Handler {
	missing := func(*http.Request) string {
		return "Missing API key: send it in the X-API-Key header or as Authorization: Bearer KEY (a browser's sign-in does not reach this route)."
	}
	return s.authenticated(h, s.error, missing, "Invalid or revoked API key.", false)
}

// authenticated runs h for the user of the request's API key or, when
// sessions is set and the request has no key, of its session cookie,
// refusing a request with neither, or with an unknown or revoked one (401,
// and the connection closes without reading its body), in the words and
// shape of the protocol: fail writes the error, missing and invalid are its
// messages. A request authenticated by its cookie must also pass the
// cross-origin checks (checkCookieOrigin). The user goes in the context for
// the handlers, and by ID for the resources shared fairly between users (the
// SQL engine). The request is live under its credential (liveAuth) until h
// returns: if the credential is revoked meanwhile, its context is cancelled
// with the reason and its body fails.
func (s *Server) authenticated(h http.HandlerFunc, fail func(http.ResponseWriter, *http.Request, error), missing func(*http.Request) string, invalid string, sessions bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var who signedIn
		var err error
		if key := apiKey(r); key != "" {
			who.user, who.cred, err = s.Store.Authenticate(r.Context(), datachat.HashAPIKey(key))
			who.method = methodAPIKey
			if datachat.ErrorCode(err) == datachat.EUNAUTHORIZED && !isError(err, datachat.ErrUserDisabled) {
				err = datachat.Errorf(datachat.EUNAUTHORIZED, "%s", invalid)
			}
		} else if c := sessionCookieOf(r); sessions && c != "" {
			who, err = s.authenticateSession(w, r, c)
		} else {
			err = datachat.Errorf(datachat.EUNAUTHORIZED, "%s", missing(r))
		}
		if err != nil {
			if datachat.ErrorCode(err) == datachat.EUNAUTHORIZED {
				w.Header().Set("Connection", "close")
			}
			fail(w, r, err)
			return
		}
		ctx, g, release := s.live.bind(r.Context(), who.cred)
		defer release()
		defer cutBodyWhenRevoked(w, r, g)()
		ctx = datachat.WithUserID(context.WithValue(ctx, userKey, who.user), who.user.ID)
		ctx = context.WithValue(ctx, signedInKey, &who)
		h(w, r.WithContext(ctx))
	})
}

// isError reports whether err is target's error: its code and message.
func isError(err error, target *datachat.Error) bool {
	return datachat.ErrorCode(err) == target.Code && datachat.ErrorMessage(err) == target.Message
}

func apiKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	if r.URL.Path == "/ws" {
		for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
			for p := range strings.SplitSeq(h, ",") {
				if k, ok := strings.CutPrefix(strings.TrimSpace(p), wsKeyProtocol); ok && k != "" {
					return k
				}
			}
		}
		return r.URL.Query().Get("api_key")
	}
	return ""
}
