package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"datachat"
)

// RunAudit runs the audit log's conformance cases: every store calls it
// from a test of its own (TestAudit), so that `go test -run Audit` runs them.
// open is as [Run]'s.
func RunAudit(t *testing.T, open func(t *testing.T) datachat.Store) {
	runTests(t, open, []storeTest{
		{"Append", testAuditAppend},
		{"Text", testAuditText},
		{"Filters", testAuditFilters},
		{"HostileFilters", testAuditHostileFilters},
		{"PagingEqualTimes", testAuditPagingEqualTimes},
		{"ConcurrentAppends", testAuditConcurrent},
		{"Prune", testAuditPrune},
	})
}

// mustAppend appends each event, failing t on an error.
func mustAppend(t *testing.T, s datachat.Store, events ...*datachat.AuditEvent) {
	t.Helper()
	for _, e := range events {
		if err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatalf("AppendAudit(%s): %v", e.Kind, err)
		}
	}
}

// auditList returns one page of f, failing t on an error.
func auditList(t *testing.T, s datachat.Store, f datachat.AuditFilter) *datachat.AuditPage {
	t.Helper()
	p, err := s.AuditEvents(t.Context(), f)
	if err != nil {
		t.Fatalf("AuditEvents(%+v): %v", f, err)
	}
	if p.Events == nil {
		t.Fatalf("AuditEvents(%+v): got nil Events, want a slice", f)
	}
	return p
}

// auditAll follows the cursors of f from its first page to its last, pages
// of limit, and returns every event.
func auditAll(t *testing.T, s datachat.Store, f datachat.AuditFilter, limit int) []*datachat.AuditEvent {
	t.Helper()
	f.Limit = limit
	var all []*datachat.AuditEvent
	for range 10000 {
		p := auditList(t, s, f)
		if len(p.Events) > limit {
			t.Fatalf("AuditEvents: got a page of %d, want at most %d", len(p.Events), limit)
		}
		all = append(all, p.Events...)
		if p.Next == "" {
			return all
		}
		if len(p.Events) == 0 {
			t.Fatalf("AuditEvents: an empty page with a cursor %q", p.Next)
		}
		f.Cursor = p.Next
	}
	t.Fatal("AuditEvents: the cursors never ended")
	return nil
}

func auditIDs(list []*datachat.AuditEvent) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.ID
	}
	return out
}

func rows(n int64) *int64 { return &n }

func testAuditAppend(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	p := auditList(t, s, datachat.AuditFilter{})
	if len(p.Events) != 0 || p.Next != "" {
		t.Fatalf("AuditEvents of an empty log: got %d events, cursor %q; want none", len(p.Events), p.Next)
	}
	q := &datachat.AuditEvent{Time: base, Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK,
		UserID: "u-1", UserName: "alice", Address: "192.0.2.7", RequestID: "req-1",
		ConversationID: "c-1", Source: "warehouse", SQL: "SELECT count(*) FROM orders", RowCount: rows(1), DurationMS: 12.5}
	failed := &datachat.AuditEvent{Time: base.Add(time.Second), Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditRefused,
		UserName: "alice", Source: "warehouse", SQL: "DELETE FROM orders", DurationMS: 0.25,
		Error: "refused by the sandbox: only SELECT"}
	key := &datachat.AuditEvent{Kind: datachat.AuditKeyCreated, Outcome: datachat.AuditOK, Target: "key-1", Detail: "for user bob"}
	mustAppend(t, s, q, failed, key)
	if q.ID == "" || key.ID == "" || q.ID == key.ID {
		t.Fatalf("AppendAudit: got ids %q and %q, want two different ones filled in", q.ID, key.ID)
	}
	checkTime(t, "event Time", q.Time, base)
	if key.Time.IsZero() {
		t.Fatal("AppendAudit: got a zero Time, want now")
	}
	checkUTC(t, "event Time", key.Time)
	got := auditList(t, s, datachat.AuditFilter{})
	equal(t, "AuditEvents, newest first", got.Events, []*datachat.AuditEvent{key, failed, q})
	if got.Next != "" {
		t.Errorf("AuditEvents of 3 events: got cursor %q, want none", got.Next)
	}

	given := &datachat.AuditEvent{ID: "given-id", Kind: datachat.AuditKeyRevoked, Outcome: datachat.AuditOK, Target: "key-1"}
	mustAppend(t, s, given)
	if given.ID != "given-id" {
		t.Errorf("AppendAudit: got id %q, want the one given kept", given.ID)
	}
	// The same id again is refused: an event is never replaced.
	again := &datachat.AuditEvent{ID: "given-id", Kind: datachat.AuditKeyRevoked, Outcome: datachat.AuditFailed, Target: "key-2"}
	if err := s.AppendAudit(ctx, again); err == nil {
		t.Error("AppendAudit of an id in use: got nil, want an error")
	}
	got = auditList(t, s, datachat.AuditFilter{Kind: datachat.AuditKeyRevoked})
	equal(t, "the event whose id was reused", got.Events, []*datachat.AuditEvent{given})

	for _, bad := range []*datachat.AuditEvent{
		{Kind: "key.stolen", Outcome: datachat.AuditOK},
		{Kind: "", Outcome: datachat.AuditOK},
		{Kind: datachat.AuditSignIn, Outcome: "maybe"},
		{Kind: datachat.AuditSignIn},
	} {
		wantCode(t, fmt.Sprintf("AppendAudit(kind %q, outcome %q)", bad.Kind, bad.Outcome), s.AppendAudit(ctx, bad), datachat.EINVALID)
	}
	if n := len(auditList(t, s, datachat.AuditFilter{}).Events); n != 4 {
		t.Errorf("after refused appends: got %d events, want 4", n)
	}
}

