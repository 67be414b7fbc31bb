package duckdb

import (
	"context"
	"testing"
	"time"

	"datachat"
)

// grant tries to take a turn for user in conv and reports on ch when it got
// one; release ends it.
type turn struct {
	user, conv string
	got        chan func()
	err        chan error
}

func take(s *scheduler, ctx context.Context, user, conv string) *turn {
	tr := &turn{user: user, conv: conv, got: make(chan func(), 1), err: make(chan error, 1)}
	go func() {
		release, err := s.acquire(ctx, user, conv)
		if err != nil {
			tr.err <- err
			return
		}
		tr.got <- release
	}()
	return tr
}

// granted waits for the turn to start, bounded so a broken scheduler fails
// rather than hangs.
func (tr *turn) granted(t *testing.T) func() {
	t.Helper()
	select {
	case r := <-tr.got:
		return r
	case err := <-tr.err:
		t.Fatalf("%s/%s: %v", tr.user, tr.conv, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s/%s never got a turn", tr.user, tr.conv)
	}
	return nil
}

func (tr *turn) waiting(t *testing.T) {
	t.Helper()
	select {
	case <-tr.got:
		t.Fatalf("%s/%s got a turn it should wait for", tr.user, tr.conv)
	case err := <-tr.err:
		t.Fatalf("%s/%s: %v", tr.user, tr.conv, err)
	default:
	}
}

// queued waits until n tickets wait in s, checking at each change.
func queued(t *testing.T, s *scheduler, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if q, _ := s.load(); q == n {
			return
		}
		select {
		case <-s.watch:
		case <-deadline:
			t.Fatalf("timed out waiting for %d to wait", n)
		}
	}
}

// newWatched is a scheduler whose changes tests can wait on.
func newWatched(slots, perUser, perUserQueued, maxQueued int) *scheduler {
	s := newScheduler(slots, perUser, perUserQueued, maxQueued)
	s.watch = make(chan struct{}, 1)
	s.changed = func() {
		select {
		case s.watch <- struct{}{}:
		default:
		}
	}
	return s
}

// TestSchedulerFair: a user with many queries waiting does not keep another
// from the next free slot; a conversation runs one query at a time; a user
// never holds more than their share of slots.
func TestSchedulerFair(t *testing.T) {
	s := newWatched(2, 1, 10, 100)
	ctx := context.Background()
	a1 := take(s, ctx, "alice", "a1")
	releaseA1 := a1.granted(t)
	// alice is at her share (1 of 2 slots): her next queries wait even with
	// a slot free.
	a2 := take(s, ctx, "alice", "a2")
	queued(t, s, 1)
	a3 := take(s, ctx, "alice", "a3")
	queued(t, s, 2)
	a2.waiting(t)
	// bob takes the free slot at once.
	b1 := take(s, ctx, "bob", "b1")
	releaseB1 := b1.granted(t)
	// carol queues behind; when alice's query ends, the slot goes to carol,
	// whose turn comes before alice's second query.
	c1 := take(s, ctx, "carol", "c1")
	queued(t, s, 3)
	releaseA1()
	releaseC1 := c1.granted(t)
	a2.waiting(t)
	releaseB1()
	releaseA2 := a2.granted(t)
	a3.waiting(t) // alice has one running
	releaseC1()
	a3.waiting(t) // still at her share
	releaseA2()
	a3.granted(t)()

	// One query at a time per conversation, even for one user with room.
	s = newWatched(4, 4, 10, 100)
	x1 := take(s, ctx, "dave", "x")
	releaseX1 := x1.granted(t)
	x2 := take(s, ctx, "dave", "x")
	y := take(s, ctx, "dave", "y")
	y.granted(t)()
	x2.waiting(t)
	releaseX1()
	x2.granted(t)()
}

// TestSchedulerLimits: a user's waiting queries are capped (EBUSY for the
// next, at once), others are not affected, and a caller that gives up leaves
// the queue.
func TestSchedulerLimits(t *testing.T) {
	s := newWatched(1, 1, 2, 100)
	ctx := context.Background()
	release := take(s, ctx, "alice", "a0").granted(t)
	gone, cancel := context.WithCancel(ctx)
	a1 := take(s, gone, "alice", "a1")
	queued(t, s, 1)
	a2 := take(s, ctx, "alice", "a2")
	queued(t, s, 2)
	if _, err := s.acquire(ctx, "alice", "a3"); datachat.ErrorCode(err) != datachat.EBUSY {
		t.Errorf("third waiting query: got %v, want EBUSY", err)
	} else {
		t.Logf("%s", datachat.ErrorMessage(err))
	}
	b := take(s, ctx, "bob", "b")
	queued(t, s, 3)
	cancel()
	if err := <-a1.err; err != context.Canceled {
		t.Errorf("cancelled wait: got %v", err)
	}
	queued(t, s, 2)
	release()
	// bob's turn comes before alice's next.
	b.granted(t)()
	a2.granted(t)()
	if q, r := s.load(); q != 0 || r != 0 {
		t.Errorf("left: %d waiting, %d running", q, r)
	}
	if len(s.users) != 0 {
		t.Errorf("users remembered after their queries: %v", s.users)
	}

	s = newWatched(1, 1, 10, 1)
	release = take(s, ctx, "alice", "a").granted(t)
	take(s, ctx, "bob", "b")
	queued(t, s, 1)
	if _, err := s.acquire(ctx, "carol", "c"); datachat.ErrorCode(err) != datachat.EBUSY {
		t.Errorf("full queue: got %v, want EBUSY", err)
	}
	release()
}

// TestSchedulerReserve: while an upload holds a slot, queries run one fewer
// at once (a running query keeps its slot; the next waits), never fewer than
// one; the slot given back starts the next waiting query.
func TestSchedulerReserve(t *testing.T) {
	s := newWatched(2, 2, 10, 100)
	ctx := context.Background()
	a := take(s, ctx, "alice", "a").granted(t)
	s.reserve(1)
	b := take(s, ctx, "bob", "b")
	queued(t, s, 1)
	b.waiting(t)
	if _, r := s.load(); r != 1 {
		t.Fatalf("%d running, want 1 beside the upload", r)
	}
	s.reserve(-1)
	releaseB := b.granted(t)
	// Reserved while both slots run: both keep them; the next query waits
	// for both to end, as one of them leaves the upload its slot.
	s.reserve(1)
	c := take(s, ctx, "carol", "c")
	queued(t, s, 1)
	a()
	c.waiting(t)
	releaseB()
	releaseC := c.granted(t)
	// However many uploads hold slots, one query runs.
	s.reserve(5)
	releaseC()
	d := take(s, ctx, "dave", "d")
	d.granted(t)()
	s.reserve(-6)
	if q, r := s.load(); q != 0 || r != 0 || s.reserved != 0 {
		t.Errorf("left: %d waiting, %d running, %d reserved", q, r, s.reserved)
	}

	// One slot: an upload never takes the last.
	s = newWatched(1, 1, 10, 100)
	s.reserve(1)
	take(s, ctx, "alice", "a").granted(t)()
}
