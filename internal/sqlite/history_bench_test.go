package sqlite_test

import (
	"strings"
	"testing"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
)

// What reading a conversation's history costs a turn (BENCHMARKS.md, "Token
// latency"): the newest 49 messages of a conversation of 60, each answer
// 2 KB with its sources, among 100 such conversations.
//
//	go test -run '^$' -bench RecentMessages ./internal/sqlite
func BenchmarkRecentMessages(b *testing.B) {
	ctx := b.Context()
	s := sqlitetest.Open(b)
	var convs []string
	for range 100 {
		_, c := sqlitetest.Conversation(b, s, "bench")
		convs = append(convs, c.ID)
		for i := range 60 {
			m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "How did revenue go?", Status: datachat.StatusComplete}
			if i%2 == 1 {
				m.Role, m.Content = datachat.RoleAssistant, strings.Repeat("Revenue grew in the north. ", 80)
				m.Sources = []datachat.Source{{ID: "s1", Text: strings.Repeat("excerpt ", 100)}}
			}
			if err := s.CreateMessage(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := 0; b.Loop(); i++ {
		msgs, err := s.RecentMessages(ctx, convs[i%len(convs)], 49)
		if err != nil || len(msgs) != 49 {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
}
