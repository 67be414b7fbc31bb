package chat

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// startFlusher writes the answer's text to the store at least once a second
// while it streams, so a crash loses at most a second of it, and renews the
// message's lease every third of its TTL, so other processes sharing the
// database know the turn is alive (tokens or not: a long SQL query too).
func (t *turn) startFlusher() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := t.r.leaseTTL() / 3
		tick := time.NewTicker(min(flushInterval, every))
		defer tick.Stop()
		renew := time.Now().Add(every)
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				t.flush()
				if !now.Before(renew) {
					t.renewLease()
					renew = now.Add(every)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (t *turn) renewLease() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.r.Store.RenewLease(ctx, t.msg.ID, t.r.Lease()); err != nil {
		t.r.Logger.Warn("renew streaming message lease", slog.String("message_id", t.msg.ID), slog.String("error", err.Error()))
	}
}

// flush appends to the store the parts that came since the last flush: only
// the new text, so the bytes written grow linearly with the answer. A part
// the flusher takes no longer grows (later text starts a new one); one it
// could not store is sent again, under the same numbers, at the next flush.
func (t *turn) flush() {
	t.mu.Lock()
	t.frozen = len(t.parts)
	first := t.stored
	batch := slices.Clone(t.parts[first:t.frozen])
	t.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.r.Store.AppendParts(ctx, t.msg.ID, first, batch); err != nil {
		t.r.Logger.Warn("flush streaming message", slog.String("message_id", t.msg.ID), slog.String("error", err.Error()))
		return
	}
	t.mu.Lock()
	t.stored = first + len(batch)
	t.mu.Unlock()
}
