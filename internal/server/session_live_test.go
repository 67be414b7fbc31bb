package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat"
)

// liveWS is an open chat WebSocket and a way to see it is still served.
type liveWS struct {
	t *testing.T
	c *websocket.Conn
}

// alive sends a message the server answers at once (an unknown type gets a
// chat_error) and reports whether the answer came.
func (w liveWS) alive() bool {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), 10*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, []byte(`{"type":"ping?"}`)); err != nil {
		return false
	}
	_, b, err := w.c.Read(ctx)
	return err == nil && strings.Contains(string(b), "chat_error")
}

// openWS opens the chat WebSocket of conv with the browser's cookie from
// its page.
func (b *browser) openWS(conv string) liveWS {
	b.t.Helper()
	c, resp, err := b.ts.dialCookie(b.t, conv, b.cookie(), b.ts.URL)
	if err != nil {
		b.t.Fatalf("open the WebSocket: %v %v", resp, err)
	}
	return liveWS{b.t, c}
}

// openKeyWS opens the chat WebSocket of conv with an API key.
func (ts *testServer) openKeyWS(t *testing.T, conv, key string) liveWS {
	t.Helper()
	return liveWS{t, ts.dialKeyConn(t, conv, key)}
}

// wantRevoked checks that the server closed w as revoked (4401) with
// reason; within bounds the wait.
func (w liveWS) wantRevoked(within time.Duration, reason string) {
	w.t.Helper()
	code, got := closedWith(w.t, w.c, within)
	if code != wsStatusRevoked || got != reason {
		w.t.Errorf("closed with %d %q, want %d %q", code, got, wsStatusRevoked, reason)
	}
}

// noWatch leaves the store check of live credentials to an hour from now:
// what ends a request in a test with it was ended at once, in this
// process.
func noWatch(_ *Deps, c *Config) { c.AuthCheckInterval = time.Hour }

// TestSignOutEndsItsWebSockets: signing out closes that session's
// WebSockets at once (4401, "You were signed out."), and only those: the
// same user's other session and key keep theirs.
func TestSignOutEndsItsWebSockets(t *testing.T) {
	ts := newTestServer(t, noWatch)
	laptop := ts.member(t, "carol", pwCarol)
	phone := ts.browser(t)
	phone.login("carol", pwCarol)
	id := carolID(t, ts)
	key := ts.keyOf(t, id)
	conv := ts.conversationOf(t, id)
	a1, a2 := laptop.openWS(conv), laptop.openWS(conv)
	b := phone.openWS(conv)
	k := ts.openKeyWS(t, conv, key)
	if !a1.alive() || !b.alive() || !k.alive() {
		t.Fatal("the WebSockets do not answer")
	}
	if st, _ := laptop.postJSON("/api/auth/logout", nil); st != 204 {
		t.Fatalf("logout: %d", st)
	}
	// In this process the close is immediate (the store's check is an hour
	// away): the wait is a bound, not a measure.
	a1.wantRevoked(5*time.Second, datachat.ErrSessionEnded.Message)
	a2.wantRevoked(5*time.Second, datachat.ErrSessionEnded.Message)
	if !b.alive() || !k.alive() {
		t.Errorf("the other session's or the key's WebSocket ended with one session's sign-out")
	}
	if _, resp, err := ts.dialCookie(t, conv, laptop.cookie(), ts.URL); err == nil || resp.StatusCode != 401 {
		t.Errorf("a WebSocket after sign-out: %v %v, want 401", resp, err)
	}
}

