package postgres_test

import (
	"context"
	"testing"

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
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(ctx context.Context, q string) error {
		_, err := conn.Exec(ctx, q)
		conn.Exec(ctx, "ROLLBACK") // after a failed BEGIN; …
		return err
	}
	storetest.AuditAppendOnly(t, s, exec, func(id string) []string {
		return []string{
			`TRUNCATE audit_events`,
			`INSERT INTO audit_events (id, at, kind, outcome) VALUES ('` + id + `', now(), 'sign_in', 'ok')
				ON CONFLICT (id) DO UPDATE SET sql_text = 'SELECT 2'`,
			// The cutoff a prune sets covers only rows older than it.
			`BEGIN; SELECT set_config('datachat.audit_prune_before', '2000-01-01T00:00:00Z', true); DELETE FROM audit_events; COMMIT`,
		}
	})
}

// The audit log's costs (what every query on a database source adds):
//
//	go test -run '^$' -bench Audit ./internal/postgres
func BenchmarkAudit(b *testing.B) {
	storetest.BenchAudit(b, 100_000, benchStore(b))
}
