package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/sqlite/sqlitetest"
	"datachat/internal/testlog"
)

// auditFixture is a real PostgreSQL database holding public.orders (3 rows)
// and a role that may read it, added as source "warehouse" granted to
// alice and attached to her conversation; bob has a conversation of his own.
type auditFixture struct {
	st         datachat.Store
	sources    *Sources
	logs       *testlog.Buffer
	alice      *datachat.User
	bob        *datachat.User
	conv, bob1 string // alice's conversation, bob's
	password   string
}

func newAuditFixture(t *testing.T, wrap func(datachat.Store) SourceStore) *auditFixture {
	t.Helper()
	ctx := context.Background()
	pg := dbsourcetest.NewPostgresDB(t, "dcaudit")
	pg.Exec(t,
		"CREATE TABLE orders (id int, item text)",
		"INSERT INTO orders VALUES (1, 'tea'), (2, 'coffee'), (3, 'water')",
		"GRANT USAGE ON SCHEMA public TO "+pg.Role,
		"GRANT SELECT ON orders TO "+pg.Role,
	)
	f := &auditFixture{password: pg.Password}

	st := sqlitetest.Open(t)
	f.st = st
	f.alice, f.bob = mustEnsure(t, st, "alice"), mustEnsure(t, st, "bob")
	for _, p := range []struct {
		user *datachat.User
		id   *string
	}{{f.alice, &f.conv}, {f.bob, &f.bob1}} {
		conv := &datachat.Conversation{UserID: p.user.ID, Title: "t"}
		if err := st.CreateConversation(ctx, conv); err != nil {
			t.Fatal(err)
		}
		*p.id = conv.ID
	}
	key, sec := newKey(t)
	sealed, err := sec.Seal(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDBSource(ctx, &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: sealed,
		Tables: []string{"public.orders"}, Users: []string{"alice"}, Origin: datachat.OriginCLI}); err != nil {
		t.Fatal(err)
	}
	var store SourceStore = st
	if wrap != nil {
		store = wrap(st)
	}
	f.logs = &testlog.Buffer{}
	f.sources = &Sources{Store: store, SecretKey: key, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.MultiWriter(f.logs, io.Discard), nil))}
	t.Cleanup(func() { f.sources.Close() })
	if _, err := f.sources.Attach(ctx, f.alice, f.conv, "warehouse"); err != nil {
		t.Fatal(err)
	}
	return f
}

