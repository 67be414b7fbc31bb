package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

func testInvites(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	inv := &datachat.Invite{UserID: alice.ID, Hash: "invite-1", CreatedAt: base}
	if err := s.CreateInvite(ctx, inv); err != nil {
		t.Fatalf("CreateInvite: %v", err)
	}
	if inv.ID == "" {
		t.Errorf("CreateInvite: got no ID")
	}
	checkTime(t, "invite CreatedAt", inv.CreatedAt, base)
	checkTime(t, "invite ExpiresAt (none given)", inv.ExpiresAt, base.Add(datachat.InviteTTL))
	mustInvite(t, s, bob.ID, "invite-bob", base.Add(time.Hour))

	if _, hash, err := s.PasswordHash(ctx, "alice"); err != nil || hash != "" {
		t.Errorf("PasswordHash before the invite: %q, %v; want none", hash, err)
	}
	wantCode(t, "UseInvite without a password hash", func() error {
		_, err := s.UseInvite(ctx, "invite-1", "", base.Add(time.Second))
		return err
	}(), datachat.EINVALID)
	a, err := s.UseInvite(ctx, "invite-1", "$argon2id$pw1", base.Add(time.Second))
	if err != nil {
		t.Fatalf("UseInvite: %v", err)
	}
	if a.ID != alice.ID || a.Name != "alice" || !a.HasPassword {
		t.Errorf("UseInvite: got %+v, want alice with a password", a)
	}
	equal(t, "UseInvite's account", a, account(t, s, alice.ID))
	pa, hash, err := s.PasswordHash(ctx, "alice")
	if err != nil || hash != "$argon2id$pw1" {
		t.Errorf("PasswordHash after the invite: %q, %v", hash, err)
	}
	equal(t, "PasswordHash's account", pa, a)

	// Used once only.
	_, err = s.UseInvite(ctx, "invite-1", "$argon2id$pw2", base.Add(2*time.Second))
	wantErr(t, "UseInvite again", err, datachat.ErrInviteInvalid)
	if _, hash, _ := s.PasswordHash(ctx, "alice"); hash != "$argon2id$pw1" {
		t.Errorf("password after a refused reuse: %q, want the first", hash)
	}
	for _, h := range []string{"", "no-such-invite", "INVITE-1", "invite-1 "} {
		_, err = s.UseInvite(ctx, h, "$argon2id$x", base.Add(time.Second))
		wantErr(t, fmt.Sprintf("UseInvite(%q)", h), err, datachat.ErrInviteInvalid)
	}

	// A new invite replaces the user's unused one, which stops working.
	mustInvite(t, s, alice.ID, "invite-2", base.Add(time.Hour))
	mustInvite(t, s, alice.ID, "invite-3", base.Add(time.Hour))
	_, err = s.UseInvite(ctx, "invite-2", "$argon2id$pw2", base.Add(time.Second))
	wantErr(t, "UseInvite of a replaced invite", err, datachat.ErrInviteInvalid)
	if _, err := s.UseInvite(ctx, "invite-3", "$argon2id$pw3", base.Add(time.Second)); err != nil {
		t.Errorf("UseInvite of the newest invite: %v", err)
	}
	if _, hash, _ := s.PasswordHash(ctx, "alice"); hash != "$argon2id$pw3" {
		t.Errorf("password after a reset: %q, want the newest", hash)
	}
	// bob's invite is his own, untouched by alice's.
	b, err := s.UseInvite(ctx, "invite-bob", "$argon2id$bob", base.Add(time.Second))
	if err != nil || b.ID != bob.ID {
		t.Errorf("bob's invite: %+v, %v", b, err)
	}

	wantCode(t, "CreateInvite for an unknown user", s.CreateInvite(ctx,
		&datachat.Invite{UserID: "no-such-user", Hash: "x", ExpiresAt: base.Add(time.Hour)}), datachat.ENOTFOUND)
	wantCode(t, "CreateInvite without a hash", s.CreateInvite(ctx,
		&datachat.Invite{UserID: alice.ID, ExpiresAt: base.Add(time.Hour)}), datachat.EINVALID)
	mustInvite(t, s, alice.ID, "invite-4", base.Add(time.Hour))
	wantCode(t, "CreateInvite with another user's hash", s.CreateInvite(ctx,
		&datachat.Invite{UserID: bob.ID, Hash: "invite-4", ExpiresAt: base.Add(time.Hour)}), datachat.ECONFLICT)
	if a, err := s.UseInvite(ctx, "invite-4", "$argon2id$pw4", base.Add(time.Second)); err != nil || a.ID != alice.ID {
		t.Errorf("an invite whose hash another CreateInvite tried: %+v, %v; want alice's", a, err)
	}
}

