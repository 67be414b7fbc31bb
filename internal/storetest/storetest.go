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
	"testing"
	"time"

	"datachat"
)

// Run runs the suite. open returns a new, empty, migrated store for one
// subtest; it should close the store in t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) datachat.Store) {
	tests := []storeTest{
		{"Ping", testPing},
		{"Users", testUsers},
		{"UsersConcurrent", testUsersConcurrent},
		{"APIKeys", testAPIKeys},
		{"RevokedCredentials", testRevokedCredentials},
		{"Conversations", testConversations},
		{"OtherUsersConversation", testOtherUsersConversation},
		{"HostileIDs", testHostileIDs},
		{"Messages", testMessages},
		{"RecentMessages", testRecentMessages},
		{"TurnStart", testTurnStart},
		{"ToolCalls", testToolCalls},
		{"InterruptStreaming", testInterruptStreaming},
		{"MessageParts", testMessageParts},
		{"FinishMessage", testFinishMessage},
		{"FinishKeepsStreamedParts", testFinishKeepsStreamedParts},
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
	runTests(t, open, append(append(append(tests, accountTests...), shareTests...), searchTests...))
}

// storeTest is a case of the suite: a subtest on a new store.
type storeTest struct {
	name string
	fn   func(t *testing.T, s datachat.Store)
}

// runTests runs each test as a subtest, on a new store from open.
func runTests(t *testing.T, open func(t *testing.T) datachat.Store, tests []storeTest) {
	for _, tt := range tests {
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

// text is a text part of a message.
func text(s string) datachat.Part { return datachat.Part{Type: datachat.PartText, Text: s} }

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
