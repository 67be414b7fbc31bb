package record

import (
	"datachat"
)

// ShareColumns are the columns [Decoder.Share] reads, of shares named s
// with the user it names, u, left-joined (none for everyone).
const ShareColumns = `s.id, s.conversation_id, COALESCE(s.user_id, ''), COALESCE(u.name, ''), s.everyone, s.created_at`

// Share decodes a row of [ShareColumns].
func (dc Decoder) Share(sc Scanner) (*datachat.Share, error) {
	var s datachat.Share
	if err := sc.Scan(&s.ID, &s.ConversationID, &s.UserID, &s.UserName, &s.Everyone, dc.Time(&s.CreatedAt)); err != nil {
		return nil, err
	}
	return &s, nil
}

// SharedColumns are the columns [Decoder.SharedConversation] reads: those
// of a conversation c, its owner o's name, and when it was shared (a
// column named shared_at the query computes).
const SharedColumns = `c.id, c.user_id, c.title, c.created_at, c.updated_at, c.notes, o.name`

// SharedConversation decodes a row of [SharedColumns] followed by when it
// was shared.
func (dc Decoder) SharedConversation(sc Scanner) (*datachat.SharedConversation, error) {
	s := &datachat.SharedConversation{Conversation: &datachat.Conversation{}}
	c := s.Conversation
	if err := sc.Scan(&c.ID, &c.UserID, &c.Title, dc.Time(&c.CreatedAt), dc.Time(&c.UpdatedAt), &c.Notes,
		&s.Owner, dc.Time(&s.SharedAt)); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrShareNotFound is the ENOTFOUND of a share that the owner's
// conversation does not have.
var ErrShareNotFound = datachat.Errorf(datachat.ENOTFOUND, "share not found")

// ErrConversationNotFound is the ENOTFOUND of a conversation that is not
// the user's (nor shared with them, for a viewer).
var ErrConversationNotFound = datachat.Errorf(datachat.ENOTFOUND, "conversation not found")

// ShareLookups are the names of a share request that a user may have, to
// look up: [datachat.CheckUserName] refuses the others, which no store holds
// (and PostgreSQL could not even compare one holding NUL); they are unknown.
func ShareLookups(names []string) []string {
	var lookup []string
	for _, n := range names {
		if datachat.CheckUserName(n) == nil {
			lookup = append(lookup, n)
		}
	}
	return lookup
}

// ShareTargets checks the users a share request names, found by name in
// ids (name → id): ErrShareWithOwner when one is the owner, else the
// unknown names (in the order given) as datachat.UnknownShareUsers says.
func ShareTargets(names []string, ids map[string]string, ownerID string) error {
	var unknown []string
	for _, n := range names {
		id, ok := ids[n]
		switch {
		case !ok:
			unknown = append(unknown, n)
		case id == ownerID:
			return datachat.ErrShareWithOwner
		}
	}
	if len(unknown) > 0 {
		return datachat.UnknownShareUsers(unknown)
	}
	return nil
}
