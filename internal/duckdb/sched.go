package duckdb

import (
	"context"
	"sync"

	"datachat"
)

// scheduler decides which waiting query runs next, fairly between users:
// at most slots queries run at once, a user at most perUser of them, one
// query at a time per conversation (its worker runs one), and a free slot
// goes to the user with a query that can start who has the fewest running,
// then who was served longest ago — so one user's slow queries hold others
// back by no more than their own share.
// A user with perUserQueued queries waiting gets EBUSY for the next one; so
// does everyone when maxQueued wait in all.
//
// Uploads have slots of their own (Engine.Ingest), which queries never take,
// and while one converts it holds one of these slots too (reserve): queries
// then run one fewer at once, never fewer than one, so that an upload gets
// its share of the CPU however many queries wait, instead of a third of it
// beside two queries.
type scheduler struct {
	mu            sync.Mutex
	slots         int
	perUser       int
	perUserQueued int
	maxQueued     int

	reserved int // slots held by uploads converting now
	running  int
	queued   int
	seq      uint64 // counts arrivals and grants, to order them
	users    map[string]*userQueue
	busy     map[string]bool // conversations with a query running
	changed  func()          // called (under mu) whenever a query waits, starts or ends
	watch    chan struct{}   // for tests: what changed sends to
}

type userQueue struct {
	running    int
	waiting    []*ticket
	lastServed uint64 // seq of the user's last grant
}

type ticket struct {
	user, conv string
	seq        uint64        // arrival order
	ready      chan struct{} // closed when the ticket may run
	granted    bool
}

func newScheduler(slots, perUser, perUserQueued, maxQueued int) *scheduler {
	return &scheduler{
		slots: slots, perUser: perUser, perUserQueued: perUserQueued, maxQueued: maxQueued,
		users: map[string]*userQueue{}, busy: map[string]bool{},
	}
}

// acquire waits for the user's turn to run a query in conv. The returned
// release must be called when the query is done.
func (s *scheduler) acquire(ctx context.Context, user, conv string) (release func(), err error) {
	s.mu.Lock()
	u := s.users[user]
	if u == nil {
		u = &userQueue{}
		s.users[user] = u
	}
	switch {
	case len(u.waiting) >= s.perUserQueued:
		s.forgetLocked(user)
		s.mu.Unlock()
		return nil, datachat.Errorf(datachat.EBUSY, "You have %d SQL queries running and %d waiting, the most allowed; wait for them to finish, then try again.", u.running, len(u.waiting))
	case s.queued >= s.maxQueued:
		s.forgetLocked(user)
		s.mu.Unlock()
		return nil, datachat.Errorf(datachat.EBUSY, "The SQL engine is busy (%d queries running, %d waiting). Try again in a moment.", s.running, s.queued)
	}
	s.seq++
	t := &ticket{user: user, conv: conv, seq: s.seq, ready: make(chan struct{})}
	u.waiting = append(u.waiting, t)
	s.queued++
	s.dispatchLocked()
	s.changedLocked()
	s.mu.Unlock()

	release = func() { s.release(t) }
	select {
	case <-t.ready:
		return release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if t.granted {
		s.mu.Unlock()
		release()
		return nil, ctx.Err()
	}
	s.removeLocked(t)
	s.mu.Unlock()
	return nil, ctx.Err()
}

func (s *scheduler) release(t *ticket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.users[t.user].running--
	delete(s.busy, t.conv)
	s.forgetLocked(t.user)
	s.dispatchLocked()
	s.changedLocked()
}

func (s *scheduler) changedLocked() {
	if s.changed != nil {
		s.changed()
	}
}

// reserve holds n more slots for uploads (n < 0: gives them back). A
// query running keeps its slot: the next waiting query starts only once
// fewer than the slots left run.
func (s *scheduler) reserve(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved += n
	s.dispatchLocked()
	s.changedLocked()
}

// dispatchLocked starts waiting tickets while slots are free.
func (s *scheduler) dispatchLocked() {
	for s.running < s.slots-min(s.reserved, s.slots-1) {
		var best *userQueue
		var bestTicket int
		for _, u := range s.users {
			if u.running >= s.perUser {
				continue
			}
			i := s.startableLocked(u)
			if i < 0 {
				continue
			}
			if best == nil || u.running < best.running ||
				u.running == best.running && (u.lastServed < best.lastServed ||
					u.lastServed == best.lastServed && u.waiting[i].seq < best.waiting[bestTicket].seq) {
				best, bestTicket = u, i
			}
		}
		if best == nil {
			return
		}
		t := best.waiting[bestTicket]
		best.waiting = append(best.waiting[:bestTicket], best.waiting[bestTicket+1:]...)
		s.queued--
		s.running++
		best.running++
		s.seq++
		best.lastServed = s.seq
		s.busy[t.conv] = true
		t.granted = true
		close(t.ready)
	}
}

// startableLocked returns the index of the user's first waiting ticket whose
// conversation is free, or -1.
func (s *scheduler) startableLocked(u *userQueue) int {
	for i, t := range u.waiting {
		if !s.busy[t.conv] {
			return i
		}
	}
	return -1
}

// removeLocked takes a ticket that gave up out of its queue.
func (s *scheduler) removeLocked(t *ticket) {
	u := s.users[t.user]
	for i, w := range u.waiting {
		if w == t {
			u.waiting = append(u.waiting[:i], u.waiting[i+1:]...)
			s.queued--
			break
		}
	}
	s.forgetLocked(t.user)
	s.dispatchLocked()
	s.changedLocked()
}

// forgetLocked drops a user with nothing running or waiting, so the map does
// not grow with every user ever seen.
func (s *scheduler) forgetLocked(user string) {
	if u := s.users[user]; u != nil && u.running == 0 && len(u.waiting) == 0 {
		delete(s.users, user)
	}
}

// load reports queries waiting and running.
func (s *scheduler) load() (queued, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued, s.running
}
