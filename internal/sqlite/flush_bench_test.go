package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
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
			s := sqlitetest.Open(b)
			ids := make([]string, n)
			for i := range ids {
				_, c := sqlitetest.Conversation(b, s, "bench")
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
