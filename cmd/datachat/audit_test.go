package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/llmtest"
)

// auditJSON runs `datachat audit --json args…` and decodes its lines.
func auditJSON(t *testing.T, env func(string) (string, bool), args ...string) []datachat.AuditEvent {
	t.Helper()
	out, _, err := runMain(t, env, append([]string{"audit", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("audit --json %q: %v", args, err)
	}
	var evs []datachat.AuditEvent
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var e datachat.AuditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit --json: line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

// TestAuditCommand: keys create and revoke are recorded, with who ran the
// command; `datachat audit` prints the log as a table — one line an event,
// nothing in it that could drive the terminal — or as JSON lines, filtered
// as the README shows, across more events than one page; a wrong command
// line is refused with the usage.
func TestAuditCommand(t *testing.T) {
	env := testEnv(t, nil)
	key, _, err := runMain(t, env, "keys", "create", "--user", "alice")
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSpace(key)[:10]
	st := storeOf(t, env)
	keys, err := st.APIKeys(t.Context())
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	if _, _, err := runMain(t, env, "keys", "revoke", keys[0].ID); err != nil {
		t.Fatal(err)
	}
	evs := auditJSON(t, env)
	if len(evs) != 2 {
		t.Fatalf("audit after keys create and revoke: %d events, want 2: %+v", len(evs), evs)
	}
	created, revoked := evs[1], evs[0]
	if created.Kind != datachat.AuditKeyCreated || created.Target != keys[0].ID || created.Outcome != datachat.AuditOK ||
		!strings.Contains(created.Detail, prefix+"… for user alice") || !strings.Contains(created.Detail, "`datachat keys create`") ||
		!strings.Contains(created.Detail, "OS user") || strings.Contains(created.Detail, strings.TrimSpace(key)) {
		t.Errorf("keys create's record: %+v", created)
	}
	if revoked.Kind != datachat.AuditKeyRevoked || revoked.Target != keys[0].ID || !strings.Contains(revoked.Detail, prefix+"… of user alice") ||
		!strings.Contains(revoked.Detail, "`datachat keys revoke`") {
		t.Errorf("keys revoke's record: %+v", revoked)
	}

	// Queries, one with SQL that would drive a terminal, and more events
	// than a page holds.
	ctx := t.Context()
	hostile := "SELECT 1;\n\t\x1b[2J\x1b]0;pwned\x07\r\u202eevil\u009b31m -- " + strings.Repeat("x", 200)
	mustAppend := func(e *datachat.AuditEvent) {
		t.Helper()
		if err := st.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(&datachat.AuditEvent{Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK, UserName: "alice\x1b[7m",
		Address: "192.0.2.9", Source: "warehouse", SQL: hostile, RowCount: ptrTo(int64(3)), DurationMS: 12})
	mustAppend(&datachat.AuditEvent{Time: time.Now().Add(-48 * time.Hour), Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditRefused,
		UserName: "bob", Source: "warehouse", SQL: "DELETE FROM orders", Error: "refused by the sandbox: only SELECT"})
	for i := range datachat.AuditPageMax + 5 {
		mustAppend(&datachat.AuditEvent{Time: time.Now().Add(-72 * time.Hour), Kind: datachat.AuditSourceQuery, Outcome: datachat.AuditOK,
			UserName: "carol", Source: "shop", SQL: fmt.Sprintf("SELECT %d", i), RowCount: ptrTo(int64(0))})
	}
	total := 2 + 2 + datachat.AuditPageMax + 5

	out, _, err := runMain(t, env, "audit")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 101 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[0], "WHAT") {
		t.Errorf("audit: %d lines, want a header and the newest 100:\n%.2000s", len(lines), out)
	}
	if strings.ContainsAny(out, "\x1b\x07\r\u202e\u009b") {
		t.Errorf("audit's table holds control characters: %q", out)
	}
	row := lines[1]
	for _, w := range []string{"alice\\u001b[7m", "192.0.2.9", "source.query", "ok", "warehouse", `SELECT 1; \u001b[2J\u001b]0;pwned\u0007 \u202eevil\u009b31m`, "→ 3 rows, 12 ms"} {
		if !strings.Contains(row, w) {
			t.Errorf("audit's newest row %q lacks %q", row, w)
		}
	}
	if strings.Contains(row, strings.Repeat("x", 100)) {
		t.Errorf("audit's row %q: the SQL is not shortened", row)
	}

	// As the README writes them.
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"audit", "--since", "24h", "--user", "alice"}, 0},
		{[]string{"audit", "--since", "24h", "--user", "alice\x1b[7m"}, 1},
		{[]string{"audit", "--source", "warehouse", "--kind", "source.query"}, 2},
		{[]string{"audit", "--outcome", "refused"}, 1},
		{[]string{"audit", "--kind", "source.query", "--outcome", "refused", "--limit", "0"}, 1},
		{[]string{"audit", "--kind", "key.revoked"}, 1},
		{[]string{"audit", "--until", "2000-01-01"}, 0},
		{[]string{"audit", "--since", "60h", "--until", "24h"}, 1},
		{[]string{"audit", "--limit", "3"}, 3},
		{[]string{"audit", "--limit", "0"}, total},
		{[]string{"audit", "--user", "carol", "--limit", "1003"}, 1003},
		{[]string{"audit", "--user", "carol", "--limit", "0"}, datachat.AuditPageMax + 5},
	} {
		out, _, err := runMain(t, env, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if n := strings.Count(out, "\n") - 1; n != tc.want {
			t.Errorf("%q: %d events, want %d:\n%.1000s", tc.args, n, tc.want, out)
		}
		args := append([]string{"--json"}, tc.args[1:]...)
		if n := len(auditJSON(t, env, args...)); n != tc.want {
			t.Errorf("%q --json: %d events, want %d", tc.args, n, tc.want)
		}
	}
	// --json as the README writes it: one object a line.
	if out, _, err := runMain(t, env, "audit", "--source", "warehouse", "--json"); err != nil || strings.Count(out, "\n") != 2 || !strings.HasPrefix(out, "{") {
		t.Errorf("audit --source warehouse --json: %v\n%s", err, out)
	}
	all := auditJSON(t, env, "--limit", "0")
	seen := map[string]bool{}
	for i, e := range all {
		if seen[e.ID] {
			t.Fatalf("audit --limit 0: event %s twice", e.ID)
		}
		seen[e.ID] = true
		if i > 0 && e.Time.After(all[i-1].Time) {
			t.Fatalf("audit: event %d is newer than the one before", i)
		}
	}
	if all[0].SQL != hostile {
		t.Errorf("audit --json: the SQL is %q, want it whole, %q", all[0].SQL, hostile)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "--kind", "key.stolen"}, "want one of sign_in"},
		{[]string{"audit", "--outcome", "maybe"}, "want ok, refused or failed"},
		{[]string{"audit", "--since", "yesterday"}, `"yesterday" is not a time`},
		{[]string{"audit", "--until", "-1h"}, "is not a time"},
		{[]string{"audit", "--limit", "-1"}, "--limit -1"},
		{[]string{"audit", "--limit", "many"}, "invalid value"},
		{[]string{"audit", "alice"}, "takes no arguments"},
		{[]string{"audit", "--json=maybe"}, "invalid"},
	} {
		_, _, err := runMain(t, env, tc.args...)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, tc.want) || !strings.Contains(ue.usage, "Usage: datachat audit") {
			t.Errorf("%q: got %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"audit", "--help"}, {"help", "audit"}, {"audit", "-h"}} {
		out, _, err := runMain(t, env, args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "Usage: datachat audit") || !strings.Contains(out, "-since TIME") || !strings.Contains(out, "DATACHAT_AUDIT_DAYS") {
			t.Errorf("%q: %v\n%s", args, err, out)
		}
	}
	if out, _, _ := runMain(t, env, "--help"); !strings.Contains(out, "audit [--since TIME]") {
		t.Errorf("datachat --help does not list audit:\n%s", out)
	}
}

