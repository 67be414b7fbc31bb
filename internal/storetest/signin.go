package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

func testPasswordChangeEndsSessions(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	_, a1 := mustSession(t, s, alice.ID, "sess-a1", base)
	_, a2 := mustSession(t, s, alice.ID, "sess-a2", base)
	_, b1 := mustSession(t, s, bob.ID, "sess-b1", base)
	key := mustKey(t, s, alice, "key-alice")
	mustInvite(t, s, alice.ID, "invite", base.Add(time.Hour))
	if _, err := s.UseInvite(ctx, "invite", "$new", base.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"sess-a1", "sess-a2"} {
		_, _, err := s.AuthenticateSession(ctx, h, base.Add(2*time.Second), time.Hour)
		wantErr(t, "a session of before the password change", err, datachat.ErrSessionEnded)
	}
	if _, _, err := s.AuthenticateSession(ctx, "sess-b1", base.Add(2*time.Second), time.Hour); err != nil {
		t.Errorf("another user's session: %v", err)
	}
	// API keys are not passwords: they stay until revoked.
	if _, _, err := s.Authenticate(ctx, "key-alice"); err != nil {
		t.Errorf("alice's key after the password change: %v", err)
	}
	wantRevoked(t, "after the password change", s, []datachat.Credential{a1, a2, b1, key},
		map[string]*datachat.Error{a1.ID: datachat.ErrSessionEnded, a2.ID: datachat.ErrSessionEnded})
}

func testSessions(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	sess := &datachat.Session{UserID: alice.ID, Hash: "sess-1", Method: "oidc", CreatedAt: base}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if sess.ID == "" {
		t.Errorf("CreateSession: no ID")
	}
	checkTime(t, "session CreatedAt", sess.CreatedAt, base)
	checkTime(t, "session LastSeenAt", sess.LastSeenAt, base)
	a, cred, err := s.AuthenticateSession(ctx, "sess-1", base.Add(time.Second), time.Hour)
	if err != nil {
		t.Fatalf("AuthenticateSession: %v", err)
	}
	if a.ID != alice.ID || a.Name != "alice" || a.Role != datachat.RoleMember {
		t.Errorf("AuthenticateSession: account %+v, want alice", a)
	}
	equal(t, "AuthenticateSession's credential", cred, datachat.Credential{Kind: datachat.CredentialSession, ID: sess.ID, UserID: alice.ID})

	for _, h := range []string{"", "sess-2", "SESS-1"} {
		_, _, err := s.AuthenticateSession(ctx, h, base.Add(time.Second), time.Hour)
		wantErr(t, fmt.Sprintf("AuthenticateSession(%q)", h), err, datachat.ErrSessionEnded)
	}
	wantCode(t, "CreateSession with an unknown method", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Hash: "x", Method: "api_key"}), datachat.EINVALID)
	wantCode(t, "CreateSession without a method", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Hash: "x"}), datachat.EINVALID)
	wantCode(t, "CreateSession without a hash", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Method: "password"}), datachat.EINVALID)
	wantCode(t, "CreateSession of an unknown user", s.CreateSession(ctx,
		&datachat.Session{UserID: "no-such-user", Hash: "x", Method: "password"}), datachat.ENOTFOUND)
	wantCode(t, "CreateSession with a used hash", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Hash: "sess-1", Method: "password"}), datachat.ECONFLICT)

	// Two sessions (two browsers): signing out of one keeps the other.
	_, other := mustSession(t, s, alice.ID, "sess-2", base)
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, _, err = s.AuthenticateSession(ctx, "sess-1", base.Add(time.Second), time.Hour)
	wantErr(t, "AuthenticateSession after DeleteSession", err, datachat.ErrSessionEnded)
	if _, c, err := s.AuthenticateSession(ctx, "sess-2", base.Add(time.Second), time.Hour); err != nil || c != other {
		t.Errorf("the other session: %+v, %v", c, err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Errorf("DeleteSession of a session gone: %v", err)
	}
	if err := s.DeleteSession(ctx, "no-such-session"); err != nil {
		t.Errorf("DeleteSession of an unknown id: %v", err)
	}
}

