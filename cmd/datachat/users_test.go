package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/config"
	"datachat/internal/postgres"
	"datachat/internal/sqlite"
	"datachat/internal/testfiles"
)

// forEachDB runs fn on SQLite and, when DATACHAT_TEST_POSTGRES_URL is set
// (else it says what to install, and fails only under CI), on PostgreSQL;
// vars are the environment of both.
func forEachDB(t *testing.T, vars map[string]string, fn func(t *testing.T, env func(string) (string, bool))) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			v := map[string]string{}
			for k, x := range vars {
				v[k] = x
			}
			if db == "postgres" {
				v["DATACHAT_DATABASE_URL"] = postgresSchemaURL(t)
			}
			fn(t, testEnv(t, v))
		})
	}
}

// storeOf opens the store of env's database, as another process would: the
// PostgreSQL database at DATACHAT_DATABASE_URL, else the SQLite file of
// DATACHAT_DATA_DIR; migrated, closed when the test ends.
func storeOf(t *testing.T, env func(string) (string, bool)) datachat.Store {
	t.Helper()
	var (
		st  migrator
		err error
	)
	if u, _ := env("DATACHAT_DATABASE_URL"); u != "" {
		st, err = postgres.Open(t.Context(), u)
	} else {
		dir, _ := env("DATACHAT_DATA_DIR")
		st, err = sqlite.Open(t.Context(), filepath.Join(dir, "datachat.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// runMainIn is runMain with stdin.
func runMainIn(t *testing.T, env func(string) (string, bool), stdin string, args ...string) (string, string, error) {
	t.Helper()
	return runMainWith(t, &Main{Env: env, Stdin: strings.NewReader(stdin)}, args...)
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, env func(string) (string, bool), args ...string) string {
	t.Helper()
	out, errOut, err := runMain(t, env, args...)
	if err != nil {
		t.Fatalf("datachat %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// failRun runs a command that must fail, with an error saying want.
func failRun(t *testing.T, env func(string) (string, bool), want string, args ...string) {
	t.Helper()
	out, _, err := runMain(t, env, args...)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("datachat %s: got %v, want an error saying %q", strings.Join(args, " "), err, want)
	}
	if out != "" {
		t.Errorf("datachat %s failed but printed %q on stdout", strings.Join(args, " "), out)
	}
}

var inviteLine = regexp.MustCompile(`^(https?://[^/\s]+)/#invite=([A-Za-z0-9_-]{43})\n$`)

// inviteToken returns the token of the invite URL a command printed alone
// on stdout, checking it points at base.
func inviteToken(t *testing.T, out, base string) string {
	t.Helper()
	m := inviteLine.FindStringSubmatch(out)
	if m == nil || m[1] != base {
		t.Fatalf("stdout %q: want only an invite URL under %s", out, base)
	}
	return m[2]
}

// useInvite sets a password with the invite's token, as POST
// /api/auth/invite does.
func useInvite(t *testing.T, st datachat.Store, token string) (*datachat.Account, error) {
	t.Helper()
	return st.UseInvite(t.Context(), datachat.HashAPIKey(token), "$argon2id$test", time.Now())
}

// listed is a row of users list --json.
type listed struct {
	datachat.Account
	SignIn string `json:"sign_in"`
	Keys   int    `json:"keys"`
}

func usersJSON(t *testing.T, env func(string) (string, bool)) map[string]listed {
	t.Helper()
	out := mustRun(t, env, "users", "list", "--json")
	rows := map[string]listed{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var r listed
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("users list --json: line %q: %v", line, err)
		}
		rows[r.Name] = r
	}
	return rows
}

// TestUsersCommands runs the users commands as the README writes them.
func TestUsersCommands(t *testing.T) {
	forEachDB(t, map[string]string{"DATACHAT_ADDR": "0.0.0.0:8123"}, func(t *testing.T, env func(string) (string, bool)) {
		st := storeOf(t, env)
		const base = "http://127.0.0.1:8123" // the listen address, 0.0.0.0 shown as 127.0.0.1

		// users add NAME [--admin]: the invite URL alone on stdout.
		out, errOut, err := runMain(t, env, "users", "add", "alice")
		if err != nil {
			t.Fatal(err)
		}
		alice := inviteToken(t, out, base)
		if !strings.Contains(errOut, "added the member alice") || !strings.Contains(errOut, "works once") {
			t.Errorf("users add: stderr %q", errOut)
		}
		boss := inviteToken(t, mustRun(t, env, "users", "add", "Boss Ünal", "--admin"), base)
		failRun(t, env, "already exists", "users", "add", "alice")
		failRun(t, env, "already exists", "users", "add", "--admin", "alice")
		failRun(t, env, "white space", "users", "add", "alice ")
		failRun(t, env, "control character", "users", "add", "al\x1b[31mice")
		if a, err := st.AccountByName(t.Context(), "alice"); err != nil || a.Role != datachat.RoleMember {
			t.Errorf("alice after a refused add --admin: %+v, %v; want a member still", a, err)
		}
		a, err := useInvite(t, st, alice)
		if err != nil || a.Name != "alice" || !a.HasPassword {
			t.Fatalf("alice's invite: %+v, %v", a, err)
		}
		if _, err := useInvite(t, st, alice); !errors.Is(err, datachat.ErrInviteInvalid) {
			t.Errorf("alice's invite used again: %v, want it refused", err)
		}
		if a, err := useInvite(t, st, boss); err != nil || a.Name != "Boss Ünal" || a.Role != datachat.RoleAdmin {
			t.Errorf("the admin's invite: %+v, %v", a, err)
		}
		carolKey := strings.TrimSpace(mustRun(t, env, "keys", "create", "--user", "carol"))
		if _, _, err := st.Authenticate(t.Context(), datachat.HashAPIKey(carolKey)); err != nil { // a request with it
			t.Fatal(err)
		}
		mustRun(t, env, "users", "add", "dave") // invited, not signed in yet

		// users list: a table, and --json.
		table := mustRun(t, env, "users", "list")
		lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
		if len(lines) != 5 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ROLE SIGN-IN STATUS LAST SEEN" {
			t.Fatalf("users list:\n%s", table)
		}
		for i, want := range []string{"Boss Ünal admin password active -", "alice member password active -", "carol member key only active 20", "dave member none yet active -"} {
			if got := strings.Join(strings.Fields(lines[i+1]), " "); !strings.HasPrefix(got, want) {
				t.Errorf("users list row %d: %q, want %q…", i+1, got, want)
			}
		}
		rows := usersJSON(t, env)
		if r := rows["carol"]; r.SignIn != "key only" || r.Keys != 1 || r.Role != datachat.RoleMember || r.LastSeenAt == nil || r.HasPassword {
			t.Errorf("users list --json, carol: %+v", r)
		}
		if r := rows["alice"]; r.SignIn != "password" || !r.HasPassword || r.DisabledAt != nil || r.ID == "" {
			t.Errorf("users list --json, alice: %+v", r)
		}

		// users reset NAME: a new URL; the one before it stops working.
		first := inviteToken(t, mustRun(t, env, "users", "reset", "dave"), base)
		second := inviteToken(t, mustRun(t, env, "users", "reset", "dave"), base)
		if _, err := useInvite(t, st, first); !errors.Is(err, datachat.ErrInviteInvalid) {
			t.Errorf("a reset's URL after another reset: %v, want it refused", err)
		}
		if _, err := useInvite(t, st, second); err != nil {
			t.Errorf("the newest reset's URL: %v", err)
		}

		// users disable / enable NAME.
		mustRun(t, env, "users", "disable", "carol")
		if _, _, err := st.Authenticate(t.Context(), datachat.HashAPIKey(carolKey)); !errors.Is(err, datachat.ErrUserDisabled) {
			t.Errorf("a disabled user's key: %v, want ErrUserDisabled", err)
		}
		if r := usersJSON(t, env)["carol"]; r.DisabledAt == nil {
			t.Errorf("users list after disable: %+v", r)
		}
		if !strings.Contains(mustRun(t, env, "users", "list"), "disabled "+time.Now().UTC().Format("2006-01-")) {
			t.Errorf("users list does not show carol disabled")
		}
		if _, errOut, err := runMain(t, env, "users", "disable", "carol"); err != nil || !strings.Contains(errOut, "already disabled") {
			t.Errorf("users disable again: %v, %q", err, errOut)
		}
		// A reset of a disabled user works once they are enabled.
		reset := inviteToken(t, mustRun(t, env, "users", "reset", "carol"), base)
		if _, err := useInvite(t, st, reset); !errors.Is(err, datachat.ErrInviteInvalid) {
			t.Errorf("a disabled user's reset URL: %v, want it refused", err)
		}
		mustRun(t, env, "users", "enable", "carol")
		if _, _, err := st.Authenticate(t.Context(), datachat.HashAPIKey(carolKey)); err != nil {
			t.Errorf("the key after enable: %v", err)
		}
		if _, err := useInvite(t, st, reset); err != nil {
			t.Errorf("the reset URL after enable: %v", err)
		}
		if _, errOut, err := runMain(t, env, "users", "enable", "carol"); err != nil || !strings.Contains(errOut, "not disabled") {
			t.Errorf("users enable of an enabled user: %v, %q", err, errOut)
		}

		// users role NAME admin|member, and the last admin.
		failRun(t, env, "last active administrator", "users", "role", "Boss Ünal", "member")
		failRun(t, env, "last active administrator", "users", "disable", "Boss Ünal")
		failRun(t, env, "last active administrator", "users", "remove", "Boss Ünal", "--yes")
		mustRun(t, env, "users", "role", "alice", "admin")
		mustRun(t, env, "users", "role", "Boss Ünal", "member")
		if r := usersJSON(t, env); r["alice"].Role != datachat.RoleAdmin || r["Boss Ünal"].Role != datachat.RoleMember {
			t.Errorf("roles after the changes: alice %s, Boss %s", r["alice"].Role, r["Boss Ünal"].Role)
		}
		if _, errOut, err := runMain(t, env, "users", "role", "alice", "admin"); err != nil || !strings.Contains(errOut, "already an admin") {
			t.Errorf("users role of the role a user has: %v, %q", err, errOut)
		}

		// users remove NAME [--yes]: asks first.
		if _, errOut, err := runMainIn(t, env, "n\n", "users", "remove", "carol"); err == nil || !strings.Contains(errOut, "[y/N]") {
			t.Errorf("users remove answered n: %v, stderr %q; want it refused after asking", err, errOut)
		}
		if _, _, err := runMainIn(t, env, "", "users", "remove", "carol"); err == nil {
			t.Errorf("users remove with no answer: removed")
		}
		if _, ok := usersJSON(t, env)["carol"]; !ok {
			t.Fatalf("carol removed without a yes")
		}
		if _, _, err := runMainIn(t, env, "y\n", "users", "remove", "carol"); err != nil {
			t.Fatalf("users remove answered y: %v", err)
		}
		mustRun(t, env, "users", "remove", "dave", "--yes")
		rows = usersJSON(t, env)
		if _, ok := rows["carol"]; ok || len(rows) != 2 {
			t.Errorf("users after the removals: %v", rows)
		}
		if _, _, err := st.Authenticate(t.Context(), datachat.HashAPIKey(carolKey)); datachat.ErrorCode(err) != datachat.EUNAUTHORIZED {
			t.Errorf("a removed user's key: %v", err)
		}
		for _, sub := range []string{"disable", "enable", "reset", "remove"} {
			failRun(t, env, `no user named "carol"`, "users", sub, "carol")
		}
		failRun(t, env, `no user named "Alice"`, "users", "role", "Alice", "member") // names are exact

		// Each change is in the audit log, as made by the command.
		for kind, targets := range map[string][]string{
			"user.invited":  {"dave", "Boss Ünal", "alice"},
			"user.reset":    {"carol", "dave", "dave"},
			"user.disabled": {"carol"},
			"user.changed":  {"Boss Ünal", "alice", "carol"},
			"user.removed":  {"dave", "carol"},
		} {
			evs := auditJSON(t, env, "--kind", kind)
			var got []string
			for _, e := range evs {
				got = append(got, e.Target)
				if !strings.Contains(e.Detail, "by `datachat users ") {
					t.Errorf("%s record %q does not say the command made it", kind, e.Detail)
				}
			}
			if strings.Join(got, ",") != strings.Join(targets, ",") {
				t.Errorf("audit --kind %s: targets %v, want %v", kind, got, targets)
			}
		}
	})
}

// TestUsersPublicURL: with DATACHAT_PUBLIC_URL, invite URLs point there.
func TestUsersPublicURL(t *testing.T) {
	env := testEnv(t, map[string]string{"DATACHAT_PUBLIC_URL": "https://chat.example.com/"})
	inviteToken(t, mustRun(t, env, "users", "add", "alice"), "https://chat.example.com")
	inviteToken(t, mustRun(t, env, "users", "reset", "alice"), "https://chat.example.com")
}

// TestUsersCommandLine: wrong command lines are refused with the usage
// (exit 2), help is on stdout (exit 0), and a declined removal fails
// (exit 1), run as the binary.
func TestUsersCommandLine(t *testing.T) {
	bin := datachatBinary(t)
	dir := t.TempDir()
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "DATACHAT_DATA_DIR="+dir)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	for _, args := range [][]string{
		{"users"},
		{"users", "rename", "alice"},
		{"users", "add"},
		{"users", "add", "alice", "bob"},
		{"users", "add", "alice", "--owner"},
		{"users", "list", "alice"},
		{"users", "role", "alice"},
		{"users", "role", "alice", "owner"},
		{"users", "remove"},
		{"users", "disable", "--yes", "alice"},
	} {
		if out, errOut, code := run("", args...); code != 2 || out != "" || !strings.Contains(errOut, "Usage: datachat users") {
			t.Errorf("datachat %s: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", strings.Join(args, " "), code, out, errOut)
		}
	}
	for _, args := range [][]string{{"users", "--help"}, {"help", "users"}, {"users", "add", "--help"}} {
		if out, _, code := run("", args...); code != 0 || !strings.Contains(out, "users add NAME [--admin]") {
			t.Errorf("datachat %s: exit %d, stdout %q; want the usage", strings.Join(args, " "), code, out)
		}
	}
	if out, _, code := run("", "help"); code != 0 || !strings.Contains(out, "users add NAME [--admin]") {
		t.Errorf("datachat help does not list users: %q", out)
	}
	if _, _, code := run("", "users", "add", "alice"); code != 0 {
		t.Fatalf("users add: exit %d", code)
	}
	if _, errOut, code := run("no\n", "users", "remove", "alice"); code != 1 || !strings.Contains(errOut, "was not removed") {
		t.Errorf("users remove, declined: exit %d, %q; want 1", code, errOut)
	}
	if out, _, code := run("", "users", "list"); code != 0 || !strings.Contains(out, "alice") {
		t.Errorf("users list after a declined remove: exit %d, %q", code, out)
	}
}

// serveStdout starts serve, stops it, and returns what it printed and the
// address it listened on.
func serveStdout(t *testing.T, env func(string) (string, bool)) (string, string) {
	t.Helper()
	var stdout bytes.Buffer
	m := &Main{Env: env, Stdout: &stdout, Stderr: io.Discard}
	err := m.ParseFlags(context.Background(), []string{"serve"})
	if err == nil {
		err = m.Run(context.Background())
	}
	addr := m.Addr()
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	return stdout.String(), addr
}

// TestServeFirstStart: serve's first start, with no users, creates the
// administrator admin and prints a one-time setup URL on the address it
// listens on; a restart before anyone signed in prints how to get a new one
// instead of another URL; once someone can sign in, it prints nothing.
func TestServeFirstStart(t *testing.T) {
	forEachDB(t, nil, func(t *testing.T, env func(string) (string, bool)) {
		out, addr := serveStdout(t, env)
		re := regexp.MustCompile(`\n  (http://[^/\s]+)/#invite=([A-Za-z0-9_-]{43})\n`)
		match := re.FindStringSubmatch(out)
		if match == nil || match[1] != "http://"+addr || !strings.Contains(out, "created the administrator admin") || !strings.Contains(out, "users reset admin") {
			t.Fatalf("serve's first start printed %q; want a setup URL on %s", out, addr)
		}

		// Restarted before the URL was used: no new URL, but the way to one.
		if out, _ := serveStdout(t, env); strings.Contains(out, "#invite=") || !strings.Contains(out, "No one can sign in yet") || !strings.Contains(out, "datachat users reset admin") {
			t.Errorf("a restart before the setup URL was used printed %q", out)
		}
		st := storeOf(t, env)
		a, err := useInvite(t, st, match[2]) // the first URL still works
		if err != nil || a.Name != "admin" || a.Role != datachat.RoleAdmin {
			t.Fatalf("the setup URL after a restart: %+v, %v", a, err)
		}
		if out, _ := serveStdout(t, env); out != "" {
			t.Errorf("a start with an admin who signed in printed %q", out)
		}
		if evs := auditJSON(t, env, "--kind", "user.invited"); len(evs) != 1 || evs[0].Target != "admin" {
			t.Errorf("the setup's audit records: %+v, want one, of admin", evs)
		}
	})
}

// TestUsersDisableEndsOpenSockets: `datachat users disable`, beside serve,
// closes the user's WebSocket within about a second (4401, saying the
// account was disabled), refuses their key, and leaves others alone;
// `users remove` then deletes their datasets' files.
func TestUsersDisableEndsOpenSockets(t *testing.T) {
	forEachDB(t, nil, func(t *testing.T, env func(string) (string, bool)) {
		m, _ := startServe(t, env)
		base := "http://" + m.Addr()
		alice := strings.TrimSpace(mustRun(t, env, "keys", "create", "--user", "alice"))
		bob := strings.TrimSpace(mustRun(t, env, "keys", "create", "--user", "bob"))
		aliceConv, bobConv := newConversation(t, base, alice), newConversation(t, base, bob)
		if st, res := upload(t, base, alice, aliceConv, testfiles.Penguins(t, t.TempDir())); st != 201 {
			t.Fatalf("upload: HTTP %d %v", st, res)
		}
		dataDir, _ := env("DATACHAT_DATA_DIR")
		files := func() int {
			t.Helper()
			list, err := os.ReadDir(filepath.Join(dataDir, "datasets"))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range list {
				if !strings.HasPrefix(e.Name(), ".") { // .tmp: uploads on their way
					n++
				}
			}
			return n
		}
		if files() != 1 {
			t.Fatalf("%d dataset files after the upload, want 1", files())
		}
		gone, stays := dialWS(t, base, alice, aliceConv), dialWS(t, base, bob, bobConv)

		mustRun(t, env, "users", "disable", "alice")
		gone.closedWith4401(t, "users disable", datachat.ErrUserDisabled.Message)
		if st, body := do(t, "GET", base+"/api/conversations", alice, ""); st != 401 {
			t.Errorf("the disabled user's key: %d %v, want 401", st, body)
		}
		stays.stillServed(t, base, bob, "another user's key")

		mustRun(t, env, "users", "remove", "alice", "--yes")
		if n := files(); n != 0 {
			t.Errorf("%d dataset files after users remove, want none", n)
		}
		if st, _ := do(t, "GET", base+"/api/conversations/"+bobConv, bob, ""); st != 200 {
			t.Errorf("bob's conversation after alice was removed: %d", st)
		}
	})
}

func TestInviteBase(t *testing.T) {
	for _, tc := range []struct{ public, addr, want string }{
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"", "[::]:8080", "http://127.0.0.1:8080"},
		{"", ":8080", "http://127.0.0.1:8080"},
		{"", "[::1]:9000", "http://[::1]:9000"},
		{"", "chat.internal:80", "http://chat.internal:80"},
		{"https://chat.example.com", "0.0.0.0:8080", "https://chat.example.com"},
	} {
		m := &Main{Config: &config.Config{PublicURL: tc.public}}
		if got := m.inviteBase(tc.addr); got != tc.want {
			t.Errorf("inviteBase(%q) with DATACHAT_PUBLIC_URL=%q: %q, want %q", tc.addr, tc.public, got, tc.want)
		}
	}
}

// TestKeysCreateRefusesBadNames: keys create makes users too, under the
// same rules for names as users add.
func TestKeysCreateRefusesBadNames(t *testing.T) {
	env := testEnv(t, nil)
	failRun(t, env, "keys create: The user name", "keys", "create", "--user", "bob\x1b]0;pwned\x07")
	failRun(t, env, "keys create: The user name", "keys", "create", "--user", "b\xffob")
	if out := mustRun(t, env, "users", "list", "--json"); out != "" {
		t.Errorf("users after refused keys create: %q", out)
	}
}
