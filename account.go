package datachat

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Role is what a user may do on the server. An admin manages users, keys,
// database sources and their grants, and sees usage and the audit log; a
// member manages only their own conversations, datasets, documents and keys.
type Role string

// Roles.
const (
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleMember }

// Account is a user as the people who manage the server see it: the user,
// their role, and how they sign in. The store keeps a user's password only
// as its hash (PasswordHash), never returned in a listing.
type Account struct {
	User
	Role Role `json:"role"`
	// Email is the address single sign-on gave, "" for others.
	Email string `json:"email,omitempty"`
	// HasPassword: an invite was used (or a password set); a user without
	// one signs in with an API key, as before accounts existed.
	HasPassword bool `json:"has_password"`
	// SSO: the user signs in through the OpenID Connect provider.
	SSO bool `json:"sso"`
	// DisabledAt is when the user was disabled: nil for an active user.
	// A disabled user's sessions and keys no longer authenticate.
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
	// TokensPerDay is the user's own token budget, nil for the server's
	// (DATACHAT_TOKENS_PER_DAY); 0 is no limit.
	TokensPerDay *int64 `json:"tokens_per_day,omitempty"`
	// LastSeenAt is the newest use of any of the user's sessions or keys.
	LastSeenAt *time.Time `json:"last_seen_at,omitempty"`
}

// Identity is who single sign-on says a person is: the provider (Issuer)
// and its stable id for them (Subject). A user is found by it, never by
// name or email, which the provider may change or reuse.
type Identity struct {
	Issuer  string
	Subject string
	Email   string
}

