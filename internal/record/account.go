package record

import (
	"strings"
	"time"
	"unicode/utf8"

	"datachat"
)

// CheckRole refuses (EINVALID) a role that is neither admin nor member.
func CheckRole(r datachat.Role) error {
	if !r.Valid() {
		return datachat.Errorf(datachat.EINVALID, "Unknown role %q: want %s or %s.", r, datachat.RoleAdmin, datachat.RoleMember)
	}
	return nil
}

// CheckTokensPerDay refuses (EINVALID) a negative token budget; nil (the
// server's) and 0 (no limit) are fine.
func CheckTokensPerDay(n *int64) error {
	if n != nil && *n < 0 {
		return datachat.Errorf(datachat.EINVALID, "A token budget of %d a day: want 0 (no limit) or more.", *n)
	}
	return nil
}

// FillAccount checks a new account (its name, role and token budget) and
// gives it its id and time.
func FillAccount(a *datachat.Account) error {
	if err := datachat.CheckUserName(a.Name); err != nil {
		return err
	}
	if err := CheckRole(a.Role); err != nil {
		return err
	}
	if err := CheckTokensPerDay(a.TokensPerDay); err != nil {
		return err
	}
	if Unstorable(a.Email) {
		return datachat.Errorf(datachat.EINVALID, "The email address is not valid UTF-8 text.")
	}
	FillCreated(&a.ID, &a.CreatedAt)
	return nil
}

// FillInvite checks an invite (EINVALID without a hash) and gives it its
// id, its time and, when it has none, its expiry: InviteTTL later.
func FillInvite(inv *datachat.Invite) error {
	if inv.Hash == "" {
		return datachat.Errorf(datachat.EINVALID, "invite hash is empty")
	}
	FillCreated(&inv.ID, &inv.CreatedAt)
	if inv.ExpiresAt.IsZero() {
		inv.ExpiresAt = inv.CreatedAt.Add(datachat.InviteTTL)
	}
	FillTime(&inv.ExpiresAt)
	return nil
}

// Session sign-in methods.
const (
	MethodPassword = "password"
	MethodOIDC     = "oidc"
)

// FillSession checks a session (EINVALID without a hash or with a method
// other than password and oidc) and gives it its id and times.
func FillSession(s *datachat.Session) error {
	if s.Hash == "" {
		return datachat.Errorf(datachat.EINVALID, "session hash is empty")
	}
	if s.Method != MethodPassword && s.Method != MethodOIDC {
		return datachat.Errorf(datachat.EINVALID, "unknown sign-in method %q: want %s or %s", s.Method, MethodPassword, MethodOIDC)
	}
	FillCreated(&s.ID, &s.CreatedAt)
	s.LastSeenAt = s.CreatedAt
	return nil
}

// IdledOut reports whether a session last used at lastSeen has been unused
// for longer than idle at now; an idle of 0 or less never ends one.
func IdledOut(lastSeen, now time.Time, idle time.Duration) bool {
	return idle > 0 && now.Sub(lastSeen) > idle
}

// ErrNoUser is the ENOTFOUND of a method given a user id that no user has.
var ErrNoUser = datachat.Errorf(datachat.ENOTFOUND, "user not found")

// NameTaken is the ECONFLICT of an account whose name another user has.
func NameTaken(name string) error {
	return datachat.Errorf(datachat.ECONFLICT, "A user named %q already exists.", name)
}

// LastAdmin refuses (ECONFLICT) what would leave the server without an
// active admin; what says what was refused ("demote", "disable",
// "remove").
func LastAdmin(what, name string) error {
	return datachat.Errorf(datachat.ECONFLICT,
		"Cannot %s %s: they are the last active administrator, and someone must be able to manage the server. Make another user an administrator first.", what, name)
}

// AccountColumns are the columns [Decoder.Account] reads, of users named u
// with the identities table beside it.
const AccountColumns = `u.id, u.name, u.created_at, u.role, u.email, u.password_hash <> '',
	EXISTS (SELECT 1 FROM identities i WHERE i.user_id = u.id), u.disabled_at, u.tokens_per_day, u.last_seen_at`

// Account decodes a row of [AccountColumns].
func (dc Decoder) Account(sc Scanner) (*datachat.Account, error) {
	var a datachat.Account
	var role string
	if err := sc.Scan(&a.ID, &a.Name, dc.Time(&a.CreatedAt), &role, &a.Email, &a.HasPassword, &a.SSO,
		dc.NullTime(&a.DisabledAt), &a.TokensPerDay, dc.NullTime(&a.LastSeenAt)); err != nil {
		return nil, err
	}
	a.Role = datachat.Role(role)
	return &a, nil
}

// UsageDay decodes a row of a user's id, name, the day (midnight UTC),
// turns, input tokens and output tokens.
func (dc Decoder) UsageDay(sc Scanner) (datachat.UsageDay, error) {
	var d datachat.UsageDay
	err := sc.Scan(&d.UserID, &d.UserName, dc.Time(&d.Day), &d.Turns, &d.InputTokens, &d.OutputTokens)
	return d, err
}

// AttemptKey is how a sign-in attempt's key (a user name, an address) is
// kept: its SHA-256, so that any bytes of any length, chosen by whoever
// signs in, make a row of fixed size that every database can hold.
func AttemptKey(key string) string { return datachat.HashAPIKey(key) }

// Unstorable reports whether no stored text can equal s: s is not valid
// UTF-8 or holds NUL, which PostgreSQL's text cannot hold (it fails the
// query instead). A store looking a user up by such a name finds none.
func Unstorable(s string) bool {
	return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0
}

// CheckIdentity refuses (EINVALID) an identity without an issuer or a
// subject, or with text no store can keep.
func CheckIdentity(id datachat.Identity) error {
	if id.Issuer == "" || id.Subject == "" {
		return datachat.Errorf(datachat.EINVALID, "a single sign-on identity needs an issuer and a subject")
	}
	if Unstorable(id.Issuer) || Unstorable(id.Subject) || Unstorable(id.Email) {
		return datachat.Errorf(datachat.EINVALID, "a single sign-on identity holds text that is not valid UTF-8, or NUL")
	}
	return nil
}
