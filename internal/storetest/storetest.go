// Package storetest is the conformance suite of [datachat.Store]: every store
// (internal/sqlite, internal/postgres) calls [Run] from its tests, so both
// behave the same way down to error codes, ordering and timestamps.
package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

// Run runs the suite. open returns a new, empty, migrated store for one
// subtest; it should close the store in t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) datachat.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s datachat.Store)
	}{
		{"Ping", testPing},
		{"Users", testUsers},
		{"UsersConcurrent", testUsersConcurrent},
		{"APIKeys", testAPIKeys},
		{"RevokedCredentials", testRevokedCredentials},
		{"Conversations", testConversations},
		{"OtherUsersConversation", testOtherUsersConversation},
		{"Messages", testMessages},
		{"RecentMessages", testRecentMessages},
		{"TurnStart", testTurnStart},
		{"ToolCalls", testToolCalls},
		{"InterruptStreaming", testInterruptStreaming},
		{"MessageParts", testMessageParts},
		{"FinishMessage", testFinishMessage},
		{"FlushStreaming", testFlushStreaming},
		{"FlushStreamingWhileDeleting", testFlushStreamingWhileDeleting},
		{"BeginTurn", testBeginTurn},
		{"BeginTurnConcurrent", testBeginTurnConcurrent},
		{"Datasets", testDatasets},
		{"Documents", testDocuments},
		{"HasDocuments", testHasDocuments},
		{"Confirmations", testConfirmations},
		{"ConfirmationResolveRace", testConfirmationResolveRace},
		{"Usage", testUsage},
		{"TakeRequest", testTakeRequest},
		{"TakeRequestConcurrent", testTakeRequestConcurrent},
		{"ConcurrentWriters", testConcurrentWriters},
		{"CascadeDelete", testCascadeDelete},
		{"Dictionary", testDictionary},
		{"SemanticLayer", testSemanticLayer},
		{"Examples", testExamples},
		{"DBSources", testDBSources},
	}
	for _, tt := range append(append(append(tests, accountTests...), shareTests...), searchTests...) {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
}

// base is a timestamp with nanoseconds and a zone other than UTC: stores must
// return it in UTC with at least millisecond precision.
var base = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("UTC+2", 2*3600))

func testPing(t *testing.T, s datachat.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: got %v, want nil", err)
	}
}

func testUsers(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatalf("EnsureUser: %v", err)
	}
	if alice.ID == "" || alice.Name != "alice" || alice.CreatedAt.IsZero() {
		t.Fatalf("EnsureUser: got %+v, want an ID, name alice and a creation time", alice)
	}
	checkUTC(t, "user CreatedAt", alice.CreatedAt)
	again, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatalf("EnsureUser again: %v", err)
	}
	equal(t, "EnsureUser of an existing name", again, alice)
	bob := mustUser(t, s, "bob")
	if bob.ID == alice.ID {
		t.Errorf("bob's ID: got %q, the same as alice's", bob.ID)
	}
	_, err = s.EnsureUser(ctx, "")
	wantCode(t, "EnsureUser(\"\")", err, datachat.EINVALID)
}

func testUsersConcurrent(t *testing.T, s datachat.Store) {
	const n = 10
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u, err := s.EnsureUser(t.Context(), "carol")
			errs[i] = err
			if u != nil {
				ids[i] = u.ID
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EnsureUser %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("EnsureUser %d: got ID %q, want %q as the others", i, ids[i], ids[0])
		}
	}
}