// Invite is a one-time link that lets its user set a password (a new user's
// first, or a reset's). Only the SHA-256 hash of its token is kept
// ([HashAPIKey]); it is used once, and not after ExpiresAt.
type Invite struct {
	ID        string
	UserID    string
	Hash      string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// InviteTTL is how long an invite can be used.
const InviteTTL = 7 * 24 * time.Hour

// Session is a browser's sign-in: its cookie holds a random token of which
// only the SHA-256 hash is kept ([HashAPIKey]). It lasts until signed out,
// until unused for the idle time the server sets (DATACHAT_SESSION_IDLE),
// or until its user is disabled, removed or changes password.
type Session struct {
	ID     string
	UserID string
	Hash   string
	// Method is how the user signed in: "password" or "oidc".
	Method     string
	CreatedAt  time.Time
	LastSeenAt time.Time
}

// CredentialSession is the Credential kind of a browser session; its ID is
// the Session's ID.
const CredentialSession CredentialKind = "session"

// Why a session stopped authenticating: the causes with which its open
// requests and WebSockets are ended.
var (
	ErrSessionEnded = &Error{Code: EUNAUTHORIZED, Message: "You were signed out. Sign in again."}
	ErrUserDisabled = &Error{Code: EUNAUTHORIZED, Message: "Your account was disabled. Ask an administrator."}
)

// ErrInviteInvalid refuses an invite that does not exist, was used, expired,
// or whose user is disabled: one answer for each, so that a token cannot be
// probed ([AccountStore.UseInvite]).
var ErrInviteInvalid = &Error{Code: EUNAUTHORIZED, Message: "This invite link is invalid, used or expired. Ask an administrator for a new one."}

// MaxUserNameBytes bounds a user's name.
const MaxUserNameBytes = 200

// CheckUserName refuses (EINVALID) a name no user may have: an empty one,
// one longer than MaxUserNameBytes, one that is not valid UTF-8, holds a
// control character, or begins or ends with white space (two names that
// look the same). Names are otherwise kept exactly: "Alice" and "alice" are
// two users.
func CheckUserName(name string) error {
	switch {
	case name == "":
		return Errorf(EINVALID, "The user name is empty.")
	case len(name) > MaxUserNameBytes:
		return Errorf(EINVALID, "The user name is longer than %d bytes.", MaxUserNameBytes)
	case !utf8.ValidString(name):
		return Errorf(EINVALID, "The user name is not valid UTF-8 text.")
	case strings.ContainsFunc(name, unicode.IsControl):
		return Errorf(EINVALID, "The user name %q holds a control character.", name)
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return Errorf(EINVALID, "The user name %q begins or ends with white space.", name)
	}
	return nil
}

// UsageDay is one user's token usage on one UTC day.
type UsageDay struct {
	UserID       string    `json:"user_id"`
	UserName     string    `json:"user"`
	Day          time.Time `json:"day"` // midnight UTC
	Turns        int64     `json:"turns"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
}

// AccountStore is what accounts, sign-in and sessions keep. Every
// [Store] implements it.
//
// Names are unique and compared exactly ([CheckUserName] says which are
// refused, EINVALID). Methods taking a user id return ENOTFOUND when there is
// no such user.
type AccountStore interface {
	// Account returns the user with this id with their account;
	// AccountByName the one with this name.
	Account(ctx context.Context, userID string) (*Account, error)
	AccountByName(ctx context.Context, name string) (*Account, error)
	// Accounts lists every user, by name.
	Accounts(ctx context.Context) ([]*Account, error)
	// CreateAccount stores a new user (a.Name, a.Role; a.Email when from
	// single sign-on; a.TokensPerDay when set), filling a.ID and
	// a.CreatedAt; ECONFLICT if the name is taken, EINVALID for a name
	// [CheckUserName] refuses or an unknown role.
	CreateAccount(ctx context.Context, a *Account) error
	// SetRole changes a user's role. Demoting the last active admin is
	// refused with ECONFLICT, so that someone can always manage the server.
	SetRole(ctx context.Context, userID string, role Role) error
	// SetTokensPerDay sets a user's own token budget (nil: the server's);
	// EINVALID for a negative one.
	SetTokensPerDay(ctx context.Context, userID string, tokens *int64) error
	// DisableUser disables a user at now and deletes their sessions and
	// unused invites, in one transaction; their keys stop authenticating
	// (and authenticate again if the user is enabled). Disabling the last
	// active admin is refused with ECONFLICT.
	DisableUser(ctx context.Context, userID string, now time.Time) error
	// EnableUser enables a disabled user.
	EnableUser(ctx context.Context, userID string) error
	// DeleteUser removes a user and everything they own (conversations,
	// keys, sessions, invites, examples, shares); the audit log keeps its
	// records. Removing the last active admin is refused with ECONFLICT.
	DeleteUser(ctx context.Context, userID string) error

	// CreateInvite stores inv (UserID, Hash, ExpiresAt: when zero,
	// InviteTTL after its CreatedAt), filling ID and CreatedAt, and
	// replacing the user's earlier unused invites, which then no longer
	// work. A disabled user's invite is stored but works only once they are
	// enabled.
	CreateInvite(ctx context.Context, inv *Invite) error
	// UseInvite sets the password of the invite's user to passwordHash and
	// uses the invite up, in one transaction, and returns the user. The
	// user's sessions are deleted (a password change signs out everywhere).
	// EUNAUTHORIZED ([ErrInviteInvalid]) when no unused invite has this
	// hash, it expired before now, or its user is disabled — the same error
	// for each.
	UseInvite(ctx context.Context, hash, passwordHash string, now time.Time) (*Account, error)
	// PasswordHash returns the user of this name and their password hash
	// ("" when they have none); ENOTFOUND when there is no such user.
	PasswordHash(ctx context.Context, name string) (*Account, string, error)

	// AccountByIdentity returns the user single sign-on knows by id;
	// ENOTFOUND when none. LinkIdentity records that id is userID's
	// (ECONFLICT when id is another user's); linking it again to the same
	// user keeps the newest id.Email, which becomes the account's Email
	// when not empty.
	AccountByIdentity(ctx context.Context, id Identity) (*Account, error)
	LinkIdentity(ctx context.Context, userID string, id Identity) error

	// CreateSession stores s (UserID, Hash, Method: "password" or "oidc"),
	// filling ID, CreatedAt and LastSeenAt; EINVALID for another method or
	// an empty hash; [ErrUserDisabled] when the user is disabled, checked
	// in the same transaction, so that a session cannot outlive a
	// DisableUser running at the same time.
	CreateSession(ctx context.Context, s *Session) error
	// AuthenticateSession returns the user of the session with this hash and
	// the session as the request's Credential, and records its use at now
	// (LastSeenAt; written at most once a minute). EUNAUTHORIZED when there
	// is no such session or it was unused for idle before now (it is then
	// deleted): [ErrSessionEnded]; or its user is disabled:
	// [ErrUserDisabled]. An idle of 0 or less never ends a session.
	AuthenticateSession(ctx context.Context, hash string, now time.Time, idle time.Duration) (*Account, Credential, error)
	// DeleteSession deletes a session (signing out); deleting one that is
	// gone is not an error.
	DeleteSession(ctx context.Context, id string) error

	// TakeAttempt admits one attempt under key (a sign-in's user name or
	// address) if fewer than limit were admitted in the window ending at
	// now, as TakeRequest does for a user's requests (a limit or window of
	// 0 or less admits everything). Keys are kept as their SHA-256, any
	// bytes and length alike, apart from TakeRequest's counts, and every
	// attempt older than its window is deleted as others are taken.
	TakeAttempt(ctx context.Context, key string, now time.Time, window time.Duration, limit int) (ok bool, retryAfter time.Duration, err error)

	// UsageByDay sums token usage per user and UTC day from since on,
	// newest day first, then by user name.
	UsageByDay(ctx context.Context, since time.Time) ([]UsageDay, error)
}
