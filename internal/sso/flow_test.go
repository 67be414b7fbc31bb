package sso

import (
	"errors"
	"testing"

	"datachat/internal/sso/ssotest"
)

func TestUsedStates(t *testing.T) {
	u := newUsedStates(2)
	for _, step := range []struct {
		state    string
		exp, now int64
		want     error
	}{
		{"a", 100, 0, nil},
		{"a", 100, 1, errStateUsed},
		{"b", 200, 1, nil},
		{"c", 200, 2, errStateFull},
		{"c", 200, 100, nil}, // a expired: forgotten
		{"d", 300, 101, errStateFull},
		{"d", 300, 200, nil}, // b and c expired
	} {
		if err := u.add(step.state, step.exp, step.now); !errors.Is(err, step.want) {
			t.Errorf("add %s at %d: got %v, want %v", step.state, step.now, err, step.want)
		}
	}
	if len(u.exp) != 1 {
		t.Errorf("%d states remembered, want 1", len(u.exp))
	}

	// Sweeps are sweepEvery apart: a full set is not walked on every add.
	u = newUsedStates(1)
	if err := u.add("a", 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := u.add("b", 100, sweepEvery-1); !errors.Is(err, errStateFull) {
		t.Errorf("b before the next sweep: got %v, want %v", err, errStateFull)
	}
	if err := u.add("b", 100, sweepEvery); err != nil {
		t.Errorf("b at the next sweep: got %v", err)
	}
}

// With the set of used states full, a sign-in is refused as busy; when the
// flows in it expire, sign-in works again.
func TestUsedStatesFull(t *testing.T) {
	p := ssotest.Start(t)
	r := newRP(t, p)
	r.h.used = newUsedStates(1)
	wantSignedIn(t, newBrowser(t).signIn(r))
	r.signed.Store(0)
	r.wantRefused(t, newBrowser(t).signIn(r), msgBusy, "the set of used states is full")
	r.clock.Advance(flowTTL)
	wantSignedIn(t, newBrowser(t).signIn(r))
}
