package chat

import (
	"context"
	"log/slog"
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

func (t *turn) flush() {
	t.mu.Lock()
	if !t.dirty {
		t.mu.Unlock()
		return
	}
	m := *t.msg
	t.dirty = false
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.r.Store.UpdateMessage(ctx, &m); err != nil {
		t.r.Logger.Warn("flush streaming message", slog.String("message_id", m.ID), slog.String("error", err.Error()))
	}
}
