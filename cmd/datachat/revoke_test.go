package main

import (
	"strings"
	"testing"
)

// TestKeysRevokeEndsOpenSockets: `datachat keys revoke`, run beside serve
// (its own store on the same database, as another process), closes the
// WebSocket of the key within about a second, with status 4401 and why;
// the user's other key goes on. On SQLite and on PostgreSQL.
func TestKeysRevokeEndsOpenSockets(t *testing.T) {
	forEachDB(t, nil, func(t *testing.T, env func(string) (string, bool)) {
		m, _ := startServe(t, env)
		base := "http://" + m.Addr()
		newKey := func() string { return strings.TrimSpace(mustRun(t, env, "keys", "create", "--user", "alice")) }
		revoked, kept := newKey(), newKey()
		conv := newConversation(t, base, revoked)
		gone, stays := dialWS(t, base, revoked, conv), dialWS(t, base, kept, conv)

		list, _, err := runMain(t, env, "keys", "list")
		if err != nil {
			t.Fatal(err)
		}
		var id string
		for _, line := range strings.Split(list, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[2] == revoked[:10]+"…" {
				id = f[0]
			}
		}
		if id == "" {
			t.Fatalf("the key is not in keys list:\n%s", list)
		}
		if _, _, err := runMain(t, env, "keys", "revoke", id); err != nil {
			t.Fatal(err)
		}
		gone.closedWith4401(t, "keys revoke", "The API key was revoked. Use another key.")
		if st, _ := do(t, "GET", base+"/api/conversations", revoked, ""); st != 401 {
			t.Errorf("the revoked key: got %d, want 401", st)
		}
		stays.stillServed(t, base, kept, "the other key")
	})
}
