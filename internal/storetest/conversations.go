package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"datachat"
)

func testConversations(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")

	c1 := &datachat.Conversation{UserID: alice.ID, Title: "first", CreatedAt: base}
	if err := s.CreateConversation(ctx, c1); err != nil {
		t.Fatalf("CreateConversation: %v", err)
	}
	if c1.ID == "" {
		t.Fatalf("CreateConversation: got empty ID, want one filled in")
	}
	checkTime(t, "CreatedAt", c1.CreatedAt, base)
	if !c1.UpdatedAt.Equal(c1.CreatedAt) {
		t.Errorf("UpdatedAt of a new conversation: got %v, want CreatedAt %v", c1.UpdatedAt, c1.CreatedAt)
	}
	got, err := s.Conversation(ctx, alice.ID, c1.ID)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	equal(t, "Conversation", got, c1)

	c2 := mustConversation(t, s, alice.ID)
	if c2.CreatedAt.IsZero() || c2.UpdatedAt.IsZero() {
		t.Fatalf("CreateConversation: got CreatedAt %v, UpdatedAt %v, want both filled in", c2.CreatedAt, c2.UpdatedAt)
	}
	checkUTC(t, "CreatedAt", c2.CreatedAt)
	list, err := s.Conversations(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Conversations: %v", err)
	}
	equal(t, "Conversations (most recently updated first)", list, []*datachat.Conversation{c2, c1})

	renamed, err := s.RenameConversation(ctx, alice.ID, c1.ID, "renamed")
	if err != nil {
		t.Fatalf("RenameConversation: %v", err)
	}
	if renamed.Title != "renamed" || renamed.ID != c1.ID {
		t.Errorf("RenameConversation: got %+v, want title renamed", renamed)
	}
	if !renamed.UpdatedAt.After(c2.UpdatedAt) {
		t.Errorf("RenameConversation UpdatedAt: got %v, want after %v", renamed.UpdatedAt, c2.UpdatedAt)
	}
	if !renamed.CreatedAt.Equal(c1.CreatedAt) {
		t.Errorf("RenameConversation CreatedAt: got %v, want %v unchanged", renamed.CreatedAt, c1.CreatedAt)
	}
	got, err = s.Conversation(ctx, alice.ID, c1.ID)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	equal(t, "Conversation after rename", got, renamed)
	list, err = s.Conversations(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Conversations: %v", err)
	}
	equal(t, "Conversations after rename", ids(list), []string{c1.ID, c2.ID})

	// A new message bumps its conversation to the top.
	m := &datachat.Message{ConversationID: c2.ID, Role: datachat.RoleUser, Content: "hi", Status: datachat.StatusComplete}
	if err := s.CreateMessage(ctx, m); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}
	list, err = s.Conversations(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Conversations: %v", err)
	}
	equal(t, "Conversations after a message", ids(list), []string{c2.ID, c1.ID})
	if list[0].UpdatedAt.Before(m.CreatedAt) {
		t.Errorf("UpdatedAt after CreateMessage: got %v, want at least %v", list[0].UpdatedAt, m.CreatedAt)
	}

	_, err = s.Conversation(ctx, alice.ID, "no-such-conversation")
	wantCode(t, "Conversation of an unknown id", err, datachat.ENOTFOUND)
	err = s.CreateConversation(ctx, &datachat.Conversation{UserID: "no-such-user"})
	wantCode(t, "CreateConversation for an unknown user", err, datachat.ENOTFOUND)

	bob := mustUser(t, s, "bob")
	list, err = s.Conversations(ctx, bob.ID)
	wantEmpty(t, "Conversations of a user with none", list, err)

	if err := s.DeleteConversation(ctx, alice.ID, c1.ID); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	_, err = s.Conversation(ctx, alice.ID, c1.ID)
	wantCode(t, "Conversation after delete", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteConversation twice", s.DeleteConversation(ctx, alice.ID, c1.ID), datachat.ENOTFOUND)
	_, err = s.RenameConversation(ctx, alice.ID, c1.ID, "x")
	wantCode(t, "RenameConversation after delete", err, datachat.ENOTFOUND)
}

