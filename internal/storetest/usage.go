package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

func testUsage(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")

	usages := []*datachat.Usage{
		{UserID: alice.ID, ConversationID: "c1", MessageID: "m1", Provider: "gemini", Model: "gemini-2.5-flash",
			InputTokens: 100, OutputTokens: 50, Success: true, CreatedAt: base.Add(-2 * time.Hour)},
		{UserID: alice.ID, InputTokens: 10, OutputTokens: 5, Estimated: true, CreatedAt: base.Add(-time.Hour)},
		{UserID: alice.ID, InputTokens: 1, OutputTokens: 2, Success: true, CreatedAt: base},
		{UserID: bob.ID, InputTokens: 1000, OutputTokens: 1000, Success: true, CreatedAt: base},
	}
	for _, u := range usages {
		if err := s.RecordUsage(ctx, u); err != nil {
			t.Fatalf("RecordUsage: %v", err)
		}
		if u.ID == "" {
			t.Fatalf("RecordUsage: got empty ID, want one filled in")
		}
	}
	checkTime(t, "usage CreatedAt", usages[2].CreatedAt, base)
	now := &datachat.Usage{UserID: alice.ID, InputTokens: 7}
	if err := s.RecordUsage(ctx, now); err != nil {
		t.Fatalf("RecordUsage: %v", err)
	}
	if now.CreatedAt.IsZero() {
		t.Fatalf("RecordUsage: got zero CreatedAt, want it filled in")
	}
	wantCode(t, "RecordUsage for an unknown user", s.RecordUsage(ctx,
		&datachat.Usage{UserID: "no-such-user", InputTokens: 1}), datachat.ENOTFOUND)

	tests := []struct {
		user  string
		since time.Time
		want  int64
	}{
		{alice.ID, base.Add(-3 * time.Hour), 175},
		{alice.ID, base.Add(-time.Hour), 25}, // at or after: the row at exactly since counts
		{alice.ID, base.Add(-time.Hour + time.Millisecond), 10},
		{alice.ID, usages[2].CreatedAt, 10},
		{alice.ID, base.Add(time.Millisecond), 7},
		{alice.ID, now.CreatedAt.Add(time.Millisecond), 0},
		{bob.ID, base.Add(-time.Hour), 2000},
		{"no-such-user", base.Add(-time.Hour), 0},
	}
	for _, tt := range tests {
		got, err := s.TokensSince(ctx, tt.user, tt.since)
		if err != nil {
			t.Fatalf("TokensSince: %v", err)
		}
		if got != tt.want {
			t.Errorf("TokensSince(%s, %v): got %d, want %d", tt.user, tt.since, got, tt.want)
		}
	}
}

func testTakeRequest(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	const window, limit = time.Minute, 3
	t0 := base

	take := func(user string, at time.Time, wantOK bool, wantRetry time.Duration) {
		t.Helper()
		ok, retry, err := s.TakeRequest(ctx, user, at, window, limit)
		if err != nil {
			t.Fatalf("TakeRequest at %v: %v", at.Sub(t0), err)
		}
		if ok != wantOK || retry != wantRetry {
			t.Errorf("TakeRequest at t0+%v: got %v, %v; want %v, %v", at.Sub(t0), ok, retry, wantOK, wantRetry)
		}
	}
	take(alice.ID, t0, true, 0)
	take(alice.ID, t0.Add(time.Second), true, 0)
	take(alice.ID, t0.Add(2*time.Second), true, 0)
	take(alice.ID, t0.Add(3*time.Second), false, 57*time.Second)
	take(alice.ID, t0.Add(59*time.Second), false, time.Second)
	take(bob.ID, t0.Add(3*time.Second), true, 0) // users are independent
	// The window is (now-window, now]: the request at t0 has left it at t0+60s.
	take(alice.ID, t0.Add(window), true, 0)
	take(alice.ID, t0.Add(window), false, time.Second)
	take(alice.ID, t0.Add(window+500*time.Millisecond), false, 500*time.Millisecond)
	take(alice.ID, t0.Add(window+time.Second), true, 0)
	take(alice.ID, t0.Add(window+time.Second), false, time.Second)
	take(alice.ID, t0.Add(10*window), true, 0)

	ok, _, err := s.TakeRequest(ctx, alice.ID, t0.Add(10*window), window, 0)
	if err != nil || !ok {
		t.Errorf("TakeRequest with limit 0 (off): got %v, %v; want true, nil", ok, err)
	}

	// Callers read the clock before they wait for the lock, so a request can
	// arrive with an earlier now than ones already admitted: those count too.
	carol := mustUser(t, s, "carol")
	for i := range limit {
		take(carol.ID, t0.Add(time.Duration(10+i)*time.Millisecond), true, 0)
	}
	if ok, _, _ := s.TakeRequest(ctx, carol.ID, t0, window, limit); ok {
		t.Errorf("TakeRequest with an earlier now: admitted beyond the limit")
	}
}

