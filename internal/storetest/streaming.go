package storetest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

// testFlushStreaming writes the parts and leases of several streaming
// messages in one call, one of them deleted before it: the others are
// written, the deleted one is reported gone.
func testFlushStreaming(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	call := func(id string) datachat.Part { return datachat.Part{Type: datachat.PartToolCall, CallID: id} }
	now := time.Now()
	// Each message's lease lapsed a second ago; the flush renews some.
	var convs []*datachat.Conversation
	var msgs []*datachat.Message
	for range 4 {
		c := mustConversation(t, s, alice.ID)
		m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
		if err := s.RenewLease(ctx, m.ID, datachat.Lease{Owner: "p", Node: "p-node", Until: now.Add(-time.Second)}); err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
		convs, msgs = append(convs, c), append(msgs, m)
	}
	a, b, c, d := msgs[0], msgs[1], msgs[2], msgs[3]
	if err := s.DeleteConversation(ctx, alice.ID, convs[1].ID); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	live := &datachat.Lease{Owner: "p", Node: "p-node", Until: now.Add(time.Minute)}
	batch := []datachat.StreamingFlush{
		{MessageID: a.ID, First: 0, Parts: []datachat.Part{text("Let me "), call("c1")}, Lease: live},
		{MessageID: b.ID, First: 0, Parts: []datachat.Part{text("never stored")}, Lease: live},
		{MessageID: c.ID, First: 0, Parts: []datachat.Part{text("No lease due.")}},
		{MessageID: d.ID, Lease: live}, // a long SQL query: a lease, no parts
		{MessageID: "no-such-message"}, // nothing to write: not looked up
	}
	for range 2 { // flushing the same batch again, as a retry would, writes nothing twice
		gone, err := s.FlushStreaming(ctx, batch)
		if err != nil {
			t.Fatalf("FlushStreaming: %v", err)
		}
		equal(t, "gone", gone, []string{b.ID})
	}
	gone, err := s.FlushStreaming(ctx, []datachat.StreamingFlush{
		{MessageID: a.ID, First: 2, Parts: []datachat.Part{text("check.")}},
		{MessageID: "no-such-message", Parts: []datachat.Part{text("x")}},
	})
	if err != nil {
		t.Fatalf("FlushStreaming: %v", err)
	}
	equal(t, "gone", gone, []string{"no-such-message"})
	if gone, err := s.FlushStreaming(ctx, nil); err != nil || gone != nil {
		t.Errorf("FlushStreaming of nothing: got %v, %v; want nil, nil", gone, err)
	}

	got, parts := partsOf(t, s, convs[0].ID, a.ID)
	equal(t, "parts of a", parts, []datachat.Part{text("Let me "), call("c1"), text("check.")})
	if got.Content != "Let me check." {
		t.Errorf("content of a while streaming: got %q", got.Content)
	}
	_, parts = partsOf(t, s, convs[2].ID, c.ID)
	equal(t, "parts of c", parts, []datachat.Part{text("No lease due.")})
	if _, parts = partsOf(t, s, convs[3].ID, d.ID); len(parts) != 0 {
		t.Errorf("parts of d: got %v, want none", parts)
	}
	// Another process's sweep takes only c, whose lease was not renewed.
	n, err := s.InterruptStreaming(ctx, now, "sweeper", "sweeper-node")
	if err != nil {
		t.Fatalf("InterruptStreaming: %v", err)
	}
	if n != 1 {
		t.Errorf("InterruptStreaming after the flush: got %d, want 1 (the message whose lease was not renewed)", n)
	}
	for i, want := range map[int]string{0: datachat.StatusStreaming, 2: datachat.StatusInterrupted, 3: datachat.StatusStreaming} {
		if m, _ := partsOf(t, s, convs[i].ID, msgs[i].ID); m.Status != want {
			t.Errorf("status of message %d: got %q, want %q", i, m.Status, want)
		}
	}
}

