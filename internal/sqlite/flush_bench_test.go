package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"datachat"
	"datachat/internal/sqlite"
)

// What one second of 500 streaming answers costs the store (BENCHMARKS.md,
// "Token latency"): each answer's new text, and the leases due (a fifth of
// them, renewed every third of a 15 s lease), written one transaction per
// message as before, or in one FlushStreaming transaction.
//
//	go test -run '^$' -bench FlushStreaming -benchtime 20x ./internal/sqlite
func BenchmarkFlushStreaming(b *testing.B) {
	const n = 500
	for _, perMessage := range []bool{true, false} {
		name := "one_transaction"
		if perMessage {
			name = "transaction_per_message"
		}
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			u, err := s.EnsureUser(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, n)
			for i := range ids {
				c := &datachat.Conversation{UserID: u.ID}
				if err := s.CreateConversation(ctx, c); err != nil {
					b.Fatal(err)
				}
				m := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
				if err := s.CreateMessage(ctx, m); err != nil {
					b.Fatal(err)
				}
				ids[i] = m.ID
			}
			lease := datachat.Lease{Owner: "bench", Node: "bench", Until: time.Now().Add(time.Minute)}
			for sec := 0; b.Loop(); sec++ {
				batch := make([]datachat.StreamingFlush, n)
				for i, id := range ids {
					batch[i] = datachat.StreamingFlush{MessageID: id, First: sec,
						Parts: []datachat.Part{{Type: datachat.PartText, Text: fmt.Sprintf("twenty tokens of %d ", sec)}}}
					if (i+sec)%5 == 0 {
						batch[i].Lease = &lease
					}
				}
				if !perMessage {
					if _, err := s.FlushStreaming(ctx, batch); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, f := range batch {
					if err := s.AppendParts(ctx, f.MessageID, f.First, f.Parts); err != nil {
						b.Fatal(err)
					}
					if f.Lease != nil {
						if err := s.RenewLease(ctx, f.MessageID, *f.Lease); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
