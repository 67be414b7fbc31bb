package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
)

func testRoles(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	root := mustAccount(t, s, "root", datachat.RoleAdmin)
	bob := mustUser(t, s, "bob")
	if err := s.SetRole(ctx, bob.ID, datachat.RoleAdmin); err != nil {
		t.Fatalf("SetRole admin: %v", err)
	}
	if a := account(t, s, bob.ID); a.Role != datachat.RoleAdmin {
		t.Errorf("bob after SetRole admin: %s", a.Role)
	}
	if err := s.SetRole(ctx, bob.ID, datachat.RoleAdmin); err != nil {
		t.Errorf("SetRole admin of an admin: %v", err)
	}
	if err := s.SetRole(ctx, bob.ID, datachat.RoleMember); err != nil {
		t.Fatalf("SetRole member with another admin: %v", err)
	}
	if a := account(t, s, bob.ID); a.Role != datachat.RoleMember {
		t.Errorf("bob after SetRole member: %s", a.Role)
	}
	wantCode(t, "SetRole to an unknown role", s.SetRole(ctx, bob.ID, "superuser"), datachat.EINVALID)
	wantCode(t, "SetRole to an empty role", s.SetRole(ctx, bob.ID, ""), datachat.EINVALID)
	wantCode(t, "SetRole of an unknown user", s.SetRole(ctx, "no-such-user", datachat.RoleMember), datachat.ENOTFOUND)
	if a := account(t, s, root.ID); a.Role != datachat.RoleAdmin {
		t.Errorf("root: %s, want admin still", a.Role)
	}
}

func testLastAdmin(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	now := base
	root := mustAccount(t, s, "root", datachat.RoleAdmin)
	member := mustAccount(t, s, "member", datachat.RoleMember)

	refused := func(what string, err error) {
		t.Helper()
		wantCode(t, what, err, datachat.ECONFLICT)
		if err != nil && !strings.Contains(datachat.ErrorMessage(err), "root") {
			t.Errorf("%s: message %q does not name the admin", what, datachat.ErrorMessage(err))
		}
		if a := account(t, s, root.ID); a.Role != datachat.RoleAdmin || a.DisabledAt != nil {
			t.Fatalf("%s: root is now %+v, want an active admin still", what, a)
		}
	}
	refused("SetRole member of the last admin", s.SetRole(ctx, root.ID, datachat.RoleMember))
	refused("DisableUser of the last admin", s.DisableUser(ctx, root.ID, now))
	refused("DeleteUser of the last admin", s.DeleteUser(ctx, root.ID))

	// A disabled admin does not count: it cannot manage the server.
	second := mustAccount(t, s, "second", datachat.RoleAdmin)
	if err := s.DisableUser(ctx, second.ID, now); err != nil {
		t.Fatalf("DisableUser of an admin beside another: %v", err)
	}
	refused("SetRole member of the last active admin", s.SetRole(ctx, root.ID, datachat.RoleMember))
	refused("DisableUser of the last active admin", s.DisableUser(ctx, root.ID, now))
	refused("DeleteUser of the last active admin", s.DeleteUser(ctx, root.ID))
	// Nor does a disabled admin need protecting.
	if err := s.SetRole(ctx, second.ID, datachat.RoleMember); err != nil {
		t.Errorf("SetRole member of a disabled admin: %v", err)
	}
	if err := s.DeleteUser(ctx, second.ID); err != nil {
		t.Errorf("DeleteUser of a disabled former admin: %v", err)
	}
	// Members come and go freely.
	if err := s.DisableUser(ctx, member.ID, now); err != nil {
		t.Errorf("DisableUser of a member: %v", err)
	}
	if err := s.DeleteUser(ctx, member.ID); err != nil {
		t.Errorf("DeleteUser of a member: %v", err)
	}
	// With another active admin (enabled again counts), the first may go.
	third := mustAccount(t, s, "third", datachat.RoleMember)
	if err := s.SetRole(ctx, third.ID, datachat.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if err := s.DisableUser(ctx, third.ID, now); err != nil {
		t.Fatal(err)
	}
	refused("DeleteUser of root with the other admin disabled", s.DeleteUser(ctx, root.ID))
	if err := s.EnableUser(ctx, third.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, root.ID); err != nil {
		t.Fatalf("DeleteUser of an admin beside an active one: %v", err)
	}
	wantCode(t, "DeleteUser of the admin left", s.DeleteUser(ctx, third.ID), datachat.ECONFLICT)
}

// testLastAdminConcurrent has two admins demote, disable or remove each
// other at the same time, round after round: exactly one change of each
// pair succeeds, and an active admin always remains.
func testLastAdminConcurrent(t *testing.T, s datachat.Store) {
	LastAdminRace(t, s, s, 8)
}

// LastAdminRace runs rounds of two admins changed at once through a and b
// (one store, or two on one database): in each round the first is demoted,
// disabled or removed through a while the second is through b. Exactly one
// of the two changes succeeds, the other is refused with ECONFLICT, and an
// active admin remains.
func LastAdminRace(t *testing.T, a, b datachat.Store, rounds int) {
	ctx := t.Context()
	change := []func(s datachat.Store, id string) error{
		func(s datachat.Store, id string) error { return s.SetRole(ctx, id, datachat.RoleMember) },
		func(s datachat.Store, id string) error { return s.DisableUser(ctx, id, time.Now()) },
		func(s datachat.Store, id string) error { return s.DeleteUser(ctx, id) },
	}
	for round := range rounds {
		x := mustAccount(t, a, fmt.Sprintf("x%d", round), datachat.RoleAdmin)
		y := mustAccount(t, a, fmt.Sprintf("y%d", round), datachat.RoleAdmin)
		// Only x and y are admins now: the earlier rounds' survivor steps down.
		list, err := a.Accounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, acc := range list {
			if acc.ID != x.ID && acc.ID != y.ID && acc.Role == datachat.RoleAdmin {
				if err := a.SetRole(ctx, acc.ID, datachat.RoleMember); err != nil {
					t.Fatalf("round %d: step down %s: %v", round, acc.Name, err)
				}
			}
		}
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; errs[0] = change[round%3](a, x.ID) })
		wg.Go(func() { <-start; errs[1] = change[(round+1)%3](b, y.ID) })
		close(start)
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch datachat.ErrorCode(err) {
			case "":
				ok++
			case datachat.ECONFLICT:
			default:
				t.Errorf("round %d: change %d: %v, want success or ECONFLICT", round, i, err)
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d of the two changes succeeded (%v), want exactly one", round, ok, errs)
		}
		list, err = b.Accounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		active := 0
		for _, acc := range list {
			if acc.Role == datachat.RoleAdmin && acc.DisabledAt == nil {
				active++
			}
		}
		if active != 1 {
			t.Fatalf("round %d: %d active admins, want 1", round, active)
		}
	}
}
