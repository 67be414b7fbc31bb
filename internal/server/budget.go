package server

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"datachat"
	"datachat/internal/tools"
)

// budget is a per-user allowance of one kind of expensive request: n a period,
// refilled evenly, with bursts of up to a quarter of n at once. It counts in
// this process's memory (the chat's DATACHAT_RATE_LIMIT_RPM counts in the
// database instead).
type budget struct {
	what  string        // "SQL queries", for the refusal
	n     int           // requests a period; 0: no budget
	per   time.Duration // the period
	burst int
	now   func() time.Time

	mu        sync.Mutex
	users     map[string]*allowance
	lastSweep time.Time
}

type allowance struct {
	lim  *rate.Limiter
	last time.Time // last request
}

// newBudget returns the budget of n requests per period; n ≤ 0: none.
func newBudget(what string, n int, per time.Duration) *budget {
	return &budget{what: what, n: n, per: per, burst: max(1, n/4), now: time.Now, users: map[string]*allowance{}}
}

// full is how long an unused allowance takes to refill completely: after it,
// a user's allowance is the same as a new one and can be forgotten.
func (b *budget) full() time.Duration {
	return time.Duration(b.burst) * b.per / time.Duration(b.n)
}

// take spends one request of the user's allowance, or returns a rate_limited
// error saying the limit and when to try again.
func (b *budget) take(userID string) error {
	if b == nil || b.n <= 0 {
		return nil
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastSweep) >= b.full() {
		b.sweep(now)
	}
	a := b.users[userID]
	if a == nil {
		a = &allowance{lim: rate.NewLimiter(rate.Every(b.per/time.Duration(b.n)), b.burst)}
		b.users[userID] = a
	}
	a.last = now
	r := a.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	r.CancelAt(now)
	return &datachat.Error{
		Code: datachat.ERATELIMIT,
		Message: fmt.Sprintf("Too many %s: the limit is %d %s per user, at most %d at once. Try again in %d s.",
			b.what, b.n, periodName(b.per), b.burst, retryAfterSeconds(wait)),
		RetryAfter: wait,
	}
}

// sweep forgets the users whose allowance has refilled: the map holds only
// users active within the last refill time.
func (b *budget) sweep(now time.Time) {
	for id, a := range b.users {
		if now.Sub(a.last) >= b.full() {
			delete(b.users, id)
		}
	}
	b.lastSweep = now
}

// size is how many users the budget remembers.
func (b *budget) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.users)
}

func periodName(d time.Duration) string {
	switch d {
	case time.Minute:
		return "a minute"
	case time.Hour:
		return "an hour"
	}
	return "every " + d.String()
}

// budgets are the server's per-user budgets.
type budgets struct {
	sql, search, uploads *budget
}

// Charge spends one of the user's allowance of b: execute_sql spends the
// SQL budget, search_documents the search budget, load_dataset the
// uploads budget (tools.BudgetOf). The catalog charges it for each tool
// call — the chat's (WebSocket, /v1, /chat/query) and MCP's alike.
func (b *budgets) Charge(userID string, bud tools.Budget) error {
	switch bud {
	case tools.SQLBudget:
		return b.sql.take(userID)
	case tools.SearchBudget:
		return b.search.take(userID)
	case tools.UploadBudget:
		return b.uploads.take(userID)
	}
	return nil
}