func testOtherUsersConversation(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	c := mustConversation(t, s, alice.ID)

	_, err := s.Conversation(ctx, bob.ID, c.ID)
	wantCode(t, "Conversation of another user", err, datachat.ENOTFOUND)
	_, err = s.RenameConversation(ctx, bob.ID, c.ID, "mine now")
	wantCode(t, "RenameConversation of another user", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteConversation of another user", s.DeleteConversation(ctx, bob.ID, c.ID), datachat.ENOTFOUND)
	list, err := s.Conversations(ctx, bob.ID)
	if err != nil {
		t.Fatalf("Conversations: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("Conversations of bob: got %d, want 0", len(list))
	}

	got, err := s.Conversation(ctx, alice.ID, c.ID)
	if err != nil {
		t.Fatalf("Conversation of its owner: %v", err)
	}
	equal(t, "Conversation after another user's attempts", got, c)
}

func testRecentMessages(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)
	var all []*datachat.Message
	for i := range 10 {
		// Pairs share a timestamp: insertion order decides among them.
		m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: fmt.Sprint(i),
			Status: datachat.StatusComplete, CreatedAt: base.Add(time.Duration(i/2) * time.Second)}
		if err := s.CreateMessage(ctx, m); err != nil {
			t.Fatalf("CreateMessage: %v", err)
		}
		if err := s.CreateToolCall(ctx, &datachat.ToolCall{MessageID: m.ID, Seq: 1, Tool: "execute_sql",
			Args: json.RawMessage(`{"query":"SELECT ` + fmt.Sprint(i) + `"}`), OK: true}); err != nil {
			t.Fatalf("CreateToolCall: %v", err)
		}
		all = append(all, m)
	}
	if err := s.CreateMessage(ctx, &datachat.Message{ConversationID: other.ID, Role: datachat.RoleUser,
		Content: "elsewhere", Status: datachat.StatusComplete, CreatedAt: base.Add(time.Hour)}); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}
	for _, n := range []int{0, 1, 3, 10, 50} {
		got, err := s.RecentMessages(ctx, c.ID, n)
		if err != nil {
			t.Fatalf("RecentMessages(%d): %v", n, err)
		}
		want := all[max(0, len(all)-n):]
		if got == nil || len(got) != len(want) {
			t.Fatalf("RecentMessages(%d): got %d messages, want %d", n, len(got), len(want))
		}
		for i := range want {
			if got[i].ID != want[i].ID || len(got[i].ToolCalls) != 1 || !strings.Contains(string(got[i].ToolCalls[0].Args), got[i].Content) {
				t.Errorf("RecentMessages(%d)[%d]: got %q with %d tool calls, want %q with its one", n, i, got[i].Content, len(got[i].ToolCalls), want[i].Content)
			}
		}
	}
}

