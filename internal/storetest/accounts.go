package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
)

// The accounts' cases ([datachat.AccountStore]), run by [Run].
var accountTests = []struct {
	name string
	fn   func(t *testing.T, s datachat.Store)
}{
	{"Accounts", testAccounts},
	{"AccountNames", testAccountNames},
	{"Roles", testRoles},
	{"LastAdmin", testLastAdmin},
	{"LastAdminConcurrent", testLastAdminConcurrent},
	{"TokensPerDay", testTokensPerDay},
	{"DisableUser", testDisableUser},
	{"DeleteUser", testDeleteUser},
	{"Invites", testInvites},
	{"InviteExpiry", testInviteExpiry},
	{"InviteDisabledUser", testInviteDisabledUser},
	{"UseInviteConcurrent", testUseInviteConcurrent},
	{"PasswordChangeEndsSessions", testPasswordChangeEndsSessions},
	{"Sessions", testSessions},
	{"SessionIdle", testSessionIdle},
	{"SessionCredentials", testSessionCredentials},
	{"SessionDisableRace", testSessionDisableRace},
	{"Identities", testIdentities},
	{"TakeAttempt", testTakeAttempt},
	{"TakeAttemptKeys", testTakeAttemptKeys},
	{"TakeAttemptConcurrent", testTakeAttemptConcurrent},
	{"UsageByDay", testUsageByDay},
	{"LastSeen", testLastSeen},
}

// mustAccount creates an account of this name and role.
func mustAccount(t *testing.T, s datachat.Store, name string, role datachat.Role) *datachat.Account {
	t.Helper()
	a := &datachat.Account{User: datachat.User{Name: name}, Role: role}
	if err := s.CreateAccount(t.Context(), a); err != nil {
		t.Fatalf("CreateAccount(%q, %s): %v", name, role, err)
	}
	return a
}

// account reads a user's account.
func account(t *testing.T, s datachat.Store, id string) *datachat.Account {
	t.Helper()
	a, err := s.Account(t.Context(), id)
	if err != nil {
		t.Fatalf("Account(%s): %v", id, err)
	}
	return a
}

// mustInvite stores an invite of the user with this hash, expiring at
// expires.
func mustInvite(t *testing.T, s datachat.Store, userID, hash string, expires time.Time) *datachat.Invite {
	t.Helper()
	inv := &datachat.Invite{UserID: userID, Hash: hash, ExpiresAt: expires}
	if err := s.CreateInvite(t.Context(), inv); err != nil {
		t.Fatalf("CreateInvite: %v", err)
	}
	return inv
}

// mustSession stores a session of the user with this hash, created at at,
// and returns it with the credential it authenticates as.
func mustSession(t *testing.T, s datachat.Store, userID, hash string, at time.Time) (*datachat.Session, datachat.Credential) {
	t.Helper()
	sess := &datachat.Session{UserID: userID, Hash: hash, Method: "password", CreatedAt: at}
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return sess, datachat.Credential{Kind: datachat.CredentialSession, ID: sess.ID, UserID: userID}
}

// wantErr fails unless err is want itself (one of the shared *datachat.Error
// values) somewhere in its chain.
func wantErr(t *testing.T, what string, err error, want *datachat.Error) {
	t.Helper()
	if !errors.Is(err, want) || datachat.ErrorCode(err) != want.Code {
		t.Errorf("%s: got %v, want %q (%s)", what, err, want.Message, want.Code)
	}
}

// revocations calls RevokedCredentials and returns each credential's reason
// by id.
func revocations(t *testing.T, s datachat.Store, creds ...datachat.Credential) map[string]error {
	t.Helper()
	revs, err := s.RevokedCredentials(t.Context(), creds)
	if err != nil {
		t.Fatalf("RevokedCredentials: %v", err)
	}
	out := map[string]error{}
	for _, r := range revs {
		if _, dup := out[r.Credential.ID]; dup {
			t.Errorf("RevokedCredentials: %s named twice", r.Credential.ID)
		}
		out[r.Credential.ID] = r.Reason
	}
	return out
}

// wantRevoked fails unless RevokedCredentials of creds answers exactly
// want: the reason of each credential that no longer authenticates, by id.
func wantRevoked(t *testing.T, what string, s datachat.Store, creds []datachat.Credential, want map[string]*datachat.Error) {
	t.Helper()
	got := revocations(t, s, creds...)
	for id, reason := range want {
		if !errors.Is(got[id], reason) {
			t.Errorf("%s: credential %s: got %v, want %q", what, id, got[id], reason.Message)
		}
	}
	for id, reason := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: credential %s revoked (%v), want it still valid", what, id, reason)
		}
	}
}

