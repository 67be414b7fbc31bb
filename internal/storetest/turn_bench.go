package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"datachat"
)

// BenchTurn measures what the store costs one chat turn, the calls that run
// on every one: the API key checked, the turn's start read (the
// conversation, its pending confirmation, its newest 49 messages of 60 or
// more), the conversation's datasets read for the prompt, the turn begun
// (the question and a leased streaming answer), the answer streamed in one
// flush and finished.
func BenchTurn(b *testing.B, s datachat.Store) {
	ctx := b.Context()
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
	for i := range 3 {
		d := &datachat.Dataset{ConversationID: c.ID, Name: fmt.Sprintf("sales_%d", i), Source: "sales.csv",
			Format: "csv", Path: fmt.Sprintf("datasets/%d.parquet", i), RowCount: 1000, Bytes: 40000,
			Columns: []datachat.Column{
				{Name: "region", Type: "text", SQLType: "VARCHAR", Samples: []string{"north", "south"}},
				{Name: "month", Type: "date", SQLType: "DATE"},
				{Name: "revenue", Type: "decimal", SQLType: "DECIMAL(12,2)"},
			}}
		if err := s.CreateDataset(ctx, d); err != nil {
			b.Fatal(err)
		}
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
		if ds, err := s.Datasets(ctx, c.ID); err != nil || len(ds) != 3 {
			b.Fatalf("%d datasets, %v", len(ds), err)
		}
		q := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "And in the south?", Status: datachat.StatusComplete}
		m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
		now := time.Now()
		lease := datachat.Lease{Owner: "bench", Node: "bench", Until: now.Add(time.Minute)}
		if err := s.BeginTurn(ctx, q, m, lease, now); err != nil {
			b.Fatal(err)
		}
		flush := []datachat.StreamingFlush{{MessageID: m.ID, Parts: []datachat.Part{{Type: datachat.PartText, Text: answer}}, Lease: &lease}}
		if _, err := s.FlushStreaming(ctx, flush); err != nil {
			b.Fatal(err)
		}
		m.Content, m.Status = answer, datachat.StatusComplete
		if err := s.FinishMessage(ctx, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}
