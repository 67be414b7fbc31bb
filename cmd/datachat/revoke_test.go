package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestKeysRevokeEndsOpenSockets: `datachat keys revoke`, run beside serve
// (its own store on the same database, as another process), closes the
// WebSocket of the key within about a second, with status 4401 and why;
// the user's other key goes on. On SQLite and on PostgreSQL.
func TestKeysRevokeEndsOpenSockets(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			vars := map[string]string{}
			if db == "postgres" {
				vars["DATACHAT_DATABASE_URL"] = postgresSchemaURL(t)
			}
			env := testEnv(t, vars)
			m, _ := startServe(t, env)
			base := "http://" + m.Addr()
			newKey := func() string {
				out, _, err := runMain(t, env, "keys", "create", "--user", "alice")
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(out)
			}
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
			if st, _ := do(t, "GET", base+"/api/conversations", kept, ""); st != 200 {
				t.Errorf("the other key: got %d, want 200", st)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := stays.conn.Ping(ctx); err != nil {
				t.Errorf("the other key's WebSocket: %v", err)
			}
		})
	}
}
