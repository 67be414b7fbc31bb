package chat

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llmtest"
	"datachat/internal/sqlite/sqlitetest"
)

// countingStore records the store calls a Runner makes, in order.
type countingStore struct {
	TurnStore
	mu    sync.Mutex
	calls []string
}

func (s *countingStore) count(name string) {
	s.mu.Lock()
	s.calls = append(s.calls, name)
	s.mu.Unlock()
}

func (s *countingStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *countingStore) Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error) {
	s.count("Conversation")
	return s.TurnStore.Conversation(ctx, userID, id)
}
func (s *countingStore) Messages(ctx context.Context, id string) ([]*datachat.Message, error) {
	s.count("Messages")
	return s.TurnStore.Messages(ctx, id)
}
func (s *countingStore) RecentMessages(ctx context.Context, id string, n int) ([]*datachat.Message, error) {
	s.count("RecentMessages")
	return s.TurnStore.RecentMessages(ctx, id, n)
}
func (s *countingStore) TurnStart(ctx context.Context, userID, id string, n int) (*datachat.Conversation, *datachat.Confirmation, []*datachat.Message, error) {
	s.count("TurnStart")
	return s.TurnStore.TurnStart(ctx, userID, id, n)
}
func (s *countingStore) Examples(ctx context.Context, userID string) ([]*datachat.Example, error) {
	s.count("Examples")
	return s.TurnStore.Examples(ctx, userID)
}
func (s *countingStore) BeginTurn(ctx context.Context, user, assistant *datachat.Message, lease datachat.Lease, now time.Time) error {
	s.count("BeginTurn")
	return s.TurnStore.BeginTurn(ctx, user, assistant, lease, now)
}
func (s *countingStore) RenewLease(ctx context.Context, id string, lease datachat.Lease) error {
	s.count("RenewLease")
	return s.TurnStore.RenewLease(ctx, id, lease)
}
func (s *countingStore) FlushStreaming(ctx context.Context, batch []datachat.StreamingFlush) ([]string, error) {
	s.count("FlushStreaming")
	return s.TurnStore.FlushStreaming(ctx, batch)
}
func (s *countingStore) CreateToolCall(ctx context.Context, tc *datachat.ToolCall) error {
	s.count("CreateToolCall")
	return s.TurnStore.CreateToolCall(ctx, tc)
}
func (s *countingStore) UpdateMessage(ctx context.Context, m *datachat.Message) error {
	s.count("UpdateMessage")
	return s.TurnStore.UpdateMessage(ctx, m)
}
func (s *countingStore) FinishMessage(ctx context.Context, m *datachat.Message, u *datachat.Usage) error {
	s.count("FinishMessage")
	return s.TurnStore.FinishMessage(ctx, m, u)
}
func (s *countingStore) CreateConfirmation(ctx context.Context, c *datachat.Confirmation) error {
	s.count("CreateConfirmation")
	return s.TurnStore.CreateConfirmation(ctx, c)
}
func (s *countingStore) PendingConfirmation(ctx context.Context, id string) (*datachat.Confirmation, error) {
	s.count("PendingConfirmation")
	return s.TurnStore.PendingConfirmation(ctx, id)
}
func (s *countingStore) ResolveConfirmation(ctx context.Context, id, status, note string) (*datachat.Confirmation, error) {
	s.count("ResolveConfirmation")
	return s.TurnStore.ResolveConfirmation(ctx, id, status, note)
}
func (s *countingStore) TokensSince(ctx context.Context, userID string, since time.Time) (int64, error) {
	s.count("TokensSince")
	return s.TurnStore.TokensSince(ctx, userID, since)
}
func (s *countingStore) TakeRequest(ctx context.Context, userID string, now time.Time, window time.Duration, limit int) (bool, time.Duration, error) {
	s.count("TakeRequest")
	return s.TurnStore.TakeRequest(ctx, userID, now, window, limit)
}

// TestTurnStoreRoundTrips: a turn of the token-latency load (a question, a
// search_documents call, a streamed answer; no limits set) makes one read
// before it starts — the conversation, its pending confirmation and the
// history in one TurnStart — then begins, reads the user's verified
// examples for the prompt, stores its tool call and finishes: five store
// calls. (Before TurnStart it read the first three apart: seven.)
func TestTurnStoreRoundTrips(t *testing.T) {
	ctx := t.Context()
	st := &countingStore{TurnStore: sqlitetest.Open(t)}
	u, conv := sqlitetest.Conversation(t, st.TurnStore.(datachat.Store), "alice")
	r := newLoadRunner(st, llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Turns: loadTurns()}))
	out, err := r.Send(ctx, u, conv.ID, "Revenue by region?", TurnOptions{}, func(Event) {})
	if err != nil || out.Message.Status != datachat.StatusComplete {
		t.Fatalf("Send: %v, %+v", err, out)
	}
	// The flusher's calls depend on the clock; the turn's own do not.
	calls := slices.DeleteFunc(st.take(), func(c string) bool { return c == "FlushStreaming" })
	want := []string{"TurnStart", "BeginTurn", "Examples", "CreateToolCall", "FinishMessage"}
	if !slices.Equal(calls, want) {
		t.Errorf("store calls of a turn: %v, want %v", calls, want)
	}
}
