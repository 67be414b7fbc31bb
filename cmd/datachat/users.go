package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"datachat"
)

const usersUsage = `Usage: datachat users add NAME [--admin]      add a user: prints their one-time invite URL
       datachat users list [--json]           name, role, how they sign in, status, last seen
       datachat users disable NAME            sign them out everywhere and refuse their keys
       datachat users enable NAME             let a disabled user in again
       datachat users reset NAME              a new invite URL, to set a new password
       datachat users remove NAME [--yes]     remove them and everything they own
       datachat users role NAME admin|member  change their role

Users sign in to the web page with a name and password, or through single
sign-on (DATACHAT_OIDC_ISSUER), and use API keys (datachat keys) for the API.
An admin manages users, keys and database sources and sees usage and the
audit log; a member manages their own conversations, datasets, documents
and keys.

add and reset print a URL (DATACHAT_PUBLIC_URL, or the address serve listens
on, then #invite=…) that sets the user's password and signs them in: it works
once, for 7 days; a newer one replaces it. Give it to the user in person or
over a channel you trust. A user who has no password yet signs in with API
keys, as before passwords existed.

disable ends the user's sessions and cancels their invite; their keys are
refused until they are enabled (a running serve cuts their open requests and
WebSockets within DATACHAT_AUTH_CHECK_INTERVAL). remove deletes the user with
their conversations, datasets, documents, keys and shares; the audit log
keeps its records. It asks first unless --yes is given. The last active admin
cannot be disabled, removed or made a member. Every change is recorded in the
audit log.
`

// usersFlags defines the flags of a users subcommand.
func usersFlags(fs *flag.FlagSet, sub string, f *cmdFlags) {
	switch sub {
	case "add":
		fs.BoolVar(&f.admin, "admin", false, "make the user an admin (default: a member)")
	case "list":
		fs.BoolVar(&f.json, "json", false, "print each user as a JSON object, one a line")
	case "remove":
		fs.BoolVar(&f.yes, "yes", false, "remove without asking")
	}
}

// usersSubs are the users subcommands and the arguments each takes.
var usersSubs = map[string]string{
	"add": "NAME", "list": "", "disable": "NAME", "enable": "NAME", "reset": "NAME", "remove": "NAME", "role": "NAME ROLE",
}

// parseUsers reads `users SUB`'s flags and arguments, flags before or after
// them.
func (m *Main) parseUsers(args []string) error {
	f := &m.flags
	const want = "want add, list, disable, enable, reset, remove or role"
	if len(args) == 0 {
		return &usageError{"users: " + want, usersUsage}
	}
	switch sub := args[0]; {
	case sub == "-h" || sub == "-help" || sub == "--help" || sub == "help":
		fmt.Fprint(m.Stdout, usersUsage)
		return flag.ErrHelp
	case usersSubs[sub] != "" || sub == "list":
		f.sub, args = sub, args[1:]
	default:
		return &usageError{fmt.Sprintf("users: unknown subcommand %q: %s", sub, want), usersUsage}
	}
	fs := commandFlags("users", f.sub, f)
	usage := helpText("users", fs)
	var err error
	if m.Args, err = m.parseArgs(fs, args, usage); err != nil {
		return err
	}
	wantArgs := strings.Fields(usersSubs[f.sub])
	if len(m.Args) != len(wantArgs) {
		if len(wantArgs) == 0 {
			return &usageError{fmt.Sprintf("users %s takes no arguments, got %q", f.sub, m.Args), usage}
		}
		return &usageError{fmt.Sprintf("users %s: want %s: datachat users %s %s", f.sub, usersSubs[f.sub], f.sub, usersSubs[f.sub]), usage}
	}
	if f.sub == "role" && !datachat.Role(m.Args[1]).Valid() {
		return &usageError{fmt.Sprintf("users role: %q is not a role: want admin or member", m.Args[1]), usage}
	}
	return nil
}

func (m *Main) runUsers(ctx context.Context) error {
	st, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	sub := m.flags.sub
	if sub == "list" {
		return m.usersList(ctx, st)
	}
	if sub == "add" {
		return m.usersAdd(ctx, st, m.Args[0])
	}
	a, err := st.AccountByName(ctx, m.Args[0])
	if datachat.ErrorCode(err) == datachat.ENOTFOUND {
		return fmt.Errorf("users %s: there is no user named %q (datachat users list shows them)", sub, m.Args[0])
	}
	if err != nil {
		return fmt.Errorf("users %s: %w", sub, err)
	}
	switch sub {
	case "disable":
		err = m.usersDisable(ctx, st, a)
	case "enable":
		err = m.usersEnable(ctx, st, a)
	case "reset":
		err = m.usersReset(ctx, st, a)
	case "remove":
		err = m.usersRemove(ctx, st, a)
	case "role":
		err = m.usersRole(ctx, st, a, datachat.Role(m.Args[1]))
	}
	if err != nil && datachat.ErrorCode(err) != datachat.EINTERNAL {
		// The store's own words (the last admin, a name taken…).
		return fmt.Errorf("users %s: %s", sub, datachat.ErrorMessage(err))
	}
	return err
}