func testAccounts(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	budget := int64(5000)
	carol := &datachat.Account{User: datachat.User{Name: "carol", CreatedAt: base}, Role: datachat.RoleAdmin,
		Email: "carol@example.com", TokensPerDay: &budget}
	if err := s.CreateAccount(ctx, carol); err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if carol.ID == "" {
		t.Fatalf("CreateAccount: got no ID")
	}
	checkTime(t, "account CreatedAt", carol.CreatedAt, base)
	equal(t, "Account of a new account", account(t, s, carol.ID), carol)
	byName, err := s.AccountByName(ctx, "carol")
	if err != nil {
		t.Fatalf("AccountByName: %v", err)
	}
	equal(t, "AccountByName", byName, carol)

	// EnsureUser makes members; an account made by either is the same user.
	bob := mustUser(t, s, "bob")
	b := account(t, s, bob.ID)
	if b.Role != datachat.RoleMember || b.HasPassword || b.SSO || b.DisabledAt != nil || b.TokensPerDay != nil || b.LastSeenAt != nil || b.Email != "" {
		t.Errorf("EnsureUser's account: got %+v, want a member without password, SSO, budget or use", b)
	}
	equal(t, "Account's user", b.User, *bob)
	again := mustUser(t, s, "carol")
	if again.ID != carol.ID {
		t.Errorf("EnsureUser of an account's name: got id %s, want %s", again.ID, carol.ID)
	}

	wantCode(t, "CreateAccount of a taken name", s.CreateAccount(ctx,
		&datachat.Account{User: datachat.User{Name: "bob"}, Role: datachat.RoleAdmin}), datachat.ECONFLICT)
	if a, err := s.AccountByName(ctx, "bob"); err != nil || a.Role != datachat.RoleMember {
		t.Errorf("bob after a refused CreateAccount: %+v, %v; want the member as before", a, err)
	}
	for _, role := range []datachat.Role{"", "Admin", "owner", "admin "} {
		wantCode(t, fmt.Sprintf("CreateAccount with role %q", role), s.CreateAccount(ctx,
			&datachat.Account{User: datachat.User{Name: "dave"}, Role: role}), datachat.EINVALID)
	}
	neg := int64(-1)
	wantCode(t, "CreateAccount with a negative budget", s.CreateAccount(ctx,
		&datachat.Account{User: datachat.User{Name: "dave"}, Role: datachat.RoleMember, TokensPerDay: &neg}), datachat.EINVALID)
	wantCode(t, "CreateAccount with an email that is not UTF-8", s.CreateAccount(ctx,
		&datachat.Account{User: datachat.User{Name: "dave"}, Role: datachat.RoleMember, Email: "d\xffe@example.com"}), datachat.EINVALID)
	if _, err := s.AccountByName(ctx, "dave"); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("dave after refused CreateAccounts: got %v, want not found", err)
	}

	_, err = s.Account(ctx, "no-such-user")
	wantCode(t, "Account of an unknown id", err, datachat.ENOTFOUND)
	_, err = s.AccountByName(ctx, "nobody")
	wantCode(t, "AccountByName of an unknown name", err, datachat.ENOTFOUND)

	list, err := s.Accounts(ctx)
	if err != nil {
		t.Fatalf("Accounts: %v", err)
	}
	equal(t, "Accounts", list, []*datachat.Account{b, carol})
}

func testAccountNames(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	// Names are kept and compared exactly: case, accents and their
	// Unicode forms make different users.
	names := []string{
		"alice", "Alice", "ALICE",
		"zoë",       // ë precomposed (NFC)
		"zoe\u0308", // e and a combining diaeresis (NFD): looks the same
		"ZOË",       // upper case
		"İstanbul",  // dotted capital I, which lower-cases to two runes
		"istanbul",  // …
		"東京",        // not Latin
		"bob 🐧",     // outside the BMP, with a space inside
		"o'brien",   // a quote
		`"; DROP--`, // SQL-looking
		"a%b_c",     // LIKE wildcards
		strings.Repeat("é", datachat.MaxUserNameBytes/2), // the longest name
	}
	ids := map[string]string{}
	for i, name := range names {
		role := datachat.RoleMember
		if i%2 == 0 {
			role = datachat.RoleAdmin
		}
		a := mustAccount(t, s, name, role)
		for n, id := range ids {
			if id == a.ID {
				t.Fatalf("%q and %q got the same id", n, name)
			}
		}
		ids[name] = a.ID
	}
	for _, name := range names {
		a, err := s.AccountByName(ctx, name)
		if err != nil {
			t.Fatalf("AccountByName(%q): %v", name, err)
		}
		if a.Name != name || a.ID != ids[name] {
			t.Errorf("AccountByName(%q): got %q (%s), want %s", name, a.Name, a.ID, ids[name])
		}
		u, err := s.EnsureUser(ctx, name)
		if err != nil || u.ID != ids[name] {
			t.Errorf("EnsureUser(%q): got %+v, %v; want the user %s", name, u, err, ids[name])
		}
		if _, _, err := s.PasswordHash(ctx, name); err != nil {
			t.Errorf("PasswordHash(%q): %v", name, err)
		}
	}
	// Names no one has, some of which no database can hold: not found,
	// never an internal error.
	for _, name := range []string{"aLiCe", "alice ", " alice", "zoé", "zo\xeb", "ali\x00ce", "\xff\xfe", "ALİCE", ""} {
		_, err := s.AccountByName(ctx, name)
		wantCode(t, fmt.Sprintf("AccountByName(%q)", name), err, datachat.ENOTFOUND)
		_, _, err = s.PasswordHash(ctx, name)
		wantCode(t, fmt.Sprintf("PasswordHash(%q)", name), err, datachat.ENOTFOUND)
	}
	// Names no user may have.
	for _, name := range []string{"", " alice", "alice ", "\talice", "alice\n", "al\x00ice", "al\x1bice", "al\u0085ice",
		"\xff\xfe", "zo\xeb", "\u00a0alice", strings.Repeat("é", datachat.MaxUserNameBytes/2) + "e"} {
		wantCode(t, fmt.Sprintf("CreateAccount(%q)", name), s.CreateAccount(ctx,
			&datachat.Account{User: datachat.User{Name: name}, Role: datachat.RoleMember}), datachat.EINVALID)
		_, err := s.EnsureUser(ctx, name)
		wantCode(t, fmt.Sprintf("EnsureUser(%q)", name), err, datachat.EINVALID)
	}
	// Listed in byte order (as SQLite sorts text), whatever the database's
	// collation.
	list, err := s.Accounts(ctx)
	if err != nil {
		t.Fatalf("Accounts: %v", err)
	}
	var got []string
	for _, a := range list {
		got = append(got, a.Name)
	}
	want := slices.Clone(names)
	slices.Sort(want) // byte order
	equal(t, "Accounts' order", got, want)
}

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

