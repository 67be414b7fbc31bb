package datachat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Share lets someone other than its owner read a conversation: one named
// user (UserID, UserName), or everyone signed in to this server (Everyone).
// A viewer sees the conversation as its owner does, read-only, and may copy
// it into a conversation of their own; they never act on the owner's.
type Share struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"-"`
	UserID         string    `json:"-"`
	UserName       string    `json:"user,omitempty"`
	Everyone       bool      `json:"everyone"`
	CreatedAt      time.Time `json:"created_at"`
}

// SharedConversation is a conversation as a viewer it is shared with finds
// it: the conversation, whose it is (Owner, the owner's name), and since
// when the viewer may read it (SharedAt: the oldest share naming them or
// everyone).
type SharedConversation struct {
	*Conversation
	Owner    string    `json:"owner"`
	SharedAt time.Time `json:"shared_at"`
}

// MaxShareUsers is the most users one [ShareStore.CreateShares] names: a
// team larger than this shares with everyone.
const MaxShareUsers = 500

// ShareCopy says what [ShareStore.CopyShared] copies from ConversationID, a
// conversation shared with ViewerID, into a new conversation of the viewer
// titled Title: its notes and every message (with its parts, tool calls,
// citations and number checks) always; of its datasets, documents and
// attached sources, those listed here.
type ShareCopy struct {
	ViewerID       string
	ConversationID string
	Title          string
	// Datasets maps the id of each dataset to copy to the Path of its
	// file's copy, which the caller made (the copy reads its own file, not
	// the owner's).
	Datasets map[string]string
	// Documents are the ids of the documents to copy, with their chunks.
	Documents []string
	// Sources are the names of the attached sources the copy has attached
	// too (the caller checked the viewer is granted them).
	Sources []string
}

// ShareCopied is what [ShareStore.CopyShared] made: the new conversation,
// and its datasets and documents by the id of the one each copies. A dataset
// or document asked for that was gone by then (its owner removed it) is not
// among them.
type ShareCopied struct {
	Conversation *Conversation
	Datasets     map[string]*Dataset
	Documents    map[string]*Document
}

// ShareStore keeps who may read which conversation. Every [Store]
// implements it. A share goes with its conversation and with the user it
// names; a viewer never sees a conversation of a disabled owner.
type ShareStore interface {
	// CreateShares shares the owner's conversation with the users named and,
	// when everyone is set, with everyone signed in to this server, in one
	// transaction. It is idempotent: a share that exists is returned as it
	// is. shares holds the share for everyone first (when asked), then one
	// per name in the order named (a name given twice once); created holds
	// those of them that are new. Errors: ENOTFOUND when the conversation is
	// not the owner's; EINVALID, sharing nothing, when there is no one to
	// share with, more than [MaxShareUsers] names, a name no user has (the
	// message names each) or the owner's own name.
	CreateShares(ctx context.Context, ownerID, conversationID string, users []string, everyone bool) (shares, created []*Share, err error)
	// Shares lists the shares of the owner's conversation, oldest first;
	// ENOTFOUND when it is not the owner's.
	Shares(ctx context.Context, ownerID, conversationID string) ([]*Share, error)
	// DeleteShare revokes a share of the owner's conversation, at once for
	// every later read, and returns it; ENOTFOUND when the conversation is
	// not the owner's or has no such share.
	DeleteShare(ctx context.Context, ownerID, conversationID, shareID string) (*Share, error)
	// SharedConversation returns a conversation shared with the viewer
	// (by name or with everyone); ENOTFOUND, as for an unknown id, when it
	// is not, when it is the viewer's own, or when its owner is disabled.
	SharedConversation(ctx context.Context, viewerID, conversationID string) (*SharedConversation, error)
	// SharedWithMe lists the conversations shared with the viewer, as
	// SharedConversation finds them, most recently shared first.
	SharedWithMe(ctx context.Context, viewerID string) ([]*SharedConversation, error)
	// CopyShared makes cp's copy in one transaction, checking in it that
	// the conversation is still shared with the viewer (ENOTFOUND, copying
	// nothing, as SharedConversation). Messages keep their times and order;
	// one left streaming or awaiting a confirmation is copied as
	// interrupted, since no turn of the copy writes it. EINVALID for an
	// empty title.
	CopyShared(ctx context.Context, cp ShareCopy) (*ShareCopied, error)
}

// CheckShareUsers returns the names a share request gives, each once in the
// order given, or EINVALID when it shares with no one or names more than
// [MaxShareUsers] users, or an empty name.
func CheckShareUsers(users []string, everyone bool) ([]string, error) {
	if len(users) == 0 && !everyone {
		return nil, Errorf(EINVALID, `Say whom to share with: {"users": ["name", …]} or {"everyone": true}.`)
	}
	if len(users) > MaxShareUsers {
		return nil, Errorf(EINVALID, "A conversation is shared with at most %d named users at once (%d given); share it with everyone instead.", MaxShareUsers, len(users))
	}
	seen := make(map[string]bool, len(users))
	out := make([]string, 0, len(users))
	for _, u := range users {
		if strings.TrimSpace(u) == "" {
			return nil, Errorf(EINVALID, "A user name to share with is empty.")
		}
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out, nil
}

// UnknownShareUsers is the EINVALID of a share request naming users that do
// not exist: it names them (the first ten, quoted, and how many more).
func UnknownShareUsers(names []string) error {
	const shown = 10
	q := make([]string, 0, min(len(names), shown))
	for _, n := range names[:min(len(names), shown)] {
		q = append(q, quoteName(n))
	}
	list := strings.Join(q, ", ")
	if len(names) > shown {
		list += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	if len(names) == 1 {
		return Errorf(EINVALID, "No user is named %s: check the name (names are exact, capitals count).", list)
	}
	return Errorf(EINVALID, "No users are named %s: check the names (names are exact, capitals count).", list)
}

// ErrShareWithOwner refuses sharing a conversation with its own owner.
var ErrShareWithOwner = &Error{Code: EINVALID, Message: "You cannot share a conversation with yourself: you see it already. Name someone else."}

// quoteName quotes a user name for a message, as Go quotes a string (what
// is not printable escaped, so white space at its ends shows), cut to 64
// characters.
func quoteName(n string) string {
	if r := []rune(n); len(r) > 64 {
		return strconv.Quote(string(r[:63])) + "…"
	}
	return strconv.Quote(n)
}
