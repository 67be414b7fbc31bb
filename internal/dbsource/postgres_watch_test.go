package dbsource_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// records is a slog handler that sends each record's message and
// attributes to a channel.
type records chan string

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r records) WithGroup(string) slog.Handler            { return r }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	r <- b.String()
	return nil
}

// TestPostgresWatch: the periodic proof finds a privilege granted while no
// query runs, logs it with the statement that takes it away, and refuses
// the next query at once; once revoked, the next proof lets queries run.
func TestPostgresWatch(t *testing.T) {
	f := pgSetup(t)
	ctx := context.Background()
	admin := f.adminConn(t)
	role := "dcsrc_watch_" + f.suffix
	exec := func(stmts ...string) {
		t.Helper()
		for _, q := range stmts {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec(fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, f.password),
		"GRANT USAGE ON SCHEMA public TO "+role, "GRANT SELECT ON public.penguins TO "+role)
	t.Cleanup(func() {
		dbsourcetest.CleanPostgres(f.admin, "REVOKE ALL ON public.penguins, public.hidden FROM "+role, "REVOKE ALL ON SCHEMA public FROM "+role)
		dbsourcetest.CleanPostgres(f.admin, "DROP ROLE IF EXISTS "+role)
	})
	db := openSource(t, "watched", pgRoleURL(f, role), []string{"public.penguins"}, dbsource.Options{MaxConns: 1})
	now := time.Now()
	dbsource.SetNow(db, func() time.Time { return now }) // the query-time proof stays fresh: only Watch proves
	if err := db.Check(ctx); err != nil {
		t.Fatal(err)
	}
	logs := make(records, 4)
	ticks := make(chan time.Time)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.Watch(wctx, ticks, slog.New(logs))
	}()
	defer func() { stop(); <-done }()

	exec("GRANT SELECT ON public.hidden TO " + role)
	ticks <- time.Now()
	got := <-logs
	for _, want := range []string{"ERROR", "refused", "source=watched", "public.hidden", "REVOKE SELECT ON"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q does not say %q", got, want)
		}
	}
	_, err := db.Query(ctx, "SELECT count(*) FROM penguins")
	wantRole(t, err, "public.hidden")

	exec("REVOKE SELECT ON public.hidden FROM " + role)
	ticks <- time.Now()
	ticks <- time.Now() // received once the proof before it ended
	if _, err := db.Query(ctx, "SELECT count(*) FROM penguins"); err != nil {
		t.Errorf("after the revoke: %v", err)
	}
	select {
	case l := <-logs:
		t.Errorf("logged after the revoke: %s", l)
	default:
	}
}
