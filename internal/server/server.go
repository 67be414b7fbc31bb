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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/metrics"
	"datachat/internal/sso"
	"datachat/internal/workspace"
	"datachat/web"
)

// Deps are what a Server serves: its store, chat runner, workspace and the
// rest, given to New.
type Deps struct {
	Store  datachat.Store
	Logger *slog.Logger

	// Chat runs chat turns; New sets its Budgets to the server's, so that
	// the chat's tool calls spend the budgets MCP's and the API's do.
	Chat      *chat.Runner
	Workspace *workspace.Workspace
	// Sources are the database sources users attach to conversations; nil:
	// none (GET /api/sources lists none).
	Sources *workspace.Sources

	// Metrics are served at /metrics; nil: the server makes its own. The
	// chat runner's observer is its caller's to set (Metrics.Chat).
	Metrics *metrics.Metrics

	// Ready, if set, is checked by /healthz besides the store.
	Ready func(ctx context.Context) error
}

// Config holds a Server's limits and timeouts; zero values are the defaults
// each field names.
type Config struct {
	MaxDatasetBytes  int64 // largest upload accepted
	MaxDocumentBytes int64

	// AllowedMetadataKeys are the metadata filter keys clients may use.
	AllowedMetadataKeys []string

	// A request body must deliver at least BodyMinBytes every
	// BodyReadTimeout, or it is cut with a 400 (zero: 64 KiB every 30 s).
	BodyReadTimeout time.Duration
	BodyMinBytes    int64
	// MaxConnections caps the connections open at once (0: no cap); more
	// wait in the listen backlog until one closes.
	MaxConnections int

	// Per-user budgets, each its own (0: none): SQL queries (POST …/sql, MCP
	// execute_sql) and document searches (POST …/search, MCP
	// search_documents) a minute, uploads (POST …/datasets, …/documents, MCP
	// load_dataset) an hour.
	SQLPerMinute    int
	SearchPerMinute int
	UploadsPerHour  int

	// MaxWSPerUser caps the chat WebSockets one user holds open (0: no cap).
	MaxWSPerUser int
	// WebSocket keep-alive: a ping every WSPingInterval, which the client
	// must answer within WSPingTimeout or be dropped as gone; its streaming
	// turn goes on and is stored (zero: 20 s and 10 s).
	WSPingInterval time.Duration
	WSPingTimeout  time.Duration
	// A chat WebSocket's client that leaves more than WSOutboxBytes of
	// events unsent, or takes longer than WSWriteTimeout to take one, is
	// cut; its turn goes on and its answer is stored (zero: 1 MiB and
	// 10 s). WSWriteTimeout also bounds each write of a streaming HTTP
	// answer (/v1/chat/completions, /v1/responses).
	WSOutboxBytes  int
	WSWriteTimeout time.Duration

	// AuthCheckInterval is how often the credentials of the requests in
	// flight are checked against the store, so that one revoked by another
	// process ends its requests and WebSockets within about this long
	// (zero: 500 ms). Revocations through the server itself (Revoke) act at
	// once.
	AuthCheckInterval time.Duration

	// SessionIdle is how long a sign-in session lasts unused
	// (DATACHAT_SESSION_IDLE; zero: 7 days).
	SessionIdle time.Duration
	// PublicURL is DATACHAT_PUBLIC_URL, the origin people open datachat at
	// ("" when not set): invite URLs start with it, the session cookie is
	// Secure when it is https, and requests made with the cookie from it
	// are its own page's (besides those from the request's own host).
	PublicURL string
	// Sign-in attempts (passwords and invites) admitted per user name and
	// per address in 15 minutes (zero: 10 and 50; negative: no limit).
	SignInPerUser    int
	SignInPerAddress int
}

// Server serves datachat's HTTP API. Make one with New.
type Server struct {
	Deps
	cfg Config

	handler    http.Handler
	httpServer *http.Server
	budgets    budgets
	live       *liveAuth // authenticated requests in flight, by credential

	mux *http.ServeMux // the routes (EnableSSO adds to them)
	// crossOrigin checks the state-changing requests made with the session
	// cookie, and sign-ins (session.go).
	crossOrigin *http.CrossOriginProtection
	// sso is single sign-on, nil when off (EnableSSO); ssoRoles: its
	// admin group sets users' roles at each sign-in.
	sso      *sso.Handler
	ssoRoles bool

	closing    chan struct{} // closed by Shutdown: ends WebSocket sessions
	closeOnce  sync.Once
	wsSessions atomic.Int64
	wsMu       sync.Mutex
	wsUsers    map[string]int // open WebSockets by user
	wsWG       sync.WaitGroup // WebSocket handlers, which Shutdown waits for

	// Draining (Shutdown): no new request or turn starts; running turns may
	// finish until the grace is over, then interrupted is closed and they end
	// with chat.ErrInterrupted, stored as interrupted.
	turnsMu       sync.Mutex
	draining      bool
	turns         int           // turns running: WebSocket turns and /chat/query
	turnsIdle     chan struct{} // closed once draining and no turn runs
	interrupted   chan struct{}
	interruptOnce sync.Once
}