// shown is a name as a terminal shows it safely, on one line.
func shown(name string) string { return datachat.AuditLine(name, 0) }

// inviteBase is where invite URLs point: DATACHAT_PUBLIC_URL, or else
// http:// and the address serve listens on, addr (the configured one for a
// command, the one actually listened on for serve), with an unspecified
// host (0.0.0.0, ::, none) shown as 127.0.0.1.
func (m *Main) inviteBase(addr string) string {
	if m.Config.PublicURL != "" {
		return m.Config.PublicURL
	}
	if h, port, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return "http://" + addr
}

// newToken returns a new invite token: 32 random bytes, base64url.
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// invite gives a a new invite (replacing any earlier one), records it in the
// audit log as kind with detail, and returns its URL under base and when it
// expires. When the record cannot be written, the invite is cancelled and
// undo (if not nil) runs: an invite gives access.
func (m *Main) invite(ctx context.Context, st datachat.Store, a *datachat.Account, base, kind, detail string, undo func(context.Context) error) (string, time.Time, error) {
	token := newToken()
	inv := &datachat.Invite{UserID: a.ID, Hash: datachat.HashAPIKey(token)}
	if err := st.CreateInvite(ctx, inv); err != nil {
		return "", time.Time{}, err
	}
	detail = fmt.Sprintf("%s; the invite works once, until %s", detail, inv.ExpiresAt.Format(time.RFC3339))
	err := m.record(ctx, &datachat.AuditEvent{Kind: kind, Outcome: datachat.AuditOK, Target: a.Name, Detail: detail},
		func(ctx context.Context) error {
			if err := cancelInvite(ctx, st, a.ID); err != nil {
				return err
			}
			if undo != nil {
				return undo(ctx)
			}
			return nil
		})
	if err != nil {
		return "", time.Time{}, err
	}
	return base + "/#invite=" + token, inv.ExpiresAt, nil
}

// cancelInvite makes a user's unused invite stop working: it is replaced
// by one, already expired, whose token nobody has.
func cancelInvite(ctx context.Context, st datachat.Store, userID string) error {
	return st.CreateInvite(ctx, &datachat.Invite{UserID: userID, Hash: datachat.HashAPIKey(newToken()), ExpiresAt: time.Now()})
}

func (m *Main) usersAdd(ctx context.Context, st datachat.Store, name string) error {
	role := datachat.RoleMember
	if m.flags.admin {
		role = datachat.RoleAdmin
	}
	a := &datachat.Account{User: datachat.User{Name: name}, Role: role}
	if err := st.CreateAccount(ctx, a); err != nil {
		if datachat.ErrorCode(err) == datachat.ECONFLICT {
			return fmt.Errorf("users add: a user named %s already exists: `datachat users reset %s` gives them a new invite URL", shown(name), shellQuote(name))
		}
		if datachat.ErrorCode(err) == datachat.EINVALID {
			return fmt.Errorf("users add: %s", datachat.ErrorMessage(err))
		}
		return fmt.Errorf("users add: %w", err)
	}
	url, expires, err := m.invite(ctx, st, a, m.inviteBase(m.Config.Addr), datachat.AuditUserInvited, "a new "+string(role),
		func(ctx context.Context) error {
			// The user goes too, unless they are the last admin (and so
			// the only one): then they stay, without a way in.
			if err := st.DeleteUser(ctx, a.ID); datachat.ErrorCode(err) != datachat.ECONFLICT {
				return err
			}
			return nil
		})
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, url)
	fmt.Fprintf(m.Stderr, "added the %s %s. The URL above sets their password and signs them in; it works once, until %s. Give it to them over a channel you trust.\n",
		role, shown(name), expires.Local().Format(time.RFC1123))
	return nil
}

// signIn says how a user signs in, for users list: with a password, single
// sign-on, API keys only, or not at all yet.
func signIn(a *datachat.Account, keys int) string {
	var ways []string
	if a.HasPassword {
		ways = append(ways, "password")
	}
	if a.SSO {
		ways = append(ways, "sso")
	}
	switch {
	case len(ways) > 0:
		return strings.Join(ways, ", ")
	case keys > 0:
		return "key only"
	}
	return "none yet"
}

