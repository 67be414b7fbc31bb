package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/storetest"
)

func TestAudit(t *testing.T) {
	testURL(t)
	storetest.RunAudit(t, func(t *testing.T) datachat.Store {
		return mustOpen(t, newSchema(t))
	})
}

// TestAuditAppendOnly: statements run directly on the database — not
// through the store — cannot change, delete or truncate audit events, nor
// set the prune's cutoff outside a transaction to get past the trigger;
// a prune deletes only what is older than its cutoff.
func TestAuditAppendOnly(t *testing.T) {
	ctx := t.Context()
	dsn := newSchema(t)
	s := mustOpen(t, dsn)
	old := &datachat.AuditEvent{Time: time.Now().AddDate(-2, 0, 0), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "alice"}
	ev := &datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice", SQL: "SELECT 1"}
	for _, e := range []*datachat.AuditEvent{old, ev} {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	refused := func(when string) {
		t.Helper()
		for _, q := range []string{
			`UPDATE audit_events SET sql_text = 'SELECT 2' WHERE id = '` + ev.ID + `'`,
			`UPDATE audit_events SET user_name = 'mallory'`,
			`DELETE FROM audit_events WHERE id = '` + ev.ID + `'`,
			`DELETE FROM audit_events`,
			`TRUNCATE audit_events`,
			`INSERT INTO audit_events (id, at, kind, outcome) VALUES ('` + ev.ID + `', now(), 'sign_in', 'ok')
				ON CONFLICT (id) DO UPDATE SET sql_text = 'SELECT 2'`,
			// The cutoff a prune sets covers only rows older than it.
			`BEGIN; SELECT set_config('datachat.audit_prune_before', '2000-01-01T00:00:00Z', true); DELETE FROM audit_events; COMMIT`,
		} {
			if _, err := conn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: %.60s: got %v, want it refused by the append-only trigger", when, q, err)
			}
			conn.Exec(ctx, "ROLLBACK") // after a failed BEGIN; …
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
}

// The audit log's costs (what every query on a database source adds):
//
//	go test -run '^$' -bench Audit ./internal/postgres
func BenchmarkAudit(b *testing.B) {
	storetest.BenchAudit(b, 100_000, benchStore(b))
}
