package workspace

import (
	"context"
	"crypto/rand"
	"datachat/internal/testenv"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/sqlite/sqlitetest"
	"datachat/internal/testnet"
)

// adminURL returns the URL in env, or skips t (fails it under CI=true)
// saying how to get one.
func adminURL(t *testing.T, env, how string) *url.URL {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		testenv.Missing(t, fmt.Sprintf("set %s to run this test (database sources are tested on a real server): %s", env, how))
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	return u
}

func newKey(t *testing.T) (string, *dbsource.Secrets) {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	sec, err := dbsource.NewSecrets(key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(key), sec
}

// TestSourceErrors: what a user (and the model) is told when a source
// attached to the conversation cannot be used, on a real PostgreSQL and a
// real MariaDB — a database that does not answer, a role that could escape
// read-only (granted a privilege after the source was added), a login or a
// database the server refuses, credentials sealed with another key, and a
// source that is unknown, not attached or not the user's. Each says what is
// wrong and never "Internal error."; the prompt lists each as unavailable
// with the same reason.
func TestSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		// urls returns the admin's URL (a role the sandbox refuses), a URL
		// with a login the server refuses, and one naming a database that
		// does not exist.
		urls func(t *testing.T) (risky, badLogin, noDB string)
		kind string
		// privilege is what the risky role is refused for; refusedLogin
		// what the server says of the login it refuses.
		privilege, refusedLogin string
	}{
		{"PostgreSQL", func(t *testing.T) (string, string, string) {
			u := adminURL(t, "DATACHAT_TEST_POSTGRES_URL", "bash internal/postgres/testdata/start-test-cluster.sh prints one")
			bad, nodb := *u, *u
			bad.User = url.UserPassword("datachat_no_such_role", "pw")
			nodb.Path = "/datachat_no_such_db"
			return u.String(), bad.String(), nodb.String()
		}, dbsource.KindPostgres, "SUPERUSER", `role "datachat_no_such_role" does not exist`},
		{"MariaDB", func(t *testing.T) (string, string, string) {
			u := adminURL(t, "DATACHAT_TEST_MYSQL_URL", "apt-get install mariadb-server, then export DATACHAT_TEST_MYSQL_URL=$(sh internal/dbsource/testdata/start-mariadb.sh)")
			risky, bad, nodb := *u, *u, *u
			risky.Path = "/mysql"
			bad.User, bad.Path = url.UserPassword(u.User.Username(), "not-the-password"), "/mysql"
			nodb.Path = "/datachat_no_such_db"
			return risky.String(), bad.String(), nodb.String()
		}, dbsource.KindMySQL, "global privilege", "Access denied for user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			risky, badLogin, noDB := tc.urls(t)
			testSourceErrors(t, tc.kind, risky, badLogin, noDB, tc.privilege, tc.refusedLogin)
		})
	}
}

