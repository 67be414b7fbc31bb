package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
)

// shareTests are the cases of [datachat.ShareStore], run by [Run].
var shareTests = []storeTest{
	{"Shares", testShares},
	{"ShareNames", testShareNames},
	{"SharedConversation", testSharedConversation},
	{"SharesGoWithTheirRows", testSharesGoWithTheirRows},
	{"SharesConcurrent", testSharesConcurrent},
	{"CopyShared", testCopyShared},
	{"CopySharedRefused", testCopySharedRefused},
}

// mustShare shares the owner's conversation and returns the shares.
func mustShare(t *testing.T, s datachat.Store, ownerID, convID string, users []string, everyone bool) (shares, created []*datachat.Share) {
	t.Helper()
	shares, created, err := s.CreateShares(t.Context(), ownerID, convID, users, everyone)
	if err != nil {
		t.Fatalf("CreateShares(%q, everyone %v): %v", users, everyone, err)
	}
	return shares, created
}

// shareLabels are shares as "everyone" or their user's name, in order.
func shareLabels(list []*datachat.Share) []string {
	out := make([]string, len(list))
	for i, sh := range list {
		out[i] = sh.UserName
		if sh.Everyone {
			out[i] = "everyone"
		}
	}
	return out
}

func listShares(t *testing.T, s datachat.Store, ownerID, convID string) []*datachat.Share {
	t.Helper()
	list, err := s.Shares(t.Context(), ownerID, convID)
	if err != nil {
		t.Fatalf("Shares: %v", err)
	}
	return list
}

func testShares(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")
	mustUser(t, s, "carol")
	c := mustConversation(t, s, alice.ID)

	wantEmpty(t, "Shares of a conversation shared with no one", listShares(t, s, alice.ID, c.ID), nil)
	shares, created := mustShare(t, s, alice.ID, c.ID, []string{"bob"}, false)
	if len(shares) != 1 || len(created) != 1 || shares[0] != created[0] {
		t.Fatalf("CreateShares(bob): got %d shares, %d created; want the same one", len(shares), len(created))
	}
	first := shares[0]
	if first.ID == "" || first.ConversationID != c.ID || first.UserID != bob.ID || first.UserName != "bob" || first.Everyone {
		t.Errorf("share with bob: got %+v", *first)
	}
	checkUTC(t, "share CreatedAt", first.CreatedAt)

	// Sharing again is idempotent: the share that is there, nothing created.
	shares, created = mustShare(t, s, alice.ID, c.ID, []string{"bob"}, false)
	if len(created) != 0 || len(shares) != 1 {
		t.Fatalf("CreateShares(bob) again: got %d shares, %d created; want 1, 0", len(shares), len(created))
	}
	equal(t, "the share made again", shares[0], first)

	// A name given twice is one share; the order is the one given, everyone
	// first.
	shares, created = mustShare(t, s, alice.ID, c.ID, []string{"carol", "bob", "carol"}, true)
	equal(t, "CreateShares(carol, bob, carol, everyone)", shareLabels(shares), []string{"everyone", "carol", "bob"})
	equal(t, "created of them", shareLabels(created), []string{"everyone", "carol"})
	if shares[0].UserID != "" || shares[0].UserName != "" || !shares[0].Everyone {
		t.Errorf("the share with everyone: got %+v", *shares[0])
	}
	equal(t, "bob's share, named again", shares[2], first)
	_, created = mustShare(t, s, alice.ID, c.ID, nil, true)
	if len(created) != 0 {
		t.Errorf("CreateShares(everyone) again: created %d", len(created))
	}

	list := listShares(t, s, alice.ID, c.ID)
	equal(t, "Shares (oldest first)", shareLabels(list), []string{"bob", "everyone", "carol"})
	equal(t, "Shares[0]", list[0], first)

	// Only the owner lists, shares or revokes.
	_, err := s.Shares(ctx, bob.ID, c.ID)
	wantCode(t, "Shares of another user's conversation", err, datachat.ENOTFOUND)
	_, _, err = s.CreateShares(ctx, bob.ID, c.ID, []string{"carol"}, false)
	wantCode(t, "CreateShares of another user's conversation", err, datachat.ENOTFOUND)
	_, _, err = s.CreateShares(ctx, alice.ID, "no-such-conversation", []string{"bob"}, false)
	wantCode(t, "CreateShares of an unknown conversation", err, datachat.ENOTFOUND)
	_, err = s.DeleteShare(ctx, bob.ID, c.ID, first.ID)
	wantCode(t, "DeleteShare by another user", err, datachat.ENOTFOUND)
	other := mustConversation(t, s, alice.ID)
	_, err = s.DeleteShare(ctx, alice.ID, other.ID, first.ID)
	wantCode(t, "DeleteShare through another conversation", err, datachat.ENOTFOUND)
	_, err = s.DeleteShare(ctx, alice.ID, c.ID, "no-such-share")
	wantCode(t, "DeleteShare of an unknown share", err, datachat.ENOTFOUND)
	equal(t, "Shares after refused calls", shareLabels(listShares(t, s, alice.ID, c.ID)), []string{"bob", "everyone", "carol"})

	gone, err := s.DeleteShare(ctx, alice.ID, c.ID, first.ID)
	if err != nil {
		t.Fatalf("DeleteShare: %v", err)
	}
	equal(t, "the share DeleteShare returns", gone, first)
	_, err = s.DeleteShare(ctx, alice.ID, c.ID, first.ID)
	wantCode(t, "DeleteShare twice", err, datachat.ENOTFOUND)
	equal(t, "Shares after a revocation", shareLabels(listShares(t, s, alice.ID, c.ID)), []string{"everyone", "carol"})

	// Shared again after a revocation: a new share.
	shares, created = mustShare(t, s, alice.ID, c.ID, []string{"bob"}, false)
	if len(created) != 1 || shares[0].ID == first.ID {
		t.Errorf("sharing again after a revocation: got %+v, want a new share", *shares[0])
	}
}