// New returns a server over d, configured by c, ready to Serve (or to give
// its Handler to another server).
func New(d Deps, c Config) *Server {
	if d.Metrics == nil {
		d.Metrics = metrics.New()
	}
	s := &Server{
		Deps:        d,
		cfg:         c,
		closing:     make(chan struct{}),
		interrupted: make(chan struct{}),
		budgets: budgets{
			sql:     newBudget("SQL queries", c.SQLPerMinute, time.Minute),
			search:  newBudget("document searches", c.SearchPerMinute, time.Minute),
			uploads: newBudget("uploads", c.UploadsPerHour, time.Hour),
		},
	}
	if d.Chat != nil {
		d.Chat.Budgets = &s.budgets
	}
	s.live = newLiveAuth(d.Store.RevokedCredentials, c.AuthCheckInterval, d.Logger)
	s.crossOrigin = http.NewCrossOriginProtection()
	if c.PublicURL != "" {
		if err := s.crossOrigin.AddTrustedOrigin(c.PublicURL); err != nil {
			// config.Load checked it is an origin; a caller that did
			// not gets the page's own host only.
			d.Logger.Error("DATACHAT_PUBLIC_URL is not an origin: cookie requests are trusted from the request's own host only", slog.String("error", err.Error()))
		}
	}
	s.addGauges()
	mux := http.NewServeMux()
	s.mux = mux
	s.routes(mux)
	// withDrain gives requests a new context: it goes outside withMetrics,
	// which reads the route the mux records on the request it is given.
	s.handler = withSecurityHeaders(s.withRequestID(s.withAuditOrigin(s.withLogging(s.withBodyPace(s.withDrain(s.withMetrics(s.withRecover(s.withJSONFallback(mux)))))))))
	s.httpServer = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
	return s
}

// Handler returns the server's routes wrapped in its middleware.
func (s *Server) Handler() http.Handler { return s.handler }

// interruptAtStop cancels a request's or a turn's context with
// chat.ErrInterrupted once a shutdown's grace is over; it watches until ctx
// ends, which the caller's cancel ensures.
func (s *Server) interruptAtStop(ctx context.Context, cancel context.CancelCauseFunc) {
	go func() {
		select {
		case <-s.interrupted:
			cancel(chat.ErrInterrupted)
		case <-ctx.Done():
		}
	}()
}