func testSourceErrors(t *testing.T, kind, risky, badLogin, noDB, privilege, refusedLogin string) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	alice, _ := st.EnsureUser(ctx, "alice")
	bob, _ := st.EnsureUser(ctx, "bob")
	conv := &datachat.Conversation{UserID: alice.ID, Title: "t"}
	bobConv := &datachat.Conversation{UserID: bob.ID, Title: "t"}
	for _, c := range []*datachat.Conversation{conv, bobConv} {
		if err := st.CreateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	key, sec := newKey(t)
	_, other := newKey(t)
	scheme := map[string]string{dbsource.KindPostgres: "postgres", dbsource.KindMySQL: "mysql"}[kind]
	down := scheme + "://u:pw@" + testnet.ClosedAddr(t) + "/db"
	if kind == dbsource.KindPostgres {
		down += "?connect_timeout=5"
	}
	sources := []struct {
		name, url string
		with      *dbsource.Secrets
		want      []string // in what the user is told
	}{
		{"down", down, sec, []string{"The database down does not answer"}},
		{"risky", risky, sec, []string{privilege, "escape read-only"}},
		{"badlogin", badLogin, sec, []string{"source badlogin: the database server refused the connection", refusedLogin}},
		{"nodb", noDB, sec, []string{"source nodb: the database server refused the connection", "datachat_no_such_db"}},
		{"otherkey", risky, other, []string{"The database otherkey cannot be opened", "secret key"}},
	}
	logs := &strings.Builder{}
	s := &Sources{Store: st, SecretKey: key, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, io.Discard), nil))}
	defer s.Close()
	for _, src := range sources {
		sealed, err := src.with.Seal(src.url)
		if err != nil {
			t.Fatal(err)
		}
		def := &datachat.DBSource{Name: src.name, Kind: kind, SealedURL: sealed, Users: []string{"alice"}, Origin: datachat.OriginCLI}
		if err := st.CreateDBSource(ctx, def); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Attach(ctx, alice, conv.ID, src.name); err != nil {
			t.Fatalf("attach %s: %v", src.name, err)
		}
	}

	told := func(what string, err error, code string, want ...string) {
		t.Helper()
		msg := datachat.ErrorMessage(err)
		t.Logf("%s: %s (%s)", what, msg, datachat.ErrorCode(err))
		if err == nil || datachat.ErrorCode(err) != code {
			t.Errorf("%s: got %v (%s), want a %s error", what, err, datachat.ErrorCode(err), code)
		}
		if strings.Contains(msg, "Internal error") {
			t.Errorf("%s: the user is told %q", what, msg)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: the user is told %q, want it to say %q", what, msg, w)
			}
		}
		for _, pw := range []string{"not-the-password", ":pw@"} {
			if strings.Contains(msg, pw) {
				t.Errorf("%s: the message shows a password: %q", what, msg)
			}
		}
	}
	infos, err := s.Describe(ctx, alice, conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]datachat.DBSourceInfo{}
	for _, in := range infos {
		byName[in.Name] = in
	}
	for _, src := range sources {
		code := datachat.EINVALID
		if src.name == "down" {
			code = datachat.EBUSY
		}
		_, err := s.Query(ctx, alice, conv.ID, src.name, "SELECT 1")
		told("query on "+src.name, err, code, src.want...)
		_, err = s.EstimateRows(ctx, alice, conv.ID, src.name, "SELECT 1")
		told("estimate on "+src.name, err, code, src.want...)
		in := byName[src.name]
		t.Logf("prompt: %s unavailable: %s", src.name, in.Unavailable)
		if in.Unavailable == "" || len(in.Tables) > 0 {
			t.Errorf("the prompt lists %s as %+v, want it unavailable", src.name, in)
		}
		for _, w := range src.want[1:] {
			if !strings.Contains(in.Unavailable, w) {
				t.Errorf("the prompt says %s is unavailable because %q, want it to say %q", src.name, in.Unavailable, w)
			}
		}
	}

	_, err = s.Query(ctx, alice, conv.ID, "nowhere", "SELECT 1")
	told("query on an unknown source", err, datachat.ENOTFOUND, `"nowhere"`)
	_, err = s.Attach(ctx, alice, conv.ID, "nowhere")
	told("attaching an unknown source", err, datachat.ENOTFOUND, `No database source named "nowhere"`)
	_, err = s.Attach(ctx, bob, bobConv.ID, "down")
	told("bob attaching alice's source", err, datachat.ENOTFOUND, `No database source named "down"`)
	_, err = s.Query(ctx, bob, bobConv.ID, "down", "SELECT 1")
	told("bob querying alice's source", err, datachat.ENOTFOUND, `"down"`)
	_, err = s.Query(ctx, bob, conv.ID, "down", "SELECT 1")
	told("bob querying alice's conversation", err, datachat.ENOTFOUND)
	if granted, err := s.Granted(ctx, bob); err != nil || len(granted) != 0 {
		t.Errorf("bob's sources: %v %v, want none", granted, err)
	}
	if strings.Contains(logs.String(), ":pw@") || strings.Contains(logs.String(), "not-the-password") {
		t.Errorf("the log shows a password:\n%s", logs.String())
	}
	// Each query is in the audit log, refused or failed as it was, with
	// what the user was told and no password.
	page, err := st.AuditEvents(ctx, datachat.AuditFilter{Kind: datachat.AuditSourceQuery})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != len(sources)+3 {
		t.Errorf("audit log: got %d queries, want %d", len(page.Events), len(sources)+3)
	}
	for _, e := range page.Events {
		want := datachat.AuditRefused
		if e.Source == "down" && e.UserName == "alice" || e.Source == "badlogin" || e.Source == "nodb" || e.Source == "otherkey" {
			want = datachat.AuditFailed
		}
		if e.Outcome != want || e.Error == "" || e.RowCount != nil {
			t.Errorf("audit record of %s's query on %s: outcome %q, error %q, rows %v; want %s with its error", e.UserName, e.Source, e.Outcome, e.Error, e.RowCount, want)
		}
		if rec := fmt.Sprintf("%+v", *e); strings.Contains(rec, ":pw@") || strings.Contains(rec, "not-the-password") {
			t.Errorf("an audit record shows a password: %s", rec)
		}
	}
}
