package record

import (
	"slices"

	"datachat"
)

// CredentialIDs are the ids a store looks up to tell which of a set of
// credentials still authenticate: their users', their API keys' and their
// sessions', each list without duplicates.
type CredentialIDs struct {
	Users, APIKeys, Sessions []string
}

// SplitCredentials returns the ids of creds to look up; EINVALID for a
// credential of a kind the stores do not know.
func SplitCredentials(creds []datachat.Credential) (CredentialIDs, error) {
	var ids CredentialIDs
	for _, c := range creds {
		switch c.Kind {
		case datachat.CredentialAPIKey:
			ids.APIKeys = append(ids.APIKeys, c.ID)
		case datachat.CredentialSession:
			ids.Sessions = append(ids.Sessions, c.ID)
		default:
			return CredentialIDs{}, datachat.Errorf(datachat.EINVALID, "unknown kind of credential %q", c.Kind)
		}
		ids.Users = append(ids.Users, c.UserID)
	}
	for _, l := range []*[]string{&ids.Users, &ids.APIKeys, &ids.Sessions} {
		slices.Sort(*l)
		*l = NonNil(slices.Compact(*l))
	}
	return ids, nil
}

// Live is what a store found of [CredentialIDs]: whether each user it found
// is active (false: disabled; absent: removed), and the user of each API
// key not revoked and of each session that exists.
type Live struct {
	Users    map[string]bool
	APIKeys  map[string]string
	Sessions map[string]string
}

// NewLive returns an empty Live to fill.
func NewLive() Live {
	return Live{Users: map[string]bool{}, APIKeys: map[string]string{}, Sessions: map[string]string{}}
}

// ReadLive reads the rows of a store's credentials check into a Live: each
// row a kind ('user', 'api_key' or 'session'), an id, and
// for a user whether they are active (true spelled as active), else the
// user the key or session is of.
func ReadLive(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}, active string) (Live, error) {
	live := NewLive()
	for rows.Next() {
		var kind, id, value string
		if err := rows.Scan(&kind, &id, &value); err != nil {
			return Live{}, err
		}
		switch kind {
		case "user":
			live.Users[id] = value == active
		case "api_key":
			live.APIKeys[id] = value
		default:
			live.Sessions[id] = value
		}
	}
	return live, rows.Err()
}

// Revocations is [datachat.Store.RevokedCredentials]'s answer once a store
// has looked creds up in live. The user comes first: every credential of a
// user disabled or removed is ended with ErrUserDisabled (disabling a user
// also deletes their sessions, and the reason they are told is the
// account's). Then a key not live, or now another user's, is revoked
// (ErrAPIKeyRevoked), and a session gone, or another user's, ended
// (ErrSessionEnded).
func Revocations(creds []datachat.Credential, live Live) []datachat.Revocation {
	var out []datachat.Revocation
	for _, c := range creds {
		var reason error
		if active := live.Users[c.UserID]; !active {
			reason = datachat.ErrUserDisabled
		} else if c.Kind == datachat.CredentialSession {
			if user, ok := live.Sessions[c.ID]; !ok || user != c.UserID {
				reason = datachat.ErrSessionEnded
			}
		} else if user, ok := live.APIKeys[c.ID]; !ok || user != c.UserID {
			reason = datachat.ErrAPIKeyRevoked
		}
		if reason != nil {
			out = append(out, datachat.Revocation{Credential: c, Reason: reason})
		}
	}
	return out
}
