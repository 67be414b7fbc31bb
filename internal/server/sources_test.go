package server

import (
	"encoding/json"
	"testing"

	"datachat"
	"datachat/internal/workspace"
)

// TestSourceRoutes: a user lists only the sources granted to them, attaches
// and detaches them, and sees them in the conversation's detail; a source not
// granted answers 404 as an unknown one does; no answer carries a URL. The
// routes never connect to a source: its sealed URL here opens nothing.
func TestSourceRoutes(t *testing.T) {
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		d.Sources = &workspace.Sources{Store: d.Store, Logger: d.Logger}
	})
	ctx := t.Context()
	for _, src := range []*datachat.DBSource{
		{Name: "warehouse", Kind: "postgres", SealedURL: "v1:sealed-warehouse", Tables: []string{"public.*"}, Users: []string{"alice"}},
		{Name: "shop", Kind: "mysql", SealedURL: "v1:sealed-shop", Tables: []string{"orders"}, AllUsers: true},
		{Name: "payroll", Kind: "postgres", SealedURL: "v1:sealed-payroll", Users: []string{"bob"}},
	} {
		if err := ts.Store.CreateDBSource(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	alice := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/json"}
	bob := map[string]string{"X-API-Key": ts.bob, "Content-Type": "application/json"}
	var conv datachat.Conversation
	json.Unmarshal([]byte(ts.run(t, scenario{name: "create", method: "POST", url: "/api/conversations", headers: alice, wantStatus: 201})), &conv)
	var bobConv datachat.Conversation
	json.Unmarshal([]byte(ts.run(t, scenario{name: "create", method: "POST", url: "/api/conversations", headers: bob, wantStatus: 201})), &bobConv)
	srcs := "/api/conversations/" + conv.ID + "/sources"
	sealed := []string{"sealed", "url", "users", "bob"}

	for _, sc := range []scenario{
		{name: "alice's sources", method: "GET", url: "/api/sources", headers: alice, wantStatus: 200,
			wantContent: []string{`{"sources":[{"name":"shop","kind":"mysql","tables":["orders"]},{"name":"warehouse","kind":"postgres","tables":["public.*"]}]}`},
			notContent:  append(sealed, "payroll")},
		{name: "bob's sources", method: "GET", url: "/api/sources", headers: bob, wantStatus: 200,
			wantContent: []string{`"payroll"`, `"shop"`}, notContent: []string{"warehouse", "sealed"}},
		{name: "no key", method: "GET", url: "/api/sources", wantStatus: 401},
		{name: "none attached", method: "GET", url: srcs, headers: alice, wantStatus: 200, wantContent: []string{`{"sources":[]}`}},
		{name: "attach", method: "POST", url: srcs, body: `{"name":"warehouse"}`, headers: alice, wantStatus: 201,
			wantContent: []string{`{"name":"warehouse","kind":"postgres","tables":["public.*"]}`}, notContent: sealed},
		{name: "attach again", method: "POST", url: srcs, body: `{"name":"warehouse"}`, headers: alice, wantStatus: 201},
		{name: "attach one for every user", method: "POST", url: srcs, body: `{"name":"shop"}`, headers: alice, wantStatus: 201},
		{name: "attach bob's", method: "POST", url: srcs, body: `{"name":"payroll"}`, headers: alice, wantStatus: 404,
			wantContent: []string{`No database source named \"payroll\".`}},
		{name: "attach an unknown one", method: "POST", url: srcs, body: `{"name":"nowhere"}`, headers: alice, wantStatus: 404,
			wantContent: []string{`No database source named \"nowhere\".`}},
		{name: "attach without a name", method: "POST", url: srcs, body: `{}`, headers: alice, wantStatus: 400},
		{name: "attach with an unknown field", method: "POST", url: srcs, body: `{"name":"shop","url":"x"}`, headers: alice, wantStatus: 400},
		{name: "bob attaches to alice's conversation", method: "POST", url: srcs, body: `{"name":"shop"}`, headers: bob, wantStatus: 404},
		{name: "bob attaches alice's source to his", method: "POST", url: "/api/conversations/" + bobConv.ID + "/sources", body: `{"name":"warehouse"}`, headers: bob, wantStatus: 404},
		{name: "bob lists alice's conversation's", method: "GET", url: srcs, headers: bob, wantStatus: 404},
		{name: "attached, in order", method: "GET", url: srcs, headers: alice, wantStatus: 200,
			wantContent: []string{`{"sources":[{"name":"warehouse","kind":"postgres","tables":["public.*"]},{"name":"shop","kind":"mysql","tables":["orders"]}]}`}},
		{name: "in the conversation's detail", method: "GET", url: "/api/conversations/" + conv.ID, headers: alice, wantStatus: 200,
			wantContent: []string{`"sources":[{"name":"warehouse"`}, notContent: sealed},
		{name: "bob detaches from alice's", method: "DELETE", url: srcs + "/shop", headers: bob, wantStatus: 404},
		{name: "detach", method: "DELETE", url: srcs + "/shop", headers: alice, wantStatus: 204},
		{name: "detach again", method: "DELETE", url: srcs + "/shop", headers: alice, wantStatus: 404},
		{name: "one left", method: "GET", url: srcs, headers: alice, wantStatus: 200,
			wantContent: []string{`{"sources":[{"name":"warehouse"`}, notContent: []string{"shop"}},
	} {
		ts.run(t, sc)
	}

	// A grant taken away: the source is no longer listed, nor attached.
	if err := ts.Store.UpdateDBSource(ctx, &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:sealed-warehouse", Users: []string{"carol"}}); err != nil {
		t.Fatal(err)
	}
	ts.run(t, scenario{name: "grant taken away", method: "GET", url: srcs, headers: alice, wantStatus: 200, wantContent: []string{`{"sources":[]}`}})
	ts.run(t, scenario{name: "grant taken away: not listed", method: "GET", url: "/api/sources", headers: alice, wantStatus: 200, notContent: []string{"warehouse"}})
}

// TestSourceRoutesWithoutSources: a server without sources lists none and
// attaches none.
func TestSourceRoutesWithoutSources(t *testing.T) {
	ts := newTestServer(t)
	alice := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/json"}
	var conv datachat.Conversation
	json.Unmarshal([]byte(ts.run(t, scenario{name: "create", method: "POST", url: "/api/conversations", headers: alice, wantStatus: 201})), &conv)
	for _, sc := range []scenario{
		{name: "list", method: "GET", url: "/api/sources", headers: alice, wantStatus: 200, wantContent: []string{`{"sources":[]}`}},
		{name: "attached", method: "GET", url: "/api/conversations/" + conv.ID + "/sources", headers: alice, wantStatus: 200, wantContent: []string{`{"sources":[]}`}},
		{name: "attached to an unknown conversation", method: "GET", url: "/api/conversations/nope/sources", headers: alice, wantStatus: 404},
		{name: "detail", method: "GET", url: "/api/conversations/" + conv.ID, headers: alice, wantStatus: 200, wantContent: []string{`"sources":[]`}},
		{name: "attach", method: "POST", url: "/api/conversations/" + conv.ID + "/sources", body: `{"name":"x"}`, headers: alice, wantStatus: 404},
		{name: "detach", method: "DELETE", url: "/api/conversations/" + conv.ID + "/sources/x", headers: alice, wantStatus: 404},
	} {
		ts.run(t, sc)
	}
}
