package storetest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"datachat"
)

// hostileIDs are ids a client may send where a conversation's goes: not
// UTF-8, a NUL, quoting and LIKE characters, a long one. No store holds
// them, so each is not found; PostgreSQL's text cannot hold the first four,
// and a store may refuse those as invalid instead.
var hostileIDs = []string{"\xff", "\xff\xfe", "a\x00b", "\x00", "' OR '1'='1", "%", "_", strings.Repeat("x", 100_000), "\u202e", ""}

// notFoundOrInvalid reports whether err is the answer to looking up id, which
// no store holds: not found, or for text that is not UTF-8 or holds a NUL,
// invalid, saying so.
func notFoundOrInvalid(err error, id string) bool {
	switch datachat.ErrorCode(err) {
	case datachat.ENOTFOUND:
		return true
	case datachat.EINVALID:
		return (!utf8.ValidString(id) || strings.ContainsRune(id, 0)) && strings.Contains(datachat.ErrorMessage(err), "UTF-8")
	}
	return false
}

// testHostileIDs: looking up, renaming and deleting a conversation by an id
// no store holds says not found (or, for text PostgreSQL cannot hold,
// invalid), never a failure of the store, and leaves the user's
// conversations as they were.
func testHostileIDs(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	for _, id := range hostileIDs {
		name := id
		if len(name) > 20 {
			name = name[:20] + "…"
		}
		if _, err := s.Conversation(ctx, alice.ID, id); !notFoundOrInvalid(err, id) {
			t.Errorf("Conversation(%q): got %v, want not found (or invalid, for text that is not UTF-8)", name, err)
		}
		if _, err := s.RenameConversation(ctx, alice.ID, id, "renamed"); !notFoundOrInvalid(err, id) {
			t.Errorf("RenameConversation(%q): got %v, want not found (or invalid, for text that is not UTF-8)", name, err)
		}
		if err := s.DeleteConversation(ctx, alice.ID, id); !notFoundOrInvalid(err, id) {
			t.Errorf("DeleteConversation(%q): got %v, want not found (or invalid, for text that is not UTF-8)", name, err)
		}
		if _, _, _, err := s.TurnStart(ctx, alice.ID, id, 10); !notFoundOrInvalid(err, id) {
			t.Errorf("TurnStart(%q): got %v, want not found (or invalid, for text that is not UTF-8)", name, err)
		}
		if _, err := s.Conversation(ctx, id, c.ID); !notFoundOrInvalid(err, id) {
			t.Errorf("Conversation as user %q: got %v, want not found (or invalid, for text that is not UTF-8)", name, err)
		}
	}
	list, err := s.Conversations(ctx, alice.ID)
	if err != nil || len(list) != 1 || list[0].ID != c.ID || list[0].Title != c.Title {
		t.Errorf("Conversations after: %v, %v; want alice's one, unchanged", list, err)
	}
}
