// Package server is datachat's HTTP edge: routes, authentication, middleware,
// JSON errors and the WebSocket.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/workspace"
	"datachat/web"
)

// Server serves datachat's HTTP API.
type Server struct {
	Store  datachat.Store
	Logger *slog.Logger

	Chat      *chat.Runner
	Workspace *workspace.Workspace

	MaxDatasetBytes  int64 // largest upload accepted
	MaxDocumentBytes int64

	// AllowedMetadataKeys are the metadata filter keys clients may use.
	AllowedMetadataKeys []string

	// Ready, if set, is checked by /healthz besides the store.
	Ready func(ctx context.Context) error

	httpServer  *http.Server
	initOnce    sync.Once
	closing     chan struct{} // closed by Shutdown: ends WebSocket sessions
	closeOnce   sync.Once
	closingOnce sync.Once
	wsSessions  atomic.Int64
	wsWG        sync.WaitGroup // WebSocket handlers, which Shutdown waits for
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.httpServer = &http.Server{
			Handler:           s.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
		}
	})
}

// Handler returns the server's routes wrapped in its middleware.
func (s *Server) Handler() http.Handler {
	s.closingOnce.Do(func() { s.closing = make(chan struct{}) })
	mux := http.NewServeMux()
	s.routes(mux)
	return s.withRequestID(s.withLogging(s.withRecover(s.withJSONFallback(mux))))
}

func (s *Server) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.healthz)
	page := web.Handler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /index.html", page)
	mux.Handle("GET /assets/", page)

	mux.Handle("POST /api/conversations", s.auth(s.createConversation))
	mux.Handle("GET /api/conversations", s.auth(s.listConversations))
	mux.Handle("GET /api/conversations/{id}", s.auth(s.getConversation))
	mux.Handle("PATCH /api/conversations/{id}", s.auth(s.renameConversation))
	mux.Handle("DELETE /api/conversations/{id}", s.auth(s.deleteConversation))

	mux.Handle("POST /api/conversations/{id}/datasets", s.auth(s.createDataset))
	mux.Handle("GET /api/conversations/{id}/datasets", s.auth(s.listDatasets))
	mux.Handle("DELETE /api/conversations/{id}/datasets/{dataset_id}", s.auth(s.deleteDataset))
	mux.Handle("POST /api/conversations/{id}/sql", s.auth(s.runSQL))
	mux.Handle("POST /api/conversations/{id}/documents", s.auth(s.createDocument))
	mux.Handle("GET /api/conversations/{id}/documents", s.auth(s.listDocuments))
	mux.Handle("DELETE /api/conversations/{id}/documents/{doc_id}", s.auth(s.deleteDocument))
	mux.Handle("POST /api/conversations/{id}/search", s.auth(s.search))

	mux.Handle("GET /ws", s.auth(s.serveWS))
	mux.Handle("POST /chat/query", s.auth(s.chatQuery))

}

// withJSONFallback answers requests that match no route in JSON: 404, or 405
// with the Allow header when only the method is wrong.
func (s *Server) withJSONFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		probe := &headerProbe{header: http.Header{}}
		mux.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]string{
				"message": fmt.Sprintf("Method %s is not allowed on %s; allowed: %s.", r.Method, r.URL.Path, probe.header.Get("Allow")),
				"type":    datachat.EINVALID,
			}})
			return
		}
		s.error(w, r, datachat.Errorf(datachat.ENOTFOUND, "No route for %s %s.", r.Method, r.URL.Path))
	})
}

// headerProbe captures what the mux would answer for an unmatched request.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	if err := s.httpServer.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections and waits for requests in flight until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.closeOnce.Do(func() {
		if s.closing != nil {
			close(s.closing)
		}
	})
	err := s.httpServer.Shutdown(ctx)
	// http.Server.Shutdown does not wait for hijacked connections.
	done := make(chan struct{})
	go func() { s.wsWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("websocket sessions still open: %w", ctx.Err()))
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	err := s.Store.Ping(ctx)
	if err == nil && s.Ready != nil {
		err = s.Ready(ctx)
	}
	if err != nil {
		s.logger(r).Error("health check failed", slog.String("error", err.Error()))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