func testSessionIdle(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	const idle = time.Hour
	mustSession(t, s, alice.ID, "sess", base)
	auth := func(at time.Duration) error {
		t.Helper()
		_, _, err := s.AuthenticateSession(ctx, "sess", base.Add(at), idle)
		return err
	}
	// Used within the idle time, again and again: it lasts far beyond it.
	for _, at := range []time.Duration{2 * time.Minute, idle, 2 * idle, 3*idle - time.Minute} {
		if err := auth(at); err != nil {
			t.Fatalf("AuthenticateSession at +%v: %v", at, err)
		}
	}
	if got := account(t, s, alice.ID).LastSeenAt; got == nil || !got.Equal(base.Add(3*idle-time.Minute).UTC().Truncate(time.Microsecond)) {
		t.Errorf("LastSeenAt after the session's uses: %v, want +%v", got, 3*idle-time.Minute)
	}
	// Unused for longer than idle: ended, and deleted, so that an earlier
	// clock does not bring it back.
	wantErr(t, "AuthenticateSession after the idle time", auth(4*idle), datachat.ErrSessionEnded)
	wantErr(t, "AuthenticateSession with an earlier clock after it idled out", auth(3*idle), datachat.ErrSessionEnded)

	// An idle of 0 never ends a session.
	mustSession(t, s, alice.ID, "forever", base)
	if _, _, err := s.AuthenticateSession(ctx, "forever", base.Add(1000*24*time.Hour), 0); err != nil {
		t.Errorf("AuthenticateSession with idle 0 after 1000 days: %v", err)
	}
	// Uses within a minute are written once: a use 30 s after the last
	// written one does not move LastSeenAt.
	mustSession(t, s, alice.ID, "often", base)
	if _, _, err := s.AuthenticateSession(ctx, "often", base.Add(30*time.Second), idle); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.AuthenticateSession(ctx, "often", base.Add(idle+time.Second), idle)
	wantErr(t, "a session whose uses within a minute went unwritten, after the idle time from the written one", err, datachat.ErrSessionEnded)
}

