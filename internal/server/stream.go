package server

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// A streaming HTTP answer (/v1/chat/completions and /v1/responses with
// "stream": true) holds at most the turn's channel of pieces and the
// connection's write buffer for its client, and waits at most the write
// timeout for each write. A client that takes longer is cut: the handler
// returns, closing the connection, and the turn goes on without it to its
// end, so its answer is completed and stored.

// streamTurn is the turn of a streaming HTTP answer: its context follows
// the request's — the client closed the connection, its key was revoked —
// except while the answer is being written (a write that fails or times out
// ends the request's context too, and cuts the client instead, see
// finishCut), and until detach; after that only the revocation of the key,
// a shutdown whose grace ran out, or stop ends it.
type streamTurn struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	unfollow func() bool
	writing  atomic.Bool
}

func (s *Server) newStreamTurn(ctx context.Context) *streamTurn {
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	st := &streamTurn{ctx: tctx, cancel: cancel}
	st.unfollow = context.AfterFunc(ctx, func() {
		if err := revocation(ctx); err != nil {
			cancel(err)
		} else if !st.writing.Load() {
			cancel(context.Cause(ctx))
		}
	})
	if g := grantFrom(ctx); g != nil {
		context.AfterFunc(g.ctx, func() { cancel(g.err()) })
	}
	s.interruptAtStop(tctx, cancel)
	return st
}

// stop cancels the turn (its answer is no longer read).
func (st *streamTurn) stop() { st.cancel(context.Canceled) }

// streamWriteTimeout bounds each write of a streaming answer.
func (s *Server) streamWriteTimeout() time.Duration {
	return cmp.Or(s.cfg.WSWriteTimeout, defaultWriteTimeout)
}

// flushWithin sends what w holds, waiting at most the write timeout for the
// client; an error means the client is cut (too slow, or gone).
func (s *Server) flushWithin(rc *http.ResponseController) error {
	if err := rc.SetWriteDeadline(time.Now().Add(s.streamWriteTimeout())); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return rc.Flush()
}

// finishCut lets the turn of a streaming answer whose client was cut run to
// its end without it: detached from the request, still counted as a turn
// for Shutdown, its pieces dropped as they come.
func (s *Server) finishCut(r *http.Request, convID string, err error, pieces <-chan piece, st *streamTurn) {
	st.unfollow()
	s.logger(r).Info("streaming client too slow or gone: cut, its turn goes on",
		slog.String("conversation_id", convID), slog.String("error", err.Error()))
	s.turnsMu.Lock()
	s.turns++ // the handler's own turn still counts: Shutdown cannot have seen none
	s.turnsMu.Unlock()
	go func() {
		defer s.endTurn()
		for range pieces {
		}
	}()
}
