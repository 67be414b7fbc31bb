package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// What keeping statements prepared saves (BENCHMARKS.md, "Token latency"):
// the transaction a streaming answer's flush runs every second, through the
// store's pool (statements kept prepared per connection) and through the
// bare driver (each statement prepared for every use, as before).
//
//	go test -run '^$' -bench StatementCache -benchmem ./internal/sqlite
func BenchmarkStatementCache(b *testing.B) {
	for _, c := range []struct {
		name string
		open func(string) (*sql.DB, error)
	}{
		{"prepared_each_use", func(p string) (*sql.DB, error) { return sql.Open("sqlite", p) }},
		{"kept_prepared", openDB},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := c.open(filepath.Join(b.TempDir(), "bench.db") + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			ctx := context.Background()
			for _, q := range []string{
				`CREATE TABLE messages (id TEXT PRIMARY KEY, content TEXT)`,
				`CREATE TABLE message_parts (message_id TEXT, seq INTEGER, kind TEXT, text TEXT, call_id TEXT, PRIMARY KEY (message_id, seq))`,
				`INSERT INTO messages VALUES ('m1', '')`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				var one int
				if err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?`, "m1").Scan(&one); err != nil {
					b.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, `
			INSERT INTO message_parts (message_id, seq, kind, text, call_id) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (message_id, seq) DO NOTHING`, "m1", i, "text", "tok01 tok02 ", ""); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
