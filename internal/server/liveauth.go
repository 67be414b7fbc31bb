package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"datachat"
)

// defaultAuthCheckInterval is how often, by default, the credentials of the
// requests in flight are checked against the store: a credential revoked by
// another process (`datachat keys revoke`, another serve on the same
// database) cuts its requests within about this long.
const defaultAuthCheckInterval = 500 * time.Millisecond

// authCheckTimeout bounds one check, so a store that hangs cannot hold the
// watcher past its next turns for long.
const authCheckTimeout = 5 * time.Second

// liveAuth is the registry of the authenticated requests in flight — plain
// requests, streamed answers, uploads, MCP calls, WebSockets — by the
// credential that authenticated each. A credential that stops being valid
// ends them all: each request's context is cancelled with the reason as its
// cause (an EUNAUTHORIZED *datachat.Error, such as datachat.ErrAPIKeyRevoked),
// and a WebSocket closes with wsStatusRevoked.
//
// Revocations made in this process reach it at once through revoke and
// revokeUser (Server.Revoke, Server.RevokeUser). Those made elsewhere are
// found by one watcher goroutine, which runs while requests are live: every
// interval it asks the store, in one read-only call
// (datachat.Store.RevokedCredentials), which of the distinct live
// credentials no longer authenticate, and it ends at the first turn that
// finds no request live (or at stop). A credential revoked between its
// request's authentication and its registration is caught by the next check.
type liveAuth struct {
	check    func(context.Context, []datachat.Credential) ([]datachat.Revocation, error)
	interval time.Duration
	logger   *slog.Logger
	// checked, when set (by tests), is told after each check how many
	// credentials it looked up.
	checked func(n int)

	mu      sync.Mutex
	live    map[datachat.Credential]map[*grant]struct{}
	unwatch context.CancelFunc // stops the watcher; nil when none runs (or it is ending)
	stopped bool               // stop was called: no watcher starts again
	failing bool               // the last check failed (logged once)
	running int                // watcher goroutines not yet ended (one, but for a moment two)
	watcher sync.WaitGroup
}

// grant is one request's hold on its credential. Its ctx is a signal, not a
// request's context: it is cancelled, with the reason as its cause, when the
// credential is revoked, and only then; a context, so that context.AfterFunc
// ties the request's context, a WebSocket's turns and a body's reads to it.
type grant struct {
	cred   datachat.Credential
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newLiveAuth(check func(context.Context, []datachat.Credential) ([]datachat.Revocation, error), interval time.Duration, logger *slog.Logger) *liveAuth {
	if interval <= 0 {
		interval = defaultAuthCheckInterval
	}
	return &liveAuth{check: check, interval: interval, logger: logger, live: map[datachat.Credential]map[*grant]struct{}{}}
}

type grantKey struct{}

// bind registers a request authenticated by cred. It returns the request's
// context — parent's, carrying the grant, and cancelled with the reason when
// cred is revoked — and release, which the request calls when it ends.
func (l *liveAuth) bind(parent context.Context, cred datachat.Credential) (context.Context, *grant, func()) {
	g := l.track(cred)
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, grantKey{}, g))
	stop := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	return ctx, g, func() {
		stop()
		cancel(nil)
		l.release(g)
	}
}

// grantFrom returns the grant of an authenticated request's context.
func grantFrom(ctx context.Context) *grant {
	g, _ := ctx.Value(grantKey{}).(*grant)
	return g
}

// revocation returns why the credential of ctx's request was revoked, or
// nil while it is valid (or ctx is not an authenticated request's).
func revocation(ctx context.Context) error {
	if g := grantFrom(ctx); g != nil {
		return g.err()
	}
	return nil
}

// err is why the grant's credential was revoked; nil while it is valid.
func (g *grant) err() error {
	if g.ctx.Err() == nil {
		return nil
	}
	return context.Cause(g.ctx)
}

// track adds a grant for cred, starting the watcher if none runs.
func (l *liveAuth) track(cred datachat.Credential) *grant {
	ctx, cancel := context.WithCancelCause(context.Background())
	g := &grant{cred: cred, ctx: ctx, cancel: cancel}
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.live[cred]
	if set == nil {
		set = map[*grant]struct{}{}
		l.live[cred] = set
	}
	set[g] = struct{}{}
	if l.unwatch == nil && !l.stopped {
		wctx, unwatch := context.WithCancel(context.Background())
		l.unwatch = unwatch
		l.running++
		l.watcher.Add(1)
		go l.watch(wctx)
	}
	return g
}

// release removes a grant (if a revocation has not already).
func (l *liveAuth) release(g *grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if set := l.live[g.cred]; set != nil {
		delete(set, g)
		if len(set) == 0 {
			delete(l.live, g.cred)
		}
	}
}

// revoke ends every request of cred with reason, and returns how many there
// were.
func (l *liveAuth) revoke(cred datachat.Credential, reason error) int {
	l.mu.Lock()
	set := l.live[cred]
	delete(l.live, cred)
	l.mu.Unlock()
	for g := range set {
		g.cancel(reason)
	}
	return len(set)
}

// revokeUser ends every request of the user's credentials, whatever they
// are, with reason, and returns how many there were.
func (l *liveAuth) revokeUser(userID string, reason error) int {
	return l.revokeUserKind(userID, "", reason)
}