func (m *Main) usersList(ctx context.Context, st datachat.Store) error {
	accounts, err := st.Accounts(ctx)
	if err != nil {
		return err
	}
	keys, err := st.APIKeys(ctx)
	if err != nil {
		return err
	}
	live := map[string]int{}
	for _, k := range keys {
		if k.RevokedAt == nil {
			live[k.UserID]++
		}
	}
	if m.flags.json {
		enc := json.NewEncoder(m.Stdout)
		for _, a := range accounts {
			row := struct {
				*datachat.Account
				SignIn string `json:"sign_in"`
				Keys   int    `json:"keys"`
			}{a, signIn(a, live[a.ID]), live[a.ID]}
			if err := enc.Encode(row); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSIGN-IN\tSTATUS\tLAST SEEN")
	for _, a := range accounts {
		status := "active"
		if a.DisabledAt != nil {
			status = "disabled " + a.DisabledAt.Format(time.DateOnly)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", shown(a.Name), a.Role, signIn(a, live[a.ID]), status, timeOrDash(a.LastSeenAt))
	}
	return tw.Flush()
}

func (m *Main) usersDisable(ctx context.Context, st datachat.Store, a *datachat.Account) error {
	if a.DisabledAt != nil {
		fmt.Fprintf(m.Stderr, "%s was already disabled, since %s\n", shown(a.Name), a.DisabledAt.Format(time.RFC3339))
		return nil
	}
	if err := st.DisableUser(ctx, a.ID, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "disabled %s: signed out everywhere, their invite cancelled, their API keys refused until `datachat users enable %s` (a running serve ends their open requests within DATACHAT_AUTH_CHECK_INTERVAL)\n",
		shown(a.Name), shellQuote(a.Name))
	return m.record(ctx, &datachat.AuditEvent{Kind: datachat.AuditUserDisabled, Outcome: datachat.AuditOK, Target: a.Name,
		Detail: "signed out everywhere, invite cancelled, API keys refused"}, nil)
}

func (m *Main) usersEnable(ctx context.Context, st datachat.Store, a *datachat.Account) error {
	if a.DisabledAt == nil {
		fmt.Fprintf(m.Stderr, "%s is not disabled\n", shown(a.Name))
		return nil
	}
	if err := st.EnableUser(ctx, a.ID); err != nil {
		return err
	}
	err := m.record(ctx, &datachat.AuditEvent{Kind: datachat.AuditUserChanged, Outcome: datachat.AuditOK, Target: a.Name,
		Detail: "enabled again: their password, single sign-on and API keys work again"},
		func(ctx context.Context) error { return st.DisableUser(ctx, a.ID, time.Now()) })
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "enabled %s: they may sign in again, and their API keys work again (their sessions of before were ended: they sign in anew)\n", shown(a.Name))
	return nil
}

func (m *Main) usersReset(ctx context.Context, st datachat.Store, a *datachat.Account) error {
	url, expires, err := m.invite(ctx, st, a, m.inviteBase(m.Config.Addr), datachat.AuditUserReset,
		"a new invite; earlier ones no longer work", nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, url)
	fmt.Fprintf(m.Stderr, "a new invite URL for %s (above): it works once, until %s, and earlier ones no longer do. Their password, if they have one, works until they use it; using it signs them out everywhere else.\n",
		shown(a.Name), expires.Local().Format(time.RFC1123))
	if a.DisabledAt != nil {
		fmt.Fprintf(m.Stderr, "%s is disabled: the URL works once they are enabled (datachat users enable %s)\n", shown(a.Name), shellQuote(a.Name))
	}
	return nil
}

// lastAdmin reports whether a is the last active admin.
func lastAdmin(ctx context.Context, st datachat.Store, a *datachat.Account) (bool, error) {
	if a.Role != datachat.RoleAdmin || a.DisabledAt != nil {
		return false, nil
	}
	all, err := st.Accounts(ctx)
	if err != nil {
		return false, err
	}
	for _, o := range all {
		if o.ID != a.ID && o.Role == datachat.RoleAdmin && o.DisabledAt == nil {
			return false, nil
		}
	}
	return true, nil
}

func (m *Main) usersRemove(ctx context.Context, st datachat.Store, a *datachat.Account) error {
	// Said before asking; the store refuses it anyway.
	if last, err := lastAdmin(ctx, st, a); err != nil || last {
		if err == nil {
			err = datachat.Errorf(datachat.ECONFLICT, "%s is the last active administrator, and someone must be able to manage the server: make another user an administrator first (datachat users role NAME admin)", shown(a.Name))
		}
		return err
	}
	convs, err := st.Conversations(ctx, a.ID)
	if err != nil {
		return err
	}
	keys, err := st.APIKeys(ctx)
	if err != nil {
		return err
	}
	nkeys := 0
	for _, k := range keys {
		if k.UserID == a.ID {
			nkeys++
		}
	}
	what := fmt.Sprintf("%s and %s", plural(len(convs), "conversation"), plural(nkeys, "API key"))
	if !m.flags.yes {
		fmt.Fprintf(m.Stderr, "Remove the %s %s with their %s, datasets and documents? This cannot be undone. [y/N] ", a.Role, shown(a.Name), what)
		if m.Stdin == nil || !readYes(m.Stdin) {
			return fmt.Errorf("users remove: %s was not removed (answer y, or pass --yes)", shown(a.Name))
		}
	}
	// Their files go with them: the workspace removes the datasets' files
	// and the documents' index entries once the store has removed the rows.
	ws, err := m.newWorkspace(st, m.Config.DataDir, m.Config.Retrieval)
	if err != nil {
		return err
	}
	if err := ws.DeleteUser(ctx, a.ID); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "removed %s with their %s (a running serve ends their open requests within DATACHAT_AUTH_CHECK_INTERVAL)\n", shown(a.Name), what)
	return m.record(ctx, &datachat.AuditEvent{Kind: datachat.AuditUserRemoved, Outcome: datachat.AuditOK, Target: a.Name,
		Detail: fmt.Sprintf("the %s, with %s", a.Role, what)}, nil)
}

func (m *Main) usersRole(ctx context.Context, st datachat.Store, a *datachat.Account, role datachat.Role) error {
	if a.Role == role {
		fmt.Fprintf(m.Stderr, "%s is already %s %s\n", shown(a.Name), article(role), role)
		return nil
	}
	if err := st.SetRole(ctx, a.ID, role); err != nil {
		return err
	}
	var undo func(context.Context) error
	if role == datachat.RoleAdmin { // access given: taken back if unrecorded
		undo = func(ctx context.Context) error { return st.SetRole(ctx, a.ID, a.Role) }
	}
	err := m.record(ctx, &datachat.AuditEvent{Kind: datachat.AuditUserChanged, Outcome: datachat.AuditOK, Target: a.Name,
		Detail: fmt.Sprintf("role %s → %s", a.Role, role)}, undo)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "%s is now %s %s\n", shown(a.Name), article(role), role)
	return nil
}