// router is where routes registers the server's routes: the server's
// ServeMux, or a test's list of them (every route the server has goes
// through routes, so a test can enumerate them all).
type router interface {
	Handle(pattern string, h http.Handler)
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// routes registers every route. Access is each route's wrapper: none
// (public), auth (an API key or the sign-in cookie), keyAuth and openaiAuth
// (an API key only), and admin inside auth (an administrator).
func (s *Server) routes(mux router) {
	mux.HandleFunc("GET /healthz", s.healthz)
	page := web.Handler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /index.html", page)
	mux.Handle("GET /assets/", page)

	mux.HandleFunc("GET /api/auth/methods", s.authMethods)
	mux.HandleFunc("POST /api/auth/login", s.login)
	mux.HandleFunc("POST /api/auth/invite", s.useInvite)
	mux.HandleFunc("POST /api/auth/logout", s.logout)
	mux.Handle("GET /api/me", s.auth(s.getMe))
	mux.Handle("GET /api/keys", s.auth(s.listOwnKeys))
	mux.Handle("POST /api/keys", s.auth(s.createOwnKey))
	mux.Handle("DELETE /api/keys/{id}", s.auth(s.revokeOwnKey))

	mux.Handle("POST /api/conversations", s.auth(s.createConversation))
	mux.Handle("GET /api/conversations", s.auth(s.listConversations))
	mux.Handle("GET /api/conversations/{id}", s.auth(s.getConversation))
	mux.Handle("PATCH /api/conversations/{id}", s.auth(s.patchConversation))
	mux.Handle("DELETE /api/conversations/{id}", s.auth(s.deleteConversation))

	mux.Handle("POST /api/conversations/{id}/datasets", s.auth(s.createDataset))
	mux.Handle("GET /api/conversations/{id}/datasets", s.auth(s.listDatasets))
	mux.Handle("DELETE /api/conversations/{id}/datasets/{dataset_id}", s.auth(s.deleteDataset))
	mux.Handle("PATCH /api/conversations/{id}/datasets/{dataset_id}", s.auth(s.patchDataset))
	mux.Handle("POST /api/conversations/{id}/dictionary", s.auth(s.importDictionary))
	mux.Handle("GET /api/conversations/{id}/dictionary", s.auth(s.getDictionary))
	mux.Handle("GET /api/conversations/{id}/dictionary/tables", s.auth(s.listSemantic)) // semantic.go
	mux.Handle("PATCH /api/conversations/{id}/dictionary/tables", s.auth(s.patchSemantic))
	mux.Handle("GET /api/shared/{id}/dictionary/tables", s.auth(s.listSharedSemantic))
	mux.Handle("POST /api/examples", s.auth(s.createExample))
	mux.Handle("GET /api/examples", s.auth(s.listExamples))
	mux.Handle("DELETE /api/examples/{id}", s.auth(s.deleteExample))
	mux.Handle("POST /api/conversations/{id}/sql", s.auth(s.runSQL))
	mux.Handle("POST /api/conversations/{id}/documents", s.auth(s.createDocument))
	mux.Handle("GET /api/conversations/{id}/documents", s.auth(s.listDocuments))
	mux.Handle("DELETE /api/conversations/{id}/documents/{doc_id}", s.auth(s.deleteDocument))
	mux.Handle("POST /api/conversations/{id}/search", s.auth(s.search))
	// Issue 24: the formats the page accepts, conversation search, Markdown export.
	mux.Handle("GET /api/formats", s.auth(s.listFormats))
	mux.Handle("GET /api/search", s.auth(s.searchConversations))
	mux.Handle("GET /api/conversations/{id}/export.md", s.auth(s.exportMarkdown))
	mux.Handle("POST /api/conversations/{id}/sample", s.auth(s.addSample))

	mux.Handle("GET /api/sources", s.auth(s.listSources))
	mux.Handle("GET /api/conversations/{id}/sources", s.auth(s.listConversationSources))
	mux.Handle("POST /api/conversations/{id}/sources", s.auth(s.attachSource))
	mux.Handle("DELETE /api/conversations/{id}/sources/{name}", s.auth(s.detachSource))

	s.shareRoutes(mux) // shares.go

	mux.Handle("GET /ws", s.auth(s.serveWS))
	mux.Handle("POST /chat/query", s.auth(s.asTurn(s.chatQuery)))

	mux.Handle("GET /v1/models", s.openaiAuth(s.listModels))
	mux.Handle("GET /v1/models/{model}", s.openaiAuth(s.getModel))
	mux.Handle("POST /v1/chat/completions", s.openaiAuth(s.asTurn(s.chatCompletions)))
	mux.Handle("POST /v1/responses", s.openaiAuth(s.asTurn(s.createResponse)))
	mux.Handle("/mcp", s.keyAuth(s.mcpHandler()))
	mux.Handle("GET /metrics", s.keyAuth(s.serveMetrics()))

	mux.Handle("GET /api/admin/users", s.auth(s.admin(s.listUsers)))
	mux.Handle("POST /api/admin/users", s.auth(s.admin(s.createUser)))
	mux.Handle("POST /api/admin/users/{name}/reset", s.auth(s.admin(s.resetUser)))
	mux.Handle("POST /api/admin/users/{name}/disable", s.auth(s.admin(s.disableUser)))
	mux.Handle("POST /api/admin/users/{name}/enable", s.auth(s.admin(s.enableUser)))
	mux.Handle("PATCH /api/admin/users/{name}", s.auth(s.admin(s.patchUser)))
	mux.Handle("DELETE /api/admin/users/{name}", s.auth(s.admin(s.removeUser)))
	mux.Handle("GET /api/admin/keys", s.auth(s.admin(s.listAllKeys)))
	mux.Handle("DELETE /api/admin/keys/{id}", s.auth(s.admin(s.revokeAnyKey)))
	mux.Handle("GET /api/admin/sources", s.auth(s.admin(s.listAllSources)))
	mux.Handle("PUT /api/admin/sources/{name}/grants", s.auth(s.admin(s.putGrants)))
	mux.Handle("GET /api/admin/usage", s.auth(s.admin(s.listUsage)))
	mux.Handle("GET /api/admin/audit", s.auth(s.admin(s.listAudit)))
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
			msg := fmt.Sprintf("Method %s is not allowed on %s; allowed: %s.", r.Method, r.URL.Path, probe.header.Get("Allow"))
			if isOpenAIPath(r.URL.Path) {
				writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": openaiRouteError(msg, "method_not_allowed")})
				return
			}
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]string{"message": msg, "type": datachat.EINVALID}})
			return
		}
		if isOpenAIPath(r.URL.Path) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": openaiRouteError(fmt.Sprintf(
				"No route for %s %s: datachat's OpenAI-compatible API serves GET /v1/models, POST /v1/chat/completions and POST /v1/responses.", r.Method, r.URL.Path), "unknown_url")})
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