// revokeUserKind ends every request of the user's credentials of kind (""
// for any), with reason, and returns how many there were.
func (l *liveAuth) revokeUserKind(userID string, kind datachat.CredentialKind, reason error) int {
	l.mu.Lock()
	var ended []*grant
	for cred, set := range l.live {
		if cred.UserID == userID && (kind == "" || cred.Kind == kind) {
			for g := range set {
				ended = append(ended, g)
			}
			delete(l.live, cred)
		}
	}
	l.mu.Unlock()
	for _, g := range ended {
		g.cancel(reason)
	}
	return len(ended)
}

// watchers returns how many watcher goroutines have not yet ended.
func (l *liveAuth) watchers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// stop stops the watcher for good and waits for it to end.
func (l *liveAuth) stop() {
	l.mu.Lock()
	l.stopped = true
	if l.unwatch != nil {
		l.unwatch()
		l.unwatch = nil
	}
	l.mu.Unlock()
	l.watcher.Wait()
}

// watch checks the live credentials every interval until ctx ends (stop),
// or a turn finds no request live.
func (l *liveAuth) watch(ctx context.Context) {
	defer l.watcher.Done()
	defer func() {
		l.mu.Lock()
		l.running--
		l.mu.Unlock()
	}()
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.checkOnce(ctx) {
			return
		}
	}
}

// checkOnce asks the store which live credentials no longer authenticate,
// and ends their requests. A store that cannot answer cuts nothing: the
// requests go on, and the next check asks again. With no request live it
// checks nothing and reports false: the watcher ends (the next request
// starts another), so an idle server does not poll, nor a goroutine per
// request come and go.
func (l *liveAuth) checkOnce(ctx context.Context) bool {
	l.mu.Lock()
	if len(l.live) == 0 {
		if l.unwatch != nil {
			l.unwatch()
			l.unwatch = nil
		}
		l.mu.Unlock()
		return false
	}
	creds := make([]datachat.Credential, 0, len(l.live))
	for c := range l.live {
		creds = append(creds, c)
	}
	l.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, authCheckTimeout)
	revoked, err := l.check(cctx, creds)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		l.mu.Lock()
		first := !l.failing
		l.failing = true
		l.mu.Unlock()
		if first {
			l.logger.Warn("cannot check whether the credentials of open requests were revoked; they go on until the store answers",
				slog.Int("credentials", len(creds)), slog.String("error", err.Error()))
		}
		return true
	}
	l.mu.Lock()
	recovered := l.failing
	l.failing = false
	l.mu.Unlock()
	if recovered {
		l.logger.Info("credentials of open requests checked again")
	}
	for _, r := range revoked {
		if n := l.revoke(r.Credential, r.Reason); n > 0 {
			l.logger.Info("credential revoked: its requests end",
				slog.String("kind", string(r.Credential.Kind)), slog.String("id", r.Credential.ID),
				slog.String("user_id", r.Credential.UserID), slog.Int("requests", n),
				slog.String("reason", datachat.ErrorMessage(r.Reason)))
		}
	}
	if l.checked != nil {
		l.checked(len(creds))
	}
	return true
}

// cutBodyWhenRevoked makes r's body fail with the revocation as soon as g's
// credential is revoked: a read waiting for the client is woken by a read
// deadline in the past, and every read after fails (the deadline alone
// could be moved again by withBodyPace). It returns the function that undoes
// the watch, to call before the handler returns: the connection may serve
// another request after, which a late deadline must not touch.
func cutBodyWhenRevoked(w http.ResponseWriter, r *http.Request, g *grant) (stop func()) {
	if r.Body == nil || r.Body == http.NoBody {
		return func() {}
	}
	r.Body = revocableBody{ReadCloser: r.Body, g: g}
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	done := false
	unwatch := context.AfterFunc(g.ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			rc.SetReadDeadline(time.Now())
		}
	})
	return func() {
		unwatch()
		mu.Lock()
		done = true
		mu.Unlock()
	}
}

// revocableBody is a request body that fails once its credential is revoked.
type revocableBody struct {
	io.ReadCloser
	g *grant
}

func (b revocableBody) Read(p []byte) (int, error) {
	if err := b.g.err(); err != nil {
		return 0, err
	}
	n, err := b.ReadCloser.Read(p)
	if rerr := b.g.err(); rerr != nil {
		return n, rerr
	}
	return n, err
}

// Revoke ends at once every request and WebSocket authenticated by cred —
// as Store.Authenticate gave it: Kind, ID and UserID — with reason (an
// EUNAUTHORIZED *datachat.Error saying why, such as
// datachat.ErrAPIKeyRevoked), and returns how many there were. Whatever
// revokes a credential in this process calls it once the store has taken the
// revocation; revocations made by other processes are found by the store
// check within the check interval (and so is one Revoke missed).
func (s *Server) Revoke(cred datachat.Credential, reason error) int {
	return s.live.revoke(cred, reason)
}

// RevokeUser is Revoke for every credential of a user — API keys and
// sign-in sessions alike — (the user was disabled or removed).
func (s *Server) RevokeUser(userID string, reason error) int {
	return s.live.revokeUser(userID, reason)
}