func testAPIKeys(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")

	k1 := &datachat.APIKey{UserID: alice.ID, Prefix: "dck_aaaa", Hash: "hash-1", CreatedAt: base}
	if err := s.CreateAPIKey(ctx, k1); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if k1.ID == "" {
		t.Fatalf("CreateAPIKey: got empty ID, want one filled in")
	}
	checkTime(t, "key CreatedAt", k1.CreatedAt, base)
	k2 := &datachat.APIKey{UserID: bob.ID, Prefix: "dck_bbbb", Hash: "hash-2"}
	if err := s.CreateAPIKey(ctx, k2); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if k2.CreatedAt.IsZero() {
		t.Fatalf("CreateAPIKey: got zero CreatedAt, want it filled in")
	}
	wantCode(t, "CreateAPIKey with a used hash", s.CreateAPIKey(ctx,
		&datachat.APIKey{UserID: bob.ID, Prefix: "x", Hash: "hash-2"}), datachat.ECONFLICT)
	wantCode(t, "CreateAPIKey for an unknown user", s.CreateAPIKey(ctx,
		&datachat.APIKey{UserID: "no-such-user", Prefix: "x", Hash: "hash-3"}), datachat.ENOTFOUND)

	keys, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatalf("APIKeys: %v", err)
	}
	k1.UserName, k2.UserName = "alice", "bob"
	equal(t, "APIKeys", keys, []*datachat.APIKey{k1, k2})
	wantCount(t, s, 2)

	u, cred, err := s.Authenticate(ctx, "hash-1")
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	equal(t, "Authenticate", u, alice)
	equal(t, "Authenticate's credential", cred, datachat.Credential{Kind: datachat.CredentialAPIKey, ID: k1.ID, UserID: alice.ID})
	keys, err = s.APIKeys(ctx)
	if err != nil {
		t.Fatalf("APIKeys: %v", err)
	}
	if keys[0].LastUsedAt == nil {
		t.Errorf("LastUsedAt after Authenticate: got nil, want the time of use")
	} else {
		checkUTC(t, "LastUsedAt", *keys[0].LastUsedAt)
	}
	if keys[1].LastUsedAt != nil {
		t.Errorf("LastUsedAt of an unused key: got %v, want nil", keys[1].LastUsedAt)
	}

	_, _, err = s.Authenticate(ctx, "no-such-hash")
	wantCode(t, "Authenticate with an unknown hash", err, datachat.EUNAUTHORIZED)
	_, _, err = s.Authenticate(ctx, "")
	wantCode(t, "Authenticate with an empty hash", err, datachat.EUNAUTHORIZED)

	if err := s.RevokeAPIKey(ctx, k1.ID); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	_, _, err = s.Authenticate(ctx, "hash-1")
	wantCode(t, "Authenticate with a revoked key", err, datachat.EUNAUTHORIZED)
	wantCount(t, s, 1)
	keys, err = s.APIKeys(ctx)
	if err != nil {
		t.Fatalf("APIKeys: %v", err)
	}
	if len(keys) != 2 {
		t.Fatalf("APIKeys after revoking: got %d keys, want 2 (revoked ones are listed)", len(keys))
	}
	if keys[0].RevokedAt == nil || keys[1].RevokedAt != nil {
		t.Errorf("RevokedAt: got %v and %v, want a time and nil", keys[0].RevokedAt, keys[1].RevokedAt)
	}
	if err := s.RevokeAPIKey(ctx, k1.ID); err != nil {
		t.Errorf("RevokeAPIKey of a revoked key: got %v, want nil", err)
	}
	wantCode(t, "RevokeAPIKey of an unknown key", s.RevokeAPIKey(ctx, "no-such-key"), datachat.ENOTFOUND)
	if _, _, err := s.Authenticate(ctx, "hash-2"); err != nil {
		t.Errorf("Authenticate with the other key: got %v, want nil", err)
	}
}

func wantCount(t *testing.T, s datachat.Store, want int) {
	t.Helper()
	n, err := s.CountAPIKeys(t.Context())
	if err != nil {
		t.Fatalf("CountAPIKeys: %v", err)
	}
	if n != want {
		t.Errorf("CountAPIKeys: got %d, want %d", n, want)
	}
}

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
	text := func(s string) datachat.Part { return datachat.Part{Type: datachat.PartText, Text: s} }
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

