package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/workspace"
)

// routeList records the routes a Server registers (Server.routes), in order.
type routeList struct{ patterns []string }

func (l *routeList) Handle(p string, _ http.Handler) { l.patterns = append(l.patterns, p) }
func (l *routeList) HandleFunc(p string, _ func(http.ResponseWriter, *http.Request)) {
	l.patterns = append(l.patterns, p)
}

// registeredRoutes returns every route of ts as "METHOD PATH" patterns.
func registeredRoutes(t *testing.T, ts *testServer) []string {
	t.Helper()
	var l routeList
	ts.routes(&l)
	if len(l.patterns) < 40 {
		t.Fatalf("only %d routes: %v", len(l.patterns), l.patterns)
	}
	return l.patterns
}

// adminContract is the admin API as TEAMS-API.md lists it.
var adminContract = []string{
	"GET /api/admin/users",
	"POST /api/admin/users",
	"POST /api/admin/users/{name}/reset",
	"POST /api/admin/users/{name}/disable",
	"POST /api/admin/users/{name}/enable",
	"PATCH /api/admin/users/{name}",
	"DELETE /api/admin/users/{name}",
	"GET /api/admin/keys",
	"DELETE /api/admin/keys/{id}",
	"GET /api/admin/sources",
	"PUT /api/admin/sources/{name}/grants",
	"GET /api/admin/usage",
	"GET /api/admin/audit",
}

// adminRequest is a request to an admin route pattern, its path values
// filled in: {name} a user's name (or, for sources, a source's), {id} a
// key's id; with a body an admin's request would send.
func adminRequest(pattern, user, source, keyID string, i int) (method, path, body string) {
	method, path, _ = strings.Cut(pattern, " ")
	if strings.HasPrefix(path, "/api/admin/sources/") {
		path = strings.ReplaceAll(path, "{name}", source)
	}
	path = strings.ReplaceAll(strings.ReplaceAll(path, "{name}", user), "{id}", keyID)
	switch {
	case method == "POST" && path == "/api/admin/users":
		body = fmt.Sprintf(`{"name":"new-%d"}`, i)
	case method == "PATCH":
		body = `{"tokens_per_day":1000}`
	case method == "PUT":
		body = `{"users":["alice"]}`
	}
	return method, path, body
}