func testSessionCredentials(t *testing.T, s datachat.Store) {
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	_, a := mustSession(t, s, alice.ID, "sess-a", base)
	_, b := mustSession(t, s, bob.ID, "sess-b", base)
	key := mustKey(t, s, alice, "key-a")
	wantRevoked(t, "sessions and a key, all valid", s, []datachat.Credential{a, b, key}, nil)
	stolen := datachat.Credential{Kind: datachat.CredentialSession, ID: b.ID, UserID: alice.ID}
	unknown := datachat.Credential{Kind: datachat.CredentialSession, ID: "no-such-session", UserID: alice.ID}
	// A session id given as an API key's is not the key.
	asKey := datachat.Credential{Kind: datachat.CredentialAPIKey, ID: a.ID, UserID: alice.ID}
	asSession := datachat.Credential{Kind: datachat.CredentialSession, ID: key.ID, UserID: alice.ID}
	got := revocations(t, s, stolen, unknown, asKey, asSession, a)
	for _, c := range []datachat.Credential{stolen, unknown, asSession} {
		if !errors.Is(got[c.ID], datachat.ErrSessionEnded) {
			t.Errorf("RevokedCredentials of %+v: %v, want ErrSessionEnded", c, got[c.ID])
		}
	}
	if !errors.Is(got[asKey.ID], datachat.ErrAPIKeyRevoked) && !errors.Is(got[asKey.ID], datachat.ErrSessionEnded) {
		t.Errorf("RevokedCredentials of a session's id as a key: %v, want it revoked", got[asKey.ID])
	}
	if err := s.DeleteSession(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	wantRevoked(t, "after signing out", s, []datachat.Credential{a, b, key}, map[string]*datachat.Error{a.ID: datachat.ErrSessionEnded})
	// A credential of a user who never existed.
	ghost := datachat.Credential{Kind: datachat.CredentialSession, ID: b.ID, UserID: "no-such-user"}
	wantRevoked(t, "a credential of an unknown user", s, []datachat.Credential{ghost}, map[string]*datachat.Error{b.ID: datachat.ErrUserDisabled})
	_, err := s.RevokedCredentials(t.Context(), []datachat.Credential{{Kind: "cookie", ID: "x", UserID: alice.ID}})
	wantCode(t, "RevokedCredentials of an unknown kind", err, datachat.EINVALID)
}

func testIdentities(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	id := datachat.Identity{Issuer: "https://idp.example.com", Subject: "248289761001", Email: "alice@example.com"}
	_, err := s.AccountByIdentity(ctx, id)
	wantCode(t, "AccountByIdentity before LinkIdentity", err, datachat.ENOTFOUND)
	if a := account(t, s, alice.ID); a.SSO {
		t.Errorf("SSO before LinkIdentity")
	}
	if err := s.LinkIdentity(ctx, alice.ID, id); err != nil {
		t.Fatalf("LinkIdentity: %v", err)
	}
	a, err := s.AccountByIdentity(ctx, id)
	if err != nil {
		t.Fatalf("AccountByIdentity: %v", err)
	}
	if a.ID != alice.ID || !a.SSO || a.Email != "alice@example.com" {
		t.Errorf("AccountByIdentity: %+v, want alice with SSO and her email", a)
	}
	// Found by issuer and subject only: the email may change.
	if a, err := s.AccountByIdentity(ctx, datachat.Identity{Issuer: id.Issuer, Subject: id.Subject, Email: "other@example.com"}); err != nil || a.ID != alice.ID {
		t.Errorf("AccountByIdentity with another email: %+v, %v", a, err)
	}
	for _, other := range []datachat.Identity{
		{Issuer: "https://idp.example.com/", Subject: id.Subject},
		{Issuer: "https://evil.example.com", Subject: id.Subject},
		{Issuer: id.Issuer, Subject: id.Subject + " "},
		{Issuer: id.Issuer, Subject: "\xff"},
		{Issuer: id.Issuer, Subject: "a\x00b"},
		{Issuer: id.Issuer, Subject: ""},
	} {
		_, err := s.AccountByIdentity(ctx, other)
		wantCode(t, fmt.Sprintf("AccountByIdentity(%q, %q)", other.Issuer, other.Subject), err, datachat.ENOTFOUND)
	}
	// Linking again keeps the newest email, on the account too.
	id.Email = "alice@new.example.com"
	if err := s.LinkIdentity(ctx, alice.ID, id); err != nil {
		t.Fatalf("LinkIdentity again: %v", err)
	}
	if a := account(t, s, alice.ID); a.Email != "alice@new.example.com" {
		t.Errorf("Email after linking again: %q", a.Email)
	}
	// One identity, one user.
	wantCode(t, "LinkIdentity of alice's identity to bob", s.LinkIdentity(ctx, bob.ID,
		datachat.Identity{Issuer: id.Issuer, Subject: id.Subject, Email: "bob@example.com"}), datachat.ECONFLICT)
	if a, _ := s.AccountByIdentity(ctx, id); a == nil || a.ID != alice.ID || a.Email != "alice@new.example.com" {
		t.Errorf("after a refused link to bob: %+v, want alice's unchanged", a)
	}
	if b := account(t, s, bob.ID); b.SSO || b.Email != "" {
		t.Errorf("bob after a refused link: %+v", b)
	}
	// The same subject at another issuer is another person.
	if err := s.LinkIdentity(ctx, bob.ID, datachat.Identity{Issuer: "https://other.example.com", Subject: id.Subject}); err != nil {
		t.Errorf("LinkIdentity of the same subject at another issuer: %v", err)
	}
	// An empty email leaves the account's as it is.
	if err := s.LinkIdentity(ctx, alice.ID, datachat.Identity{Issuer: id.Issuer, Subject: id.Subject}); err != nil {
		t.Fatal(err)
	}
	if a := account(t, s, alice.ID); a.Email != "alice@new.example.com" {
		t.Errorf("Email after linking without one: %q, want the last one given", a.Email)
	}
	wantCode(t, "LinkIdentity of an unknown user", s.LinkIdentity(ctx, "no-such-user",
		datachat.Identity{Issuer: "https://x", Subject: "1"}), datachat.ENOTFOUND)
	for _, bad := range []datachat.Identity{{Subject: "1"}, {Issuer: "https://x"}, {Issuer: "https://x", Subject: "a\x00"},
		{Issuer: "https://x", Subject: "1", Email: "\xff@x"}} {
		wantCode(t, fmt.Sprintf("LinkIdentity(%+q)", bad), s.LinkIdentity(ctx, alice.ID, bad), datachat.EINVALID)
	}
	// A new account from single sign-on keeps the email it was given.
	carol := &datachat.Account{User: datachat.User{Name: "carol"}, Role: datachat.RoleMember, Email: "carol@example.com"}
	if err := s.CreateAccount(ctx, carol); err != nil {
		t.Fatal(err)
	}
	if err := s.LinkIdentity(ctx, carol.ID, datachat.Identity{Issuer: id.Issuer, Subject: "carol-1", Email: "carol@example.com"}); err != nil {
		t.Fatal(err)
	}
	carol.SSO = true
	equal(t, "an account from single sign-on", account(t, s, carol.ID), carol)
}

func testTakeAttempt(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	const window, limit = 15 * time.Minute, 3
	t0 := base
	take := func(key string, at time.Time, wantOK bool, wantRetry time.Duration) {
		t.Helper()
		ok, retry, err := s.TakeAttempt(ctx, key, at, window, limit)
		if err != nil {
			t.Fatalf("TakeAttempt(%q) at +%v: %v", key, at.Sub(t0), err)
		}
		if ok != wantOK || retry != wantRetry {
			t.Errorf("TakeAttempt(%q) at t0+%v: got %v, %v; want %v, %v", key, at.Sub(t0), ok, retry, wantOK, wantRetry)
		}
	}
	take("alice", t0, true, 0)
	take("alice", t0.Add(time.Second), true, 0)
	take("alice", t0.Add(2*time.Second), true, 0)
	take("alice", t0.Add(3*time.Second), false, window-3*time.Second)
	take("alice", t0.Add(window-time.Second), false, time.Second)
	take("Alice", t0.Add(3*time.Second), true, 0)     // keys are exact
	take("127.0.0.1", t0.Add(3*time.Second), true, 0) // names and addresses apart
	// The window is (now-window, now].
	take("alice", t0.Add(window), true, 0)
	take("alice", t0.Add(window), false, time.Second)
	take("alice", t0.Add(window+time.Second), true, 0)
	take("alice", t0.Add(10*window), true, 0)
	// A refused attempt is not counted: after a storm of refusals the
	// slots free as the admitted ones leave the window.
	for i := range 20 {
		at := time.Duration(i) * time.Millisecond
		if i < limit {
			take("bob", t0.Add(at), true, 0)
		} else {
			take("bob", t0.Add(at), false, window-at)
		}
	}
	take("bob", t0.Add(window), true, 0)

	for _, off := range []struct {
		window time.Duration
		limit  int
	}{{window, 0}, {0, limit}, {-time.Second, limit}, {window, -1}} {
		for range 5 {
			ok, retry, err := s.TakeAttempt(ctx, "alice", t0.Add(10*window), off.window, off.limit)
			if err != nil || !ok || retry != 0 {
				t.Errorf("TakeAttempt with window %v, limit %d (off): %v, %v, %v", off.window, off.limit, ok, retry, err)
			}
		}
	}
}

func testTakeAttemptKeys(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	const window, limit = time.Minute, 2
	now := base
	// Keys are what a client sends: any bytes, any length.
	keys := []string{"", "\xff\xfe", "a\x00b", strings.Repeat("x", 1<<20), "'; DELETE FROM auth_attempts; --", "ALICE", "alice"}
	for _, k := range keys {
		for i := range limit + 1 {
			ok, _, err := s.TakeAttempt(ctx, k, now, window, limit)
			if err != nil {
				t.Fatalf("TakeAttempt(%.20q): %v", k, err)
			}
			if ok != (i < limit) {
				t.Errorf("TakeAttempt(%.20q) #%d: ok %v, want %v", k, i+1, ok, i < limit)
			}
		}
	}
	// Apart from TakeRequest's counts, even under a key equal to a user's id.
	alice := mustUser(t, s, "alice")
	for range limit {
		if ok, _, err := s.TakeAttempt(ctx, alice.ID, now, window, limit); err != nil || !ok {
			t.Fatalf("TakeAttempt(alice's id): %v, %v", ok, err)
		}
	}
	if ok, _, err := s.TakeRequest(ctx, alice.ID, now, window, 1); err != nil || !ok {
		t.Errorf("TakeRequest after attempts under the user's id: %v, %v; want admitted", ok, err)
	}
	// Attempts that left their window go as others are taken: a key's
	// slots are all free again later, even with many other keys between.
	for i := range 50 {
		if _, _, err := s.TakeAttempt(ctx, fmt.Sprintf("spray-%d", i), now.Add(2*window), window, limit); err != nil {
			t.Fatal(err)
		}
	}
	for range limit {
		if ok, _, err := s.TakeAttempt(ctx, "alice", now.Add(2*window), window, limit); err != nil || !ok {
			t.Errorf("TakeAttempt after the window: %v, %v; want admitted", ok, err)
		}
	}
}

func testTakeAttemptConcurrent(t *testing.T, s datachat.Store) {
	const n, limit, window = 40, 10, time.Minute
	now := time.Now()
	var admitted, other atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := "alice"
			if i%4 == 3 {
				key = fmt.Sprintf("other-%d", i)
			}
			ok, retry, err := s.TakeAttempt(t.Context(), key, now, window, limit)
			switch {
			case err != nil:
				t.Errorf("TakeAttempt: %v", err)
			case key != "alice":
				if !ok {
					t.Errorf("TakeAttempt(%s), its first: refused", key)
				}
				other.Add(1)
			case ok:
				admitted.Add(1)
			case retry <= 0 || retry > window:
				t.Errorf("TakeAttempt refused: retry after %v, want in (0, %v]", retry, window)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("concurrent TakeAttempt: %d admitted, want exactly %d of %d", got, limit, n-int(other.Load()))
	}
}

// testSessionDisableRace creates sessions while the user is disabled: once
// DisableUser has returned, whether each CreateSession came before it (and
// was deleted by it) or after (and was refused), none authenticates after
// the user is enabled again.
func testSessionDisableRace(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAccount(t, s, "root", datachat.RoleAdmin)
	alice := mustUser(t, s, "alice")
	const rounds, each = 10, 4
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range each {
			wg.Go(func() {
				<-start
				err := s.CreateSession(ctx, &datachat.Session{UserID: alice.ID, Hash: fmt.Sprintf("race-%d-%d", round, i), Method: "password"})
				if err != nil && !errors.Is(err, datachat.ErrUserDisabled) {
					t.Errorf("CreateSession: %v", err)
				}
			})
		}
		wg.Go(func() {
			<-start
			if err := s.DisableUser(ctx, alice.ID, time.Now()); err != nil {
				t.Errorf("DisableUser: %v", err)
			}
		})
		close(start)
		wg.Wait()
		if err := s.EnableUser(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		for i := range each {
			if _, _, err := s.AuthenticateSession(ctx, fmt.Sprintf("race-%d-%d", round, i), time.Now(), time.Hour); err == nil {
				t.Errorf("round %d: a session created while alice was being disabled authenticates after she was enabled", round)
			}
		}
	}
}