func mustEnsure(t *testing.T, st datachat.Store, name string) *datachat.User {
	t.Helper()
	u, err := st.EnsureUser(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// events returns the whole audit log, newest first.
func (f *auditFixture) events(t *testing.T) []*datachat.AuditEvent {
	t.Helper()
	p, err := f.st.AuditEvents(t.Context(), datachat.AuditFilter{Limit: datachat.AuditPageMax})
	if err != nil {
		t.Fatal(err)
	}
	return p.Events
}

// TestAuditSourceQueries: every query on a database source is recorded once,
// whatever its outcome — answered (with its row count), refused by the
// sandbox, refused for a source not attached or not granted, failed in the
// engine, stopped by its caller — with the user, the conversation, the
// source, the SQL as sent, how long it took and the address and request id
// of the request it came from; the record never holds the source's
// password. Queries at once are each recorded.
func TestAuditSourceQueries(t *testing.T) {
	f := newAuditFixture(t, nil)
	ctx := datachat.WithAuditOrigin(context.Background(), "198.51.100.4", "req-42")
	long := "SELECT id FROM orders WHERE item <> '" + strings.Repeat("\x1b[2J", 1<<18) + "'"
	stopped, stop := context.WithCancel(ctx)
	stop()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		user    *datachat.User
		conv    string
		source  string
		sql     string
		outcome string
		rows    *int64
		errText string // in the record's Error
	}{
		{"answered", ctx, f.alice, f.conv, "warehouse", "SELECT id, item FROM orders ORDER BY id", datachat.AuditOK, ptr(int64(3)), ""},
		{"no rows", ctx, f.alice, f.conv, "warehouse", "SELECT id FROM orders WHERE id > 10", datachat.AuditOK, ptr(int64(0)), ""},
		{"refused by the sandbox", ctx, f.alice, f.conv, "warehouse", "DELETE FROM orders", datachat.AuditRefused, nil, "refused"},
		{"a table not allowed", ctx, f.alice, f.conv, "warehouse", "SELECT * FROM pg_catalog.pg_authid", datachat.AuditRefused, nil, "pg_authid"},
		{"a syntax error", ctx, f.alice, f.conv, "warehouse", "SELEC 1", datachat.AuditFailed, nil, "syntax"},
		{"a source not attached", ctx, f.alice, f.conv, "payroll", "SELECT 1", datachat.AuditRefused, nil, `"payroll"`},
		{"bob on alice's source", ctx, f.bob, f.bob1, "warehouse", "SELECT 1", datachat.AuditRefused, nil, `"warehouse"`},
		{"bob in alice's conversation", ctx, f.bob, f.conv, "warehouse", "SELECT 1", datachat.AuditRefused, nil, "not found"},
		{"1 MiB of escape sequences", ctx, f.alice, f.conv, "warehouse", long, "", nil, ""},
		{"stopped", stopped, f.alice, f.conv, "warehouse", "SELECT pg_sleep(5)", datachat.AuditFailed, nil, "stopped before it finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.events(t))
			r, qerr := f.sources.Query(tc.ctx, tc.user, tc.conv, tc.source, tc.sql)
			evs := f.events(t)
			if len(evs) != before+1 {
				t.Fatalf("got %d new audit events, want 1", len(evs)-before)
			}
			e := evs[0]
			t.Logf("%s: %s %v %q", tc.name, e.Outcome, e.RowCount, e.Error)
			if e.Kind != datachat.AuditSourceQuery || e.UserID != tc.user.ID || e.UserName != tc.user.Name ||
				e.ConversationID != tc.conv || e.Source != tc.source || e.Address != "198.51.100.4" || e.RequestID != "req-42" {
				t.Errorf("got %+v, want a source.query by %s in %s on %s from 198.51.100.4, req-42", e, tc.user.Name, tc.conv, tc.source)
			}
			if tc.outcome != "" && e.Outcome != tc.outcome {
				t.Errorf("outcome: got %q, want %q (the query's error: %v)", e.Outcome, tc.outcome, qerr)
			}
			if (qerr == nil) != (e.Outcome == datachat.AuditOK) {
				t.Errorf("outcome %q for a query that returned %v", e.Outcome, qerr)
			}
			if qerr == nil && (e.RowCount == nil || int(*e.RowCount) != r.RowCount) {
				t.Errorf("row count: got %v, want %d", e.RowCount, r.RowCount)
			}
			if tc.rows != nil && (e.RowCount == nil || *e.RowCount != *tc.rows) {
				t.Errorf("row count: got %v, want %d", e.RowCount, *tc.rows)
			}
			if qerr != nil && (e.RowCount != nil || e.Error == "") {
				t.Errorf("a failed query's record: row count %v, error %q; want none and the error", e.RowCount, e.Error)
			}
			if !strings.Contains(e.Error, tc.errText) {
				t.Errorf("error: got %q, want it to say %q", e.Error, tc.errText)
			}
			if qerr != nil && tc.ctx.Err() == nil && e.Error != datachat.ErrorMessage(qerr) {
				t.Errorf("error: got %q, want what the caller was told, %q", e.Error, datachat.ErrorMessage(qerr))
			}
			if len(tc.sql) <= datachat.AuditSQLMax && (e.SQL != tc.sql || e.SQLTruncated) {
				t.Errorf("SQL: got %q (truncated %v), want %q whole", e.SQL, e.SQLTruncated, tc.sql)
			}
			if len(tc.sql) > datachat.AuditSQLMax && (!e.SQLTruncated || !strings.HasPrefix(tc.sql, e.SQL) || len(e.SQL) < datachat.AuditSQLMax-3) {
				t.Errorf("SQL of %d bytes: got %d bytes, truncated %v; want the first %d", len(tc.sql), len(e.SQL), e.SQLTruncated, datachat.AuditSQLMax)
			}
			if e.DurationMS <= 0 {
				t.Errorf("duration: got %v ms, want more than 0", e.DurationMS)
			}
			if strings.Contains(fmt.Sprintf("%+v", *e), f.password) {
				t.Errorf("the record holds the source's password: %+v", *e)
			}
		})
	}

	// Queries at once: each is recorded once.
	before := len(f.events(t))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := f.sources.Query(ctx, f.alice, f.conv, "warehouse", fmt.Sprintf("SELECT %d AS n", i)); err != nil {
				t.Errorf("query %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got := map[string]int{}
	for _, e := range f.events(t)[:len(f.events(t))-before] {
		got[e.SQL]++
	}
	for i := range 8 {
		if n := got[fmt.Sprintf("SELECT %d AS n", i)]; n != 1 {
			t.Errorf("query %d at once with others: recorded %d times, want once", i, n)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// failingAudit is a store whose audit log cannot be written.
type failingAudit struct {
	datachat.Store
	err error
}

func (f failingAudit) AppendAudit(context.Context, *datachat.AuditEvent) error { return f.err }

// TestAuditFailClosed: when a query's record cannot be written, its result
// does not reach the caller — nor its error, which may quote the data —:
// the caller is told the query was not answered because the audit log
// could not be written, and the server's log says which query it was. A
// store that is down asks the caller to come back (EBUSY with Retry-After).
func TestAuditFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"an error", errors.New("disk I/O error"), false},
		{"the database unavailable", datachat.StoreUnavailable(errors.New("connection refused")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newAuditFixture(t, func(st datachat.Store) SourceStore { return failingAudit{st, tc.err} })
			ctx := datachat.WithAuditOrigin(context.Background(), "203.0.113.9", "req-7")
			for _, sql := range []string{
				"SELECT item FROM orders",              // answered: its rows must not be returned
				"SELECT CAST(item AS int) FROM orders", // its error quotes a value
				"DELETE FROM orders",                   // refused
			} {
				r, err := f.sources.Query(ctx, f.alice, f.conv, "warehouse", sql)
				msg := datachat.ErrorMessage(err)
				if r != nil || datachat.ErrorCode(err) != datachat.EBUSY || !strings.Contains(msg, "audit log") {
					t.Errorf("%s: got %+v, %v; want no result and a busy error naming the audit log", sql, r, err)
				}
				for _, v := range []string{"tea", "coffee", "water"} {
					if strings.Contains(msg, v) {
						t.Errorf("%s: the caller is told %q, which shows the data", sql, msg)
					}
				}
				if _, ok := datachat.RetryAfter(err); ok != tc.retry {
					t.Errorf("%s: Retry-After given %v, want %v", sql, ok, tc.retry)
				}
				if !errors.Is(err, tc.err) && !strings.Contains(err.Error(), tc.err.Error()) {
					t.Errorf("%s: the error %v does not carry the store's, %v", sql, err, tc.err)
				}
			}
			logs := f.logs.String()
			if n := strings.Count(logs, "could not be recorded"); n != 3 || !strings.Contains(logs, "req-7") || !strings.Contains(logs, "source=warehouse") {
				t.Errorf("the server's log: %d lines on unrecorded queries, want 3 naming the request and source:\n%s", n, logs)
			}
			// The same queries with the log writable answer.
			f.sources.Store = f.st
			if r, err := f.sources.Query(ctx, f.alice, f.conv, "warehouse", "SELECT item FROM orders"); err != nil || r.RowCount != 3 {
				t.Errorf("with the audit log back: got %v, %v; want 3 rows", r, err)
			}
		})
	}
}