// testFlushStreaming writes the parts and leases of several streaming
// messages in one call, one of them deleted before it: the others are
// written, the deleted one is reported gone.
func testFlushStreaming(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	text := func(s string) datachat.Part { return datachat.Part{Type: datachat.PartText, Text: s} }
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

func testFinishMessage(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusStreaming)
	text := func(s string) datachat.Part { return datachat.Part{Type: datachat.PartText, Text: s} }
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

func testDatasets(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)

	list, err := s.Datasets(ctx, c.ID)
	wantEmpty(t, "Datasets of an empty conversation", list, err)

	d1 := &datachat.Dataset{ConversationID: c.ID, Name: "starwars", Source: "StarWars.csv", Format: "parquet",
		Path: "datasets/x/starwars.parquet", RowCount: 87, Bytes: 12345, CreatedAt: base,
		Columns: []datachat.Column{
			{Name: "name", Type: "text", SQLType: "VARCHAR"},
			{Name: "height", Type: "integer", SQLType: "BIGINT"},
			{Name: "mass", Type: "decimal", SQLType: "DECIMAL(10,2)"},
		}}
	d2 := &datachat.Dataset{ConversationID: c.ID, Name: "alltypes_plain_snappy",
		Source: "https://example.com/alltypes_plain.snappy.parquet", Format: "parquet", Path: "datasets/y.parquet",
		Columns: []datachat.Column{{Name: "id", Type: "integer", SQLType: "INTEGER"}}}
	for _, d := range []*datachat.Dataset{d1, d2} {
		if err := s.CreateDataset(ctx, d); err != nil {
			t.Fatalf("CreateDataset: %v", err)
		}
		if d.ID == "" || d.CreatedAt.IsZero() {
			t.Fatalf("CreateDataset: got ID %q, CreatedAt %v, want both filled in", d.ID, d.CreatedAt)
		}
	}
	checkTime(t, "dataset CreatedAt", d1.CreatedAt, base)

	list, err = s.Datasets(ctx, c.ID)
	if err != nil {
		t.Fatalf("Datasets: %v", err)
	}
	equal(t, "Datasets", list, []*datachat.Dataset{d1, d2})
	got, err := s.Dataset(ctx, c.ID, d1.ID)
	if err != nil {
		t.Fatalf("Dataset: %v", err)
	}
	equal(t, "Dataset", got, d1)

	wantCode(t, "CreateDataset with a name already used", s.CreateDataset(ctx,
		&datachat.Dataset{ConversationID: c.ID, Name: "starwars"}), datachat.ECONFLICT)
	if err := s.CreateDataset(ctx, &datachat.Dataset{ConversationID: other.ID, Name: "starwars"}); err != nil {
		t.Errorf("CreateDataset with the same name in another conversation: got %v, want nil", err)
	}
	wantCode(t, "CreateDataset in an unknown conversation", s.CreateDataset(ctx,
		&datachat.Dataset{ConversationID: "no-such-conversation", Name: "x"}), datachat.ENOTFOUND)
	_, err = s.Dataset(ctx, other.ID, d1.ID)
	wantCode(t, "Dataset through another conversation", err, datachat.ENOTFOUND)
	_, err = s.Dataset(ctx, c.ID, "no-such-dataset")
	wantCode(t, "Dataset of an unknown id", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDataset through another conversation", s.DeleteDataset(ctx, other.ID, d1.ID), datachat.ENOTFOUND)

	if err := s.DeleteDataset(ctx, c.ID, d1.ID); err != nil {
		t.Fatalf("DeleteDataset: %v", err)
	}
	_, err = s.Dataset(ctx, c.ID, d1.ID)
	wantCode(t, "Dataset after delete", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDataset twice", s.DeleteDataset(ctx, c.ID, d1.ID), datachat.ENOTFOUND)
	list, err = s.Datasets(ctx, c.ID)
	if err != nil {
		t.Fatalf("Datasets: %v", err)
	}
	equal(t, "Datasets after delete", list, []*datachat.Dataset{d2})
}

func testDocuments(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)

	doc1 := &datachat.Document{ConversationID: c.ID, Name: "report.pdf", MediaType: "application/pdf",
		Pages: 3, Bytes: 4096, CreatedAt: base,
		Metadata: map[string]string{"department": "finance", "year": "2024"}}
	chunks1 := []*datachat.Chunk{
		{Seq: 0, Page: 1, Heading: "Intro", Start: 0, End: 100, Text: "first chunk"},
		{Seq: 1, Page: 2, Start: 100, End: 250, Text: "second chunk ✓"},
		{Seq: 2, Page: 3, Heading: "End", Start: 250, End: 300, Text: "third chunk"},
	}
	if err := s.CreateDocument(ctx, doc1, chunks1); err != nil {
		t.Fatalf("CreateDocument: %v", err)
	}
	if doc1.ID == "" {
		t.Fatalf("CreateDocument: got empty ID, want one filled in")
	}
	checkTime(t, "document CreatedAt", doc1.CreatedAt, base)
	for _, ch := range chunks1 {
		if ch.ID == "" || ch.DocumentID != doc1.ID {
			t.Fatalf("CreateDocument chunk: got ID %q, DocumentID %q, want an ID and %q", ch.ID, ch.DocumentID, doc1.ID)
		}
	}
	doc2 := &datachat.Document{ConversationID: c.ID, Name: "notes.md", MediaType: "text/markdown", Chunks: 2}
	chunks2 := []*datachat.Chunk{
		{Seq: 1, Start: 10, End: 20, Text: "b"},
		{Seq: 0, Start: 0, End: 10, Text: "a"},
	}
	if err := s.CreateDocument(ctx, doc2, chunks2); err != nil {
		t.Fatalf("CreateDocument: %v", err)
	}

	docs, err := s.Documents(ctx, c.ID)
	if err != nil {
		t.Fatalf("Documents: %v", err)
	}
	equal(t, "Documents", docs, []*datachat.Document{doc1, doc2})
	if docs[0].Chunks != 3 {
		t.Errorf("Document.Chunks: got %d, want 3", docs[0].Chunks)
	}
	got, err := s.Document(ctx, c.ID, doc1.ID)
	if err != nil {
		t.Fatalf("Document: %v", err)
	}
	equal(t, "Document", got, doc1)

	chunks, err := s.Chunks(ctx, c.ID)
	if err != nil {
		t.Fatalf("Chunks: %v", err)
	}
	equal(t, "Chunks", chunks, []*datachat.Chunk{chunks1[0], chunks1[1], chunks1[2], chunks2[1], chunks2[0]})
	chunks, err = s.Chunks(ctx, other.ID)
	wantEmpty(t, "Chunks of a conversation without documents", chunks, err)

	_, err = s.Document(ctx, other.ID, doc1.ID)
	wantCode(t, "Document through another conversation", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDocument through another conversation", s.DeleteDocument(ctx, other.ID, doc1.ID), datachat.ENOTFOUND)
	wantCode(t, "CreateDocument in an unknown conversation", s.CreateDocument(ctx,
		&datachat.Document{ConversationID: "no-such-conversation", Name: "x"},
		[]*datachat.Chunk{{Text: "x"}}), datachat.ENOTFOUND)

	if err := s.DeleteDocument(ctx, c.ID, doc1.ID); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	_, err = s.Document(ctx, c.ID, doc1.ID)
	wantCode(t, "Document after delete", err, datachat.ENOTFOUND)
	wantCode(t, "DeleteDocument twice", s.DeleteDocument(ctx, c.ID, doc1.ID), datachat.ENOTFOUND)
	chunks, err = s.Chunks(ctx, c.ID)
	if err != nil {
		t.Fatalf("Chunks: %v", err)
	}
	equal(t, "Chunks after deleting a document", chunks, []*datachat.Chunk{chunks2[1], chunks2[0]})
}

func testHasDocuments(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)
	has := func(what, conversationID string, want bool) {
		t.Helper()
		got, err := s.HasDocuments(ctx, conversationID)
		if err != nil {
			t.Fatalf("HasDocuments %s: %v", what, err)
		}
		if got != want {
			t.Errorf("HasDocuments %s: got %v, want %v", what, got, want)
		}
	}
	has("of a new conversation", c.ID, false)
	has("of an unknown conversation", "no-such-conversation", false)
	var docs []*datachat.Document
	for _, name := range []string{"a.pdf", "b.pdf"} {
		d := &datachat.Document{ConversationID: c.ID, Name: name, MediaType: "application/pdf"}
		if err := s.CreateDocument(ctx, d, []*datachat.Chunk{{Text: "text of " + name}}); err != nil {
			t.Fatalf("CreateDocument: %v", err)
		}
		docs = append(docs, d)
	}
	has("of a conversation with two documents", c.ID, true)
	has("of another conversation", other.ID, false)
	if err := s.DeleteDocument(ctx, c.ID, docs[0].ID); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	has("after deleting one of two", c.ID, true)
	if err := s.DeleteDocument(ctx, c.ID, docs[1].ID); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	has("after deleting both", c.ID, false)
}

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

func testUsage(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")

	usages := []*datachat.Usage{
		{UserID: alice.ID, ConversationID: "c1", MessageID: "m1", Provider: "gemini", Model: "gemini-2.5-flash",
			InputTokens: 100, OutputTokens: 50, Success: true, CreatedAt: base.Add(-2 * time.Hour)},
		{UserID: alice.ID, InputTokens: 10, OutputTokens: 5, Estimated: true, CreatedAt: base.Add(-time.Hour)},
		{UserID: alice.ID, InputTokens: 1, OutputTokens: 2, Success: true, CreatedAt: base},
		{UserID: bob.ID, InputTokens: 1000, OutputTokens: 1000, Success: true, CreatedAt: base},
	}
	for _, u := range usages {
		if err := s.RecordUsage(ctx, u); err != nil {
			t.Fatalf("RecordUsage: %v", err)
		}
		if u.ID == "" {
			t.Fatalf("RecordUsage: got empty ID, want one filled in")
		}
	}
	checkTime(t, "usage CreatedAt", usages[2].CreatedAt, base)
	now := &datachat.Usage{UserID: alice.ID, InputTokens: 7}
	if err := s.RecordUsage(ctx, now); err != nil {
		t.Fatalf("RecordUsage: %v", err)
	}
	if now.CreatedAt.IsZero() {
		t.Fatalf("RecordUsage: got zero CreatedAt, want it filled in")
	}
	wantCode(t, "RecordUsage for an unknown user", s.RecordUsage(ctx,
		&datachat.Usage{UserID: "no-such-user", InputTokens: 1}), datachat.ENOTFOUND)

	tests := []struct {
		user  string
		since time.Time
		want  int64
	}{
		{alice.ID, base.Add(-3 * time.Hour), 175},
		{alice.ID, base.Add(-time.Hour), 25}, // at or after: the row at exactly since counts
		{alice.ID, base.Add(-time.Hour + time.Millisecond), 10},
		{alice.ID, usages[2].CreatedAt, 10},
		{alice.ID, base.Add(time.Millisecond), 7},
		{alice.ID, now.CreatedAt.Add(time.Millisecond), 0},
		{bob.ID, base.Add(-time.Hour), 2000},
		{"no-such-user", base.Add(-time.Hour), 0},
	}
	for _, tt := range tests {
		got, err := s.TokensSince(ctx, tt.user, tt.since)
		if err != nil {
			t.Fatalf("TokensSince: %v", err)
		}
		if got != tt.want {
			t.Errorf("TokensSince(%s, %v): got %d, want %d", tt.user, tt.since, got, tt.want)
		}
	}
}

func testTakeRequest(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	const window, limit = time.Minute, 3
	t0 := base

	take := func(user string, at time.Time, wantOK bool, wantRetry time.Duration) {
		t.Helper()
		ok, retry, err := s.TakeRequest(ctx, user, at, window, limit)
		if err != nil {
			t.Fatalf("TakeRequest at %v: %v", at.Sub(t0), err)
		}
		if ok != wantOK || retry != wantRetry {
			t.Errorf("TakeRequest at t0+%v: got %v, %v; want %v, %v", at.Sub(t0), ok, retry, wantOK, wantRetry)
		}
	}
	take(alice.ID, t0, true, 0)
	take(alice.ID, t0.Add(time.Second), true, 0)
	take(alice.ID, t0.Add(2*time.Second), true, 0)
	take(alice.ID, t0.Add(3*time.Second), false, 57*time.Second)
	take(alice.ID, t0.Add(59*time.Second), false, time.Second)
	take(bob.ID, t0.Add(3*time.Second), true, 0) // users are independent
	// The window is (now-window, now]: the request at t0 has left it at t0+60s.
	take(alice.ID, t0.Add(window), true, 0)
	take(alice.ID, t0.Add(window), false, time.Second)
	take(alice.ID, t0.Add(window+500*time.Millisecond), false, 500*time.Millisecond)
	take(alice.ID, t0.Add(window+time.Second), true, 0)
	take(alice.ID, t0.Add(window+time.Second), false, time.Second)
	take(alice.ID, t0.Add(10*window), true, 0)

	ok, _, err := s.TakeRequest(ctx, alice.ID, t0.Add(10*window), window, 0)
	if err != nil || !ok {
		t.Errorf("TakeRequest with limit 0 (off): got %v, %v; want true, nil", ok, err)
	}

	// Callers read the clock before they wait for the lock, so a request can
	// arrive with an earlier now than ones already admitted: those count too.
	carol := mustUser(t, s, "carol")
	for i := range limit {
		take(carol.ID, t0.Add(time.Duration(10+i)*time.Millisecond), true, 0)
	}
	if ok, _, _ := s.TakeRequest(ctx, carol.ID, t0, window, limit); ok {
		t.Errorf("TakeRequest with an earlier now: admitted beyond the limit")
	}
}

func testTakeRequestConcurrent(t *testing.T, s datachat.Store) {
	alice := mustUser(t, s, "alice")
	const n, limit, window = 50, 10, time.Minute
	now := time.Now()
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ok, retry, err := s.TakeRequest(t.Context(), alice.ID, now, window, limit)
			if err != nil {
				t.Errorf("TakeRequest: %v", err)
				return
			}
			if ok {
				admitted.Add(1)
			} else if retry <= 0 || retry > window {
				t.Errorf("TakeRequest refused: got retry after %v, want in (0, %v]", retry, window)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("concurrent TakeRequest: got %d admitted, want exactly %d of %d", got, limit, n)
	}
}

func testConcurrentWriters(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	const writers, each = 20, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant,
					Status: datachat.StatusStreaming, Content: fmt.Sprintf("writer %d message %d", w, i)}
				if err := s.CreateMessage(ctx, m); err != nil {
					t.Errorf("CreateMessage: %v", err)
					return
				}
				if err := s.CreateToolCall(ctx, &datachat.ToolCall{MessageID: m.ID, Tool: "execute_sql",
					Args: json.RawMessage(`{"query":"SELECT 1"}`), OK: true}); err != nil {
					t.Errorf("CreateToolCall: %v", err)
					return
				}
				m.Status = datachat.StatusComplete
				if err := s.UpdateMessage(ctx, m); err != nil {
					t.Errorf("UpdateMessage: %v", err)
					return
				}
				if _, err := s.Messages(ctx, c.ID); err != nil {
					t.Errorf("Messages: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	msgs, err := s.Messages(ctx, c.ID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if len(msgs) != writers*each {
		t.Fatalf("Messages: got %d, want %d", len(msgs), writers*each)
	}
	for _, m := range msgs {
		if m.Status != datachat.StatusComplete || len(m.ToolCalls) != 1 {
			t.Fatalf("message %q: got status %q and %d tool calls, want %q and 1",
				m.Content, m.Status, len(m.ToolCalls), datachat.StatusComplete)
		}
	}
}

func testCascadeDelete(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	keep := mustConversation(t, s, alice.ID)

	fill := func(c *datachat.Conversation) {
		t.Helper()
		m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusAwaitingConfirmation)
		if err := s.CreateToolCall(ctx, &datachat.ToolCall{MessageID: m.ID, Tool: "execute_sql",
			Args: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("CreateToolCall: %v", err)
		}
		if err := s.CreateDataset(ctx, &datachat.Dataset{ConversationID: c.ID, Name: "t"}); err != nil {
			t.Fatalf("CreateDataset: %v", err)
		}
		if err := s.CreateDocument(ctx, &datachat.Document{ConversationID: c.ID, Name: "d.md"},
			[]*datachat.Chunk{{Text: "a"}, {Seq: 1, Text: "b"}}); err != nil {
			t.Fatalf("CreateDocument: %v", err)
		}
		if err := s.CreateConfirmation(ctx, &datachat.Confirmation{ConversationID: c.ID, MessageID: m.ID,
			Action: "execute_sql", Parameters: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("CreateConfirmation: %v", err)
		}
		if err := s.RecordUsage(ctx, &datachat.Usage{UserID: alice.ID, ConversationID: c.ID, MessageID: m.ID,
			InputTokens: 10, OutputTokens: 1}); err != nil {
			t.Fatalf("RecordUsage: %v", err)
		}
	}
	fill(c)
	fill(keep)

	if err := s.DeleteConversation(ctx, alice.ID, c.ID); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	counts := func(c *datachat.Conversation) (msgs, datasets, docs, chunks int, pending bool) {
		t.Helper()
		ms, err := s.Messages(ctx, c.ID)
		if err != nil {
			t.Fatalf("Messages: %v", err)
		}
		ds, err := s.Datasets(ctx, c.ID)
		if err != nil {
			t.Fatalf("Datasets: %v", err)
		}
		dc, err := s.Documents(ctx, c.ID)
		if err != nil {
			t.Fatalf("Documents: %v", err)
		}
		ch, err := s.Chunks(ctx, c.ID)
		if err != nil {
			t.Fatalf("Chunks: %v", err)
		}
		_, err = s.PendingConfirmation(ctx, c.ID)
		if err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
			t.Fatalf("PendingConfirmation: %v", err)
		}
		return len(ms), len(ds), len(dc), len(ch), err == nil
	}
	if m, d, doc, ch, p := counts(c); m+d+doc+ch != 0 || p {
		t.Errorf("deleted conversation: got %d messages, %d datasets, %d documents, %d chunks, pending confirmation %v; want none",
			m, d, doc, ch, p)
	}
	if m, d, doc, ch, p := counts(keep); m != 1 || d != 1 || doc != 1 || ch != 2 || !p {
		t.Errorf("other conversation: got %d messages, %d datasets, %d documents, %d chunks, pending confirmation %v; want 1, 1, 1, 2, true",
			m, d, doc, ch, p)
	}
	// Token usage outlives the conversation: deleting one must not reset a budget.
	n, err := s.TokensSince(ctx, alice.ID, time.Time{})
	if err != nil {
		t.Fatalf("TokensSince: %v", err)
	}
	if n != 22 {
		t.Errorf("TokensSince after deleting a conversation: got %d, want 22", n)
	}
}

func mustUser(t *testing.T, s datachat.Store, name string) *datachat.User {
	t.Helper()
	u, err := s.EnsureUser(t.Context(), name)
	if err != nil {
		t.Fatalf("EnsureUser(%q): %v", name, err)
	}
	return u
}

func mustConversation(t *testing.T, s datachat.Store, userID string) *datachat.Conversation {
	t.Helper()
	c := &datachat.Conversation{UserID: userID, Title: "conversation"}
	if err := s.CreateConversation(t.Context(), c); err != nil {
		t.Fatalf("CreateConversation: %v", err)
	}
	return c
}

func mustMessage(t *testing.T, s datachat.Store, conversationID, role, status string) *datachat.Message {
	t.Helper()
	m := &datachat.Message{ConversationID: conversationID, Role: role, Status: status, Content: role + " text"}
	if err := s.CreateMessage(t.Context(), m); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}
	return m
}