func testDisableUser(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAccount(t, s, "root", datachat.RoleAdmin)
	alice := mustAccount(t, s, "alice", datachat.RoleMember)
	bob := mustAccount(t, s, "bob", datachat.RoleMember)
	aliceKey := mustKey(t, s, &alice.User, "hash-alice")
	bobKey := mustKey(t, s, &bob.User, "hash-bob")
	_, aliceSess := mustSession(t, s, alice.ID, "sess-alice", base)
	_, bobSess := mustSession(t, s, bob.ID, "sess-bob", base)
	mustInvite(t, s, alice.ID, "invite-alice", base.Add(time.Hour))
	all := []datachat.Credential{aliceKey, bobKey, aliceSess, bobSess}
	wantRevoked(t, "before disabling", s, all, nil)

	if err := s.DisableUser(ctx, alice.ID, base); err != nil {
		t.Fatalf("DisableUser: %v", err)
	}
	a := account(t, s, alice.ID)
	if a.DisabledAt == nil {
		t.Fatalf("DisabledAt after DisableUser: nil")
	}
	checkTime(t, "DisabledAt", *a.DisabledAt, base)
	// Disabling again keeps the first time.
	if err := s.DisableUser(ctx, alice.ID, base.Add(time.Hour)); err != nil {
		t.Fatalf("DisableUser again: %v", err)
	}
	checkTime(t, "DisabledAt after disabling again", *account(t, s, alice.ID).DisabledAt, base)

	_, _, err := s.Authenticate(ctx, "hash-alice")
	wantErr(t, "Authenticate with a disabled user's key", err, datachat.ErrUserDisabled)
	// Her sessions were deleted with it (RevokedCredentials tells their
	// open requests why).
	_, _, err = s.AuthenticateSession(ctx, "sess-alice", base.Add(time.Second), time.Hour)
	wantErr(t, "AuthenticateSession of a disabled user", err, datachat.ErrSessionEnded)
	_, err = s.UseInvite(ctx, "invite-alice", "pw", base.Add(time.Second))
	wantErr(t, "UseInvite of a disabled user's invite", err, datachat.ErrInviteInvalid)
	wantRevoked(t, "after disabling alice", s, all, map[string]*datachat.Error{
		aliceKey.ID: datachat.ErrUserDisabled, aliceSess.ID: datachat.ErrUserDisabled})
	err = s.CreateSession(ctx, &datachat.Session{UserID: alice.ID, Hash: "sess-alice-2", Method: "password"})
	wantErr(t, "CreateSession of a disabled user", err, datachat.ErrUserDisabled)
	// bob is untouched.
	if _, _, err := s.Authenticate(ctx, "hash-bob"); err != nil {
		t.Errorf("bob's key: %v", err)
	}
	if _, _, err := s.AuthenticateSession(ctx, "sess-bob", base.Add(time.Second), time.Hour); err != nil {
		t.Errorf("bob's session: %v", err)
	}
	// The key is not revoked: it authenticates again once alice is
	// enabled. Her sessions and invites are gone for good.
	if err := s.EnableUser(ctx, alice.ID); err != nil {
		t.Fatalf("EnableUser: %v", err)
	}
	if err := s.EnableUser(ctx, alice.ID); err != nil {
		t.Errorf("EnableUser of an enabled user: %v", err)
	}
	if a := account(t, s, alice.ID); a.DisabledAt != nil {
		t.Errorf("DisabledAt after EnableUser: %v", a.DisabledAt)
	}
	if u, cred, err := s.Authenticate(ctx, "hash-alice"); err != nil || u.ID != alice.ID || cred != aliceKey {
		t.Errorf("alice's key after EnableUser: %+v, %+v, %v", u, cred, err)
	}
	_, _, err = s.AuthenticateSession(ctx, "sess-alice", base.Add(2*time.Second), time.Hour)
	wantErr(t, "a session of before disabling, after enabling", err, datachat.ErrSessionEnded)
	_, err = s.UseInvite(ctx, "invite-alice", "pw", base.Add(2*time.Second))
	wantErr(t, "an invite of before disabling, after enabling", err, datachat.ErrInviteInvalid)
	wantRevoked(t, "after enabling alice", s, all, map[string]*datachat.Error{aliceSess.ID: datachat.ErrSessionEnded})
	mustSession(t, s, alice.ID, "sess-alice-3", base)
	if _, _, err := s.AuthenticateSession(ctx, "sess-alice-3", base.Add(time.Second), time.Hour); err != nil {
		t.Errorf("a new session after enabling: %v", err)
	}

	wantCode(t, "DisableUser of an unknown user", s.DisableUser(ctx, "no-such-user", base), datachat.ENOTFOUND)
	wantCode(t, "EnableUser of an unknown user", s.EnableUser(ctx, "no-such-user"), datachat.ENOTFOUND)
}