// testAuditText: SQL text is kept byte for byte up to AuditSQLMax — control
// characters, quotes, every plane of Unicode —, cut at a character boundary
// past it with SQLTruncated set; NUL and bytes that are not UTF-8 become
// U+FFFD in both stores alike; other fields are cut at AuditTextMax.
func testAuditText(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	control := "SELECT '\x1b[31mred\x1b[0m', '\r\n\t\a\b\f\v', '\u202eevil', 'é漢字🦆', $$q$$, \"x\"; -- ' OR 1=1\x7f\u0085"
	// 1 MiB of SQL whose cut falls inside a 4-byte character.
	long := "SELECT '" + strings.Repeat("a", datachat.AuditSQLMax-10) + strings.Repeat("🦆", 1<<18)
	if len(long) < 1<<20 {
		t.Fatalf("long SQL: %d bytes, want 1 MiB", len(long))
	}
	exact := strings.Repeat("b", datachat.AuditSQLMax)
	for _, tc := range []struct {
		name, sql, want string
		truncated       bool
	}{
		{"control characters", control, control, false},
		{"invalid UTF-8 and NUL", "SELECT '\xff\xfe', 'a\x00b', '\xe6\x97'", "SELECT '\uFFFD', 'a\uFFFDb', '\uFFFD'", false},
		{"1 MiB", long, long[:datachat.AuditSQLMax-2], true},
		{"exactly the cap", exact, exact, false},
		{"one byte more", exact + "c", exact, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditFailed, Source: "t-" + tc.name, SQL: tc.sql}
			mustAppend(t, s, e)
			got := auditList(t, s, datachat.AuditFilter{Source: e.Source}).Events
			if len(got) != 1 {
				t.Fatalf("got %d events, want 1", len(got))
			}
			if got[0].SQL != tc.want || got[0].SQLTruncated != tc.truncated {
				t.Errorf("got SQL of %d bytes (truncated %v), want %d bytes (truncated %v); first difference at %d",
					len(got[0].SQL), got[0].SQLTruncated, len(tc.want), tc.truncated, firstDiff(got[0].SQL, tc.want))
			}
			if !utf8.ValidString(got[0].SQL) {
				t.Error("stored SQL is not valid UTF-8")
			}
			equal(t, "the event AppendAudit left", e, got[0])
		})
	}
	e := &datachat.AuditEvent{Kind: datachat.AuditSignIn, Outcome: datachat.AuditRefused, UserName: "mallory\x00",
		Detail: strings.Repeat("é", datachat.AuditTextMax), Error: "\xc3"}
	mustAppend(t, s, e)
	if len(e.Detail) > datachat.AuditTextMax || !utf8.ValidString(e.Detail) || e.UserName != "mallory\uFFFD" || e.Error != "\uFFFD" {
		t.Errorf("AppendAudit: got detail of %d bytes (valid %v), user %q, error %q; want at most %d bytes, mallory\uFFFD, \uFFFD",
			len(e.Detail), utf8.ValidString(e.Detail), e.UserName, e.Error, datachat.AuditTextMax)
	}
	got := auditList(t, s, datachat.AuditFilter{User: "mallory\uFFFD"}).Events
	equal(t, "an event with long and invalid text", got, []*datachat.AuditEvent{e})
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testAuditFilters(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	ev := func(min int, kind, outcome, user, source string) *datachat.AuditEvent {
		return &datachat.AuditEvent{Time: at(min), Kind: kind, Outcome: outcome, UserName: user, Source: source}
	}
	a0 := ev(0, datachat.AuditSourceAdded, datachat.AuditOK, "", "warehouse")
	a1 := ev(1, datachat.AuditSourceQuery, datachat.AuditOK, "alice", "warehouse")
	a2 := ev(2, datachat.AuditSourceQuery, datachat.AuditRefused, "bob", "warehouse")
	a3 := ev(3, datachat.AuditSourceQuery, datachat.AuditOK, "alice", "shop")
	a4 := ev(4, datachat.AuditSignIn, datachat.AuditRefused, "alice", "")
	a5 := ev(5, datachat.AuditKeyCreated, datachat.AuditOK, "bob", "")
	mustAppend(t, s, a0, a1, a2, a3, a4, a5)
	for _, tc := range []struct {
		name string
		f    datachat.AuditFilter
		want []*datachat.AuditEvent
	}{
		{"none", datachat.AuditFilter{}, []*datachat.AuditEvent{a5, a4, a3, a2, a1, a0}},
		{"user", datachat.AuditFilter{User: "alice"}, []*datachat.AuditEvent{a4, a3, a1}},
		{"source", datachat.AuditFilter{Source: "warehouse"}, []*datachat.AuditEvent{a2, a1, a0}},
		{"kind", datachat.AuditFilter{Kind: datachat.AuditSourceQuery}, []*datachat.AuditEvent{a3, a2, a1}},
		{"outcome", datachat.AuditFilter{Outcome: datachat.AuditRefused}, []*datachat.AuditEvent{a4, a2}},
		{"user and source", datachat.AuditFilter{User: "alice", Source: "warehouse"}, []*datachat.AuditEvent{a1}},
		{"since, inclusive", datachat.AuditFilter{Since: at(3)}, []*datachat.AuditEvent{a5, a4, a3}},
		{"until, exclusive", datachat.AuditFilter{Until: at(2)}, []*datachat.AuditEvent{a1, a0}},
		{"since and until, in another zone", datachat.AuditFilter{Since: at(1).In(time.FixedZone("UTC-7", -7*3600)), Until: at(3).UTC()},
			[]*datachat.AuditEvent{a2, a1}},
		{"an empty range", datachat.AuditFilter{Since: at(2), Until: at(2)}, []*datachat.AuditEvent{}},
		{"everything", datachat.AuditFilter{User: "bob", Source: "warehouse", Kind: datachat.AuditSourceQuery,
			Outcome: datachat.AuditRefused, Since: at(0), Until: at(6)}, []*datachat.AuditEvent{a2}},
		{"a user with none", datachat.AuditFilter{User: "carol"}, []*datachat.AuditEvent{}},
	} {
		equal(t, tc.name, auditList(t, s, tc.f).Events, tc.want)
	}
	for _, tc := range []struct {
		name string
		f    datachat.AuditFilter
	}{
		{"an unknown kind", datachat.AuditFilter{Kind: "source.queried"}},
		{"an unknown outcome", datachat.AuditFilter{Outcome: "denied"}},
		{"since after until", datachat.AuditFilter{Since: at(3), Until: at(2)}},
		{"a negative limit", datachat.AuditFilter{Limit: -1}},
	} {
		_, err := s.AuditEvents(ctx, tc.f)
		wantCode(t, "AuditEvents with "+tc.name, err, datachat.EINVALID)
		if msg := datachat.ErrorMessage(err); msg == "" || msg == "Internal error." {
			t.Errorf("AuditEvents with %s: got message %q, want one saying what is wrong", tc.name, msg)
		}
	}
}

