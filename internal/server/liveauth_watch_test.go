package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/sqlite"
	"datachat/internal/sqlite/sqlitetest"
)

// keyOf stores an API key for the user name and returns its credential.
func keyOf(t *testing.T, st *sqlite.Store, name string) datachat.Credential {
	t.Helper()
	u, err := st.EnsureUser(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	_, hash, prefix := datachat.NewAPIKeySecret()
	if err := st.CreateAPIKey(t.Context(), &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	_, cred, err := st.Authenticate(t.Context(), hash)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// TestLiveAuthChecksEveryInterval: in a bubble whose clock only moves when
// every goroutine waits, a key revoked in the store (a real SQLite file)
// ends its requests at the watcher's next turn, not before, and only
// theirs; with no request left the watcher ends at its next turn.
func TestLiveAuthChecksEveryInterval(t *testing.T) {
	st := sqlitetest.Open(t)
	alice, alice2, bob := keyOf(t, st, "alice"), keyOf(t, st, "alice"), keyOf(t, st, "bob")
	synctest.Test(t, func(t *testing.T) {
		const interval = 500 * time.Millisecond
		l := newLiveAuth(st.RevokedCredentials, interval, slog.New(slog.DiscardHandler))
		var checks atomic.Int32
		l.checked = func(n int) {
			checks.Add(1)
		}
		a := l.track(alice)
		a2 := l.track(alice)
		other := l.track(alice2)
		b := l.track(bob)
		if err := st.RevokeAPIKey(context.Background(), alice.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval - time.Millisecond)
		synctest.Wait()
		if a.err() != nil || checks.Load() != 0 {
			t.Fatalf("before the first turn: revoked %v after %d checks", a.err(), checks.Load())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		for _, g := range []*grant{a, a2} {
			if err := g.err(); !errors.Is(err, datachat.ErrAPIKeyRevoked) {
				t.Errorf("at the first turn: the revoked key's request has %v, want ErrAPIKeyRevoked", err)
			}
		}
		if other.err() != nil || b.err() != nil {
			t.Errorf("other keys' requests ended: %v, %v", other.err(), b.err())
		}
		// The revoked credential is no longer looked up: its requests are
		// done; the others stay live over many turns.
		time.Sleep(10 * interval)
		synctest.Wait()
		if other.err() != nil || b.err() != nil || checks.Load() != 11 {
			t.Errorf("after 11 turns: %v, %v, %d checks", other.err(), b.err(), checks.Load())
		}
		for _, g := range []*grant{a, a2, other, b} {
			l.release(g)
		}
		// Released, the requests leave no watcher: it ends at its next
		// turn, and Wait returns only once its goroutine has ended (else the
		// bubble deadlocks).
		l.watcher.Wait()
		time.Sleep(10 * interval)
		if checks.Load() != 11 {
			t.Errorf("checks with no request live: %d", checks.Load()-11)
		}
	})
}

// TestLiveAuthRevokeInProcess: Revoke and RevokeUser act without any time
// passing, on the credential or user they name only.
func TestLiveAuthRevokeInProcess(t *testing.T) {
	st := sqlitetest.Open(t)
	alice, alice2, bob := keyOf(t, st, "alice"), keyOf(t, st, "alice"), keyOf(t, st, "bob")
	synctest.Test(t, func(t *testing.T) {
		l := newLiveAuth(st.RevokedCredentials, time.Hour, slog.New(slog.DiscardHandler))
		a, a2, b := l.track(alice), l.track(alice2), l.track(bob)
		ctx, g, release := l.bind(context.Background(), bob)
		if grantFrom(ctx) != g || revocation(ctx) != nil {
			t.Fatalf("bound context: grant %v, revocation %v", grantFrom(ctx), revocation(ctx))
		}
		if n := l.revoke(alice, datachat.ErrAPIKeyRevoked); n != 1 || !errors.Is(a.err(), datachat.ErrAPIKeyRevoked) || a2.err() != nil || b.err() != nil {
			t.Errorf("revoke: %d ended; %v %v %v", n, a.err(), a2.err(), b.err())
		}
		disabled := datachat.Errorf(datachat.EUNAUTHORIZED, "Your account was disabled.")
		if n := l.revokeUser(bob.UserID, disabled); n != 2 || b.err() != disabled || a2.err() != nil {
			t.Errorf("revokeUser: %d ended; %v %v", n, b.err(), a2.err())
		}
		// The bound request's context ends with the reason as its cause.
		<-ctx.Done()
		if context.Cause(ctx) != disabled || revocation(ctx) != disabled {
			t.Errorf("bound context: cause %v, revocation %v", context.Cause(ctx), revocation(ctx))
		}
		release()
		l.release(a2)
		l.release(a) // already gone: nothing happens
		l.watcher.Wait()
	})
}

// TestLiveAuthStoreFailure: while the store cannot answer nothing is cut
// and one warning is logged; once it answers, revocations apply again.
func TestLiveAuthStoreFailure(t *testing.T) {
	st := sqlitetest.Open(t)
	alice := keyOf(t, st, "alice")
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		check := func(ctx context.Context, creds []datachat.Credential) ([]datachat.Revocation, error) {
			if down.Load() {
				return nil, datachat.StoreUnavailable(errors.New("connection refused"))
			}
			return st.RevokedCredentials(ctx, creds)
		}
		logs := &logWatch{}
		warned := logs.watch("cannot check whether the credentials of open requests were revoked; they go on until the store answers")
		var warnings atomic.Int32
		counted := &countingHandler{Handler: logs, n: &warnings}
		const interval = 100 * time.Millisecond
		l := newLiveAuth(check, interval, slog.New(counted))
		g := l.track(alice)
		if err := st.RevokeAPIKey(context.Background(), alice.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * interval)
		synctest.Wait()
		<-warned
		if g.err() != nil || warnings.Load() != 1 {
			t.Errorf("with the store down: revoked %v, %d warnings; want nothing cut, one warning", g.err(), warnings.Load())
		}
		down.Store(false)
		time.Sleep(interval)
		synctest.Wait()
		if !errors.Is(g.err(), datachat.ErrAPIKeyRevoked) {
			t.Errorf("with the store back: %v, want ErrAPIKeyRevoked", g.err())
		}
		l.release(g)
		l.watcher.Wait()
	})
}

// countingHandler counts the warnings logged through it.
type countingHandler struct {
	slog.Handler
	n *atomic.Int32
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

// TestLiveAuthStop: stop ends the watcher with requests still live, waits
// for it, and no later request starts another.
func TestLiveAuthStop(t *testing.T) {
	st := sqlitetest.Open(t)
	alice := keyOf(t, st, "alice")
	synctest.Test(t, func(t *testing.T) {
		l := newLiveAuth(st.RevokedCredentials, 100*time.Millisecond, slog.New(slog.DiscardHandler))
		var checks atomic.Int32
		l.checked = func(int) { checks.Add(1) }
		l.track(alice)
		time.Sleep(250 * time.Millisecond)
		l.stop()
		l.track(alice)
		time.Sleep(time.Second)
		synctest.Wait()
		if checks.Load() != 2 {
			t.Errorf("%d checks, want the 2 before stop", checks.Load())
		}
	})
}

// TestLiveAuthConcurrent tracks, releases and revokes from many goroutines
// at once (run it with -race): every request of a revoked credential ends
// with the reason, and no other.
func TestLiveAuthConcurrent(t *testing.T) {
	st := sqlitetest.Open(t)
	var creds []datachat.Credential
	for _, name := range []string{"a", "b", "c", "d"} {
		creds = append(creds, keyOf(t, st, name), keyOf(t, st, name))
	}
	l := newLiveAuth(st.RevokedCredentials, time.Millisecond, slog.New(slog.DiscardHandler))
	defer l.stop()
	revoked := map[datachat.Credential]bool{creds[0]: true, creds[3]: true, creds[6]: true}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		grants []*grant
	)
	start := make(chan struct{})
	for i := range 200 {
		wg.Go(func() {
			<-start
			g := l.track(creds[i%len(creds)])
			if i%5 == 0 {
				l.release(g) // a short request
				return
			}
			mu.Lock()
			grants = append(grants, g)
			mu.Unlock()
		})
	}
	for c := range revoked {
		wg.Go(func() {
			<-start
			if c == creds[6] {
				if err := st.RevokeAPIKey(context.Background(), c.ID); err != nil {
					t.Error(err)
				}
				return // the watcher finds it
			}
			l.revoke(c, datachat.ErrAPIKeyRevoked)
		})
	}
	close(start)
	wg.Wait()
	// The in-process revocations raced the tracking: a request registered
	// after one is left to the watcher, as one authenticated before a
	// revocation and registered after is. Revoke them in the store too, and
	// wait for every request of a revoked key to end.
	for c := range revoked {
		if err := st.RevokeAPIKey(context.Background(), c.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range grants {
		if !revoked[g.cred] {
			continue
		}
		select {
		case <-g.ctx.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("a request of revoked key %s still live", g.cred.ID)
		}
		if !errors.Is(g.err(), datachat.ErrAPIKeyRevoked) {
			t.Errorf("ended with %v", g.err())
		}
	}
	for _, g := range grants {
		if !revoked[g.cred] && g.err() != nil {
			t.Errorf("a request of key %s, not revoked, ended: %v", g.cred.ID, g.err())
		}
		l.release(g)
	}
}

func TestCloseReasonFitsAFrame(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"The API key was revoked. Use another key.", "The API key was revoked. Use another key."},
		{strings.Repeat("x", 123), strings.Repeat("x", 123)},
		{strings.Repeat("x", 130), strings.Repeat("x", 123)},
		{strings.Repeat("x", 122) + "é", strings.Repeat("x", 122)}, // é takes bytes 123 and 124
	} {
		if got := closeReason(tc.in); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("closeReason(%d bytes): got %d bytes %q", len(tc.in), len(got), got)
		}
	}
}

// What being live under a credential adds to every authenticated request:
// bind and release, one request at a time (the watcher starts and stops
// with each) and from many goroutines at once (one watcher, one lock).
//
//	go test -run '^$' -bench LiveAuthBind ./internal/server
func BenchmarkLiveAuthBind(b *testing.B) {
	never := func(context.Context, []datachat.Credential) ([]datachat.Revocation, error) { return nil, nil }
	cred := datachat.Credential{Kind: datachat.CredentialAPIKey, ID: "k", UserID: "u"}
	b.Run("sequential", func(b *testing.B) {
		l := newLiveAuth(never, time.Hour, slog.New(slog.DiscardHandler))
		defer l.stop()
		for b.Loop() {
			_, _, release := l.bind(context.Background(), cred)
			release()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := newLiveAuth(never, time.Hour, slog.New(slog.DiscardHandler))
		defer l.stop()
		l.track(cred) // a long request keeps the watcher up
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _, release := l.bind(context.Background(), cred)
				release()
			}
		})
	})
}