func ids(list []*datachat.Conversation) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.ID
	}
	return out
}

// wantCode fails unless err carries the error code want.
// wantEmpty fails t unless a listing, named by what, succeeded with an
// empty slice that is not nil: the API sends it as [], not null.
func wantEmpty[T any](t *testing.T, what string, list []T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if list == nil || len(list) != 0 {
		t.Fatalf("%s: got %#v, want an empty slice", what, list)
	}
}

func wantCode(t *testing.T, what string, err error, want string) {
	t.Helper()
	if got := datachat.ErrorCode(err); got != want {
		t.Errorf("%s: got error %v (code %q), want code %q", what, err, got, want)
	}
}

// checkUTC fails unless t is in UTC.
func checkUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.Location() != time.UTC {
		t.Errorf("%s: got location %v, want UTC", what, tm.Location())
	}
}

// checkTime fails unless got, a timestamp a Create method normalised from in,
// is in UTC and within the same millisecond.
func checkTime(t *testing.T, what string, got, in time.Time) {
	t.Helper()
	checkUTC(t, what, got)
	if !got.Truncate(time.Millisecond).Equal(in.Truncate(time.Millisecond)) {
		t.Errorf("%s: got %v, want %v to the millisecond", what, got, in.UTC())
	}
}

// equal fails unless got and want are deeply equal: what a Create method left
// in its argument is exactly what reads return.
func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\ngot  %s\nwant %s", what, show(got), show(want))
	}
}

// show formats v for a failure message: pointers followed, slice elements one
// a line, JSON fields as text.
func show(v any) string {
	return showValue(reflect.ValueOf(v), "")
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func showValue(rv reflect.Value, indent string) string {
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return "nil"
		}
		rv = rv.Elem()
	}
	switch {
	case rv.Type() == rawMessageType:
		if rv.IsNil() {
			return "nil"
		}
		return fmt.Sprintf("%s", rv.Bytes())
	case rv.Kind() == reflect.Slice:
		if rv.IsNil() {
			return "nil"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d elements", rv.Len())
		for i := range rv.Len() {
			fmt.Fprintf(&b, "\n%s  [%d] %s", indent, i, showValue(rv.Index(i), indent+"  "))
		}
		return b.String()
	case rv.Kind() == reflect.Struct && rv.Type() != reflect.TypeFor[time.Time]():
		var b strings.Builder
		b.WriteString("{")
		for i := range rv.NumField() {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s:%s", rv.Type().Field(i).Name, showValue(rv.Field(i), indent+"  "))
		}
		b.WriteString("}")
		return b.String()
	default:
		return fmt.Sprintf("%v", rv)
	}
}
