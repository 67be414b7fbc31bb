package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"datachat"
)

// The accounts' cases ([datachat.AccountStore]), run by [Run].
var accountTests = []storeTest{
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

// OldStore is a new store that can be migrated as the release before a
// migration was: with every migration but that one.
type OldStore interface {
	Migrator
	// MigrateWithout applies every migration but skip.
	MigrateWithout(ctx context.Context, skip string) error
}

// AccountsMigration checks the accounts migration, named accounts, on an
// install of the release before it: old, new and empty, gets every
// migration but that one, then users and keys, then that one. The users
// there become members, but admin, serve's first-key user, who becomes the
// admin; none has a password, their keys still work, and the newest use of
// their keys is when they were last seen.
func AccountsMigration(t *testing.T, old OldStore, accounts string) {
	ctx := t.Context()
	if err := old.MigrateWithout(ctx, accounts); err != nil {
		t.Fatal(err)
	}
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
	if err := old.Migrate(ctx); err != nil {
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
