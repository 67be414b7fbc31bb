package postgres_test

import (
	"strings"
	"testing"
	"time"

	"datachat"
)

// What the store costs one chat turn, the calls that run on every one: the
// API key checked, the turn's start read (the conversation, its pending
// confirmation, its newest 49 messages of 60 or more), the turn begun (the
// question and a leased streaming answer), the answer streamed in one part
// and finished.
//
//	go test -run '^$' -bench Turn ./internal/postgres
func BenchmarkTurn(b *testing.B) {
	ctx := b.Context()
	s := benchStore(b)(b)
	u, err := s.EnsureUser(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	key := &datachat.APIKey{UserID: u.ID, Prefix: "dc_bench", Hash: "bench-hash"}
	if err := s.CreateAPIKey(ctx, key); err != nil {
		b.Fatal(err)
	}
	c := &datachat.Conversation{UserID: u.ID, Title: "bench"}
	if err := s.CreateConversation(ctx, c); err != nil {
		b.Fatal(err)
	}
	answer := strings.Repeat("Revenue grew in the north. ", 80)
	for i := range 60 {
		m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "How did revenue go?", Status: datachat.StatusComplete}
		if i%2 == 1 {
			m.Role, m.Content = datachat.RoleAssistant, answer
		}
		if err := s.CreateMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, _, err := s.Authenticate(ctx, key.Hash); err != nil {
			b.Fatal(err)
		}
		if _, _, msgs, err := s.TurnStart(ctx, u.ID, c.ID, 49); err != nil || len(msgs) != 49 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
		q := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "And in the south?", Status: datachat.StatusComplete}
		m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
		now := time.Now()
		if err := s.BeginTurn(ctx, q, m, datachat.Lease{Owner: "bench", Node: "bench", Until: now.Add(time.Minute)}, now); err != nil {
			b.Fatal(err)
		}
		if err := s.AppendParts(ctx, m.ID, 0, []datachat.Part{{Type: "text", Text: answer}}); err != nil {
			b.Fatal(err)
		}
		m.Content, m.Status = answer, datachat.StatusComplete
		if err := s.FinishMessage(ctx, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}
