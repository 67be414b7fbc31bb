package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

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
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(ctx context.Context, q string) error {
		_, err := db.ExecContext(ctx, q)
		return err
	}
	storetest.AuditAppendOnly(t, s, exec, func(id string) []string {
		return []string{
			`DELETE FROM audit_events WHERE at < '9999'`,
			`INSERT OR REPLACE INTO audit_events (id, at, kind, outcome) VALUES ('` + id + `', '2000-01-01T00:00:00.000000Z', 'sign_in', 'ok')`,
			`REPLACE INTO audit_events (id, at, kind, outcome) VALUES ('` + id + `', '2000-01-01T00:00:00.000000Z', 'sign_in', 'ok')`,
			`INSERT INTO audit_events (id, at, kind, outcome) VALUES ('` + id + `', '2000-01-01T00:00:00.000000Z', 'sign_in', 'ok')
				ON CONFLICT (id) DO UPDATE SET sql_text = 'SELECT 2'`,
		}
	})
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