// TestAdminRoutesRefuseOthers enumerates the server's routes — every one
// it registers, from the one list Server.routes is — and calls each route
// under /api/admin/ as a member (with a key and with a session), as an
// admin who was demoted, as a disabled admin (key and session), and
// without credentials, then as an admin: only the admin gets through, and
// nothing the others asked for was done. A new admin route without the
// admin check fails here.
func TestAdminRoutesRefuseOthers(t *testing.T) {
	ts := newTestServer(t)
	routes := registeredRoutes(t, ts)
	var admin []string
	for _, p := range routes {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/api/admin") {
			admin = append(admin, p)
		}
	}
	for _, want := range adminContract {
		if !slices.Contains(admin, want) {
			t.Errorf("the admin route %s is not registered", want)
		}
	}
	// Every route listed is one the server serves: the list is the mux's.
	for _, p := range routes {
		method, path, _ := strings.Cut(p, " ")
		if path == "" {
			method, path = "POST", p
		}
		path = strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(path, "{$}", ""), "{", "x"), "}", "")
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		if _, pattern := ts.mux.Handler(req); pattern != p {
			t.Errorf("%s: the server's mux routes %s %s to %q", p, method, path, pattern)
		}
	}

	rootID := ts.account(t, "root", datachat.RoleAdmin)
	rootKey := ts.keyOf(t, rootID)
	root := ts.browser(t)
	if st, body := root.postJSON("/api/auth/invite", map[string]string{"token": ts.inviteToken(t, rootID), "password": pwRoot}); st != 200 {
		t.Fatal(st, body)
	}
	member := ts.member(t, "mem", pwCarol)
	memberKey := ts.keyOf(t, carolIDOf(t, ts, "mem"))
	demoted := ts.person(t, "demoted", datachat.RoleAdmin, pwCarol)
	demotedKey := ts.keyOf(t, carolIDOf(t, ts, "demoted"))
	if st, body := root.do("PATCH", "/api/admin/users/demoted", `{"role":"member"}`); st.StatusCode != 200 {
		t.Fatal(st.StatusCode, body)
	}
	disabled := ts.person(t, "gone", datachat.RoleAdmin, pwCarol)
	disabledCookie := disabled.cookie()
	disabledKey := ts.keyOf(t, carolIDOf(t, ts, "gone"))
	if st, body := root.postJSON("/api/admin/users/gone/disable", nil); st != 200 {
		t.Fatal(st, body)
	}
	victimID := ts.account(t, "victim", datachat.RoleMember)
	victimKey := ts.keyOf(t, victimID)
	victimKeyID := ts.keyID(t, victimKey)
	if err := ts.Store.CreateDBSource(t.Context(), &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:x", Users: []string{"victim"}, Origin: datachat.OriginCLI}); err != nil {
		t.Fatal(err)
	}
	before := len(ts.auditOf(t, "")) // nothing below but the admin's calls adds a record of a change

	type caller struct {
		name   string
		status int
		do     func(method, path, body string) (int, string)
	}
	viaKey := func(key string) func(method, path, body string) (int, string) {
		return func(method, path, body string) (int, string) {
			return ts.withCookie(t, method, path, "", body, "X-API-Key", key)
		}
	}
	viaBrowser := func(b *browser) func(method, path, body string) (int, string) {
		return func(method, path, body string) (int, string) {
			resp, out := b.do(method, path, body)
			return resp.StatusCode, out
		}
	}
	viaCookie := func(cookie string) func(method, path, body string) (int, string) {
		return func(method, path, body string) (int, string) {
			return ts.withCookie(t, method, path, cookie, body, "Origin", ts.URL, "Sec-Fetch-Site", "same-origin")
		}
	}
	others := []caller{
		{"a member's key", 403, viaKey(memberKey)},
		{"a member's session", 403, viaBrowser(member)},
		{"a demoted admin's key", 403, viaKey(demotedKey)},
		{"a demoted admin's session", 403, viaBrowser(demoted)},
		{"a disabled admin's key", 401, viaKey(disabledKey)},
		{"a disabled admin's session", 401, viaCookie(disabledCookie)},
		{"a member's key and the admin's cookie from another site", 403, func(method, path, body string) (int, string) {
			return ts.withCookie(t, method, path, root.cookie(), body, "X-API-Key", memberKey, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
		}},
		{"nobody", 401, viaKey("")},
		{"a made-up key", 401, viaKey("dck_" + randomToken())},
	}
	for i, p := range admin {
		for _, c := range others {
			method, path, body := adminRequest(p, "victim", "warehouse", victimKeyID, i)
			st, out := c.do(method, path, body)
			if st != c.status {
				t.Errorf("%s as %s: got %d %s, want %d", p, c.name, st, out, c.status)
			}
			if st == 403 && !strings.Contains(out, "Only an administrator may do this.") && !strings.Contains(out, "another site") {
				t.Errorf("%s as %s: %s does not say who may", p, c.name, out)
			}
			if strings.Contains(out, "victim") && method == "GET" {
				t.Errorf("%s as %s: the answer tells of the victim: %s", p, c.name, out)
			}
		}
	}
	// Nothing was done: the victim is there, enabled, their key works,
	// their source's grant is as it was, and no change was recorded.
	if a, err := ts.Store.AccountByName(t.Context(), "victim"); err != nil || a.DisabledAt != nil || a.TokensPerDay != nil || a.Role != datachat.RoleMember {
		t.Errorf("the victim after the refused calls: %+v %v", a, err)
	}
	if st, _ := ts.withCookie(t, "GET", "/api/me", "", "", "X-API-Key", victimKey); st != 200 {
		t.Errorf("the victim's key after the refused calls: %d", st)
	}
	if src, _ := ts.Store.DBSource(t.Context(), "warehouse"); !slices.Equal(src.Users, []string{"victim"}) {
		t.Errorf("the source's grant after the refused calls: %v", src.Users)
	}
	if after := len(ts.auditOf(t, "")); after != before {
		for _, e := range ts.auditOf(t, "")[:after-before] {
			if e.Kind != datachat.AuditSignIn {
				t.Errorf("a refused call was recorded as done: %+v", *e)
			}
		}
	}

	// The admin gets through every route, with a key or a session; the
	// routes that change something run last, removal at the very end.
	slices.SortStableFunc(admin, func(a, b string) int {
		rank := func(p string) int {
			switch {
			case strings.HasPrefix(p, "DELETE /api/admin/users"):
				return 3
			case strings.HasPrefix(p, "GET"):
				return 0
			}
			return 1
		}
		return rank(a) - rank(b)
	})
	for i, p := range admin {
		for j, c := range []caller{{"the admin's key", 0, viaKey(rootKey)}, {"the admin's session", 0, viaBrowser(root)}} {
			method, path, body := adminRequest(p, "victim", "warehouse", victimKeyID, 2*i+j)
			st, out := c.do(method, path, body)
			if st == 401 || st == 403 || st == 405 || strings.Contains(out, "No route") || st >= 500 {
				t.Errorf("%s as %s: got %d %s", p, c.name, st, out)
			}
		}
	}
}