// testFlushStreamingWhileDeleting races flushes against the deletion of
// their messages' conversations: each flush succeeds, a message either
// written or reported gone, never failing the batch.
func testFlushStreamingWhileDeleting(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	keep := mustMessage(t, s, mustConversation(t, s, alice.ID).ID, datachat.RoleAssistant, datachat.StatusStreaming)
	for i := range 20 {
		c := mustConversation(t, s, alice.ID)
		m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
		deleted := make(chan error, 1)
		go func() { deleted <- s.DeleteConversation(ctx, alice.ID, c.ID) }()
		lease := &datachat.Lease{Owner: "p", Node: "p-node", Until: time.Now().Add(time.Minute)}
		part := []datachat.Part{{Type: datachat.PartText, Text: fmt.Sprintf("%d ", i)}}
		gone, err := s.FlushStreaming(ctx, []datachat.StreamingFlush{
			{MessageID: keep.ID, First: i, Parts: part, Lease: lease},
			{MessageID: m.ID, First: 0, Parts: part, Lease: lease},
		})
		if err != nil {
			t.Fatalf("round %d: FlushStreaming: %v", i, err)
		}
		if len(gone) > 1 || (len(gone) == 1 && gone[0] != m.ID) {
			t.Fatalf("round %d: gone %v, want at most the deleted message", i, gone)
		}
		if err := <-deleted; err != nil {
			t.Fatalf("round %d: DeleteConversation: %v", i, err)
		}
	}
	var want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&want, "%d ", i)
	}
	if got, _ := partsOf(t, s, keep.ConversationID, keep.ID); got.Content != want.String() {
		t.Errorf("the message kept: content %q, want %q", got.Content, want.String())
	}
}