// TestDisablingCutsEverything: an admin disabling a member through the
// API ends, at once, the member's sessions' and keys' WebSockets with the
// reason; the cookie and the key then open nothing.
func TestDisablingCutsEverything(t *testing.T) {
	ts := newTestServer(t, noWatch)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	carol := ts.member(t, "carol", pwCarol)
	id := carolID(t, ts)
	key := ts.keyOf(t, id)
	conv := ts.conversationOf(t, id)
	s, k := carol.openWS(conv), ts.openKeyWS(t, conv, key)
	other := ts.openKeyWS(t, ts.conversationOf(t, ts.aliceID), ts.alice)
	if st, body := root.postJSON("/api/admin/users/carol/disable", nil); st != 200 {
		t.Fatalf("disable: %d %s", st, body)
	}
	s.wantRevoked(5*time.Second, datachat.ErrUserDisabled.Message)
	k.wantRevoked(5*time.Second, datachat.ErrUserDisabled.Message)
	if !other.alive() {
		t.Errorf("another user's WebSocket ended")
	}
	if st, _ := carol.me(); st != 401 {
		t.Errorf("the disabled member's cookie: %d, want 401", st)
	}
	if st, body := ts.get(t, "/api/me", key); st != 401 || !strings.Contains(body, datachat.ErrUserDisabled.Message) {
		t.Errorf("the disabled member's key: %d %s, want 401 saying the account is disabled", st, body)
	}
	// Removed: the same.
	dora := ts.member(t, "dora", pwCarol)
	d := dora.openWS(ts.conversationOf(t, carolIDOf(t, ts, "dora")))
	if resp, body := root.do("DELETE", "/api/admin/users/dora", ""); resp.StatusCode != 204 {
		t.Fatalf("remove dora: %d %s", resp.StatusCode, body)
	}
	d.wantRevoked(5*time.Second, datachat.ErrUserDisabled.Message)
}

// TestPasswordChangeEndsSessions: using an invite (a new password) ends the
// user's other sessions and their WebSockets at once; their API keys hold.
func TestPasswordChangeEndsSessions(t *testing.T) {
	ts := newTestServer(t, noWatch)
	carol := ts.member(t, "carol", pwCarol)
	id := carolID(t, ts)
	key := ts.keyOf(t, id)
	conv := ts.conversationOf(t, id)
	s, k := carol.openWS(conv), ts.openKeyWS(t, conv, key)
	phone := ts.browser(t)
	if st, body := phone.postJSON("/api/auth/invite", map[string]string{"token": ts.inviteToken(t, id), "password": pwCarol + " anew"}); st != 200 {
		t.Fatalf("reset: %d %s", st, body)
	}
	s.wantRevoked(5*time.Second, datachat.ErrSessionEnded.Message)
	if !k.alive() {
		t.Errorf("the key's WebSocket ended with a password change")
	}
	if st, _ := carol.me(); st != 401 {
		t.Errorf("the old session after the password changed: %d, want 401", st)
	}
	if st, _ := phone.me(); st != 200 {
		t.Errorf("the session of the new password: %d", st)
	}
	if st, _ := carol.postJSON("/api/auth/login", map[string]string{"user": "carol", "password": pwCarol}); st != 401 {
		t.Errorf("the old password: %d, want 401", st)
	}
}

// TestRevocationsFromAnotherProcess: a member disabled, or signed out by a
// password change, through another process on the same database (the
// command line, another serve) has their session's open WebSocket cut
// within the check interval — with the default 500 ms, within a second.
func TestRevocationsFromAnotherProcess(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	id := carolID(t, ts)
	conv := ts.conversationOf(t, id)
	elsewhere := ts.otherProcess(t)

	s := carol.openWS(conv)
	if err := elsewhere.DisableUser(t.Context(), id, time.Now()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// 1.5 s allowed for a loaded machine, as the key's test does.
	s.wantRevoked(1500*time.Millisecond, datachat.ErrUserDisabled.Message)
	t.Logf("closed %v after the user was disabled elsewhere", time.Since(start).Round(time.Millisecond))

	if err := elsewhere.EnableUser(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	carol.login("carol", pwCarol)
	s = carol.openWS(conv)
	token := randomToken()
	if err := elsewhere.CreateInvite(t.Context(), &datachat.Invite{UserID: id, Hash: datachat.HashAPIKey(token), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := elsewhere.UseInvite(t.Context(), datachat.HashAPIKey(token), "elsewhere-hash", time.Now()); err != nil {
		t.Fatal(err)
	}
	s.wantRevoked(1500*time.Millisecond, datachat.ErrSessionEnded.Message)
}