func testDeleteUser(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAccount(t, s, "root", datachat.RoleAdmin)
	alice := mustAccount(t, s, "alice", datachat.RoleMember)
	bob := mustAccount(t, s, "bob", datachat.RoleMember)

	// Everything alice can own, and the same of bob's beside it.
	type owned struct {
		conv    *datachat.Conversation
		key     datachat.Credential
		sess    datachat.Credential
		example *datachat.Example
	}
	fill := func(a *datachat.Account) owned {
		t.Helper()
		c := mustConversation(t, s, a.ID)
		m := mustMessage(t, s, c.ID, datachat.RoleAssistant, datachat.StatusAwaitingConfirmation)
		if err := s.CreateToolCall(ctx, &datachat.ToolCall{MessageID: m.ID, Tool: "execute_sql", Args: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateDataset(ctx, &datachat.Dataset{ConversationID: c.ID, Name: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateDocument(ctx, &datachat.Document{ConversationID: c.ID, Name: "d.md"}, []*datachat.Chunk{{Text: "a"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateConfirmation(ctx, &datachat.Confirmation{ConversationID: c.ID, MessageID: m.ID, Action: "execute_sql"}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordUsage(ctx, &datachat.Usage{UserID: a.ID, ConversationID: c.ID, MessageID: m.ID, InputTokens: 7, CreatedAt: base}); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := s.TakeRequest(ctx, a.ID, base, time.Minute, 1); err != nil || !ok {
			t.Fatalf("TakeRequest: %v, %v", ok, err)
		}
		e := &datachat.Example{UserID: a.ID, SQL: "SELECT 1", Verdict: datachat.VerdictCorrect}
		if err := s.SaveExample(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := s.LinkIdentity(ctx, a.ID, datachat.Identity{Issuer: "https://idp", Subject: "sub-" + a.Name}); err != nil {
			t.Fatal(err)
		}
		if err := s.AttachDBSource(ctx, c.ID, "warehouse"); err != nil {
			t.Fatal(err)
		}
		mustInvite(t, s, a.ID, "invite-"+a.Name, base.Add(time.Hour))
		_, sess := mustSession(t, s, a.ID, "sess-"+a.Name, base)
		return owned{conv: c, key: mustKey(t, s, &a.User, "key-"+a.Name), sess: sess, example: e}
	}
	if err := s.CreateDBSource(ctx, &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "sealed", AllUsers: true}); err != nil {
		t.Fatal(err)
	}
	a, b := fill(alice), fill(bob)
	event := &datachat.AuditEvent{Kind: datachat.AuditKeyCreated, Outcome: datachat.AuditOK, UserID: alice.ID, UserName: "alice", Target: a.key.ID}
	mustAppend(t, s, event)

	if err := s.DeleteUser(ctx, alice.ID); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	_, err := s.Account(ctx, alice.ID)
	wantCode(t, "Account after DeleteUser", err, datachat.ENOTFOUND)
	_, err = s.AccountByName(ctx, "alice")
	wantCode(t, "AccountByName after DeleteUser", err, datachat.ENOTFOUND)
	_, err = s.Conversation(ctx, alice.ID, a.conv.ID)
	wantCode(t, "Conversation after DeleteUser", err, datachat.ENOTFOUND)
	convs, err := s.Conversations(ctx, alice.ID)
	wantEmpty(t, "Conversations after DeleteUser", convs, err)
	msgs, err := s.Messages(ctx, a.conv.ID)
	wantEmpty(t, "Messages after DeleteUser", msgs, err)
	ds, err := s.Datasets(ctx, a.conv.ID)
	wantEmpty(t, "Datasets after DeleteUser", ds, err)
	docs, err := s.Documents(ctx, a.conv.ID)
	wantEmpty(t, "Documents after DeleteUser", docs, err)
	chunks, err := s.Chunks(ctx, a.conv.ID)
	wantEmpty(t, "Chunks after DeleteUser", chunks, err)
	_, err = s.PendingConfirmation(ctx, a.conv.ID)
	wantCode(t, "PendingConfirmation after DeleteUser", err, datachat.ENOTFOUND)
	srcs, err := s.ConversationDBSources(ctx, a.conv.ID)
	wantEmpty(t, "ConversationDBSources after DeleteUser", srcs, err)
	exs, err := s.Examples(ctx, alice.ID)
	wantEmpty(t, "Examples after DeleteUser", exs, err)
	if n, err := s.TokensSince(ctx, alice.ID, time.Time{}); err != nil || n != 0 {
		t.Errorf("TokensSince after DeleteUser: %d, %v; want 0", n, err)
	}
	keys, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.UserID == alice.ID {
			t.Errorf("APIKeys after DeleteUser lists alice's key %s", k.ID)
		}
	}
	_, _, err = s.Authenticate(ctx, "key-alice")
	wantCode(t, "Authenticate after DeleteUser", err, datachat.EUNAUTHORIZED)
	_, _, err = s.AuthenticateSession(ctx, "sess-alice", base.Add(time.Second), time.Hour)
	wantErr(t, "AuthenticateSession after DeleteUser", err, datachat.ErrSessionEnded)
	_, err = s.UseInvite(ctx, "invite-alice", "pw", base.Add(time.Second))
	wantErr(t, "UseInvite after DeleteUser", err, datachat.ErrInviteInvalid)
	_, err = s.AccountByIdentity(ctx, datachat.Identity{Issuer: "https://idp", Subject: "sub-alice"})
	wantCode(t, "AccountByIdentity after DeleteUser", err, datachat.ENOTFOUND)
	wantRevoked(t, "RevokedCredentials after DeleteUser", s, []datachat.Credential{a.key, a.sess, b.key, b.sess},
		map[string]*datachat.Error{a.key.ID: datachat.ErrUserDisabled, a.sess.ID: datachat.ErrUserDisabled})
	// Their requests' count went with them: the same id (never reused) is
	// admitted again at once.
	if ok, _, err := s.TakeRequest(ctx, alice.ID, base, time.Minute, 1); err != nil || !ok {
		t.Errorf("TakeRequest of a removed user's id: %v, %v; want admitted", ok, err)
	}
	// The audit log keeps its records.
	if got := auditAll(t, s, datachat.AuditFilter{User: "alice"}, 10); len(got) != 1 || got[0].ID != event.ID {
		t.Errorf("audit log after DeleteUser: %v, want alice's event kept", auditIDs(got))
	}
	// bob keeps everything.
	if _, err := s.Conversation(ctx, bob.ID, b.conv.ID); err != nil {
		t.Errorf("bob's conversation: %v", err)
	}
	if msgs, err := s.Messages(ctx, b.conv.ID); err != nil || len(msgs) != 1 {
		t.Errorf("bob's messages: %d, %v", len(msgs), err)
	}
	if exs, err := s.Examples(ctx, bob.ID); err != nil || len(exs) != 1 {
		t.Errorf("bob's examples: %d, %v", len(exs), err)
	}
	if _, err := s.UseInvite(ctx, "invite-bob", "pw", base.Add(time.Second)); err != nil {
		t.Errorf("bob's invite: %v", err)
	}
	if _, err := s.AccountByIdentity(ctx, datachat.Identity{Issuer: "https://idp", Subject: "sub-bob"}); err != nil {
		t.Errorf("bob's identity: %v", err)
	}
	if _, err := s.DBSource(ctx, "warehouse"); err != nil {
		t.Errorf("the source alice used: %v", err)
	}
	// The name is free again, for a new user.
	again := mustAccount(t, s, "alice", datachat.RoleMember)
	if again.ID == alice.ID {
		t.Errorf("a new alice got the removed one's id")
	}
	wantCode(t, "DeleteUser again", s.DeleteUser(ctx, alice.ID), datachat.ENOTFOUND)
}

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

func testPasswordChangeEndsSessions(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	_, a1 := mustSession(t, s, alice.ID, "sess-a1", base)
	_, a2 := mustSession(t, s, alice.ID, "sess-a2", base)
	_, b1 := mustSession(t, s, bob.ID, "sess-b1", base)
	key := mustKey(t, s, alice, "key-alice")
	mustInvite(t, s, alice.ID, "invite", base.Add(time.Hour))
	if _, err := s.UseInvite(ctx, "invite", "$new", base.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"sess-a1", "sess-a2"} {
		_, _, err := s.AuthenticateSession(ctx, h, base.Add(2*time.Second), time.Hour)
		wantErr(t, "a session of before the password change", err, datachat.ErrSessionEnded)
	}
	if _, _, err := s.AuthenticateSession(ctx, "sess-b1", base.Add(2*time.Second), time.Hour); err != nil {
		t.Errorf("another user's session: %v", err)
	}
	// API keys are not passwords: they stay until revoked.
	if _, _, err := s.Authenticate(ctx, "key-alice"); err != nil {
		t.Errorf("alice's key after the password change: %v", err)
	}
	wantRevoked(t, "after the password change", s, []datachat.Credential{a1, a2, b1, key},
		map[string]*datachat.Error{a1.ID: datachat.ErrSessionEnded, a2.ID: datachat.ErrSessionEnded})
}

func testSessions(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	sess := &datachat.Session{UserID: alice.ID, Hash: "sess-1", Method: "oidc", CreatedAt: base}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if sess.ID == "" {
		t.Errorf("CreateSession: no ID")
	}
	checkTime(t, "session CreatedAt", sess.CreatedAt, base)
	checkTime(t, "session LastSeenAt", sess.LastSeenAt, base)
	a, cred, err := s.AuthenticateSession(ctx, "sess-1", base.Add(time.Second), time.Hour)
	if err != nil {
		t.Fatalf("AuthenticateSession: %v", err)
	}
	if a.ID != alice.ID || a.Name != "alice" || a.Role != datachat.RoleMember {
		t.Errorf("AuthenticateSession: account %+v, want alice", a)
	}
	equal(t, "AuthenticateSession's credential", cred, datachat.Credential{Kind: datachat.CredentialSession, ID: sess.ID, UserID: alice.ID})

	for _, h := range []string{"", "sess-2", "SESS-1"} {
		_, _, err := s.AuthenticateSession(ctx, h, base.Add(time.Second), time.Hour)
		wantErr(t, fmt.Sprintf("AuthenticateSession(%q)", h), err, datachat.ErrSessionEnded)
	}
	wantCode(t, "CreateSession with an unknown method", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Hash: "x", Method: "api_key"}), datachat.EINVALID)
	wantCode(t, "CreateSession without a method", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Hash: "x"}), datachat.EINVALID)
	wantCode(t, "CreateSession without a hash", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Method: "password"}), datachat.EINVALID)
	wantCode(t, "CreateSession of an unknown user", s.CreateSession(ctx,
		&datachat.Session{UserID: "no-such-user", Hash: "x", Method: "password"}), datachat.ENOTFOUND)
	wantCode(t, "CreateSession with a used hash", s.CreateSession(ctx,
		&datachat.Session{UserID: alice.ID, Hash: "sess-1", Method: "password"}), datachat.ECONFLICT)

	// Two sessions (two browsers): signing out of one keeps the other.
	_, other := mustSession(t, s, alice.ID, "sess-2", base)
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, _, err = s.AuthenticateSession(ctx, "sess-1", base.Add(time.Second), time.Hour)
	wantErr(t, "AuthenticateSession after DeleteSession", err, datachat.ErrSessionEnded)
	if _, c, err := s.AuthenticateSession(ctx, "sess-2", base.Add(time.Second), time.Hour); err != nil || c != other {
		t.Errorf("the other session: %+v, %v", c, err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Errorf("DeleteSession of a session gone: %v", err)
	}
	if err := s.DeleteSession(ctx, "no-such-session"); err != nil {
		t.Errorf("DeleteSession of an unknown id: %v", err)
	}
}

func testSessionIdle(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	const idle = time.Hour
	mustSession(t, s, alice.ID, "sess", base)
	auth := func(at time.Duration) error {
		t.Helper()
		_, _, err := s.AuthenticateSession(ctx, "sess", base.Add(at), idle)
		return err
	}
	// Used within the idle time, again and again: it lasts far beyond it.
	for _, at := range []time.Duration{2 * time.Minute, idle, 2 * idle, 3*idle - time.Minute} {
		if err := auth(at); err != nil {
			t.Fatalf("AuthenticateSession at +%v: %v", at, err)
		}
	}
	if got := account(t, s, alice.ID).LastSeenAt; got == nil || !got.Equal(base.Add(3*idle-time.Minute).UTC().Truncate(time.Microsecond)) {
		t.Errorf("LastSeenAt after the session's uses: %v, want +%v", got, 3*idle-time.Minute)
	}
	// Unused for longer than idle: ended, and deleted, so that an earlier
	// clock does not bring it back.
	wantErr(t, "AuthenticateSession after the idle time", auth(4*idle), datachat.ErrSessionEnded)
	wantErr(t, "AuthenticateSession with an earlier clock after it idled out", auth(3*idle), datachat.ErrSessionEnded)

	// An idle of 0 never ends a session.
	mustSession(t, s, alice.ID, "forever", base)
	if _, _, err := s.AuthenticateSession(ctx, "forever", base.Add(1000*24*time.Hour), 0); err != nil {
		t.Errorf("AuthenticateSession with idle 0 after 1000 days: %v", err)
	}
	// Uses within a minute are written once: a use 30 s after the last
	// written one does not move LastSeenAt.
	mustSession(t, s, alice.ID, "often", base)
	if _, _, err := s.AuthenticateSession(ctx, "often", base.Add(30*time.Second), idle); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.AuthenticateSession(ctx, "often", base.Add(idle+time.Second), idle)
	wantErr(t, "a session whose uses within a minute went unwritten, after the idle time from the written one", err, datachat.ErrSessionEnded)
}

func testSessionCredentials(t *testing.T, s datachat.Store) {
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	_, a := mustSession(t, s, alice.ID, "sess-a", base)
	_, b := mustSession(t, s, bob.ID, "sess-b", base)
	key := mustKey(t, s, alice, "key-a")
	wantRevoked(t, "sessions and a key, all valid", s, []datachat.Credential{a, b, key}, nil)
	stolen := datachat.Credential{Kind: datachat.CredentialSession, ID: b.ID, UserID: alice.ID}
	unknown := datachat.Credential{Kind: datachat.CredentialSession, ID: "no-such-session", UserID: alice.ID}
	// A session id given as an API key's is not the key.
	asKey := datachat.Credential{Kind: datachat.CredentialAPIKey, ID: a.ID, UserID: alice.ID}
	asSession := datachat.Credential{Kind: datachat.CredentialSession, ID: key.ID, UserID: alice.ID}
	got := revocations(t, s, stolen, unknown, asKey, asSession, a)
	for _, c := range []datachat.Credential{stolen, unknown, asSession} {
		if !errors.Is(got[c.ID], datachat.ErrSessionEnded) {
			t.Errorf("RevokedCredentials of %+v: %v, want ErrSessionEnded", c, got[c.ID])
		}
	}
	if !errors.Is(got[asKey.ID], datachat.ErrAPIKeyRevoked) && !errors.Is(got[asKey.ID], datachat.ErrSessionEnded) {
		t.Errorf("RevokedCredentials of a session's id as a key: %v, want it revoked", got[asKey.ID])
	}
	if err := s.DeleteSession(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	wantRevoked(t, "after signing out", s, []datachat.Credential{a, b, key}, map[string]*datachat.Error{a.ID: datachat.ErrSessionEnded})
	// A credential of a user who never existed.
	ghost := datachat.Credential{Kind: datachat.CredentialSession, ID: b.ID, UserID: "no-such-user"}
	wantRevoked(t, "a credential of an unknown user", s, []datachat.Credential{ghost}, map[string]*datachat.Error{b.ID: datachat.ErrUserDisabled})
	_, err := s.RevokedCredentials(t.Context(), []datachat.Credential{{Kind: "cookie", ID: "x", UserID: alice.ID}})
	wantCode(t, "RevokedCredentials of an unknown kind", err, datachat.EINVALID)
}

func testIdentities(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	id := datachat.Identity{Issuer: "https://idp.example.com", Subject: "248289761001", Email: "alice@example.com"}
	_, err := s.AccountByIdentity(ctx, id)
	wantCode(t, "AccountByIdentity before LinkIdentity", err, datachat.ENOTFOUND)
	if a := account(t, s, alice.ID); a.SSO {
		t.Errorf("SSO before LinkIdentity")
	}
	if err := s.LinkIdentity(ctx, alice.ID, id); err != nil {
		t.Fatalf("LinkIdentity: %v", err)
	}
	a, err := s.AccountByIdentity(ctx, id)
	if err != nil {
		t.Fatalf("AccountByIdentity: %v", err)
	}
	if a.ID != alice.ID || !a.SSO || a.Email != "alice@example.com" {
		t.Errorf("AccountByIdentity: %+v, want alice with SSO and her email", a)
	}
	// Found by issuer and subject only: the email may change.
	if a, err := s.AccountByIdentity(ctx, datachat.Identity{Issuer: id.Issuer, Subject: id.Subject, Email: "other@example.com"}); err != nil || a.ID != alice.ID {
		t.Errorf("AccountByIdentity with another email: %+v, %v", a, err)
	}
	for _, other := range []datachat.Identity{
		{Issuer: "https://idp.example.com/", Subject: id.Subject},
		{Issuer: "https://evil.example.com", Subject: id.Subject},
		{Issuer: id.Issuer, Subject: id.Subject + " "},
		{Issuer: id.Issuer, Subject: "\xff"},
		{Issuer: id.Issuer, Subject: "a\x00b"},
		{Issuer: id.Issuer, Subject: ""},
	} {
		_, err := s.AccountByIdentity(ctx, other)
		wantCode(t, fmt.Sprintf("AccountByIdentity(%q, %q)", other.Issuer, other.Subject), err, datachat.ENOTFOUND)
	}
	// Linking again keeps the newest email, on the account too.
	id.Email = "alice@new.example.com"
	if err := s.LinkIdentity(ctx, alice.ID, id); err != nil {
		t.Fatalf("LinkIdentity again: %v", err)
	}
	if a := account(t, s, alice.ID); a.Email != "alice@new.example.com" {
		t.Errorf("Email after linking again: %q", a.Email)
	}
	// One identity, one user.
	wantCode(t, "LinkIdentity of alice's identity to bob", s.LinkIdentity(ctx, bob.ID,
		datachat.Identity{Issuer: id.Issuer, Subject: id.Subject, Email: "bob@example.com"}), datachat.ECONFLICT)
	if a, _ := s.AccountByIdentity(ctx, id); a == nil || a.ID != alice.ID || a.Email != "alice@new.example.com" {
		t.Errorf("after a refused link to bob: %+v, want alice's unchanged", a)
	}
	if b := account(t, s, bob.ID); b.SSO || b.Email != "" {
		t.Errorf("bob after a refused link: %+v", b)
	}
	// The same subject at another issuer is another person.
	if err := s.LinkIdentity(ctx, bob.ID, datachat.Identity{Issuer: "https://other.example.com", Subject: id.Subject}); err != nil {
		t.Errorf("LinkIdentity of the same subject at another issuer: %v", err)
	}
	// An empty email leaves the account's as it is.
	if err := s.LinkIdentity(ctx, alice.ID, datachat.Identity{Issuer: id.Issuer, Subject: id.Subject}); err != nil {
		t.Fatal(err)
	}
	if a := account(t, s, alice.ID); a.Email != "alice@new.example.com" {
		t.Errorf("Email after linking without one: %q, want the last one given", a.Email)
	}
	wantCode(t, "LinkIdentity of an unknown user", s.LinkIdentity(ctx, "no-such-user",
		datachat.Identity{Issuer: "https://x", Subject: "1"}), datachat.ENOTFOUND)
	for _, bad := range []datachat.Identity{{Subject: "1"}, {Issuer: "https://x"}, {Issuer: "https://x", Subject: "a\x00"},
		{Issuer: "https://x", Subject: "1", Email: "\xff@x"}} {
		wantCode(t, fmt.Sprintf("LinkIdentity(%+q)", bad), s.LinkIdentity(ctx, alice.ID, bad), datachat.EINVALID)
	}
	// A new account from single sign-on keeps the email it was given.
	carol := &datachat.Account{User: datachat.User{Name: "carol"}, Role: datachat.RoleMember, Email: "carol@example.com"}
	if err := s.CreateAccount(ctx, carol); err != nil {
		t.Fatal(err)
	}
	if err := s.LinkIdentity(ctx, carol.ID, datachat.Identity{Issuer: id.Issuer, Subject: "carol-1", Email: "carol@example.com"}); err != nil {
		t.Fatal(err)
	}
	carol.SSO = true
	equal(t, "an account from single sign-on", account(t, s, carol.ID), carol)
}

func testTakeAttempt(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	const window, limit = 15 * time.Minute, 3
	t0 := base
	take := func(key string, at time.Time, wantOK bool, wantRetry time.Duration) {
		t.Helper()
		ok, retry, err := s.TakeAttempt(ctx, key, at, window, limit)
		if err != nil {
			t.Fatalf("TakeAttempt(%q) at +%v: %v", key, at.Sub(t0), err)
		}
		if ok != wantOK || retry != wantRetry {
			t.Errorf("TakeAttempt(%q) at t0+%v: got %v, %v; want %v, %v", key, at.Sub(t0), ok, retry, wantOK, wantRetry)
		}
	}
	take("alice", t0, true, 0)
	take("alice", t0.Add(time.Second), true, 0)
	take("alice", t0.Add(2*time.Second), true, 0)
	take("alice", t0.Add(3*time.Second), false, window-3*time.Second)
	take("alice", t0.Add(window-time.Second), false, time.Second)
	take("Alice", t0.Add(3*time.Second), true, 0)     // keys are exact
	take("127.0.0.1", t0.Add(3*time.Second), true, 0) // names and addresses apart
	// The window is (now-window, now].
	take("alice", t0.Add(window), true, 0)
	take("alice", t0.Add(window), false, time.Second)
	take("alice", t0.Add(window+time.Second), true, 0)
	take("alice", t0.Add(10*window), true, 0)
	// A refused attempt is not counted: after a storm of refusals the
	// slots free as the admitted ones leave the window.
	for i := range 20 {
		at := time.Duration(i) * time.Millisecond
		if i < limit {
			take("bob", t0.Add(at), true, 0)
		} else {
			take("bob", t0.Add(at), false, window-at)
		}
	}
	take("bob", t0.Add(window), true, 0)

	for _, off := range []struct {
		window time.Duration
		limit  int
	}{{window, 0}, {0, limit}, {-time.Second, limit}, {window, -1}} {
		for range 5 {
			ok, retry, err := s.TakeAttempt(ctx, "alice", t0.Add(10*window), off.window, off.limit)
			if err != nil || !ok || retry != 0 {
				t.Errorf("TakeAttempt with window %v, limit %d (off): %v, %v, %v", off.window, off.limit, ok, retry, err)
			}
		}
	}
}

func testTakeAttemptKeys(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	const window, limit = time.Minute, 2
	now := base
	// Keys are what a client sends: any bytes, any length.
	keys := []string{"", "\xff\xfe", "a\x00b", strings.Repeat("x", 1<<20), "'; DELETE FROM auth_attempts; --", "ALICE", "alice"}
	for _, k := range keys {
		for i := range limit + 1 {
			ok, _, err := s.TakeAttempt(ctx, k, now, window, limit)
			if err != nil {
				t.Fatalf("TakeAttempt(%.20q): %v", k, err)
			}
			if ok != (i < limit) {
				t.Errorf("TakeAttempt(%.20q) #%d: ok %v, want %v", k, i+1, ok, i < limit)
			}
		}
	}
	// Apart from TakeRequest's counts, even under a key equal to a user's id.
	alice := mustUser(t, s, "alice")
	for range limit {
		if ok, _, err := s.TakeAttempt(ctx, alice.ID, now, window, limit); err != nil || !ok {
			t.Fatalf("TakeAttempt(alice's id): %v, %v", ok, err)
		}
	}
	if ok, _, err := s.TakeRequest(ctx, alice.ID, now, window, 1); err != nil || !ok {
		t.Errorf("TakeRequest after attempts under the user's id: %v, %v; want admitted", ok, err)
	}
	// Attempts that left their window go as others are taken: a key's
	// slots are all free again later, even with many other keys between.
	for i := range 50 {
		if _, _, err := s.TakeAttempt(ctx, fmt.Sprintf("spray-%d", i), now.Add(2*window), window, limit); err != nil {
			t.Fatal(err)
		}
	}
	for range limit {
		if ok, _, err := s.TakeAttempt(ctx, "alice", now.Add(2*window), window, limit); err != nil || !ok {
			t.Errorf("TakeAttempt after the window: %v, %v; want admitted", ok, err)
		}
	}
}

func testTakeAttemptConcurrent(t *testing.T, s datachat.Store) {
	const n, limit, window = 40, 10, time.Minute
	now := time.Now()
	var admitted, other atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := "alice"
			if i%4 == 3 {
				key = fmt.Sprintf("other-%d", i)
			}
			ok, retry, err := s.TakeAttempt(t.Context(), key, now, window, limit)
			switch {
			case err != nil:
				t.Errorf("TakeAttempt: %v", err)
			case key != "alice":
				if !ok {
					t.Errorf("TakeAttempt(%s), its first: refused", key)
				}
				other.Add(1)
			case ok:
				admitted.Add(1)
			case retry <= 0 || retry > window:
				t.Errorf("TakeAttempt refused: retry after %v, want in (0, %v]", retry, window)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != limit {
		t.Errorf("concurrent TakeAttempt: %d admitted, want exactly %d of %d", got, limit, n-int(other.Load()))
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

func testLastSeen(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	if a := account(t, s, alice.ID); a.LastSeenAt != nil {
		t.Errorf("LastSeenAt of a new user: %v", a.LastSeenAt)
	}
	before := time.Now().Add(-time.Second)
	mustKey(t, s, alice, "key") // mustKey authenticates once
	a := account(t, s, alice.ID)
	if a.LastSeenAt == nil || a.LastSeenAt.Before(before) {
		t.Errorf("LastSeenAt after a key's use: %v, want about now", a.LastSeenAt)
	}
	// A session's use later than that moves it on; signing out keeps it.
	sess, _ := mustSession(t, s, alice.ID, "sess", time.Now().Add(time.Hour))
	at := time.Now().Add(2 * time.Hour)
	if _, _, err := s.AuthenticateSession(ctx, "sess", at, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if got := account(t, s, alice.ID).LastSeenAt; got == nil || !got.Equal(at.UTC().Truncate(time.Microsecond)) {
		t.Errorf("LastSeenAt after a session's use and sign-out: %v, want %v", got, at.UTC())
	}
	// An earlier use (a clock behind) does not move it back.
	mustSession(t, s, alice.ID, "sess-2", base)
	if _, _, err := s.AuthenticateSession(ctx, "sess-2", base.Add(time.Hour), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := account(t, s, alice.ID).LastSeenAt; got == nil || !got.Equal(at.UTC().Truncate(time.Microsecond)) {
		t.Errorf("LastSeenAt after an older use: %v, want still %v", got, at.UTC())
	}
}

// AccountsMigration checks the accounts migration on an install of the
// release before it: old is a store with every migration but the accounts
// one, and nothing in it yet; migrate applies it. The users there become
// members, but admin, serve's first-key user, who becomes the admin; none
// has a password, their keys still work, and the newest use of their keys
// is when they were last seen.
func AccountsMigration(t *testing.T, old datachat.Store, migrate func() error) {
	ctx := t.Context()
	admin := mustUser(t, old, "admin")
	alice := mustUser(t, old, "alice")
	bob := mustUser(t, old, "Admin") // not admin: names are exact
	used := base.Add(time.Hour)
	for i, k := range []*datachat.APIKey{
		{UserID: admin.ID, Hash: "key-admin"},
		{UserID: alice.ID, Hash: "key-alice-1", LastUsedAt: &base},
		{UserID: alice.ID, Hash: "key-alice-2", LastUsedAt: &used},
		{UserID: alice.ID, Hash: "key-alice-3", LastUsedAt: ptr(used.Add(time.Hour)), RevokedAt: ptr(used.Add(time.Hour))},
	} {
		k.Prefix = fmt.Sprintf("dck_%d", i)
		if err := old.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey before the migration: %v", err)
		}
	}
	if err := migrate(); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	list, err := old.Accounts(ctx)
	if err != nil {
		t.Fatalf("Accounts after the migration: %v", err)
	}
	lastUse := used.Add(time.Hour).UTC().Truncate(time.Microsecond) // a revoked key's use was a use
	want := []*datachat.Account{
		{User: *bob, Role: datachat.RoleMember},
		{User: *admin, Role: datachat.RoleAdmin},
		{User: *alice, Role: datachat.RoleMember, LastSeenAt: &lastUse},
	}
	equal(t, "Accounts after the migration", list, want)
	for _, h := range []string{"key-admin", "key-alice-1"} {
		if _, _, err := old.Authenticate(ctx, h); err != nil {
			t.Errorf("Authenticate(%s) after the migration: %v", h, err)
		}
	}
	if u := mustUser(t, old, "carol"); account(t, old, u.ID).Role != datachat.RoleMember {
		t.Errorf("a user made after the migration is not a member")
	}
	// The one admin is protected like any last admin.
	wantCode(t, "DisableUser of the migrated admin", old.DisableUser(ctx, admin.ID, base), datachat.ECONFLICT)
}

// testSessionDisableRace creates sessions while the user is disabled: once
// DisableUser has returned, whether each CreateSession came before it (and
// was deleted by it) or after (and was refused), none authenticates after
// the user is enabled again.
func testSessionDisableRace(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAccount(t, s, "root", datachat.RoleAdmin)
	alice := mustUser(t, s, "alice")
	const rounds, each = 10, 4
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range each {
			wg.Go(func() {
				<-start
				err := s.CreateSession(ctx, &datachat.Session{UserID: alice.ID, Hash: fmt.Sprintf("race-%d-%d", round, i), Method: "password"})
				if err != nil && !errors.Is(err, datachat.ErrUserDisabled) {
					t.Errorf("CreateSession: %v", err)
				}
			})
		}
		wg.Go(func() {
			<-start
			if err := s.DisableUser(ctx, alice.ID, time.Now()); err != nil {
				t.Errorf("DisableUser: %v", err)
			}
		})
		close(start)
		wg.Wait()
		if err := s.EnableUser(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		for i := range each {
			if _, _, err := s.AuthenticateSession(ctx, fmt.Sprintf("race-%d-%d", round, i), time.Now(), time.Hour); err == nil {
				t.Errorf("round %d: a session created while alice was being disabled authenticates after she was enabled", round)
			}
		}
	}
}