// refuseAuditWrites makes the SQLite store of a data directory refuse
// every new audit event, as a store whose audit log cannot be written.
func refuseAuditWrites(t *testing.T, env func(string) (string, bool)) {
	t.Helper()
	storeOf(t, env) // migrated
	dir, _ := env("DATACHAT_DATA_DIR")
	db, err := sql.Open("sqlite", filepath.Join(dir, "datachat.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER test_audit_down BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'the audit log is down'); END`); err != nil {
		t.Fatal(err)
	}
}

// TestAuditFailClosedCommands: when the audit log cannot be written, a key
// created is revoked again and not printed, and serve does not start with
// a setup URL it cannot record; a key revoked stays revoked, and the
// command fails saying its record is missing.
func TestAuditFailClosedCommands(t *testing.T) {
	env := testEnv(t, nil)
	key, _, err := runMain(t, env, "keys", "create", "--user", "alice")
	if err != nil {
		t.Fatal(err)
	}
	refuseAuditWrites(t, env)
	out, _, err := runMain(t, env, "keys", "create", "--user", "carol")
	if err == nil || !strings.Contains(err.Error(), "audit log") || !strings.Contains(err.Error(), "undone") || strings.Contains(out, "dck_") {
		t.Errorf("keys create with the audit log down: %v, printed %q; want it refused, no key printed", err, out)
	}
	st := storeOf(t, env)
	keys, err := st.APIKeys(t.Context())
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	if keys[1].UserName != "carol" || keys[1].RevokedAt == nil {
		t.Errorf("carol's key: %+v, want it revoked", keys[1])
	}
	if _, _, err := runMain(t, env, "keys", "revoke", keys[0].ID); err == nil || !strings.Contains(err.Error(), "was done, but the audit log could not record it") {
		t.Errorf("keys revoke with the audit log down: %v, want it to say the record is missing", err)
	}
	if _, _, err := st.Authenticate(t.Context(), datachat.HashAPIKey(strings.TrimSpace(key))); datachat.ErrorCode(err) != datachat.EUNAUTHORIZED {
		t.Errorf("alice's key after the revoke: %v, want it revoked", err)
	}

	// serve's setup URL: a new data directory whose audit log is down.
	env2 := testEnv(t, nil)
	refuseAuditWrites(t, env2)
	var stdout strings.Builder
	m := &Main{Env: env2, Stdout: &stdout, Stderr: io.Discard}
	err = m.ParseFlags(context.Background(), []string{"serve"})
	if err == nil {
		err = m.Run(context.Background())
	}
	m.Close()
	if err == nil || !strings.Contains(err.Error(), "audit log") || strings.Contains(stdout.String(), "#invite=") {
		t.Errorf("serve's first start with the audit log down: %v, printed %q; want it stopped, no setup URL printed", err, stdout.String())
	}
}

// TestAuditRetention: serve deletes, as it starts, the audit events older
// than DATACHAT_AUDIT_DAYS (365 by default) and records that it did; 0
// keeps every event. serve's first user is recorded as invited by serve. (One
// data directory for every start: serve compiles PDFium once per
// directory.)
func TestAuditRetention(t *testing.T) {
	dir := t.TempDir()
	st := storeOf(t, testEnv(t, map[string]string{"DATACHAT_DATA_DIR": dir}))
	now := time.Now()
	for _, e := range []struct {
		name string
		at   time.Time
	}{{"10y", now.AddDate(-10, 0, 0)}, {"400d", now.AddDate(0, 0, -400)}, {"40d", now.AddDate(0, 0, -40)}, {"1h", now.Add(-time.Hour)}} {
		if err := st.AppendAudit(t.Context(), &datachat.AuditEvent{Time: e.at, Kind: datachat.AuditSignIn, Outcome: datachat.AuditOK, UserName: e.name}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		days   string // "" for the default
		kept   []string
		pruned string // the newest audit.pruned event's detail says so
	}{
		{"0", []string{"1h", "40d", "400d", "10y"}, ""},
		{"", []string{"1h", "40d"}, "2 events before"},
		{"30", []string{"1h"}, "1 event before"},
	} {
		vars := map[string]string{"DATACHAT_DATA_DIR": dir}
		if tc.days != "" {
			vars["DATACHAT_AUDIT_DAYS"] = tc.days
		}
		env := testEnv(t, vars)
		m, err := serveLogged(t, env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		var kept []string
		for _, e := range auditJSON(t, env, "--kind", "sign_in") {
			kept = append(kept, e.UserName)
		}
		if strings.Join(kept, ",") != strings.Join(tc.kept, ",") {
			t.Errorf("DATACHAT_AUDIT_DAYS=%q: kept %v, want %v", tc.days, kept, tc.kept)
		}
		pruned := auditJSON(t, env, "--kind", "audit.pruned")
		if tc.pruned == "" && len(pruned) != 0 || tc.pruned != "" && (len(pruned) == 0 || !strings.HasPrefix(pruned[0].Detail, tc.pruned)) {
			t.Errorf("DATACHAT_AUDIT_DAYS=%q: the prunes' records %+v, want the newest to say %q", tc.days, pruned, tc.pruned)
		}
		first := auditJSON(t, env, "--kind", "user.invited")
		if len(first) != 1 || first[0].Target != "admin" || !strings.Contains(first[0].Detail, "the first admin") || !strings.Contains(first[0].Detail, "by serve as it started") {
			t.Errorf("serve's first user: %+v, want it recorded once, as invited by serve", first)
		}
	}
}

// TestAuditSources: a source added, changed, granted and removed — with
// the command or through DATACHAT_SOURCES as serve starts — is recorded,
// never with its URL; a chat answer's query on it is recorded with its SQL
// and row count, from the request's address; `datachat audit --source`
// shows them all.
func TestAuditSources(t *testing.T) {
	src := newPostgresSource(t)
	env := testEnv(t, nil)
	run := func(args ...string) string {
		t.Helper()
		out, err := runMainOut(t, env, args...)
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		return out
	}
	// The role may read these tables, and --tables must name them all.
	granted := strings.Join(dbsourcetest.Tables(t, sourceCSVs), ",")
	run("sources", "add", "warehouse", "--url", src.reader, "--tables", granted, "--users", "alice")
	dir := t.TempDir()
	config := func(yaml string) string {
		p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", time.Now().UnixNano()))
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shop := func(extra string) string {
		return config(fmt.Sprintf("DATACHAT_SOURCES:\n  - name: shop\n    url: %q\n%s", src.reader, extra))
	}
	for _, file := range []string{
		shop("    tables: " + granted + "\n    users: alice\n"),    // added
		shop("    tables: " + granted + "\n    users: alice\n"),    // unchanged: no record
		shop("    tables: " + granted + "\n    all_users: true\n"), // granted
		shop("    all_users: true\n"),                              // changed: every table of the database
		config("DATACHAT_SOURCES: []\n"),                           // removed
	} {
		m, err := serveLogged(t, env, io.Discard, "--config", file)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
	}

	// A chat answer queries warehouse.
	fake := llmTestSQL(t, "SELECT count(*) AS n FROM penguins", "warehouse")
	env = testEnv(t, map[string]string{"DATACHAT_DATA_DIR": mustGet(env, "DATACHAT_DATA_DIR"), "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake})
	m, err := serveLogged(t, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	alice := strings.TrimSpace(firstLine(run("keys", "create", "--user", "alice")))
	base := "http://" + m.Addr()
	call := func(method, path, body string) string {
		t.Helper()
		st, b, _ := apiCall(t, method, base+path, alice, body)
		if st/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, st, b)
		}
		return b
	}
	conv := jsonField(t, call("POST", "/api/conversations", ""), "id")
	call("POST", "/api/conversations/"+conv+"/sources", `{"name":"warehouse"}`)
	call("POST", "/chat/query", fmt.Sprintf(`{"query":"How many penguins?","conversation_id":%q}`, conv))
	m.Close()
	run("sources", "remove", "warehouse")

	evs := auditJSON(t, env, "--limit", "0")
	var got []string
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Source == "" {
			continue
		}
		got = append(got, e.Kind+" "+e.Source)
		if strings.Contains(fmt.Sprintf("%+v", e), src.password) {
			t.Errorf("%s: the record holds the password: %+v", e.Kind, e)
		}
		switch e.Kind {
		case datachat.AuditSourceQuery:
			if e.SQL != "SELECT count(*) AS n FROM penguins" || e.RowCount == nil || *e.RowCount != 1 || e.UserName != "alice" ||
				e.ConversationID != conv || e.Address != "127.0.0.1" || e.RequestID == "" || e.Outcome != datachat.AuditOK {
				t.Errorf("the chat's query: %+v", e)
			}
		case datachat.AuditSourceGranted:
			if !strings.Contains(e.Detail, "granted to alice → granted to every user") || !strings.Contains(e.Detail, "by serve as it started") {
				t.Errorf("shop granted: %+v", e)
			}
		case datachat.AuditSourceChanged:
			if !strings.Contains(e.Detail, "tables "+granted+" → *") || strings.Contains(e.Detail, "URL") {
				t.Errorf("shop changed: %+v", e)
			}
		case datachat.AuditSourceAdded:
			if e.Source == "warehouse" && (!strings.Contains(e.Detail, "granted to alice") || !strings.Contains(e.Detail, "`datachat sources add`")) {
				t.Errorf("warehouse added: %+v", e)
			}
			if e.Source == "shop" && !strings.Contains(e.Detail, "from DATACHAT_SOURCES") {
				t.Errorf("shop added: %+v", e)
			}
		}
	}
	want := []string{"source.added warehouse", "source.added shop", "source.granted shop", "source.changed shop",
		"source.removed shop", "source.query warehouse", "source.removed warehouse"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("the sources' records, oldest first:\ngot  %v\nwant %v", got, want)
	}
	out, _, err := runMain(t, env, "audit", "--source", "warehouse")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n") - 1; n != 3 || !strings.Contains(out, "SELECT count(*) AS n FROM penguins → 1 row") {
		t.Errorf("audit --source warehouse: %d events, want 3:\n%s", n, out)
	}
}

func ptrTo[T any](v T) *T { return &v }

func mustGet(env func(string) (string, bool), k string) string {
	v, _ := env(k)
	return v
}

// llmTestSQL starts a fake OpenAI-compatible model that answers a question
// by running sql on source, and returns its URL.
func llmTestSQL(t *testing.T, sql, source string) string {
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{
		Turns: []llmtest.Turn{{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q, "source": %q}`, sql, source))}}},
		Default: &llmtest.Turn{Reply: "done"},
	})
	return fake.URL
}