// carolIDOf returns the id of the user name.
func carolIDOf(t *testing.T, ts *testServer, name string) string {
	t.Helper()
	a, err := ts.Store.AccountByName(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// TestEveryCookieChangeChecksTheOrigin enumerates the routes that change
// something and sends each the session cookie from another site: each is
// refused (403, or 401 where the cookie is not taken at all) before its
// handler runs.
func TestEveryCookieChangeChecksTheOrigin(t *testing.T) {
	ts := newTestServer(t)
	rootID := ts.account(t, "root", datachat.RoleAdmin)
	root := ts.browser(t)
	if st, body := root.postJSON("/api/auth/invite", map[string]string{"token": ts.inviteToken(t, rootID), "password": pwRoot}); st != 200 {
		t.Fatal(st, body)
	}
	conv := ts.conversationOf(t, rootID)
	n := 0
	for _, p := range registeredRoutes(t, ts) {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "POST", p // /mcp
		}
		if method == "GET" || method == "HEAD" {
			continue
		}
		n++
		path = strings.NewReplacer("{id}", conv, "{name}", "root", "{dataset_id}", "d", "{doc_id}", "d").Replace(path)
		st, out := ts.withCookie(t, method, path, root.cookie(), `{}`, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
		want := 403
		if path == "/mcp" || strings.HasPrefix(path, "/v1/") {
			want = 401
		}
		if st != want {
			t.Errorf("%s from another site with the cookie: %d %s, want %d", p, st, out, want)
		}
	}
	if n < 20 {
		t.Errorf("only %d routes change something", n)
	}
	if st, _ := root.me(); st != 200 {
		t.Errorf("the admin is no longer signed in after the refused requests")
	}
}

// TestAdminUsers: the admin manages users through the API — invite,
// reset, disable, enable, role, token budget, remove — each recorded in
// the audit log; mistakes are refused saying what is wrong; an admin
// cannot lock themself out, and the last admin cannot be demoted.
func TestAdminUsers(t *testing.T) {
	ts := newTestServer(t)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	call := func(method, path, body string) (int, map[string]any, string) {
		t.Helper()
		resp, out := root.do(method, path, body)
		var m map[string]any
		json.Unmarshal([]byte(out), &m)
		return resp.StatusCode, m, out
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/api/admin/users", `{"name":"bea","role":"owner"}`, 400, "Unknown role"},
		{"POST", "/api/admin/users", `{"name":""}`, 400, "empty"},
		{"POST", "/api/admin/users", `{"name":" bea"}`, 400, "white space"},
		{"POST", "/api/admin/users", `{"name":"be\u0000a"}`, 400, "control"},
		{"POST", "/api/admin/users", `{"name":"bea","password":"x"}`, 400, "password"},
		{"POST", "/api/admin/users", `{"name":"alice"}`, 409, "exists"},
		{"POST", "/api/admin/users/nobody/reset", ``, 404, `No user named \"nobody\"`},
		{"POST", "/api/admin/users/nobody/disable", ``, 404, "nobody"},
		{"PATCH", "/api/admin/users/alice", `{}`, 400, "Nothing to change"},
		{"PATCH", "/api/admin/users/alice", `{"role":"root"}`, 400, "Unknown role"},
		{"PATCH", "/api/admin/users/alice", `{"tokens_per_day":-1}`, 400, "tokens_per_day"},
		{"PATCH", "/api/admin/users/alice", `{"tokens_per_day":1.5}`, 400, "tokens_per_day"},
		{"PATCH", "/api/admin/users/alice", `{"tokens_per_day":"100"}`, 400, "tokens_per_day"},
		{"PATCH", "/api/admin/users/alice", `{"tokens_per_day":99999999999999999999}`, 400, "tokens_per_day"},
		{"POST", "/api/admin/users/root/disable", ``, 409, "your own account"},
		{"DELETE", "/api/admin/users/root", ``, 409, "your own account"},
		{"PATCH", "/api/admin/users/root", `{"role":"member"}`, 409, ""},
		{"GET", "/api/admin/usage?days=0", ``, 400, "days"},
		{"GET", "/api/admin/usage?days=367", ``, 400, "days"},
		{"GET", "/api/admin/usage?days=x", ``, 400, "days"},
		{"GET", "/api/admin/usage?day=3", ``, 400, "Unknown parameter"},
		{"GET", "/api/admin/usage?days=1&days=2", ``, 400, "once"},
	} {
		st, _, out := call(tc.method, tc.path, tc.body)
		if st != tc.status || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s %s: got %d %s, want %d with %q", tc.method, tc.path, tc.body, st, out, tc.status, tc.want)
		}
	}
	if st, m := root.me(); st != 200 || m.Role != datachat.RoleAdmin {
		t.Errorf("the last admin after trying to demote themself: %d %+v", st, m)
	}

	// Invite bea as an admin; she sets her password.
	st, m, out := call("POST", "/api/admin/users", `{"name":"bea","role":"admin"}`)
	if st != 201 {
		t.Fatalf("invite bea: %d %s", st, out)
	}
	token := strings.TrimPrefix(m["invite_url"].(string), ts.URL+"/#invite=")
	bea := ts.browser(t)
	if st, body := bea.postJSON("/api/auth/invite", map[string]string{"token": token, "password": pwCarol}); st != 200 || !strings.Contains(body, `"role":"admin"`) {
		t.Fatalf("bea's invite: %d %s", st, body)
	}
	// A reset gives a new invite: the old one (used) and any earlier unused
	// one stop working; her sessions hold until she uses it.
	_, m1, _ := call("POST", "/api/admin/users/bea/reset", "")
	st, m2, out := call("POST", "/api/admin/users/bea/reset", "")
	if st != 200 || m2["invite_url"] == m1["invite_url"] || m2["expires_at"] == nil {
		t.Fatalf("reset: %d %s", st, out)
	}
	if st, _ := bea.me(); st != 200 {
		t.Errorf("bea after a reset she has not used: %d", st)
	}
	first := strings.TrimPrefix(m1["invite_url"].(string), ts.URL+"/#invite=")
	if st, _ := ts.browser(t).postJSON("/api/auth/invite", map[string]string{"token": first, "password": pwCarol + "1"}); st != 401 {
		t.Errorf("the earlier reset's invite: %d, want 401", st)
	}
	second := strings.TrimPrefix(m2["invite_url"].(string), ts.URL+"/#invite=")
	beaPhone := ts.browser(t)
	if st, _ := beaPhone.postJSON("/api/auth/invite", map[string]string{"token": second, "password": pwCarol + "2"}); st != 200 {
		t.Errorf("the newest reset's invite: %d", st)
	}
	if st, _ := bea.me(); st != 401 {
		t.Errorf("bea's older session after her password changed: %d, want 401", st)
	}
	beaPhone.login("bea", pwCarol+"2")

	// Two admins: bea may demote herself; the next request sees it.
	if st, _, out := call("PATCH", "/api/admin/users/bea", `{"role":"member","tokens_per_day":5000}`); st != 200 || !strings.Contains(out, `"role":"member"`) || !strings.Contains(out, `"tokens_per_day":5000`) {
		t.Errorf("demote bea with a budget: %d %s", st, out)
	}
	if resp, _ := beaPhone.do("GET", "/api/admin/users", ""); resp.StatusCode != 403 {
		t.Errorf("bea on an admin route after her demotion: %d, want 403", resp.StatusCode)
	}
	if st, _, out := call("PATCH", "/api/admin/users/bea", `{"tokens_per_day":null}`); st != 200 || strings.Contains(out, "tokens_per_day") {
		t.Errorf("bea's budget back to the server's: %d %s", st, out)
	}
	if st, _, out := call("PATCH", "/api/admin/users/bea", `{"tokens_per_day":0}`); st != 200 || !strings.Contains(out, `"tokens_per_day":0`) {
		t.Errorf("bea without a budget: %d %s", st, out)
	}

	// Disable and enable.
	st, _, out = call("POST", "/api/admin/users/bea/disable", "")
	if st != 200 || !strings.Contains(out, `"disabled_at"`) {
		t.Errorf("disable bea: %d %s", st, out)
	}
	if st, body := beaPhone.me(); st != 401 {
		t.Errorf("bea's session after she was disabled: %d %s", st, body)
	}
	if st, body := bea.postJSON("/api/auth/login", map[string]string{"user": "bea", "password": pwCarol + "2"}); st != 401 || !strings.Contains(body, datachat.ErrUserDisabled.Message) {
		t.Errorf("bea signs in disabled: %d %s", st, body)
	}
	if st, _, _ := call("POST", "/api/admin/users/bea/disable", ""); st != 200 {
		t.Errorf("disable bea again: %d", st)
	}
	if st, _, out := call("POST", "/api/admin/users/bea/enable", ""); st != 200 || strings.Contains(out, "disabled_at") {
		t.Errorf("enable bea: %d %s", st, out)
	}
	bea.login("bea", pwCarol+"2")

	st, _, out = call("GET", "/api/admin/users", "")
	var users struct{ Users []datachat.Account }
	json.Unmarshal([]byte(out), &users)
	var names []string
	for _, u := range users.Users {
		names = append(names, u.Name)
	}
	if st != 200 || !slices.Equal(names, []string{"alice", "bea", "bob", "root"}) || strings.Contains(out, "hash") {
		t.Errorf("users: %d %v %s", st, names, out)
	}

	if st, _, out := call("DELETE", "/api/admin/users/bea", ""); st != 204 {
		t.Errorf("remove bea: %d %s", st, out)
	}
	if st, _ := bea.me(); st != 401 {
		t.Errorf("bea's session after she was removed: %d", st)
	}
	if st, _, _ := call("DELETE", "/api/admin/users/bea", ""); st != 404 {
		t.Errorf("remove bea again: %d, want 404", st)
	}

	kinds := map[string]int{}
	for _, e := range ts.auditOf(t, "") {
		if strings.HasPrefix(e.Kind, "user.") {
			kinds[e.Kind]++
			if e.UserName != "root" || e.Address != "127.0.0.1" || e.RequestID == "" {
				t.Errorf("record %+v: want root's, with address and request id", *e)
			}
		}
	}
	for kind, n := range map[string]int{datachat.AuditUserInvited: 1, datachat.AuditUserReset: 2, datachat.AuditUserDisabled: 1,
		datachat.AuditUserChanged: 4, datachat.AuditUserRemoved: 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s records, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
}

// TestOwnKeys: a member creates, lists and revokes their own keys; another
// user's key is not found by its id, whatever the route; the admin lists
// and revokes every key; a revoked key's requests end.
func TestOwnKeys(t *testing.T) {
	ts := newTestServer(t)
	carol := ts.member(t, "carol", pwCarol)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	resp, body := carol.do("POST", "/api/keys", `{}`)
	var k struct{ Key, ID, Prefix string }
	json.Unmarshal([]byte(body), &k)
	if resp.StatusCode != 201 || !strings.HasPrefix(k.Key, k.Prefix) || k.ID == "" || !strings.Contains(body, "created_at") {
		t.Fatalf("create a key: %d %s", resp.StatusCode, body)
	}
	if resp, body := carol.do("POST", "/api/keys", ""); resp.StatusCode != 201 {
		t.Errorf("create a key without a body: %d %s", resp.StatusCode, body)
	}
	if resp, body := carol.do("POST", "/api/keys", `{"user":"alice"}`); resp.StatusCode != 400 {
		t.Errorf("create a key for another user: %d %s, want 400", resp.StatusCode, body)
	}
	if st, body := ts.withCookie(t, "GET", "/v1/models", "", "", "Authorization", "Bearer "+k.Key); st != 200 {
		t.Errorf("the new key on /v1: %d %s", st, body)
	}
	st, body := carol.get("/api/keys")
	if st != 200 || strings.Count(body, `"id"`) != 2 || strings.Contains(body, k.Key) || strings.Contains(body, `"user":"alice"`) || strings.Contains(body, "hash") {
		t.Errorf("carol's keys: %d %s", st, body)
	}
	aliceKeyID := ts.keyID(t, ts.alice)
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/api/keys/" + aliceKeyID},
		{"DELETE", "/api/keys/" + aliceKeyID + "%00"},
		{"DELETE", "/api/keys/..%2F" + aliceKeyID},
		{"DELETE", "/api/admin/keys/" + aliceKeyID},
	} {
		resp, body := carol.do(c.method, c.path, "")
		if resp.StatusCode != 404 && resp.StatusCode != 403 {
			t.Errorf("%s %s as carol: %d %s, want 404 or 403", c.method, c.path, resp.StatusCode, body)
		}
	}
	if st, _ := ts.withCookie(t, "GET", "/api/me", "", "", "X-API-Key", ts.alice); st != 200 {
		t.Errorf("alice's key after carol's attempts: %d", st)
	}
	if resp, _ := carol.do("DELETE", "/api/keys/"+k.ID, ""); resp.StatusCode != 204 {
		t.Errorf("revoke own key: %d", resp.StatusCode)
	}
	if st, _ := ts.withCookie(t, "GET", "/v1/models", "", "", "Authorization", "Bearer "+k.Key); st != 401 {
		t.Errorf("the revoked key: %d, want 401", st)
	}
	if resp, _ := carol.do("DELETE", "/api/keys/"+k.ID, ""); resp.StatusCode != 204 {
		t.Errorf("revoke it again: %d, want 204", resp.StatusCode)
	}
	st, body = root.get("/api/admin/keys")
	if st != 200 || !strings.Contains(body, `"user":"alice"`) || !strings.Contains(body, `"user":"carol"`) || !strings.Contains(body, `"revoked_at"`) {
		t.Errorf("every key: %d %s", st, body)
	}
	if resp, _ := root.do("DELETE", "/api/admin/keys/"+aliceKeyID, ""); resp.StatusCode != 204 {
		t.Errorf("the admin revokes alice's key: %d", resp.StatusCode)
	}
	if st, _ := ts.withCookie(t, "GET", "/api/me", "", "", "X-API-Key", ts.alice); st != 401 {
		t.Errorf("alice's key revoked by the admin: %d, want 401", st)
	}
	if resp, _ := root.do("DELETE", "/api/admin/keys/nope", ""); resp.StatusCode != 404 {
		t.Errorf("an unknown key: %d, want 404", resp.StatusCode)
	}
	created, revoked := ts.auditOf(t, datachat.AuditKeyCreated), ts.auditOf(t, datachat.AuditKeyRevoked)
	if len(created) != 2 || len(revoked) != 2 || created[0].UserName != "carol" || revoked[0].UserName != "root" || revoked[0].Target != aliceKeyID {
		t.Errorf("key records: created %v, revoked %v", created, revoked)
	}
}

// TestAdminSourceGrants: the admin lists every source with its grant and
// changes whom it is granted to, which members see at once; unknown users,
// both kinds of grant, and a source from the --config file are refused.
func TestAdminSourceGrants(t *testing.T) {
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		d.Sources = &workspace.Sources{Store: d.Store, Logger: d.Logger, DataDir: t.TempDir()}
	})
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	ctx := t.Context()
	for _, s := range []*datachat.DBSource{
		{Name: "warehouse", Kind: "postgres", SealedURL: "v1:secret-sealed", Tables: []string{"public.*"}, Users: []string{"alice"}, Origin: datachat.OriginCLI},
		{Name: "shop", Kind: "mysql", SealedURL: "v1:x", AllUsers: true, Origin: datachat.OriginConfig},
	} {
		if err := ts.Store.CreateDBSource(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	st, body := root.get("/api/admin/sources")
	if st != 200 || !strings.Contains(body, `"name":"warehouse","kind":"postgres","tables":["public.*"],"users":["alice"],"all_users":false,"origin":"cli"`) ||
		!strings.Contains(body, `"name":"shop"`) || strings.Contains(body, "sealed") || strings.Contains(body, "v1:") {
		t.Errorf("sources: %d %s", st, body)
	}
	visible := func(key string) bool {
		_, out := ts.get(t, "/api/sources", key)
		return strings.Contains(out, "warehouse")
	}
	if !visible(ts.alice) || visible(ts.bob) {
		t.Fatalf("before: alice sees it %v, bob %v", visible(ts.alice), visible(ts.bob))
	}
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"warehouse", `{"users":["bob","nobody","n\u0000"]}`, 400, `No user named \"nobody\", \"n\\u0000\"`},
		{"warehouse", `{"users":["bob"],"all_users":true}`, 400, "not both"},
		{"warehouse", `{}`, 400, "Give whom"},
		{"warehouse", `{"users":"bob"}`, 400, "JSON"},
		{"nope", `{"users":["bob"]}`, 404, "nope"},
		{"shop", `{"users":["bob"]}`, 409, "DATACHAT_SOURCES"},
		{"warehouse", `{"users":["bob","bob"]}`, 200, `"users":["bob"]`},
	} {
		resp, out := root.do("PUT", "/api/admin/sources/"+tc.path+"/grants", tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(out, tc.want) {
			t.Errorf("PUT %s %s: got %d %s, want %d with %q", tc.path, tc.body, resp.StatusCode, out, tc.status, tc.want)
		}
	}
	if visible(ts.alice) || !visible(ts.bob) {
		t.Errorf("after granting to bob: alice sees it %v, bob %v", visible(ts.alice), visible(ts.bob))
	}
	if resp, out := root.do("PUT", "/api/admin/sources/warehouse/grants", `{"all_users":true}`); resp.StatusCode != 200 || !strings.Contains(out, `"users":[],"all_users":true`) {
		t.Errorf("grant to all: %d %s", resp.StatusCode, out)
	}
	if src, _ := ts.Store.DBSource(ctx, "warehouse"); src.SealedURL != "v1:secret-sealed" || !slices.Equal(src.Tables, []string{"public.*"}) {
		t.Errorf("the grant changed more than the grant: %+v", src)
	}
	ev := ts.auditOf(t, datachat.AuditSourceGranted)
	if len(ev) != 2 || ev[1].Detail != "granted to alice → granted to bob, through the API" || ev[0].Source != "warehouse" || ev[0].UserName != "root" {
		t.Errorf("source.granted records: %+v", ev)
	}
}