func testShareNames(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	mustUser(t, s, "bob")
	zoe := mustUser(t, s, "Zoë 李")
	c := mustConversation(t, s, alice.ID)

	// Refused requests share with no one: not even with the names that
	// exist beside the one refused.
	for _, tt := range []struct {
		what     string
		users    []string
		everyone bool
		mention  []string // what the message says
	}{
		{"no one", nil, false, []string{"users", "everyone"}},
		{"an empty list", []string{}, false, nil},
		{"an empty name", []string{"bob", ""}, false, []string{"empty"}},
		{"a blank name", []string{"   "}, true, []string{"empty"}},
		{"an unknown name", []string{"bob", "mallory"}, true, []string{"mallory"}},
		{"unknown names", []string{"mallory", "bob", "trent"}, false, []string{"mallory", "trent"}},
		{"a name differing in case", []string{"Bob"}, false, []string{"Bob"}},
		{"a name with a space added", []string{"bob "}, false, []string{`"bob "`}},
		{"a name without its accent", []string{"Zoe 李"}, false, []string{"Zoe 李"}},
		{"a name decomposed (NFD)", []string{"Zoe\u0308 李"}, false, nil},
		{"a name holding NUL", []string{"bob\x00"}, false, []string{"bob"}},
		{"a name that is not UTF-8", []string{"b\xffob"}, false, nil},
		{"a name with a control character", []string{"bo\x1bb"}, false, []string{`\x1b`}},
		{"a name longer than any", []string{strings.Repeat("b", 10000)}, false, nil},
		{"the owner's own name", []string{"bob", "alice"}, false, []string{"yourself"}},
		{"more names than allowed", manyNames(datachat.MaxShareUsers + 1), false, []string{fmt.Sprint(datachat.MaxShareUsers), "everyone"}},
	} {
		_, _, err := s.CreateShares(ctx, alice.ID, c.ID, tt.users, tt.everyone)
		wantCode(t, "CreateShares with "+tt.what, err, datachat.EINVALID)
		for _, m := range tt.mention {
			if !strings.Contains(datachat.ErrorMessage(err), m) {
				t.Errorf("CreateShares with %s: the message %q does not say %q", tt.what, datachat.ErrorMessage(err), m)
			}
		}
		if msg := datachat.ErrorMessage(err); strings.ContainsAny(msg, "\x00\x1b\n") || len(msg) > 2000 {
			t.Errorf("CreateShares with %s: the message is not one line of text: %q", tt.what, msg)
		}
		if list := listShares(t, s, alice.ID, c.ID); len(list) != 0 {
			t.Fatalf("CreateShares with %s shared with %v", tt.what, shareLabels(list))
		}
	}
	// Many unknown names: the message names the first ten and counts the rest.
	_, _, err := s.CreateShares(ctx, alice.ID, c.ID, manyNames(40), false)
	if msg := datachat.ErrorMessage(err); !strings.Contains(msg, "user-09") || strings.Contains(msg, "user-10") || !strings.Contains(msg, "30 more") {
		t.Errorf("CreateShares with 40 unknown names: %q", msg)
	}

	// A Unicode name is found exactly as written.
	shares, _ := mustShare(t, s, alice.ID, c.ID, []string{"Zoë 李"}, false)
	if shares[0].UserID != zoe.ID || shares[0].UserName != "Zoë 李" {
		t.Errorf("share with Zoë 李: got %+v", *shares[0])
	}

	// As many names as allowed, all real: one share each, in order.
	names := manyNames(datachat.MaxShareUsers)
	for _, n := range names {
		mustUser(t, s, n)
	}
	shares, created := mustShare(t, s, alice.ID, c.ID, names, false)
	if len(shares) != len(names) || len(created) != len(names) || shares[len(names)-1].UserName != names[len(names)-1] {
		t.Errorf("CreateShares of %d names: got %d shares, %d created", len(names), len(shares), len(created))
	}
	if got := len(listShares(t, s, alice.ID, c.ID)); got != len(names)+1 {
		t.Errorf("Shares after sharing with %d more: got %d", len(names), got)
	}
}

