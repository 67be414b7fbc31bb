package storetest

import (
	"testing"
	"time"

	"datachat"
)

// searchTests are the conformance tests of conversation search.
var searchTests = []storeTest{
	{"SearchConversations", testSearchConversations},
}

// testSearchConversations: titles and message text are searched, ignoring
// ASCII case, within the user's own conversations, newest first, with a
// snippet around the first matching message's match.
func testSearchConversations(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	alice := mustUser(t, s, "alice")
	bob := mustUser(t, s, "bob")

	byTitle := &datachat.Conversation{UserID: alice.ID, Title: "Penguin census", CreatedAt: base}
	byText := &datachat.Conversation{UserID: alice.ID, Title: "New conversation", CreatedAt: base.Add(time.Second)}
	neither := &datachat.Conversation{UserID: alice.ID, Title: "Sales", CreatedAt: base.Add(2 * time.Second)}
	bobs := &datachat.Conversation{UserID: bob.ID, Title: "Bob's penguins", CreatedAt: base.Add(3 * time.Second)}
	for _, c := range []*datachat.Conversation{byTitle, byText, neither, bobs} {
		if err := s.CreateConversation(ctx, c); err != nil {
			t.Fatalf("CreateConversation: %v", err)
		}
	}
	long := "The colony on the island was counted twice in spring. " +
		"Adelie PENGUINS numbered 152 at the last count, up from 120, " +
		"and the survey team will count again in the autumn when the chicks fledge."
	for i, m := range []*datachat.Message{
		{ConversationID: byText.ID, Role: datachat.RoleUser, Content: "How many birds?", Status: datachat.StatusComplete, CreatedAt: base.Add(4 * time.Second)},
		{ConversationID: byText.ID, Role: datachat.RoleAssistant, Content: long, Status: datachat.StatusComplete, CreatedAt: base.Add(5 * time.Second)},
		{ConversationID: byText.ID, Role: datachat.RoleUser, Content: "and the penguins last year?", Status: datachat.StatusComplete, CreatedAt: base.Add(6 * time.Second)},
		{ConversationID: neither.ID, Role: datachat.RoleUser, Content: "revenue by region", Status: datachat.StatusComplete, CreatedAt: base.Add(7 * time.Second)},
		{ConversationID: bobs.ID, Role: datachat.RoleUser, Content: "penguins", Status: datachat.StatusComplete, CreatedAt: base.Add(8 * time.Second)},
	} {
		if err := s.CreateMessage(ctx, m); err != nil {
			t.Fatalf("CreateMessage %d: %v", i, err)
		}
	}
	// byText's messages made it the most recently updated of alice's.
	got, err := s.SearchConversations(ctx, alice.ID, "  PenGuin ", 10)
	if err != nil {
		t.Fatalf("SearchConversations: %v", err)
	}
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	equal(t, "SearchConversations ids (newest first, alice's only)", ids, []string{byText.ID, byTitle.ID})
	if len(got) == 2 {
		if got[0].Title != "New conversation" || got[0].UserID != alice.ID {
			t.Errorf("match: got %+v, want alice's conversation with its title", got[0].Conversation)
		}
		// The first message holding the term, cut around it.
		want := datachat.SearchSnippet(long, "penguin", 160)
		if got[0].Snippet != want || want == "" {
			t.Errorf("snippet: got %q, want %q", got[0].Snippet, want)
		}
		if got[1].Snippet != "" {
			t.Errorf("a title-only match has snippet %q, want none", got[1].Snippet)
		}
	}

	got, err = s.SearchConversations(ctx, alice.ID, "penguin", 1)
	if err != nil || len(got) != 1 || got[0].ID != byText.ID {
		t.Errorf("SearchConversations limit 1: got %v, %v; want only %s", got, err, byText.ID)
	}
	for _, term := range []string{"", "   ", "walrus"} {
		got, err = s.SearchConversations(ctx, alice.ID, term, 10)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("SearchConversations(%q): got %v, %v; want an empty list", term, got, err)
		}
	}
	// A term with LIKE's wildcards is taken literally.
	got, err = s.SearchConversations(ctx, alice.ID, "%", 10)
	if err != nil || len(got) != 0 {
		t.Errorf("SearchConversations(%%): got %d matches, %v; want none", len(got), err)
	}
	got, err = s.SearchConversations(ctx, bob.ID, "census", 10)
	if err != nil || len(got) != 0 {
		t.Errorf("bob searching alice's title: got %d matches, %v; want none", len(got), err)
	}
}