// get is a GET with an API key.
func (ts *testServer) get(t *testing.T, path, key string) (int, string) {
	t.Helper()
	return ts.withCookie(t, "GET", path, "", "", "X-API-Key", key)
}

// TestAdminUsage: usage per user and UTC day, newest day first, over the
// days asked for.
func TestAdminUsage(t *testing.T) {
	ts := newTestServer(t)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	ctx := t.Context()
	aliceConv := ts.conversationOf(t, ts.aliceID)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for _, u := range []struct {
		at      time.Time
		in, out int64
	}{
		{today.Add(time.Hour), 10, 1},
		{today.Add(2 * time.Hour), 20, 2},
		{today.AddDate(0, 0, -1).Add(time.Hour), 100, 10},
		{today.AddDate(0, 0, -40), 1000, 100},
	} {
		m := &datachat.Message{ConversationID: aliceConv, Role: "assistant", Status: datachat.StatusComplete}
		if err := ts.Store.CreateMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := ts.Store.RecordUsage(ctx, &datachat.Usage{UserID: ts.aliceID, ConversationID: aliceConv, MessageID: m.ID,
			InputTokens: u.in, OutputTokens: u.out, CreatedAt: u.at}); err != nil {
			t.Fatal(err)
		}
	}
	var got struct{ Usage []datachat.UsageDay }
	st, body := root.get("/api/admin/usage")
	json.Unmarshal([]byte(body), &got)
	if st != 200 || len(got.Usage) != 2 || got.Usage[0].InputTokens != 30 || got.Usage[0].Turns != 2 || !got.Usage[0].Day.Equal(today) ||
		got.Usage[1].InputTokens != 100 || got.Usage[0].UserName != "alice" {
		t.Errorf("30 days: %d %s", st, body)
	}
	st, body = root.get("/api/admin/usage?days=1")
	if st != 200 || strings.Count(body, `"day"`) != 1 {
		t.Errorf("1 day: %d %s", st, body)
	}
	st, body = root.get("/api/admin/usage?days=366")
	if st != 200 || strings.Count(body, `"day"`) != 3 {
		t.Errorf("366 days: %d %s", st, body)
	}
}

