package datachat

// Credential is what authenticated a request: today an API key; a sign-in
// session is another Kind beside it. Kind and ID name it; UserID is whose
// it is. The server keeps its requests and WebSockets by Credential, and
// ends them when [KeyStore.RevokedCredentials] finds it no longer valid.
type Credential struct {
	Kind   CredentialKind
	ID     string // the API key's id (as `keys list` shows it)
	UserID string
}

// CredentialKind says what a Credential is.
type CredentialKind string

// Kinds of credentials.
const (
	CredentialAPIKey CredentialKind = "api_key"
)

// Revocation is a credential that no longer authenticates, and why: Reason
// is an EUNAUTHORIZED *Error whose message tells the user.
type Revocation struct {
	Credential Credential
	Reason     error
}

// ErrAPIKeyRevoked is why a revoked (or deleted) API key stopped
// authenticating: the cause with which its open requests and WebSockets are
// ended.
var ErrAPIKeyRevoked = &Error{Code: EUNAUTHORIZED, Message: "The API key was revoked. Use another key."}
