package storetest

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"datachat"
)

// mustKey stores an API key of the user with hash and returns it as the
// credential Authenticate gives for it.
func mustKey(t *testing.T, s datachat.Store, u *datachat.User, hash string) datachat.Credential {
	t.Helper()
	if err := s.CreateAPIKey(t.Context(), &datachat.APIKey{UserID: u.ID, Prefix: "dck_test", Hash: hash}); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	_, cred, err := s.Authenticate(t.Context(), hash)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	return cred
}

// revokedIDs calls RevokedCredentials and returns the ids it names, sorted,
// checking that each comes with the reason of a revoked key.
func revokedIDs(t *testing.T, s datachat.Store, creds []datachat.Credential) []string {
	t.Helper()
	revs, err := s.RevokedCredentials(t.Context(), creds)
	if err != nil {
		t.Fatalf("RevokedCredentials: %v", err)
	}
	ids := []string{}
	for _, r := range revs {
		if !errors.Is(r.Reason, datachat.ErrAPIKeyRevoked) || datachat.ErrorCode(r.Reason) != datachat.EUNAUTHORIZED {
			t.Errorf("RevokedCredentials: %s's reason is %v, want ErrAPIKeyRevoked", r.Credential.ID, r.Reason)
		}
		ids = append(ids, r.Credential.ID)
	}
	sort.Strings(ids)
	return ids
}

func testRevokedCredentials(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	a1 := mustKey(t, s, alice, "hash-a1")
	a2 := mustKey(t, s, alice, "hash-a2")
	b1 := mustKey(t, s, bob, "hash-b1")
	all := []datachat.Credential{a1, a2, b1}

	if revs, err := s.RevokedCredentials(ctx, nil); err != nil || len(revs) != 0 {
		t.Errorf("RevokedCredentials of none: got %v, %v; want none", revs, err)
	}
	equal(t, "RevokedCredentials with every key valid", revokedIDs(t, s, all), []string{})
	before, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := s.RevokeAPIKey(ctx, a1.ID); err != nil {
		t.Fatal(err)
	}
	equal(t, "RevokedCredentials after revoking alice's first key", revokedIDs(t, s, all), []string{a1.ID})
	equal(t, "RevokedCredentials of the other keys only", revokedIDs(t, s, []datachat.Credential{a2, b1}), []string{})

	// A key the store does not have, and one presented as another user's,
	// do not authenticate either.
	unknown := datachat.Credential{Kind: datachat.CredentialAPIKey, ID: "no-such-key", UserID: alice.ID}
	stolen := datachat.Credential{Kind: datachat.CredentialAPIKey, ID: b1.ID, UserID: alice.ID}
	got := revokedIDs(t, s, []datachat.Credential{unknown, stolen, a2})
	want := []string{b1.ID, "no-such-key"}
	sort.Strings(want)
	equal(t, "RevokedCredentials of an unknown key and of a key under another user", got, want)

	// Any number in one call.
	many := []datachat.Credential{a2, b1}
	for i := range 2500 {
		many = append(many, datachat.Credential{Kind: datachat.CredentialAPIKey, ID: fmt.Sprintf("gone-%04d", i), UserID: bob.ID})
	}
	if got := revokedIDs(t, s, many); len(got) != 2500 || got[0] != "gone-0000" || got[2499] != "gone-2499" {
		t.Errorf("RevokedCredentials of 2502 keys: got %d revoked (%v…), want the 2500 unknown ones", len(got), got[:min(3, len(got))])
	}

	_, err = s.RevokedCredentials(ctx, []datachat.Credential{a2, {Kind: "cookie", ID: "s1", UserID: alice.ID}})
	wantCode(t, "RevokedCredentials of an unknown kind", err, datachat.EINVALID)

	// It only reads: a key's last use is what Authenticate recorded.
	after, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range after {
		if !equalTime(before[i].LastUsedAt, after[i].LastUsedAt) {
			t.Errorf("RevokedCredentials changed key %s's last use from %v to %v", after[i].ID, before[i].LastUsedAt, after[i].LastUsedAt)
		}
	}
}

// equalTime reports whether two optional times are both unset or the same
// instant.
func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