// article is "an" before admin, "a" before member.
func article(r datachat.Role) string {
	if r == datachat.RoleAdmin {
		return "an"
	}
	return "a"
}

// firstUser is serve's start with no users at all: it creates the user
// admin, an admin, and prints a one-time setup URL (an invite, as users add
// prints) on stdout. The token rides in the URL's fragment, so it never
// reaches a log. An install that has users is left as it is, but told when
// no one could sign in, or no one could manage it.
func (m *Main) firstUser(ctx context.Context, st datachat.Store) error {
	accounts, err := st.Accounts(ctx)
	if err != nil {
		return err
	}
	if len(accounts) > 0 {
		return m.checkSignIn(ctx, st, accounts)
	}
	a := &datachat.Account{User: datachat.User{Name: "admin"}, Role: datachat.RoleAdmin}
	if err := st.CreateAccount(ctx, a); err != nil {
		if datachat.ErrorCode(err) == datachat.ECONFLICT {
			return nil // another serve on the same database, starting at once, made it
		}
		return err
	}
	url, expires, err := m.invite(ctx, st, a, m.inviteBase(m.Addr()), datachat.AuditUserInvited,
		"the first admin, made because there were no users", nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "No users yet: created the administrator admin. Set its password at\n\n  %s\n\nThis link works once, until %s; `datachat users reset admin` makes a new one. Invite others with `datachat users add NAME` or from the admin page.\n",
		url, expires.Local().Format(time.RFC1123))
	m.Logger.Info("first user admin created: its setup URL is on standard output")
	return nil
}

// checkSignIn warns when no active user can sign in (no password, single
// sign-on or API key), or no active admin is left to manage the server.
func (m *Main) checkSignIn(ctx context.Context, st datachat.Store, accounts []*datachat.Account) error {
	keys, err := st.APIKeys(ctx)
	if err != nil {
		return err
	}
	withKey := map[string]bool{}
	for _, k := range keys {
		if k.RevokedAt == nil {
			withKey[k.UserID] = true
		}
	}
	var admin string
	anyone := false
	for _, a := range accounts {
		if a.DisabledAt != nil {
			continue
		}
		if a.Role == datachat.RoleAdmin && admin == "" {
			admin = a.Name
		}
		anyone = anyone || a.HasPassword || a.SSO || withKey[a.ID]
	}
	switch {
	case admin == "":
		m.Logger.Warn("no active administrator: no one can manage users or sources from the page; make one with `datachat users role NAME admin`")
	case !anyone:
		msg := fmt.Sprintf("No one can sign in yet: no user has a password, single sign-on or an API key. `datachat users reset %s` prints a new setup URL for the administrator %s.", shellQuote(admin), shown(admin))
		fmt.Fprintln(m.Stdout, msg)
		m.Logger.Warn("no one can sign in yet", slog.String("help", msg))
	}
	return nil
}