func testMessages(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)

	msgs, err := s.Messages(ctx, c.ID)
	wantEmpty(t, "Messages of an empty conversation", msgs, err)

	// m1 and m2 share a timestamp: insertion order decides.
	m1 := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "question",
		Status: datachat.StatusComplete, CreatedAt: base}
	m2 := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Content: "",
		Status: datachat.StatusStreaming, CreatedAt: base}
	m3 := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "follow-up ✓ ünïcode",
		Status: datachat.StatusComplete, InputTokens: 3, OutputTokens: 4, Error: "e", CreatedAt: base.Add(time.Second)}
	for _, m := range []*datachat.Message{m1, m2, m3} {
		if err := s.CreateMessage(ctx, m); err != nil {
			t.Fatalf("CreateMessage: %v", err)
		}
	}
	if m1.ID == "" || m1.ID == m2.ID {
		t.Fatalf("CreateMessage IDs: got %q and %q, want distinct IDs", m1.ID, m2.ID)
	}
	checkTime(t, "message CreatedAt", m1.CreatedAt, base)
	if !m1.UpdatedAt.Equal(m1.CreatedAt) {
		t.Errorf("UpdatedAt of a new message: got %v, want CreatedAt %v", m1.UpdatedAt, m1.CreatedAt)
	}
	if err := s.CreateMessage(ctx, &datachat.Message{ConversationID: other.ID, Role: datachat.RoleUser,
		Content: "elsewhere", Status: datachat.StatusComplete}); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}

	for _, m := range []*datachat.Message{m1, m2, m3} {
		m.ToolCalls = []datachat.ToolCall{}
	}
	msgs, err = s.Messages(ctx, c.ID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	equal(t, "Messages", msgs, []*datachat.Message{m1, m2, m3})

	m2.Content = "the answer"
	m2.Status = datachat.StatusComplete
	m2.InputTokens, m2.OutputTokens = 100, 20
	m2.Error = "partial failure"
	m2.ErrorReason, m2.ErrorSuggestedAction = "quota_exceeded", "Check the provider's billing page."
	dist := 0.25
	m2.Sources = []datachat.Source{
		{ID: "doc:0", Text: "An excerpt, with \"quotes\".", Score: 1.5, Distance: &dist,
			Metadata: map[string]any{"document": "a.pdf", "page": float64(3), "section": "Intro"}},
		{ID: "doc:7", Text: "Another.", Score: 0.5, Metadata: map[string]any{"document": "a.pdf", "page": nil}},
	}
	before := m2.UpdatedAt
	if err := s.UpdateMessage(ctx, m2); err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	if m2.UpdatedAt.Before(before) {
		t.Errorf("UpdatedAt after UpdateMessage: got %v, want at least %v", m2.UpdatedAt, before)
	}
	msgs, err = s.Messages(ctx, c.ID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	equal(t, "Messages after UpdateMessage", msgs, []*datachat.Message{m1, m2, m3})
	// The turn's history does not need the sources: RecentMessages leaves them out.
	recent, err := s.RecentMessages(ctx, c.ID, 3)
	if err != nil {
		t.Fatalf("RecentMessages: %v", err)
	}
	if len(recent) != 3 || recent[1].Sources != nil || recent[1].Content != "the answer" {
		t.Errorf("RecentMessages: got %d messages, the answer's sources %v", len(recent), recent[1].Sources)
	}

	wantCode(t, "UpdateMessage of an unknown message",
		s.UpdateMessage(ctx, &datachat.Message{ID: "no-such-message", Status: datachat.StatusComplete}), datachat.ENOTFOUND)
	wantCode(t, "CreateMessage in an unknown conversation",
		s.CreateMessage(ctx, &datachat.Message{ConversationID: "no-such-conversation", Role: datachat.RoleUser}),
		datachat.ENOTFOUND)
	msgs, err = s.Messages(ctx, "no-such-conversation")
	if err != nil {
		t.Fatalf("Messages of an unknown conversation: %v", err)
	}
	if len(msgs) != 0 {
		t.Errorf("Messages of an unknown conversation: got %d, want 0", len(msgs))
	}
}

func testToolCalls(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	user := mustMessage(t, s, c.ID, datachat.RoleUser, datachat.StatusComplete)
	asst := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusComplete)
	asst2 := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusComplete)

	// Args keep their exact bytes, spacing and key order included.
	calls := []*datachat.ToolCall{
		{MessageID: asst.ID, Seq: 2, CallID: "call_c", Tool: "search_documents",
			Args: json.RawMessage(`{"query":"q","top_k":3}`), OK: false, Error: "no documents",
			StartedAt: base.Add(2 * time.Second), DurationMS: 7},
		{MessageID: asst.ID, Seq: 0, CallID: "call_a", Tool: "execute_sql",
			Args: json.RawMessage(`{"query": "SELECT 1",  "z": 1, "a": [1, 2]}`), OK: true,
			Result: "n | avg\n1 | 2\n(1 row)", StartedAt: base, DurationMS: 12,
			// A float column of whole numbers: the text cannot tell it from an integer.
			Columns: []datachat.Column{{Name: "n", Type: datachat.TypeInteger, SQLType: "BIGINT"}, {Name: "avg", Type: datachat.TypeFloat, SQLType: "DOUBLE"}}},
		{MessageID: asst.ID, Seq: 1, CallID: "call_b", Tool: "load_dataset",
			Args: json.RawMessage(`{"url":"https://example.com/x.csv"}`), OK: true, Result: "loaded"},
		{MessageID: asst2.ID, Seq: 0, CallID: "call_d", Tool: "execute_sql", Args: json.RawMessage(`{}`), OK: true},
	}
	for _, tc := range calls {
		if err := s.CreateToolCall(ctx, tc); err != nil {
			t.Fatalf("CreateToolCall: %v", err)
		}
		if tc.ID == "" {
			t.Fatalf("CreateToolCall: got empty ID, want one filled in")
		}
	}
	checkTime(t, "tool call StartedAt", calls[1].StartedAt, base)
	if calls[2].StartedAt.IsZero() {
		t.Errorf("CreateToolCall: got zero StartedAt, want it filled in")
	}

	msgs, err := s.Messages(ctx, c.ID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if len(msgs) != 3 {
		t.Fatalf("Messages: got %d, want 3", len(msgs))
	}
	if msgs[0].ToolCalls == nil || len(msgs[0].ToolCalls) != 0 {
		t.Errorf("ToolCalls of %s: got %#v, want an empty slice", user.Role, msgs[0].ToolCalls)
	}
	equal(t, "ToolCalls (by seq)", msgs[1].ToolCalls, []datachat.ToolCall{*calls[1], *calls[2], *calls[0]})
	equal(t, "ToolCalls of the second message", msgs[2].ToolCalls, []datachat.ToolCall{*calls[3]})
	if got, want := string(msgs[1].ToolCalls[0].Args), string(calls[1].Args); got != want {
		t.Errorf("Args: got %s, want %s byte for byte", got, want)
	}

	wantCode(t, "CreateToolCall for an unknown message", s.CreateToolCall(ctx,
		&datachat.ToolCall{MessageID: "no-such-message", Tool: "execute_sql", Args: json.RawMessage(`{}`)}),
		datachat.ENOTFOUND)
	wantCode(t, "CreateToolCall with invalid JSON args", s.CreateToolCall(ctx,
		&datachat.ToolCall{MessageID: asst.ID, Tool: "execute_sql", Args: json.RawMessage(`{"query":`)}),
		datachat.EINVALID)
}