func testTakeRequestConcurrent(t *testing.T, s datachat.Store) {
	alice := mustUser(t, s, "alice")
	const n, limit, window = 50, 10, time.Minute
	now := time.Now()
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ok, retry, err := s.TakeRequest(t.Context(), alice.ID, now, window, limit)
			if err != nil {
				t.Errorf("TakeRequest: %v", err)
				return
			}
			if ok {
				admitted.Add(1)
			} else if retry <= 0 || retry > window {
				t.Errorf("TakeRequest refused: got retry after %v, want in (0, %v]", retry, window)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("concurrent TakeRequest: got %d admitted, want exactly %d of %d", got, limit, n)
	}
}

func testTokensPerDay(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	bob := mustUser(t, s, "bob")
	for _, n := range []*int64{ptr(int64(1000)), ptr(int64(0)), nil, ptr(int64(1) << 50)} {
		if err := s.SetTokensPerDay(ctx, bob.ID, n); err != nil {
			t.Fatalf("SetTokensPerDay(%v): %v", n, err)
		}
		equal(t, "TokensPerDay", account(t, s, bob.ID).TokensPerDay, n)
	}
	wantCode(t, "SetTokensPerDay negative", s.SetTokensPerDay(ctx, bob.ID, ptr(int64(-5))), datachat.EINVALID)
	wantCode(t, "SetTokensPerDay of an unknown user", s.SetTokensPerDay(ctx, "no-such-user", nil), datachat.ENOTFOUND)
	if got := account(t, s, bob.ID).TokensPerDay; got == nil || *got != 1<<50 {
		t.Errorf("TokensPerDay after refused changes: %v, want 2^50", got)
	}
}

func testUsageByDay(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	zed := mustUser(t, s, "Zed") // upper case sorts first in byte order
	amy := mustUser(t, s, "amy")
	gone := mustUser(t, s, "gone")
	day := time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC)
	// Each usage at a time in some zone: its UTC day counts.
	local := time.FixedZone("UTC-5", -5*3600)
	record := func(u *datachat.User, at time.Time, in, out int64) {
		t.Helper()
		if err := s.RecordUsage(ctx, &datachat.Usage{UserID: u.ID, InputTokens: in, OutputTokens: out, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	record(amy, day.Add(-time.Microsecond), 1000, 1000) // the day before: before since
	record(amy, day, 10, 1)
	record(amy, day.Add(23*time.Hour+59*time.Minute).In(local), 20, 2) // 18:59 in UTC-5, still the 4th in UTC
	record(zed, day.Add(12*time.Hour), 5, 5)
	record(amy, day.Add(24*time.Hour), 30, 3)
	record(zed, day.Add(48*time.Hour+time.Hour).In(local), 7, 0) // 20:00 on the 5th in UTC-5: the 6th in UTC
	record(gone, day.Add(time.Hour), 99, 99)
	if err := s.DeleteUser(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.UsageByDay(ctx, day.In(local))
	if err != nil {
		t.Fatalf("UsageByDay: %v", err)
	}
	want := []datachat.UsageDay{
		{UserID: zed.ID, UserName: "Zed", Day: day.Add(48 * time.Hour), Turns: 1, InputTokens: 7, OutputTokens: 0},
		{UserID: amy.ID, UserName: "amy", Day: day.Add(24 * time.Hour), Turns: 1, InputTokens: 30, OutputTokens: 3},
		{UserID: zed.ID, UserName: "Zed", Day: day, Turns: 1, InputTokens: 5, OutputTokens: 5},
		{UserID: amy.ID, UserName: "amy", Day: day, Turns: 2, InputTokens: 30, OutputTokens: 3},
	}
	equal(t, "UsageByDay", got, want)
	for _, d := range got {
		checkUTC(t, "UsageDay.Day", d.Day)
	}
	later, err := s.UsageByDay(ctx, day.Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "UsageByDay from a later time", later, want[:1])
	none, err := s.UsageByDay(ctx, day.Add(1000*time.Hour))
	wantEmpty(t, "UsageByDay with nothing since", none, err)
}