func testInviteExpiry(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	expires := base.Add(time.Hour)
	mustInvite(t, s, alice.ID, "invite-1", expires)
	_, err := s.UseInvite(ctx, "invite-1", "$pw", expires.Add(time.Microsecond))
	wantErr(t, "UseInvite just after it expired", err, datachat.ErrInviteInvalid)
	_, err = s.UseInvite(ctx, "invite-1", "$pw", expires.Add(24*time.Hour))
	wantErr(t, "UseInvite a day after it expired", err, datachat.ErrInviteInvalid)
	// A refused use does not use it up: at the last instant it works.
	if _, err := s.UseInvite(ctx, "invite-1", "$pw", expires); err != nil {
		t.Errorf("UseInvite at the instant it expires: %v, want it still valid", err)
	}
	// An invite of a week ago, made with the default lifetime.
	old := &datachat.Invite{UserID: alice.ID, Hash: "invite-2", CreatedAt: base}
	if err := s.CreateInvite(ctx, old); err != nil {
		t.Fatal(err)
	}
	_, err = s.UseInvite(ctx, "invite-2", "$pw", base.Add(datachat.InviteTTL+time.Second))
	wantErr(t, "UseInvite after InviteTTL", err, datachat.ErrInviteInvalid)
	if _, err := s.UseInvite(ctx, "invite-2", "$pw", base.Add(datachat.InviteTTL-time.Second)); err != nil {
		t.Errorf("UseInvite within InviteTTL: %v", err)
	}
	if _, hash, _ := s.PasswordHash(ctx, "alice"); hash != "$pw" {
		t.Errorf("password: %q", hash)
	}
}

func testInviteDisabledUser(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAccount(t, s, "root", datachat.RoleAdmin)
	alice := mustUser(t, s, "alice")
	if err := s.DisableUser(ctx, alice.ID, base); err != nil {
		t.Fatal(err)
	}
	// An invite of a disabled user can be made (an administrator resetting
	// before enabling) but is refused, and not used up, while they are.
	mustInvite(t, s, alice.ID, "invite-1", base.Add(time.Hour))
	_, err := s.UseInvite(ctx, "invite-1", "$pw", base.Add(time.Second))
	wantErr(t, "UseInvite of a disabled user", err, datachat.ErrInviteInvalid)
	if a := account(t, s, alice.ID); a.HasPassword {
		t.Errorf("a disabled user got a password")
	}
	if err := s.EnableUser(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UseInvite(ctx, "invite-1", "$pw", base.Add(time.Second)); err != nil {
		t.Errorf("UseInvite once enabled: %v", err)
	}
}

func testUseInviteConcurrent(t *testing.T, s datachat.Store) {
	UseInviteRace(t, []datachat.Store{s})
}

// UseInviteRace uses one invite from many goroutines at once, spread over
// stores (one, or several on one database): exactly one succeeds, the others
// get ErrInviteInvalid, and the winner's password is the one kept.
func UseInviteRace(t *testing.T, stores []datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, stores[0], "alice")
	const rounds, n = 3, 12
	for round := range rounds {
		hash := fmt.Sprintf("invite-%d", round)
		mustInvite(t, stores[0], alice.ID, hash, time.Now().Add(time.Hour))
		var (
			wins   atomic.Int32
			winner atomic.Value
			wg     sync.WaitGroup
		)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				pw := fmt.Sprintf("$pw-%d-%d", round, i)
				a, err := stores[i%len(stores)].UseInvite(ctx, hash, pw, time.Now())
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(pw)
					if a.ID != alice.ID || !a.HasPassword {
						t.Errorf("UseInvite: got %+v", a)
					}
				case !errors.Is(err, datachat.ErrInviteInvalid):
					t.Errorf("UseInvite: %v, want success or ErrInviteInvalid", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("round %d: %d of %d concurrent UseInvite succeeded, want exactly 1", round, got, n)
		}
		if _, hash, _ := stores[0].PasswordHash(ctx, "alice"); hash != winner.Load() {
			t.Errorf("round %d: stored password %q, want the winner's %q", round, hash, winner.Load())
		}
	}
}