func testInterruptStreaming(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c1 := mustConversation(t, s, alice.ID)
	c2 := mustConversation(t, s, alice.ID)
	now := time.Now()
	// This process is owner "a" on node "host-a/127.0.0.1:8080".
	const owner, node = "a", "host-a/127.0.0.1:8080"
	lease := func(m *datachat.Message, owner, node string, until time.Time) {
		t.Helper()
		if err := s.RenewLease(ctx, m.ID, datachat.Lease{Owner: owner, Node: node, Until: until}); err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
	}
	done := mustMessage(t, s, c1.ID, datachat.RoleUser, datachat.StatusComplete)
	// Streaming without a lease: left by a crash before leases existed.
	s1 := mustMessage(t, s, c1.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	s2 := mustMessage(t, s, c2.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	waiting := mustMessage(t, s, c2.ID, datachat.RoleAssistant, datachat.StatusAwaitingConfirmation)
	// Another process's live turn: left alone.
	live := mustMessage(t, s, c1.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	lease(live, "b", "host-b/127.0.0.1:8080", now.Add(time.Minute))
	// Another process's lapsed lease: that process is gone.
	lapsed := mustMessage(t, s, c2.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	lease(lapsed, "c", "host-c/127.0.0.1:8080", now.Add(-time.Second))
	// An earlier run on this node, killed: gone even though its lease is live.
	earlier := mustMessage(t, s, c1.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	lease(earlier, "a0", node, now.Add(time.Minute))
	// This process's own turn, even with a lapsed lease: never interrupted.
	mine := mustMessage(t, s, c2.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	lease(mine, owner, node, now.Add(-time.Second))

	n, err := s.InterruptStreaming(ctx, now, owner, node)
	if err != nil {
		t.Fatalf("InterruptStreaming: %v", err)
	}
	if n != 4 {
		t.Errorf("InterruptStreaming: got %d, want 4", n)
	}
	want := map[string]string{
		done.ID:    datachat.StatusComplete,
		s1.ID:      datachat.StatusInterrupted,
		s2.ID:      datachat.StatusInterrupted,
		waiting.ID: datachat.StatusAwaitingConfirmation,
		live.ID:    datachat.StatusStreaming,
		lapsed.ID:  datachat.StatusInterrupted,
		earlier.ID: datachat.StatusInterrupted,
		mine.ID:    datachat.StatusStreaming,
	}
	checkStatuses := func() {
		t.Helper()
		for _, c := range []*datachat.Conversation{c1, c2} {
			msgs, err := s.Messages(ctx, c.ID)
			if err != nil {
				t.Fatalf("Messages: %v", err)
			}
			for _, m := range msgs {
				if m.Status != want[m.ID] {
					t.Errorf("status of message %s: got %q, want %q", m.ID, m.Status, want[m.ID])
				}
			}
		}
	}
	checkStatuses()
	n, err = s.InterruptStreaming(ctx, now, owner, node)
	if err != nil {
		t.Fatalf("InterruptStreaming: %v", err)
	}
	if n != 0 {
		t.Errorf("InterruptStreaming a second time: got %d, want 0", n)
	}

	// Once the other process's lease lapses, its message is taken for left
	// behind; this process's own still is not.
	n, err = s.InterruptStreaming(ctx, now.Add(2*time.Minute), owner, node)
	if err != nil {
		t.Fatalf("InterruptStreaming: %v", err)
	}
	if n != 1 {
		t.Errorf("InterruptStreaming after the lease lapsed: got %d, want 1", n)
	}
	want[live.ID] = datachat.StatusInterrupted
	checkStatuses()

	// Without an owner or node (a tool that is not serving), only the lease counts.
	n, err = s.InterruptStreaming(ctx, now, "", "")
	if err != nil {
		t.Fatalf("InterruptStreaming: %v", err)
	}
	if n != 1 {
		t.Errorf("InterruptStreaming without owner: got %d, want 1 (the lapsed lease of %q)", n, owner)
	}
	want[mine.ID] = datachat.StatusInterrupted
	checkStatuses()

	wantCode(t, "RenewLease of an unknown message",
		s.RenewLease(ctx, "no-such-message", datachat.Lease{Owner: owner, Until: now}), datachat.ENOTFOUND)
}

// testBeginTurn checks the store-level claim that keeps one turn at a time per
// conversation across processes.
func testBeginTurn(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	now := time.Now()
	turn := func(content string) (*datachat.Message, *datachat.Message) {
		return &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: content, Status: datachat.StatusComplete},
			&datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	}
	statuses := func() []string {
		t.Helper()
		msgs, err := s.Messages(ctx, c.ID)
		if err != nil {
			t.Fatalf("Messages: %v", err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.Role+":"+m.Content+":"+m.Status)
		}
		return out
	}

	u1, a1 := turn("one")
	leaseA := datachat.Lease{Owner: "a", Node: "host-a/127.0.0.1:8080", Until: now.Add(time.Minute)}
	if err := s.BeginTurn(ctx, u1, a1, leaseA, now); err != nil {
		t.Fatalf("BeginTurn: %v", err)
	}
	if u1.ID == "" || a1.ID == "" || u1.CreatedAt.IsZero() || a1.UpdatedAt.IsZero() {
		t.Fatalf("BeginTurn: got %+v and %+v, want IDs and times filled in", u1, a1)
	}
	checkUTC(t, "CreatedAt", a1.CreatedAt)
	equal(t, "messages after BeginTurn", statuses(), []string{"user:one:complete", "assistant::streaming"})
	if got, err := s.Conversation(ctx, alice.ID, c.ID); err != nil || got.UpdatedAt.Before(a1.CreatedAt) {
		t.Errorf("conversation after BeginTurn: got %v, %v; want UpdatedAt bumped to %v", got, err, a1.CreatedAt)
	}

	// A second turn while the first streams, from any process: refused, nothing stored.
	u2, a2 := turn("two")
	leaseB := datachat.Lease{Owner: "b", Node: "host-b/127.0.0.1:8080", Until: now.Add(2 * time.Minute)}
	wantCode(t, "BeginTurn while a turn streams", s.BeginTurn(ctx, u2, a2, leaseB, now.Add(time.Second)), datachat.ECONFLICT)
	equal(t, "messages after a refused BeginTurn", statuses(), []string{"user:one:complete", "assistant::streaming"})

	// A renewed lease keeps the turn alive past its first expiry.
	leaseA.Until = now.Add(5 * time.Minute)
	if err := s.RenewLease(ctx, a1.ID, leaseA); err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	u2, a2 = turn("two")
	wantCode(t, "BeginTurn while a renewed turn streams", s.BeginTurn(ctx, u2, a2, leaseB, now.Add(3*time.Minute)), datachat.ECONFLICT)

	// Once the lease lapsed (its process is gone), the next turn interrupts the
	// old message and starts.
	u2, a2 = turn("two")
	if err := s.BeginTurn(ctx, u2, a2, leaseB, now.Add(6*time.Minute)); err != nil {
		t.Fatalf("BeginTurn after the lease lapsed: %v", err)
	}
	equal(t, "messages after a lapsed lease", statuses(), []string{
		"user:one:complete", "assistant::interrupted", "user:two:complete", "assistant::streaming"})

	// A finished turn frees the conversation; a turn may start without a user message.
	a2.Status, a2.Content = datachat.StatusComplete, "answer"
	if err := s.UpdateMessage(ctx, a2); err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	_, a3 := turn("")
	if err := s.BeginTurn(ctx, nil, a3, leaseA, now.Add(6*time.Minute)); err != nil {
		t.Fatalf("BeginTurn without a user message: %v", err)
	}
	equal(t, "messages after BeginTurn without a user message", statuses(), []string{
		"user:one:complete", "assistant::interrupted", "user:two:complete", "assistant:answer:complete", "assistant::streaming"})

	_, a4 := turn("")
	a4.ConversationID = "no-such-conversation"
	wantCode(t, "BeginTurn in an unknown conversation", s.BeginTurn(ctx, nil, a4, leaseA, now), datachat.ENOTFOUND)
}

// testBeginTurnConcurrent races turns on one conversation: exactly one starts.
func testBeginTurnConcurrent(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	now := time.Now()
	var started, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			u := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: fmt.Sprint(i), Status: datachat.StatusComplete}
			a := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
			lease := datachat.Lease{Owner: fmt.Sprint("owner-", i), Node: fmt.Sprint("node-", i), Until: now.Add(time.Minute)}
			switch err := s.BeginTurn(ctx, u, a, lease, now); datachat.ErrorCode(err) {
			case "":
				started.Add(1)
			case datachat.ECONFLICT:
				refused.Add(1)
			default:
				t.Errorf("BeginTurn: %v", err)
			}
		})
	}
	wg.Wait()
	if started.Load() != 1 || refused.Load() != 7 {
		t.Errorf("concurrent BeginTurn: got %d started and %d refused, want 1 and 7", started.Load(), refused.Load())
	}
	msgs, err := s.Messages(ctx, c.ID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if len(msgs) != 2 {
		t.Errorf("messages after concurrent BeginTurn: got %d, want 2", len(msgs))
	}
}

// testFinishKeepsStreamedParts: an answer whose first parts were flushed
// while it streamed ends with FinishMessage keeping those (the store does
// not take them again: a different text under their numbers is ignored)
// and appending the rest; without PartsStored its parts are replaced,
// merged. Either way the answer reads back merged, with its content.
func testFinishKeepsStreamedParts(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	call := func(id string) datachat.Part { return datachat.Part{Type: datachat.PartToolCall, CallID: id} }
	streamed := func() (*datachat.Conversation, *datachat.Message) {
		c := mustConversation(t, s, alice.ID)
		m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
		if _, err := s.FlushStreaming(ctx, []datachat.StreamingFlush{{MessageID: m.ID, First: 0, Parts: []datachat.Part{text("Let me "), text("check. "), call("c1")}}}); err != nil {
			t.Fatalf("FlushStreaming: %v", err)
		}
		return c, m
	}

	c, m := streamed()
	m.Status, m.Content = datachat.StatusComplete, "Let me check. It is 42."
	m.Parts = []datachat.Part{text("NOT "), text("STORED "), call("c1"), text("It is "), text("42.")}
	m.PartsStored = 3
	if err := s.FinishMessage(ctx, m, nil); err != nil {
		t.Fatalf("FinishMessage: %v", err)
	}
	got, parts := partsOf(t, s, c.ID, m.ID)
	equal(t, "parts kept and appended", parts, []datachat.Part{text("Let me check. "), call("c1"), text("It is 42.")})
	if got.Status != datachat.StatusComplete || got.Content != "Let me check. It is 42." {
		t.Errorf("finished: status %q content %q", got.Status, got.Content)
	}
	if err := s.FinishMessage(ctx, m, nil); err != nil { // a retry, as a repair would
		t.Fatalf("FinishMessage again: %v", err)
	}
	_, parts = partsOf(t, s, c.ID, m.ID)
	equal(t, "parts after a retried finish", parts, []datachat.Part{text("Let me check. "), call("c1"), text("It is 42.")})

	c, m = streamed()
	m.Status, m.Content = datachat.StatusAwaitingConfirmation, "Replaced. "
	m.Parts = []datachat.Part{text("Replaced"), text(". "), call("c9")}
	if err := s.FinishMessage(ctx, m, nil); err != nil {
		t.Fatalf("FinishMessage: %v", err)
	}
	_, parts = partsOf(t, s, c.ID, m.ID)
	equal(t, "parts replaced", parts, []datachat.Part{text("Replaced. "), call("c9")})
}
