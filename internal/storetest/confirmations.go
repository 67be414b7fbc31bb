package storetest

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"datachat"
)

func testConfirmations(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusAwaitingConfirmation)

	_, err := s.PendingConfirmation(ctx, c.ID)
	wantCode(t, "PendingConfirmation with none", err, datachat.ENOTFOUND)

	conf := &datachat.Confirmation{ConversationID: c.ID, MessageID: m.ID, CallID: "call_1",
		Action: "execute_sql", Parameters: json.RawMessage(`{"query": "DELETE FROM t", "estimated_rows": 12}`),
		Explanation: "this changes data", State: json.RawMessage(`{"round":2,"calls":[1,2]}`), CreatedAt: base}
	if err := s.CreateConfirmation(ctx, conf); err != nil {
		t.Fatalf("CreateConfirmation: %v", err)
	}
	if conf.ID == "" || conf.Status != datachat.ConfirmPending {
		t.Fatalf("CreateConfirmation: got ID %q, status %q, want an ID and %q", conf.ID, conf.Status, datachat.ConfirmPending)
	}
	checkTime(t, "confirmation CreatedAt", conf.CreatedAt, base)
	got, err := s.PendingConfirmation(ctx, c.ID)
	if err != nil {
		t.Fatalf("PendingConfirmation: %v", err)
	}
	equal(t, "PendingConfirmation", got, conf)

	resolved, err := s.ResolveConfirmation(ctx, conf.ID, datachat.ConfirmApproved, "go ahead")
	if err != nil {
		t.Fatalf("ResolveConfirmation: %v", err)
	}
	if resolved.Status != datachat.ConfirmApproved || resolved.Note != "go ahead" || resolved.ResolvedAt == nil {
		t.Errorf("ResolveConfirmation: got status %q, note %q, resolved at %v; want approved, go ahead, a time",
			resolved.Status, resolved.Note, resolved.ResolvedAt)
	} else {
		checkUTC(t, "ResolvedAt", *resolved.ResolvedAt)
	}
	want := *conf
	want.Status, want.Note, want.ResolvedAt = resolved.Status, resolved.Note, resolved.ResolvedAt
	equal(t, "ResolveConfirmation", resolved, &want)

	_, err = s.PendingConfirmation(ctx, c.ID)
	wantCode(t, "PendingConfirmation after resolving", err, datachat.ENOTFOUND)
	_, err = s.ResolveConfirmation(ctx, conf.ID, datachat.ConfirmDeclined, "")
	wantCode(t, "ResolveConfirmation a second time", err, datachat.ECONFLICT)
	_, err = s.ResolveConfirmation(ctx, conf.ID, datachat.ConfirmApproved, "")
	wantCode(t, "ResolveConfirmation a second time", err, datachat.ECONFLICT)
	_, err = s.ResolveConfirmation(ctx, "no-such-confirmation", datachat.ConfirmApproved, "")
	wantCode(t, "ResolveConfirmation of an unknown id", err, datachat.ENOTFOUND)

	// Without a message, declined.
	conf2 := &datachat.Confirmation{ConversationID: c.ID, Action: "load_dataset",
		Parameters: json.RawMessage(`{"url":"https://example.com/a.csv"}`)}
	if err := s.CreateConfirmation(ctx, conf2); err != nil {
		t.Fatalf("CreateConfirmation: %v", err)
	}
	_, err = s.ResolveConfirmation(ctx, conf2.ID, "maybe", "")
	wantCode(t, "ResolveConfirmation to an invalid status", err, datachat.EINVALID)
	got, err = s.PendingConfirmation(ctx, c.ID)
	if err != nil {
		t.Fatalf("PendingConfirmation: %v", err)
	}
	equal(t, "PendingConfirmation without a message", got, conf2)
	resolved, err = s.ResolveConfirmation(ctx, conf2.ID, datachat.ConfirmDeclined, "no thanks")
	if err != nil {
		t.Fatalf("ResolveConfirmation: %v", err)
	}
	if resolved.Status != datachat.ConfirmDeclined {
		t.Errorf("ResolveConfirmation: got status %q, want %q", resolved.Status, datachat.ConfirmDeclined)
	}

	wantCode(t, "CreateConfirmation in an unknown conversation", s.CreateConfirmation(ctx,
		&datachat.Confirmation{ConversationID: "no-such-conversation", Action: "execute_sql"}), datachat.ENOTFOUND)
}

func testConfirmationResolveRace(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	conf := &datachat.Confirmation{ConversationID: c.ID, Action: "execute_sql", Parameters: json.RawMessage(`{}`)}
	if err := s.CreateConfirmation(ctx, conf); err != nil {
		t.Fatalf("CreateConfirmation: %v", err)
	}
	const n = 10
	var won, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			status := datachat.ConfirmApproved
			if i%2 == 1 {
				status = datachat.ConfirmDeclined
			}
			_, err := s.ResolveConfirmation(ctx, conf.ID, status, "")
			switch datachat.ErrorCode(err) {
			case "":
				won.Add(1)
			case datachat.ECONFLICT:
				conflicts.Add(1)
			default:
				t.Errorf("ResolveConfirmation: got %v, want nil or ECONFLICT", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || conflicts.Load() != n-1 {
		t.Errorf("concurrent ResolveConfirmation: got %d resolved and %d conflicts, want 1 and %d",
			won.Load(), conflicts.Load(), n-1)
	}
}
