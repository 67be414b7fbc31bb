package storetest

import (
	"fmt"
	"testing"
	"time"

	"datachat"
)

// testTurnStart: TurnStart reads, in one call, what Conversation,
// PendingConfirmation and RecentMessages read apart: the user's
// conversation (ENOTFOUND for another user's, or none), its pending
// confirmation (nil when none) and its newest n messages with their tool
// calls and parts.
func testTurnStart(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
	c := mustConversation(t, s, alice.ID)
	for i := range 6 {
		m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: fmt.Sprint(i),
			Status: datachat.StatusComplete, CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if err := s.CreateMessage(ctx, m); err != nil {
			t.Fatalf("CreateMessage: %v", err)
		}
		if err := s.AppendParts(ctx, m.ID, 0, []datachat.Part{{Type: datachat.PartText, Text: fmt.Sprint(i)}}); err != nil {
			t.Fatalf("AppendParts: %v", err)
		}
	}
	check := func(what string, n int, wantPending string) {
		t.Helper()
		conv, pending, msgs, err := s.TurnStart(ctx, alice.ID, c.ID, n)
		if err != nil {
			t.Fatalf("%s: TurnStart: %v", what, err)
		}
		if conv == nil || conv.ID != c.ID || conv.UserID != alice.ID {
			t.Errorf("%s: conversation %+v, want %s's %s", what, conv, alice.ID, c.ID)
		}
		if got := ""; pending != nil {
			got = pending.ID
			if got != wantPending {
				t.Errorf("%s: pending %q, want %q", what, got, wantPending)
			}
		} else if wantPending != "" {
			t.Errorf("%s: no pending confirmation, want %q", what, wantPending)
		}
		want, err := s.RecentMessages(ctx, c.ID, n)
		if err != nil {
			t.Fatalf("RecentMessages: %v", err)
		}
		if msgs == nil || len(msgs) != len(want) {
			t.Fatalf("%s: %d messages, want %d", what, len(msgs), len(want))
		}
		for i := range want {
			if msgs[i].ID != want[i].ID || msgs[i].Content != want[i].Content || len(msgs[i].Parts) != len(want[i].Parts) {
				t.Errorf("%s: message %d is %q with %d parts, want %q with %d", what, i, msgs[i].Content, len(msgs[i].Parts), want[i].Content, len(want[i].Parts))
			}
		}
	}
	check("no confirmation, 3 messages", 3, "")
	check("no messages asked", 0, "")
	conf := &datachat.Confirmation{ConversationID: c.ID, Action: "execute_sql", CreatedAt: base}
	if err := s.CreateConfirmation(ctx, conf); err != nil {
		t.Fatalf("CreateConfirmation: %v", err)
	}
	check("a pending confirmation, all messages", 50, conf.ID)
	if _, err := s.ResolveConfirmation(ctx, conf.ID, datachat.ConfirmDeclined, ""); err != nil {
		t.Fatalf("ResolveConfirmation: %v", err)
	}
	check("the confirmation resolved", 2, "")

	_, _, _, err := s.TurnStart(ctx, bob.ID, c.ID, 3)
	wantCode(t, "TurnStart of another user's conversation", err, datachat.ENOTFOUND)
	_, _, _, err = s.TurnStart(ctx, alice.ID, "no-such-conversation", 3)
	wantCode(t, "TurnStart of no conversation", err, datachat.ENOTFOUND)
}
