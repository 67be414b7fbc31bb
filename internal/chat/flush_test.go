package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"datachat"
)

// batchStore hands each FlushStreaming batch to the test on batches and
// answers what the test sends on answers.
type batchStore struct {
	datachat.Store
	batches chan []datachat.StreamingFlush
	answers chan flushAnswer
}

type flushAnswer struct {
	gone []string
	err  error
}

func (s *batchStore) FlushStreaming(_ context.Context, batch []datachat.StreamingFlush) ([]string, error) {
	s.batches <- batch
	a := <-s.answers
	return a.gone, a.err
}

// streamingTurns starts n streaming turns of r, messages m0, m1, …
func streamingTurns(r *Runner, n int) ([]*turn, []func()) {
	var turns []*turn
	var stops []func()
	for i := range n {
		t := &turn{r: r, msg: &datachat.Message{ID: fmt.Sprintf("m%d", i)}}
		turns = append(turns, t)
		stops = append(stops, r.startStreaming(t))
	}
	return turns, stops
}

// wantBatch fails unless a batch reads as want, by message: "first:text",
// then " lease" when it renews the lease.
func wantBatch(t *testing.T, what string, batch []datachat.StreamingFlush, want map[string]string) {
	t.Helper()
	if got := summary(batch); !maps.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func summary(batch []datachat.StreamingFlush) map[string]string {
	out := map[string]string{}
	for _, f := range batch {
		s := fmt.Sprint(f.First, ":", datachat.PartsText(f.Parts))
		if f.Lease != nil {
			s += " lease"
		}
		out[f.MessageID] = s
	}
	return out
}

// TestFlushBatchesTurns: the text and leases of all the streaming turns are
// written in one store call a second; while it runs, tokens still go
// through, and a turn that ends waits for the write holding its parts.
func TestFlushBatchesTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{batches: make(chan []datachat.StreamingFlush), answers: make(chan flushAnswer)}
		r := &Runner{Store: st, Logger: slog.New(slog.DiscardHandler), LeaseOwner: "me", LeaseTTL: 6 * time.Second}
		turns, stops := streamingTurns(r, 3)
		for _, tr := range turns {
			tr.token("a ")
		}
		start := time.Now()

		// One second on: one call for the three turns; no lease due yet
		// (renewed every 2 s).
		batch := <-st.batches
		if d := time.Since(start); d != time.Second {
			t.Errorf("first flush after %v, want 1s", d)
		}
		wantBatch(t, "first batch", batch, map[string]string{"m0": "0:a ", "m1": "0:a ", "m2": "0:a "})
		// The write is in flight: tokens still go through.
		turns[0].token("b ")
		turns[1].token("b ")
		// Turn 0 ends: it waits for the write holding its parts.
		stopped := make(chan struct{})
		go func() { stops[0](); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("a turn ended while a write of its parts was in flight")
		default:
		}
		st.answers <- flushAnswer{}
		<-stopped

		// Two seconds on: turn 1's new text, from part 1 (part 0 was taken
		// and stored), and the leases of the turns left.
		batch = <-st.batches
		wantBatch(t, "second batch", batch, map[string]string{"m1": "1:b  lease", "m2": "1: lease"})
		st.answers <- flushAnswer{}

		// Three seconds on: nothing new, no lease due: no call.
		// Four seconds on: the leases again.
		batch = <-st.batches
		if d := time.Since(start); d != 4*time.Second {
			t.Errorf("third flush after %v, want 4s", d)
		}
		wantBatch(t, "third batch", batch, map[string]string{"m1": "2: lease", "m2": "1: lease"})
		st.answers <- flushAnswer{}

		stops[1]()
		stops[2]() // the last turn: the flusher stops (synctest.Test fails if it lingers)
	})
}

// TestFlushRetries: what the store did not take is sent again at the next
// flush, under the same numbers; a message deleted meanwhile is written no
// more, and the other turns' writes go on.
func TestFlushRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{batches: make(chan []datachat.StreamingFlush), answers: make(chan flushAnswer)}
		r := &Runner{Store: st, Logger: slog.New(slog.DiscardHandler), LeaseOwner: "me", LeaseTTL: 3 * time.Second}
		turns, stops := streamingTurns(r, 2)
		turns[0].token("a ")
		turns[1].token("x ")

		batch := <-st.batches
		wantBatch(t, "first batch", batch, map[string]string{"m0": "0:a  lease", "m1": "0:x  lease"})
		turns[0].token("b ") // a new part: the one taken no longer grows
		st.answers <- flushAnswer{err: errors.New("database is locked")}

		batch = <-st.batches
		wantBatch(t, "after a failed write", batch, map[string]string{"m0": "0:a b  lease", "m1": "0:x  lease"})
		for _, f := range batch {
			if f.MessageID == "m0" && len(f.Parts) != 2 {
				t.Errorf("after a failed write: m0's parts %+v, want the one taken and the new one apart", f.Parts)
			}
		}
		st.answers <- flushAnswer{gone: []string{"m1"}}

		turns[0].token("c ")
		turns[1].token("y ")
		batch = <-st.batches
		wantBatch(t, "after m1 was deleted", batch, map[string]string{"m0": "2:c  lease"})
		st.answers <- flushAnswer{}

		for _, stop := range stops {
			stop()
		}
	})
}

// TestFlushBoundsItsBytes: a flush takes the text of turns until it holds
// maxFlushBytes; the turns left are written at the next second, and the
// leases due are renewed for all of them.
func TestFlushBoundsItsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchStore{batches: make(chan []datachat.StreamingFlush), answers: make(chan flushAnswer)}
		r := &Runner{Store: st, Logger: slog.New(slog.DiscardHandler), LeaseOwner: "me", LeaseTTL: 6 * time.Second}
		turns, stops := streamingTurns(r, 3)
		big := strings.Repeat("x", maxFlushBytes*3/4)
		for _, tr := range turns {
			tr.token(big)
		}
		batch := <-st.batches // one second on
		st.answers <- flushAnswer{}
		if len(batch) != 2 {
			t.Fatalf("first flush: %d turns, want 2 (their text reached the bound)", len(batch))
		}
		written := map[string]bool{}
		for _, f := range batch {
			written[f.MessageID] = true
			if datachat.PartsText(f.Parts) != big || f.Lease != nil {
				t.Errorf("first flush, %s: %d bytes, lease %v; want its text and no lease", f.MessageID, len(datachat.PartsText(f.Parts)), f.Lease)
			}
		}
		batch = <-st.batches // two seconds on: the third turn's text, and every lease
		st.answers <- flushAnswer{}
		for _, f := range batch {
			want := ""
			if !written[f.MessageID] {
				want = big
			}
			if datachat.PartsText(f.Parts) != want || f.Lease == nil {
				t.Errorf("second flush, %s: %d bytes, lease %v; want %d bytes and the lease", f.MessageID, len(datachat.PartsText(f.Parts)), f.Lease, len(want))
			}
		}
		if len(batch) != 3 {
			t.Errorf("second flush: %d turns, want 3", len(batch))
		}
		for _, stop := range stops {
			stop()
		}
	})
}
