package chat

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"datachat"
)

// flusher writes the answers of all of a Runner's streaming turns to the
// store: every second their new text, so a crash loses at most a second of
// it, and every third of the lease's TTL their leases, so other processes
// sharing the database know the turns are alive (tokens or not: a long SQL
// query too). It makes one store call for all of them
// (datachat.Store.FlushStreaming), one write transaction a second for the
// process rather than one per turn: with hundreds of turns, the store's
// single writer and the CPU it takes are what the token relay would
// otherwise wait for.
//
// The relay never waits for it: the flusher holds a turn's lock only to copy
// the new parts, never across the store call. A turn's end waits for a write
// in flight with its parts (stopStreaming), so that finish's write comes
// after the turn's last flush.
type flusher struct {
	mu    sync.Mutex
	turns map[*turn]*flushState // the turns streaming
	quit  chan struct{}         // closes the loop when the last turn leaves; nil when none runs
}

// flushState is the flusher's record of one turn.
type flushState struct {
	renewAt time.Time     // when its lease is due for renewal
	writing chan struct{} // closed when the write in flight with its parts ends; nil when none
	gone    bool          // its message was deleted: nothing more to write
}

// startStreaming adds t to the turns the flusher writes, starting the
// flusher if it was idle; stop removes it once any write in flight with its
// parts ended.
func (r *Runner) startStreaming(t *turn) (stop func()) {
	f := &r.flushes
	f.mu.Lock()
	r.addStreaming(t, r.now())
	if f.quit == nil {
		f.quit = make(chan struct{})
		go r.flushLoop(f.quit)
	}
	f.mu.Unlock()
	return func() { r.stopStreaming(t) }
}

// addStreaming records t, streaming from now; f.mu held.
func (r *Runner) addStreaming(t *turn, now time.Time) {
	f := &r.flushes
	if f.turns == nil {
		f.turns = map[*turn]*flushState{}
	}
	f.turns[t] = &flushState{renewAt: now.Add(r.leaseTTL() / 3)}
}

// stopStreaming removes t from the flusher, after the write in flight with
// its parts, if any, ended; the flusher stops when no turn is left.
func (r *Runner) stopStreaming(t *turn) {
	f := &r.flushes
	f.mu.Lock()
	var writing chan struct{}
	if st := f.turns[t]; st != nil {
		writing = st.writing
	}
	delete(f.turns, t)
	if len(f.turns) == 0 && f.quit != nil {
		close(f.quit)
		f.quit = nil
	}
	f.mu.Unlock()
	if writing != nil {
		<-writing
	}
}

// flushLoop flushes every second (or third of the lease's TTL, if shorter)
// until quit closes.
func (r *Runner) flushLoop(quit chan struct{}) {
	tick := time.NewTicker(min(flushInterval, r.leaseTTL()/3))
	defer tick.Stop()
	for {
		select {
		case <-quit:
			return
		case <-tick.C:
			r.flushStreaming(r.now())
		}
	}
}

// maxFlushBytes bounds the text one flush writes (beyond the first turn's):
// the turns left wait for the next second, so that a few long answers
// streaming fast do not hold the store's single writer, which every other
// turn's writes wait for, for seconds. Their leases are renewed all the same.
const maxFlushBytes = 4 << 20

// flushed is one turn's share of a flush.
type flushed struct {
	t     *turn
	first int
	n     int  // parts taken
	lease bool // renewed
}

// flushStreaming writes, in one store call, the parts that came since the
// last flush to every streaming turn (up to maxFlushBytes of text), and the
// leases due for renewal at now.
// Only the new text is written, so the bytes written grow linearly with an
// answer. A part the flusher takes no longer grows (later text starts a new
// one); parts or a lease the store did not take are sent again, the parts
// under the same numbers, at the next flush.
func (r *Runner) flushStreaming(now time.Time) {
	f := &r.flushes
	var (
		batch []datachat.StreamingFlush
		took  []flushed
		lease datachat.Lease
		size  int // bytes of text taken
	)
	writing := make(chan struct{})
	defer close(writing)

	f.mu.Lock()
	for t, st := range f.turns {
		if st.gone || st.writing != nil {
			continue // deleted, or in a write of an earlier loop still going
		}
		due := !now.Before(st.renewAt)
		t.mu.Lock()
		first := t.stored
		var parts []datachat.Part
		if size < maxFlushBytes {
			t.frozen = len(t.parts)
			parts = slices.Clone(t.parts[first:t.frozen])
		}
		t.mu.Unlock()
		for _, p := range parts {
			size += len(p.Text)
		}
		if len(parts) == 0 && !due {
			continue
		}
		if due && lease.Owner == "" {
			lease = r.Lease()
		}
		e := datachat.StreamingFlush{MessageID: t.msg.ID, First: first, Parts: parts}
		if due {
			e.Lease = &lease
		}
		batch = append(batch, e)
		took = append(took, flushed{t: t, first: first, n: len(parts), lease: due})
		st.writing = writing
	}
	f.mu.Unlock()
	if len(batch) == 0 {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	gone, err := r.Store.FlushStreaming(ctx, batch)
	cancel()
	if err != nil {
		r.Logger.Warn("flush streaming messages", slog.Int("messages", len(batch)), slog.String("error", err.Error()))
	}
	isGone := make(map[string]bool, len(gone))
	for _, id := range gone {
		isGone[id] = true
		r.Logger.Warn("flush streaming message", slog.String("message_id", id), slog.String("error", "message not found"))
	}
	if err == nil {
		for _, e := range took {
			if !isGone[e.t.msg.ID] {
				e.t.mu.Lock()
				e.t.stored = e.first + e.n
				e.t.mu.Unlock()
			}
		}
	}

	f.mu.Lock()
	for _, e := range took {
		st := f.turns[e.t]
		if st == nil {
			continue // ended meanwhile; it waits for writing
		}
		st.writing = nil
		switch {
		case isGone[e.t.msg.ID]:
			st.gone = true
		case err == nil && e.lease:
			st.renewAt = now.Add(r.leaseTTL() / 3)
		}
	}
	f.mu.Unlock()
}