// Serve accepts connections on ln until Shutdown, at most MaxConnections at
// once.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, s.cfg.MaxConnections)
	}
	if err := s.httpServer.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// interruptWait bounds how long Shutdown waits, once the grace is over, for
// the turns it interrupted to be stored, and for sessions and requests to end.
const interruptWait = 10 * time.Second

// Errors of a draining server.
var (
	errDraining     = datachat.Errorf(datachat.EBUSY, "The server is restarting and takes no new requests. Try again in a moment.")
	errDrainingTurn = datachat.Errorf(datachat.EBUSY, "The server is restarting: your message was not sent. Send it again in a moment.")
)

// Shutdown drains the server. At once, new requests are refused (503 busy, so
// a load balancer moves on), a chat_send gets a chat_error, and the listeners
// close. Running turns may finish until ctx ends; those still running then
// are interrupted — stored with status interrupted, not cancelled: the user
// did not cancel them — as are other requests in flight, and Shutdown waits up
// to interruptWait more for that. Then the WebSocket sessions close.
func (s *Server) Shutdown(ctx context.Context) error {
	idle := s.drain()
	s.Logger.Info("draining", slog.String("detail", "new requests and turns are refused; running turns may finish"))
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	served := make(chan error, 1)
	go func() { served <- s.httpServer.Shutdown(hctx) }()

	var errs []error
	interrupt := func(what string, done <-chan struct{}) {
		s.interruptOnce.Do(func() { close(s.interrupted) })
		select {
		case <-done:
		case <-time.After(interruptWait):
			errs = append(errs, fmt.Errorf("%s still running %s after the shutdown grace", what, interruptWait))
		}
	}
	select {
	case <-idle:
	case <-ctx.Done():
		interrupt("turns", idle)
	}

	// No turn runs: end the WebSocket sessions. http.Server.Shutdown does not
	// wait for hijacked connections.
	s.closeOnce.Do(func() { close(s.closing) })
	sessions := make(chan struct{})
	go func() { s.wsWG.Wait(); close(sessions) }()
	select {
	case <-sessions:
	case <-time.After(interruptWait):
		errs = append(errs, errors.New("websocket sessions still open after the shutdown"))
	}

	// Other requests (uploads, queries) get the rest of the grace too.
	requests := make(chan struct{})
	var serveErr error
	go func() { serveErr = <-served; close(requests) }()
	select {
	case <-requests:
	case <-ctx.Done():
		interrupt("requests", requests)
		hcancel()
		<-requests
	}
	s.live.stop() // no request is left to watch
	return errors.Join(append(errs, serveErr)...)
}

// drain stops new requests and turns, and returns a channel closed once no
// turn runs.
func (s *Server) drain() <-chan struct{} {
	s.turnsMu.Lock()
	defer s.turnsMu.Unlock()
	if !s.draining {
		s.draining = true
		s.turnsIdle = make(chan struct{})
		if s.turns == 0 {
			close(s.turnsIdle)
		}
	}
	return s.turnsIdle
}

func (s *Server) isDraining() bool {
	s.turnsMu.Lock()
	defer s.turnsMu.Unlock()
	return s.draining
}

// beginTurn counts a turn about to run; false while draining: it must not
// start. Every true is paired with an endTurn.
func (s *Server) beginTurn() bool {
	s.turnsMu.Lock()
	defer s.turnsMu.Unlock()
	if s.draining {
		return false
	}
	s.turns++
	return true
}

func (s *Server) endTurn() {
	s.turnsMu.Lock()
	defer s.turnsMu.Unlock()
	s.turns--
	if s.draining && s.turns == 0 {
		close(s.turnsIdle)
	}
}

// asTurn runs a handler that runs a chat turn as one: refused while draining,
// waited for by Shutdown.
func (s *Server) asTurn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.beginTurn() {
			w.Header().Set("Connection", "close")
			s.error(w, r, errDraining)
			return
		}
		defer s.endTurn()
		h(w, r)
	}
}

// withDrain refuses new requests while the server shuts down, and ends those
// still running when the grace is over: their context is cancelled with
// chat.ErrInterrupted.
func (s *Server) withDrain(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.isDraining() {
			w.Header().Set("Connection", "close")
			s.error(w, r, errDraining)
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		s.interruptAtStop(ctx, cancel)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
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
		// When to look again: as the error says (the database unavailable),
		// else as for the database, the likeliest cause.
		after := datachat.StoreRetryAfter
		if d, ok := datachat.RetryAfter(err); ok {
			after = d
		}
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(after)))
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