// partsOf returns a message's parts as Messages lists them.
func partsOf(t *testing.T, s datachat.Store, conversationID, messageID string) (*datachat.Message, []datachat.Part) {
	t.Helper()
	msgs, err := s.Messages(t.Context(), conversationID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	for _, m := range msgs {
		if m.ID == messageID {
			return m, m.Parts
		}
	}
	t.Fatalf("message %s not listed", messageID)
	return nil, nil
}

func testMessageParts(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	call := func(id string) datachat.Part { return datachat.Part{Type: datachat.PartToolCall, CallID: id} }
	appends := []struct {
		first int
		parts []datachat.Part
	}{
		{0, []datachat.Part{text("Let me check "), text("the documents.")}},
		{2, []datachat.Part{call("c1"), text("In Rust, ")}},
		{2, []datachat.Part{call("c1"), text("In Rust, ")}}, // a retried append writes nothing twice
		{4, []datachat.Part{text("ownership "), call("c2"), call("c3"), text("matters.")}},
		{8, nil},
	}
	for _, a := range appends {
		if err := s.AppendParts(ctx, m.ID, a.first, a.parts); err != nil {
			t.Fatalf("AppendParts(%d): %v", a.first, err)
		}
	}
	want := []datachat.Part{text("Let me check the documents."), call("c1"), text("In Rust, ownership "), call("c2"), call("c3"), text("matters.")}
	got, parts := partsOf(t, s, c.ID, m.ID)
	equal(t, "parts while streaming", parts, want)
	if got.Content != "Let me check the documents.In Rust, ownership matters." || got.Status != datachat.StatusStreaming {
		t.Errorf("while streaming: content %q status %q, want the parts' text, streaming", got.Content, got.Status)
	}
	if err := s.AppendParts(ctx, "no-such-message", 0, []datachat.Part{text("x")}); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("AppendParts of a missing message: got %v, want ENOTFOUND", err)
	}
	// The process streaming it is gone: the message keeps the text it streamed.
	if _, err := s.InterruptStreaming(ctx, time.Now(), "another", "another-node"); err != nil {
		t.Fatalf("InterruptStreaming: %v", err)
	}
	got, parts = partsOf(t, s, c.ID, m.ID)
	if got.Status != datachat.StatusInterrupted || got.Content != "Let me check the documents.In Rust, ownership matters." {
		t.Errorf("interrupted: status %q content %q", got.Status, got.Content)
	}
	equal(t, "parts after the interruption", parts, want)

	// BeginTurn's own clean-up of a lapsed message keeps its text too.
	c2 := mustConversation(t, s, alice.ID)
	old := mustMessage(t, s, c2.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	if err := s.AppendParts(ctx, old.ID, 0, []datachat.Part{text("half an answer")}); err != nil {
		t.Fatal(err)
	}
	next := &datachat.Message{ConversationID: c2.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	if err := s.BeginTurn(ctx, nil, next, datachat.Lease{Owner: "a", Node: "n", Until: time.Now().Add(time.Minute)}, time.Now()); err != nil {
		t.Fatalf("BeginTurn: %v", err)
	}
	if got, _ := partsOf(t, s, c2.ID, old.ID); got.Status != datachat.StatusInterrupted || got.Content != "half an answer" {
		t.Errorf("interrupted by BeginTurn: status %q content %q", got.Status, got.Content)
	}
}

func testFinishMessage(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	call := datachat.Part{Type: datachat.PartToolCall, CallID: "c1"}
	if err := s.AppendParts(ctx, m.ID, 0, []datachat.Part{text("Checking"), text("..."), call}); err != nil {
		t.Fatal(err)
	}
	m.Content = "Checking... 42 rows."
	m.Status = datachat.StatusComplete
	m.InputTokens, m.OutputTokens = 120, 30
	m.Parts = []datachat.Part{text("Checking"), text("... "), call, text("42 rows.")}
	m.Sources = []datachat.Source{{ID: "s1", Text: "x", Metadata: map[string]any{"document": "d.pdf"}}}
	m.NumberChecks = []datachat.NumberCheck{
		{Text: "42", Start: 12, End: 14, Status: "matched", Source: json.RawMessage(`{"tool_call_id":"c1","row":0,"column":1}`)},
		{Text: "7", Start: 20, End: 21, Status: "unmatched", Source: json.RawMessage(`null`)},
	}
	u := &datachat.Usage{UserID: alice.ID, ConversationID: c.ID, MessageID: m.ID, Provider: "gemini", Model: "m",
		InputTokens: 120, OutputTokens: 30, Success: true}
	since := time.Now().Add(-time.Hour)
	for range 2 { // finishing again, as a retry would, records the usage once
		if err := s.FinishMessage(ctx, m, u); err != nil {
			t.Fatalf("FinishMessage: %v", err)
		}
	}
	got, parts := partsOf(t, s, c.ID, m.ID)
	equal(t, "finished parts", parts, []datachat.Part{text("Checking... "), call, text("42 rows.")})
	if got.Content != m.Content || got.Status != datachat.StatusComplete || got.InputTokens != 120 || got.OutputTokens != 30 || len(got.Sources) != 1 {
		t.Errorf("finished message: %+v", got)
	}
	var src struct {
		ToolCallID  string `json:"tool_call_id"`
		Row, Column int
	}
	if len(got.NumberChecks) != 2 || got.NumberChecks[0].Text != "42" || got.NumberChecks[1].Status != "unmatched" ||
		json.Unmarshal(got.NumberChecks[0].Source, &src) != nil || src.ToolCallID != "c1" || src.Column != 1 {
		t.Errorf("number checks: %+v", got.NumberChecks)
	}
	if n, err := s.TokensSince(ctx, alice.ID, since); err != nil || n != 150 {
		t.Errorf("TokensSince after finishing twice: %d, %v; want 150", n, err)
	}
	// Finishing without usage, and without parts (an answer with no text).
	m2 := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	m2.Status = datachat.StatusCancelled
	if err := s.FinishMessage(ctx, m2, nil); err != nil {
		t.Fatalf("FinishMessage without usage: %v", err)
	}
	if got, parts := partsOf(t, s, c.ID, m2.ID); got.Status != datachat.StatusCancelled || len(parts) != 0 {
		t.Errorf("finished without parts: status %q, parts %v", got.Status, parts)
	}
	if err := s.FinishMessage(ctx, &datachat.Message{ID: "no-such-message", Status: datachat.StatusComplete}, u); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("FinishMessage of a missing message: got %v, want ENOTFOUND", err)
	}
	if n, _ := s.TokensSince(ctx, alice.ID, since); n != 150 {
		t.Errorf("a failed FinishMessage recorded usage: %d tokens, want 150", n)
	}
}