// manyNames returns n user names, user-00, user-01…
func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%02d", i)
	}
	return out
}

func testSharedConversation(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustAccount(t, s, "alice", datachat.RoleMember)
	bob := mustUser(t, s, "bob")
	carol := mustUser(t, s, "carol")
	c := mustConversation(t, s, alice.ID)
	private := mustConversation(t, s, alice.ID)

	seen := func(viewer *datachat.User, conv string) (*datachat.SharedConversation, error) {
		t.Helper()
		return s.SharedConversation(ctx, viewer.ID, conv)
	}
	list := func(viewer *datachat.User) []string {
		t.Helper()
		l, err := s.SharedWithMe(ctx, viewer.ID)
		if err != nil {
			t.Fatalf("SharedWithMe: %v", err)
		}
		if l == nil {
			t.Fatalf("SharedWithMe: got nil, want an empty slice")
		}
		out := make([]string, len(l))
		for i, sc := range l {
			out[i] = sc.ID
		}
		return out
	}
	for _, v := range []*datachat.User{bob, carol, &alice.User} {
		_, err := seen(v, c.ID)
		wantCode(t, "SharedConversation of a conversation shared with no one, as "+v.Name, err, datachat.ENOTFOUND)
		equal(t, "SharedWithMe of "+v.Name+" before any share", list(v), []string{})
	}

	shares, _ := mustShare(t, s, alice.ID, c.ID, []string{"bob"}, false)
	got, err := seen(bob, c.ID)
	if err != nil {
		t.Fatalf("SharedConversation as bob: %v", err)
	}
	want, _ := s.Conversation(ctx, alice.ID, c.ID)
	equal(t, "the shared conversation", got.Conversation, want)
	if got.Owner != "alice" || !got.SharedAt.Equal(shares[0].CreatedAt) {
		t.Errorf("SharedConversation: owner %q, shared at %v; want alice, %v", got.Owner, got.SharedAt, shares[0].CreatedAt)
	}
	checkUTC(t, "SharedAt", got.SharedAt)
	_, err = seen(carol, c.ID)
	wantCode(t, "SharedConversation as a user it is not shared with", err, datachat.ENOTFOUND)
	_, err = seen(bob, private.ID)
	wantCode(t, "SharedConversation of the owner's other conversation", err, datachat.ENOTFOUND)
	_, err = seen(bob, "no-such-conversation")
	wantCode(t, "SharedConversation of an unknown id", err, datachat.ENOTFOUND)
	equal(t, "SharedWithMe of bob", list(bob), []string{c.ID})
	equal(t, "SharedWithMe of carol", list(carol), []string{})

	// Everyone: every user but the owner, from the everyone share's time on;
	// bob keeps his own, older.
	everyone, _ := mustShare(t, s, alice.ID, c.ID, nil, true)
	if got, err := seen(carol, c.ID); err != nil || !got.SharedAt.Equal(everyone[0].CreatedAt) {
		t.Errorf("SharedConversation as carol after sharing with everyone: %v, %v", got, err)
	}
	if got, err := seen(bob, c.ID); err != nil || !got.SharedAt.Equal(shares[0].CreatedAt) {
		t.Errorf("SharedConversation as bob after sharing with everyone: %v, %v", got, err)
	}
	_, err = seen(&alice.User, c.ID)
	wantCode(t, "SharedConversation as its owner", err, datachat.ENOTFOUND)
	equal(t, "SharedWithMe of the owner", list(&alice.User), []string{})
	dave := mustUser(t, s, "dave") // a user who came after the share sees it too
	equal(t, "SharedWithMe of a newcomer", list(dave), []string{c.ID})

	// Most recently shared first; other owners' too.
	erin := mustUser(t, s, "erin")
	later := mustConversation(t, s, erin.ID)
	mustShare(t, s, erin.ID, later.ID, []string{"bob"}, false)
	equal(t, "SharedWithMe, most recently shared first", list(bob), []string{later.ID, c.ID})

	// A disabled owner's conversations are seen by no one, until enabled.
	if err := s.DisableUser(ctx, alice.ID, time.Now()); err != nil {
		t.Fatalf("DisableUser: %v", err)
	}
	for _, v := range []*datachat.User{bob, carol} {
		_, err := seen(v, c.ID)
		wantCode(t, "SharedConversation of a disabled owner's, as "+v.Name, err, datachat.ENOTFOUND)
	}
	equal(t, "SharedWithMe while the owner is disabled", list(bob), []string{later.ID})
	if err := s.EnableUser(ctx, alice.ID); err != nil {
		t.Fatalf("EnableUser: %v", err)
	}
	equal(t, "SharedWithMe once the owner is enabled", list(bob), []string{later.ID, c.ID})

	// A revocation stops the view at once: bob still sees it through
	// everyone until that goes too.
	if _, err := s.DeleteShare(ctx, alice.ID, c.ID, shares[0].ID); err != nil {
		t.Fatal(err)
	}
	if got, err := seen(bob, c.ID); err != nil || !got.SharedAt.Equal(everyone[0].CreatedAt) {
		t.Errorf("SharedConversation as bob, his share revoked but everyone's kept: %v, %v", got, err)
	}
	if _, err := s.DeleteShare(ctx, alice.ID, c.ID, everyone[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*datachat.User{bob, carol, dave} {
		_, err := seen(v, c.ID)
		wantCode(t, "SharedConversation after every share is revoked, as "+v.Name, err, datachat.ENOTFOUND)
	}
	equal(t, "SharedWithMe after the revocations", list(bob), []string{later.ID})
}

// testSharesGoWithTheirRows: a share goes with its conversation and with the
// user it names (foreign keys).
func testSharesGoWithTheirRows(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	mustAccount(t, s, "root", datachat.RoleAdmin)
	alice := mustAccount(t, s, "alice", datachat.RoleMember)
	bob := mustAccount(t, s, "bob", datachat.RoleMember)
	carol := mustUser(t, s, "carol")
	c := mustConversation(t, s, alice.ID)
	c2 := mustConversation(t, s, alice.ID)
	mustShare(t, s, alice.ID, c.ID, []string{"bob", "carol"}, true)
	mustShare(t, s, alice.ID, c2.ID, []string{"carol"}, false)

	if err := s.DeleteUser(ctx, bob.ID); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	equal(t, "Shares after the user they name is removed", shareLabels(listShares(t, s, alice.ID, c.ID)), []string{"everyone", "carol"})
	// A new user of the removed one's name gets none of their shares.
	bob2 := mustUser(t, s, "bob")
	if _, err := s.SharedConversation(ctx, bob2.ID, c.ID); err != nil {
		t.Errorf("the new bob sees the everyone share: %v", err)
	}
	if _, err := s.SharedConversation(ctx, bob2.ID, c2.ID); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("the new bob sees a conversation shared with carol only: %v", err)
	}

	if err := s.DeleteConversation(ctx, alice.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	l, err := s.SharedWithMe(ctx, carol.ID)
	if err != nil || len(l) != 1 || l[0].ID != c2.ID {
		t.Errorf("SharedWithMe after a shared conversation is deleted: %v, %v", l, err)
	}
	// Removing the owner removes their conversations and their shares.
	if err := s.DeleteUser(ctx, alice.ID); err != nil {
		t.Fatalf("DeleteUser of the owner: %v", err)
	}
	l, err = s.SharedWithMe(ctx, carol.ID)
	wantEmpty(t, "SharedWithMe after the owner is removed", l, err)
}

// testSharesConcurrent shares one conversation with the same users from
// many goroutines: each user gets one share, and exactly one call says it
// created it.
func testSharesConcurrent(t *testing.T, s datachat.Store) {
	alice := mustUser(t, s, "alice")
	mustUser(t, s, "bob")
	mustUser(t, s, "carol")
	c := mustConversation(t, s, alice.ID)
	const n = 10
	var mu sync.Mutex
	created := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, made, err := s.CreateShares(t.Context(), alice.ID, c.ID, []string{"bob", "carol"}, true)
			if err != nil {
				t.Errorf("CreateShares: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, l := range shareLabels(made) {
				created[l]++
			}
		})
	}
	wg.Wait()
	equal(t, "shares created by concurrent calls", created, map[string]int{"everyone": 1, "bob": 1, "carol": 1})
	equal(t, "Shares", len(listShares(t, s, alice.ID, c.ID)), 3)
}
