package storetest

import (
	"sync"
	"testing"

	"datachat"
)

func testUsers(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatalf("EnsureUser: %v", err)
	}
	if alice.ID == "" || alice.Name != "alice" || alice.CreatedAt.IsZero() {
		t.Fatalf("EnsureUser: got %+v, want an ID, name alice and a creation time", alice)
	}
	checkUTC(t, "user CreatedAt", alice.CreatedAt)
	again, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatalf("EnsureUser again: %v", err)
	}
	equal(t, "EnsureUser of an existing name", again, alice)
	bob := mustUser(t, s, "bob")
	if bob.ID == alice.ID {
		t.Errorf("bob's ID: got %q, the same as alice's", bob.ID)
	}
	_, err = s.EnsureUser(ctx, "")
	wantCode(t, "EnsureUser(\"\")", err, datachat.EINVALID)
}

func testUsersConcurrent(t *testing.T, s datachat.Store) {
	const n = 10
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u, err := s.EnsureUser(t.Context(), "carol")
			errs[i] = err
			if u != nil {
				ids[i] = u.ID
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EnsureUser %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("EnsureUser %d: got ID %q, want %q as the others", i, ids[i], ids[0])
		}
	}
}

func testAPIKeys(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")

	k1 := &datachat.APIKey{UserID: alice.ID, Prefix: "dck_aaaa", Hash: "hash-1", CreatedAt: base}
	if err := s.CreateAPIKey(ctx, k1); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if k1.ID == "" {
		t.Fatalf("CreateAPIKey: got empty ID, want one filled in")
	}
	checkTime(t, "key CreatedAt", k1.CreatedAt, base)
	k2 := &datachat.APIKey{UserID: bob.ID, Prefix: "dck_bbbb", Hash: "hash-2"}
	if err := s.CreateAPIKey(ctx, k2); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if k2.CreatedAt.IsZero() {
		t.Fatalf("CreateAPIKey: got zero CreatedAt, want it filled in")
	}
	wantCode(t, "CreateAPIKey with a used hash", s.CreateAPIKey(ctx,
		&datachat.APIKey{UserID: bob.ID, Prefix: "x", Hash: "hash-2"}), datachat.ECONFLICT)
	wantCode(t, "CreateAPIKey for an unknown user", s.CreateAPIKey(ctx,
		&datachat.APIKey{UserID: "no-such-user", Prefix: "x", Hash: "hash-3"}), datachat.ENOTFOUND)

	keys, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatalf("APIKeys: %v", err)
	}
	k1.UserName, k2.UserName = "alice", "bob"
	equal(t, "APIKeys", keys, []*datachat.APIKey{k1, k2})
	wantCount(t, s, 2)

	u, cred, err := s.Authenticate(ctx, "hash-1")
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	equal(t, "Authenticate", u, alice)
	equal(t, "Authenticate's credential", cred, datachat.Credential{Kind: datachat.CredentialAPIKey, ID: k1.ID, UserID: alice.ID})
	keys, err = s.APIKeys(ctx)
	if err != nil {
		t.Fatalf("APIKeys: %v", err)
	}
	if keys[0].LastUsedAt == nil {
		t.Errorf("LastUsedAt after Authenticate: got nil, want the time of use")
	} else {
		checkUTC(t, "LastUsedAt", *keys[0].LastUsedAt)
	}
	if keys[1].LastUsedAt != nil {
		t.Errorf("LastUsedAt of an unused key: got %v, want nil", keys[1].LastUsedAt)
	}

	_, _, err = s.Authenticate(ctx, "no-such-hash")
	wantCode(t, "Authenticate with an unknown hash", err, datachat.EUNAUTHORIZED)
	_, _, err = s.Authenticate(ctx, "")
	wantCode(t, "Authenticate with an empty hash", err, datachat.EUNAUTHORIZED)

	if err := s.RevokeAPIKey(ctx, k1.ID); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	_, _, err = s.Authenticate(ctx, "hash-1")
	wantCode(t, "Authenticate with a revoked key", err, datachat.EUNAUTHORIZED)
	wantCount(t, s, 1)
	keys, err = s.APIKeys(ctx)
	if err != nil {
		t.Fatalf("APIKeys: %v", err)
	}
	if len(keys) != 2 {
		t.Fatalf("APIKeys after revoking: got %d keys, want 2 (revoked ones are listed)", len(keys))
	}
	if keys[0].RevokedAt == nil || keys[1].RevokedAt != nil {
		t.Errorf("RevokedAt: got %v and %v, want a time and nil", keys[0].RevokedAt, keys[1].RevokedAt)
	}
	if err := s.RevokeAPIKey(ctx, k1.ID); err != nil {
		t.Errorf("RevokeAPIKey of a revoked key: got %v, want nil", err)
	}
	wantCode(t, "RevokeAPIKey of an unknown key", s.RevokeAPIKey(ctx, "no-such-key"), datachat.ENOTFOUND)
	if _, _, err := s.Authenticate(ctx, "hash-2"); err != nil {
		t.Errorf("Authenticate with the other key: got %v, want nil", err)
	}
}

func wantCount(t *testing.T, s datachat.Store, want int) {
	t.Helper()
	n, err := s.CountAPIKeys(t.Context())
	if err != nil {
		t.Fatalf("CountAPIKeys: %v", err)
	}
	if n != want {
		t.Errorf("CountAPIKeys: got %d, want %d", n, want)
	}
}
