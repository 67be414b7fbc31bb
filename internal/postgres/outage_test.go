package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/postgres/pgtest"
)

// wantUnavailable checks that err is the store's "database unavailable": EBUSY
// with a Retry-After, a reason and a suggested action, and a message that
// shows nothing of the database.
func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var c *datachat.Condition
	switch {
	case err == nil:
		t.Errorf("%s: got no error, want the database unavailable", what)
	case datachat.ErrorCode(err) != datachat.EBUSY || !errors.Is(err, datachat.ErrStoreUnavailable) || !errors.As(err, &c):
		t.Errorf("%s: got %v (code %s), want EBUSY, the database unavailable", what, err, datachat.ErrorCode(err))
	case c.RetryAfter() <= 0 || c.Reason == "" || c.SuggestedAction == "":
		t.Errorf("%s: condition %+v lacks a Retry-After, a reason or a suggested action", what, c)
	}
	if msg := datachat.ErrorMessage(err); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "SQLSTATE") || strings.Contains(msg, "postgres") {
		t.Errorf("%s: message %q shows the database's detail", what, msg)
	}
}

// TestOutage stops a real PostgreSQL under an open store — sessions ended by
// the shutdown, new connections refused — and starts it again: every call in
// between is the database unavailable, never an internal error, and the store
// serves again once the database is back, with no reopening.
func TestOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("outage test skipped in -short mode")
	}
	pg := pgtest.Start(t)
	ctx := t.Context()
	s := mustOpen(t, pg.URL)
	u, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	conv := &datachat.Conversation{UserID: u.ID, Title: "before"}
	if err := s.CreateConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	// A pooled connection is idle in the pool while the database stops: the
	// pool must not hand it out broken once the database is back.
	if _, err := s.Conversations(ctx, u.ID); err != nil {
		t.Fatal(err)
	}

	pg.Stop()
	down := time.Now()
	calls := map[string]func() error{
		"Ping":          func() error { return s.Ping(ctx) },
		"Authenticate":  func() error { _, _, err := s.Authenticate(ctx, "h"); return err },
		"Conversation":  func() error { _, err := s.Conversation(ctx, u.ID, conv.ID); return err },
		"Conversations": func() error { _, err := s.Conversations(ctx, u.ID); return err },
		"CreateConversation": func() error {
			return s.CreateConversation(ctx, &datachat.Conversation{UserID: u.ID, Title: "during"})
		},
		"BeginTurn": func() error {
			return s.BeginTurn(ctx, &datachat.Message{ConversationID: conv.ID, Role: datachat.RoleUser, Content: "q", Status: datachat.StatusComplete},
				&datachat.Message{ConversationID: conv.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming},
				datachat.Lease{Owner: "o", Node: "n", Until: time.Now().Add(time.Minute)}, time.Now())
		},
		"TakeRequest": func() error { _, _, err := s.TakeRequest(ctx, u.ID, time.Now(), time.Minute, 10); return err },
		"Messages":    func() error { _, err := s.Messages(ctx, conv.ID); return err },
		"RevokedCredentials": func() error {
			_, err := s.RevokedCredentials(ctx, []datachat.Credential{{Kind: datachat.CredentialAPIKey, ID: "k", UserID: u.ID}})
			return err
		},
	}
	for name, call := range calls {
		wantUnavailable(t, name+" with the database stopped", call())
	}
	t.Logf("every call answered unavailable within %s of the stop", time.Since(down).Round(time.Millisecond))

	pg.Restart()
	recovery := pgtest.WaitUntil(t, 30*time.Second, "the store serves again", func() bool {
		_, err := s.Conversations(ctx, u.ID)
		return err == nil
	})
	t.Logf("recovery: the store served %s after PostgreSQL accepted connections again", recovery.Round(time.Millisecond))
	for name, call := range calls {
		if name == "Authenticate" {
			continue // its hash is unknown: EUNAUTHORIZED
		}
		if err := call(); err != nil {
			t.Errorf("%s after the restart: %v", name, err)
		}
	}
	if _, _, err := s.Authenticate(ctx, "h"); datachat.ErrorCode(err) != datachat.EUNAUTHORIZED {
		t.Errorf("Authenticate of an unknown key after the restart: got %v, want EUNAUTHORIZED", err)
	}
}

// TestTerminatedSession: a session the administrator terminated under the
// store (what pg_ctl stop does to each) is unavailable too, and the next call
// gets a new one.
func TestTerminatedSession(t *testing.T) {
	if testing.Short() {
		t.Skip("outage test skipped in -short mode")
	}
	base := newSchema(t)
	app := "datachat_terminated_" + strings.ReplaceAll(t.Name(), "/", "_")
	ctx := t.Context()
	s := mustOpen(t, base+"&application_name="+app)
	u, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// A session killed by the administrator (what pg_ctl stop does to each)
	// while the store holds it in its pool.
	if _, err := s.Conversations(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, app).Scan(&n); err != nil || n == 0 {
		t.Fatalf("terminate the store's sessions: %d, %v", n, err)
	}
	// The pool hands out a connection used less than a second ago without
	// pinging it: the call meets the terminated session.
	_, err = s.Conversations(ctx, u.ID)
	wantUnavailable(t, "a query on a terminated session", err)
	// The pool drops the dead session: the next call works.
	if _, err := s.Conversations(ctx, u.ID); err != nil {
		t.Errorf("the call after: %v", err)
	}
}