// testAuditHostileFilters: filter values are matched as they are, never as
// SQL or patterns, and a cursor not made by the store is refused.
func testAuditHostileFilters(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAppend(t, s,
		&datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice", Source: "warehouse"},
		&datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "a%", Source: "w_rehouse"},
	)
	for _, v := range []string{
		"' OR '1'='1", "alice' --", "%", "_", "a%", "w_rehouse", "alice\x00", "\xff", "ALICE", " alice",
		strings.Repeat("x", 1<<16), "alice'; DELETE FROM audit_events; --", `\`, "*",
	} {
		n := 0
		if v == "a%" {
			n = 1 // the user literally named so
		}
		if got := len(auditList(t, s, datachat.AuditFilter{User: v}).Events); got != n {
			t.Errorf("user %.40q: got %d events, want %d", v, got, n)
		}
		n = 0
		if v == "w_rehouse" {
			n = 1
		}
		if got := len(auditList(t, s, datachat.AuditFilter{Source: v}).Events); got != n {
			t.Errorf("source %.40q: got %d events, want %d", v, got, n)
		}
		_, err := s.AuditEvents(ctx, datachat.AuditFilter{Kind: v})
		wantCode(t, fmt.Sprintf("kind %.40q", v), err, datachat.EINVALID)
	}
	if n := len(auditList(t, s, datachat.AuditFilter{}).Events); n != 2 {
		t.Errorf("after hostile filters: got %d events, want 2", n)
	}
	page := auditList(t, s, datachat.AuditFilter{Limit: 1})
	if page.Next == "" {
		t.Fatal("a page of 1 of 2: got no cursor")
	}
	for _, c := range []string{
		"x", "!!!", page.Next + "=", page.Next[:len(page.Next)-1] + "*", "MTIz", // "123": no id
		"MTIzIA",                          // "123 ": an empty id
		"eHl6IGFiYw",                      // "xyz abc": not a time
		"MTIzIGEgYg",                      // "123 a b": a space in the id
		"MTIzIGEnOyBEUk9QIFRBQkxFIHg7LS0", // "123 a'; DROP TABLE x;--"
		strings.Repeat("QUFB", 1000),
	} {
		_, err := s.AuditEvents(ctx, datachat.AuditFilter{Cursor: c})
		wantCode(t, fmt.Sprintf("cursor %.40q", c), err, datachat.EINVALID)
	}
}

// testAuditPagingEqualTimes: events sharing a time are paged by id, none
// twice and none left out, whatever the page size, and a filter holds across
// pages.
func testAuditPagingEqualTimes(t *testing.T, s datachat.Store) {
	var want []*datachat.AuditEvent
	for i := range 23 {
		at := base // most share one time, to the microsecond
		if i%5 == 0 {
			at = base.Add(time.Duration(i) * time.Microsecond)
		}
		e := &datachat.AuditEvent{Time: at, Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK,
			UserName: []string{"alice", "bob"}[i%2], Source: "warehouse", SQL: fmt.Sprintf("SELECT %d", i)}
		mustAppend(t, s, e)
		want = append(want, e)
	}
	slices.SortFunc(want, func(a, b *datachat.AuditEvent) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	for _, limit := range []int{1, 2, 3, 7, 22, 23, 24, 1000} {
		got := auditAll(t, s, datachat.AuditFilter{}, limit)
		equal(t, fmt.Sprintf("pages of %d", limit), auditIDs(got), auditIDs(want))
	}
	var bobs []*datachat.AuditEvent
	for _, e := range want {
		if e.UserName == "bob" {
			bobs = append(bobs, e)
		}
	}
	equal(t, "bob's, pages of 2", auditIDs(auditAll(t, s, datachat.AuditFilter{User: "bob"}, 2)), auditIDs(bobs))
	// A cursor of one filter given to another lists from the same place.
	p := auditList(t, s, datachat.AuditFilter{Limit: 4})
	rest := auditAll(t, s, datachat.AuditFilter{User: "bob", Cursor: p.Next}, 3)
	var wantRest []*datachat.AuditEvent
	for _, e := range want[4:] {
		if e.UserName == "bob" {
			wantRest = append(wantRest, e)
		}
	}
	equal(t, "bob's after the fourth event", auditIDs(rest), auditIDs(wantRest))
	// The limit is bounded.
	p = auditList(t, s, datachat.AuditFilter{Limit: datachat.AuditPageMax + 1})
	if len(p.Events) != len(want) {
		t.Errorf("a limit over the maximum: got %d events, want all %d", len(p.Events), len(want))
	}
}

// testAuditConcurrent: appends from many goroutines at once all land, each
// once; more events than the largest page are paged through.
func testAuditConcurrent(t *testing.T, s datachat.Store) {
	const writers, each = 8, 130
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := &datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK,
					UserName: fmt.Sprintf("user%d", w), SQL: fmt.Sprintf("SELECT %d", i)}
				if err := s.AppendAudit(t.Context(), e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("AppendAudit: %v", err)
	}
	p := auditList(t, s, datachat.AuditFilter{Limit: 1 << 20})
	if len(p.Events) != datachat.AuditPageMax || p.Next == "" {
		t.Errorf("a page with a huge limit: got %d events, cursor %q; want %d and a cursor", len(p.Events), p.Next, datachat.AuditPageMax)
	}
	all := auditAll(t, s, datachat.AuditFilter{}, datachat.AuditPageMax)
	seen := map[string]bool{}
	for _, e := range all {
		key := e.UserName + " " + e.SQL
		if seen[key] || seen[e.ID] {
			t.Fatalf("event %s (%s) listed twice", e.ID, key)
		}
		seen[key], seen[e.ID] = true, true
	}
	if len(all) != writers*each {
		t.Errorf("got %d events, want %d", len(all), writers*each)
	}
	if n := len(auditAll(t, s, datachat.AuditFilter{User: "user3"}, 50)); n != each {
		t.Errorf("user3's: got %d events, want %d", n, each)
	}
}

// testAuditPrune: PruneAudit deletes only the events older than its cutoff,
// records that it did, and refuses a cutoff in the future.
func testAuditPrune(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	now := time.Now()
	old := &datachat.AuditEvent{Time: now.AddDate(-2, 0, 0), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "alice"}
	older := &datachat.AuditEvent{Time: now.AddDate(-3, 0, 0), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "bob"}
	edge := &datachat.AuditEvent{Time: now.AddDate(-1, 0, 0), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "carol"}
	recent := &datachat.AuditEvent{Time: now.Add(-time.Hour), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "dave"}
	mustAppend(t, s, old, older, edge, recent)

	n, err := s.PruneAudit(ctx, now.AddDate(-5, 0, 0))
	if err != nil || n != 0 {
		t.Fatalf("PruneAudit with nothing older: got %d, %v; want 0, nil", n, err)
	}
	if got := auditList(t, s, datachat.AuditFilter{Kind: datachat.AuditPruned}).Events; len(got) != 0 {
		t.Errorf("a prune that deleted nothing: got %d audit.pruned events, want none", len(got))
	}
	n, err = s.PruneAudit(ctx, edge.Time) // edge itself is not older than the cutoff
	if err != nil || n != 2 {
		t.Fatalf("PruneAudit: got %d, %v; want 2, nil", n, err)
	}
	left := auditList(t, s, datachat.AuditFilter{Kind: datachat.AuditSignIn}).Events
	equal(t, "events left", auditIDs(left), []string{recent.ID, edge.ID})
	pruned := auditList(t, s, datachat.AuditFilter{Kind: datachat.AuditPruned}).Events
	if len(pruned) != 1 || !strings.Contains(pruned[0].Detail, "2 events") || pruned[0].Outcome != datachat.AuditOK {
		t.Errorf("the prune's record: got %s, want one audit.pruned event saying 2 events", show(pruned))
	}
	_, err = s.PruneAudit(ctx, time.Now().Add(time.Hour))
	wantCode(t, "PruneAudit with a cutoff in the future", err, datachat.EINVALID)
	if got := auditList(t, s, datachat.AuditFilter{}).Events; len(got) != 3 {
		t.Errorf("after a refused prune: got %d events, want 3", len(got))
	}
}

// AuditAppendOnly checks that statements run on s's database directly, not
// through the store, cannot change or delete its audit events, before a
// prune and after it, and that a prune deletes only what is older than its
// cutoff. exec runs a statement on the database; the statements here, and
// those refused gives in the engine's own SQL (naming the event id), must
// fail with the append-only trigger's error.
func AuditAppendOnly(t *testing.T, s datachat.Store, exec func(ctx context.Context, query string) error, refused func(id string) []string) {
	ctx := t.Context()
	old := &datachat.AuditEvent{Time: time.Now().AddDate(-2, 0, 0), Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: "alice"}
	ev := &datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice", SQL: "SELECT 1"}
	for _, e := range []*datachat.AuditEvent{old, ev} {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, q := range append([]string{
			`UPDATE audit_events SET sql_text = 'SELECT 2' WHERE id = '` + ev.ID + `'`,
			`UPDATE audit_events SET user_name = 'mallory'`,
			`DELETE FROM audit_events WHERE id = '` + ev.ID + `'`,
			`DELETE FROM audit_events`,
		}, refused(ev.ID)...) {
			if err := exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: %.60s: got %v, want it refused by the append-only trigger", when, q, err)
			}
		}
		got, err := s.AuditEvents(ctx, datachat.AuditFilter{Kind: datachat.AuditSourceQuery})
		if err != nil || len(got.Events) != 1 || got.Events[0].SQL != "SELECT 1" || got.Events[0].UserName != "alice" {
			t.Fatalf("%s: the event after the statements: %+v, %v; want it unchanged", when, got, err)
		}
	}
	check("before a prune")
	if n, err := s.PruneAudit(ctx, time.Now().AddDate(-1, 0, 0)); err != nil || n != 1 {
		t.Fatalf("PruneAudit: %d, %v; want 1 deleted", n, err)
	}
	check("after a prune")
}

// BenchAudit measures the audit log of the stores open makes (each
// benchmark on a new one): one append, appends from every core at once
// (what every query on a database source adds to the store's writes), and
// a page of the newest events among n, whole or filtered by a user or a
// source and kind, first or deep in the log.
func BenchAudit(b *testing.B, n int, open func(b *testing.B) datachat.Store) {
	query := func(i int) *datachat.AuditEvent {
		return &datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK,
			UserID: fmt.Sprintf("u-%d", i%100), UserName: fmt.Sprintf("user%d", i%100), Address: "192.0.2.1", RequestID: "req",
			ConversationID: "c-1", Source: fmt.Sprintf("source%d", i%10),
			SQL: "SELECT species, count(*) AS n, avg(body_mass_g) FROM penguins WHERE island = 'Biscoe' GROUP BY species ORDER BY n DESC", RowCount: rows(3), DurationMS: 4.2}
	}
	b.Run("Append", func(b *testing.B) {
		s := open(b)
		for i := 0; b.Loop(); i++ {
			if err := s.AppendAudit(b.Context(), query(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendParallel", func(b *testing.B) {
		s := open(b)
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				if err := s.AppendAudit(b.Context(), query(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run(fmt.Sprintf("List_of_%d", n), func(b *testing.B) {
		s := open(b)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < n; i += 4 {
					if err := s.AppendAudit(b.Context(), query(i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		first, err := s.AuditEvents(b.Context(), datachat.AuditFilter{Limit: datachat.AuditPageMax})
		if err != nil {
			b.Fatal(err)
		}
		mid := first.Next // 1000 in
		for _, tc := range []struct {
			name string
			f    datachat.AuditFilter
		}{
			{"newest_100", datachat.AuditFilter{}},
			{"user_100", datachat.AuditFilter{User: "user42"}},
			{"source_kind_100", datachat.AuditFilter{Source: "source3", Kind: datachat.AuditSourceQuery}},
			{"after_1000_100", datachat.AuditFilter{Cursor: mid}},
			{"outcome_none", datachat.AuditFilter{Outcome: datachat.AuditRefused}},
		} {
			b.Run(tc.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := s.AuditEvents(b.Context(), tc.f); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
}
