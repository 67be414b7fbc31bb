package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
	"datachat/internal/storetest"
)

func TestAudit(t *testing.T) {
	storetest.RunAudit(t, func(t *testing.T) datachat.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "datachat.db"))
	})
}

// TestAuditAppendOnly: statements run directly on the database file — not
// through the store — cannot change or delete an audit event, nor replace
// one, before a prune and after it; a prune deletes only what is older than
// its cutoff.
func TestAuditAppendOnly(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "datachat.db")
	s := mustOpen(t, path)
	old := &datachat.AuditEvent{Time: time.Now().AddDate(-2, 0, 0), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "alice"}
	ev := &datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice", SQL: "SELECT 1"}
	for _, e := range []*datachat.AuditEvent{old, ev} {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	refused := func(when string) {
		t.Helper()
		for _, q := range []string{
			`UPDATE audit_events SET sql_text = 'SELECT 2' WHERE id = '` + ev.ID + `'`,
			`UPDATE audit_events SET user_name = 'mallory'`,
			`DELETE FROM audit_events WHERE id = '` + ev.ID + `'`,
			`DELETE FROM audit_events`,
			`DELETE FROM audit_events WHERE at < '9999'`,
			`INSERT OR REPLACE INTO audit_events (id, at, kind, outcome) VALUES ('` + ev.ID + `', '2000-01-01T00:00:00.000000Z', 'sign_in', 'ok')`,
			`REPLACE INTO audit_events (id, at, kind, outcome) VALUES ('` + ev.ID + `', '2000-01-01T00:00:00.000000Z', 'sign_in', 'ok')`,
			`INSERT INTO audit_events (id, at, kind, outcome) VALUES ('` + ev.ID + `', '2000-01-01T00:00:00.000000Z', 'sign_in', 'ok')
				ON CONFLICT (id) DO UPDATE SET sql_text = 'SELECT 2'`,
		} {
			if _, err := db.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: %.60s: got %v, want it refused by the append-only trigger", when, q, err)
			}
		}
		got, err := s.AuditEvents(ctx, datachat.AuditFilter{Kind: datachat.AuditSourceQuery})
		if err != nil || len(got.Events) != 1 || got.Events[0].SQL != "SELECT 1" || got.Events[0].UserName != "alice" {
			t.Fatalf("%s: the event after the statements: %+v, %v; want it unchanged", when, got, err)
		}
	}
	refused("before a prune")
	if n, err := s.PruneAudit(ctx, time.Now().AddDate(-1, 0, 0)); err != nil || n != 1 {
		t.Fatalf("PruneAudit: %d, %v; want 1 deleted", n, err)
	}
	refused("after a prune")
	var marks int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM audit_prune`).Scan(&marks); err != nil || marks != 0 {
		t.Errorf("audit_prune after a prune: %d rows, %v; want none left", marks, err)
	}
}

// The audit log's costs (what every query on a database source adds):
//
//	go test -run '^$' -bench Audit ./internal/sqlite
func BenchmarkAudit(b *testing.B) {
	storetest.BenchAudit(b, 100_000, func(b *testing.B) datachat.Store {
		return sqlitetest.Open(b)
	})
}