// TestUserTokenBudget: a budget the admin sets for a user (PATCH
// tokens_per_day) overrides the server's for that user's next turn: a
// larger one lets them go on, 0 lifts the limit, a smaller one stops them;
// null gives them the server's again.
func TestUserTokenBudget(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}, Usage: &llmtest.Usage{Input: 80, Output: 30}}},
		func(r *chat.Runner) {
			r.TokensPerDay = 100
			// As serve wires it: the user's own budget, from the store.
			r.UserTokensPerDay = func(ctx context.Context, userID string) (*int64, error) {
				a, err := r.Store.(datachat.Store).Account(ctx, userID)
				if err != nil {
					return nil, err
				}
				return a.TokensPerDay, nil
			}
		})
	root := cs.person(t, "root", datachat.RoleAdmin, pwRoot)
	ask := func(key, conv string) int {
		t.Helper()
		st, _ := cs.post(t, "/chat/query", key, `{"query":"q","conversation_id":"`+conv+`"}`)
		return st
	}
	budget := func(user, v string) {
		t.Helper()
		if resp, body := root.do("PATCH", "/api/admin/users/"+user, `{"tokens_per_day":`+v+`}`); resp.StatusCode != 200 {
			t.Fatalf("budget %s %s: %d %s", user, v, resp.StatusCode, body)
		}
	}
	aliceConv, bobConv := cs.newConversation(t, cs.alice), cs.newConversation(t, cs.bob)
	for _, c := range []struct{ key, conv string }{{cs.alice, aliceConv}, {cs.bob, bobConv}} {
		if st := ask(c.key, c.conv); st != 200 {
			t.Fatalf("first turn: %d", st)
		}
		if st := ask(c.key, c.conv); st != 429 {
			t.Fatalf("over the server's budget: %d, want 429", st)
		}
	}
	budget("alice", "1000")
	budget("bob", "0")
	if st := ask(cs.alice, aliceConv); st != 200 {
		t.Errorf("alice with 1000 a day after 110: %d, want 200", st)
	}
	for range 3 {
		if st := ask(cs.bob, bobConv); st != 200 {
			t.Errorf("bob without a limit: %d, want 200", st)
		}
	}
	budget("alice", "200") // 220 used
	if st := ask(cs.alice, aliceConv); st != 429 {
		t.Errorf("alice over her own 200: %d, want 429", st)
	}
	budget("bob", "null")
	if st := ask(cs.bob, bobConv); st != 429 {
		t.Errorf("bob back on the server's budget: %d, want 429", st)
	}
}

// TestAdminRemoveUserRemovesFiles: removing a user through the API removes
// their datasets' files too, not only their rows.
func TestAdminRemoveUserRemovesFiles(t *testing.T) {
	ts := newTestServer(t)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	conv, _ := ts.penguins(t, ts.bob)
	ds, err := ts.Store.Datasets(t.Context(), conv)
	if err != nil || len(ds) != 1 {
		t.Fatalf("bob's datasets: %v %v", ds, err)
	}
	file := filepath.Join(ts.Workspace.Loader.Dir(), ds[0].Path)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the dataset's file: %v", err)
	}
	if resp, body := root.do("DELETE", "/api/admin/users/bob", ""); resp.StatusCode != 204 {
		t.Fatalf("remove bob: %d %s", resp.StatusCode, body)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bob's dataset file after he was removed: %v, want it gone", err)
	}
}

// TestRemovedUsersGrantsDoNotPass: removing a user through the API takes
// their name out of the sources granted to it (recorded), so that a later
// user of the same name gets none of them; a source from the --config file
// is left to its file.
func TestRemovedUsersGrantsDoNotPass(t *testing.T) {
	ts := newTestServer(t)
	root := ts.person(t, "root", datachat.RoleAdmin, pwRoot)
	for _, s := range []*datachat.DBSource{
		{Name: "warehouse", Kind: "postgres", SealedURL: "v1:x", Users: []string{"alice", "bob"}, Origin: datachat.OriginCLI},
		{Name: "only_bob", Kind: "postgres", SealedURL: "v1:x", Users: []string{"bob"}, Origin: datachat.OriginCLI},
		{Name: "filed", Kind: "mysql", SealedURL: "v1:x", Users: []string{"bob"}, Origin: datachat.OriginConfig},
	} {
		if err := ts.Store.CreateDBSource(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	if resp, body := root.do("DELETE", "/api/admin/users/bob", ""); resp.StatusCode != 204 {
		t.Fatalf("remove bob: %d %s", resp.StatusCode, body)
	}
	for name, want := range map[string][]string{"warehouse": {"alice"}, "only_bob": {}, "filed": {"bob"}} {
		src, err := ts.Store.DBSource(t.Context(), name)
		if err != nil || !slices.Equal(nonNil(src.Users), want) {
			t.Errorf("%s after bob was removed: %v %v, want granted to %v", name, src.Users, err, want)
		}
	}
	ev := ts.auditOf(t, datachat.AuditSourceGranted)
	if len(ev) != 2 || !strings.Contains(ev[0].Detail, "as user bob was removed") || ev[0].UserName != "root" {
		t.Errorf("source.granted records: %+v", ev)
	}
}
