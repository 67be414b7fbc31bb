package storetest

import (
	"testing"

	"datachat"
)

func testDBSources(t *testing.T, s datachat.Store) {
	ctx := t.Context()
	list, err := s.DBSources(ctx)
	wantEmpty(t, "DBSources of an empty store", list, err)

	wh := &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:sealed-1",
		Tables: []string{"public.*", "sales.orders"}, Users: []string{"alice", "bob"}, CreatedAt: base}
	shop := &datachat.DBSource{Name: "shop", Kind: "mysql", SealedURL: "v1:sealed-2", AllUsers: true,
		Origin: datachat.OriginConfig}
	for _, src := range []*datachat.DBSource{wh, shop} {
		if err := s.CreateDBSource(ctx, src); err != nil {
			t.Fatalf("CreateDBSource(%s): %v", src.Name, err)
		}
	}
	checkTime(t, "source CreatedAt", wh.CreatedAt, base)
	if shop.CreatedAt.IsZero() || shop.Origin != datachat.OriginConfig || wh.Origin != datachat.OriginCLI {
		t.Errorf("CreateDBSource: got CreatedAt %v, origins %q and %q; want a time, config and cli (the default)", shop.CreatedAt, shop.Origin, wh.Origin)
	}
	if shop.Tables == nil || shop.Users == nil {
		t.Errorf("CreateDBSource: got Tables %#v, Users %#v; want empty slices, not nil", shop.Tables, shop.Users)
	}
	got, err := s.DBSource(ctx, "warehouse")
	if err != nil {
		t.Fatalf("DBSource: %v", err)
	}
	equal(t, "DBSource", got, wh)
	list, err = s.DBSources(ctx)
	if err != nil {
		t.Fatalf("DBSources: %v", err)
	}
	equal(t, "DBSources (by name)", list, []*datachat.DBSource{shop, wh})

	wantCode(t, "CreateDBSource of a name in use", s.CreateDBSource(ctx,
		&datachat.DBSource{Name: "shop", Kind: "mysql", SealedURL: "v1:x"}), datachat.ECONFLICT)
	wantCode(t, "CreateDBSource without a sealed URL", s.CreateDBSource(ctx,
		&datachat.DBSource{Name: "empty", Kind: "mysql"}), datachat.EINVALID)
	_, err = s.DBSource(ctx, "nope")
	wantCode(t, "DBSource of an unknown name", err, datachat.ENOTFOUND)

	// Attachments.
	alice := mustUser(t, s, "alice")
	c := mustConversation(t, s, alice.ID)
	other := mustConversation(t, s, alice.ID)
	attached := func(conv string) []*datachat.DBSource {
		t.Helper()
		l, err := s.ConversationDBSources(ctx, conv)
		if err != nil {
			t.Fatalf("ConversationDBSources: %v", err)
		}
		return l
	}
	if l := attached(c.ID); l == nil || len(l) != 0 {
		t.Fatalf("ConversationDBSources before attaching: got %#v, want an empty slice", l)
	}
	for _, name := range []string{"warehouse", "shop", "warehouse"} { // again: no error, no duplicate
		if err := s.AttachDBSource(ctx, c.ID, name); err != nil {
			t.Fatalf("AttachDBSource(%s): %v", name, err)
		}
	}
	if err := s.AttachDBSource(ctx, other.ID, "shop"); err != nil {
		t.Fatalf("AttachDBSource: %v", err)
	}
	equal(t, "ConversationDBSources (in attach order)", attached(c.ID), []*datachat.DBSource{wh, shop})
	wantCode(t, "AttachDBSource of an unknown source", s.AttachDBSource(ctx, c.ID, "nope"), datachat.ENOTFOUND)
	wantCode(t, "AttachDBSource to an unknown conversation", s.AttachDBSource(ctx, "no-such-conversation", "shop"), datachat.ENOTFOUND)

	// An update keeps the attachments.
	wh2 := &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:sealed-3", Tables: []string{"*"},
		AllUsers: true, Origin: datachat.OriginConfig}
	if err := s.UpdateDBSource(ctx, wh2); err != nil {
		t.Fatalf("UpdateDBSource: %v", err)
	}
	wh2.CreatedAt = wh.CreatedAt
	wh2.Users = []string{}
	got, err = s.DBSource(ctx, "warehouse")
	if err != nil {
		t.Fatalf("DBSource: %v", err)
	}
	equal(t, "DBSource after UpdateDBSource", got, wh2)
	equal(t, "ConversationDBSources after UpdateDBSource", attached(c.ID), []*datachat.DBSource{wh2, shop})
	wantCode(t, "UpdateDBSource of an unknown name", s.UpdateDBSource(ctx,
		&datachat.DBSource{Name: "nope", Kind: "mysql", SealedURL: "v1:x"}), datachat.ENOTFOUND)

	if err := s.DetachDBSource(ctx, c.ID, "warehouse"); err != nil {
		t.Fatalf("DetachDBSource: %v", err)
	}
	wantCode(t, "DetachDBSource twice", s.DetachDBSource(ctx, c.ID, "warehouse"), datachat.ENOTFOUND)
	equal(t, "ConversationDBSources after DetachDBSource", attached(c.ID), []*datachat.DBSource{shop})

	// Removing a source detaches it everywhere.
	if err := s.DeleteDBSource(ctx, "shop"); err != nil {
		t.Fatalf("DeleteDBSource: %v", err)
	}
	wantCode(t, "DeleteDBSource twice", s.DeleteDBSource(ctx, "shop"), datachat.ENOTFOUND)
	if l := attached(c.ID); len(l) != 0 {
		t.Errorf("ConversationDBSources after DeleteDBSource: got %d, want none", len(l))
	}
	if l := attached(other.ID); len(l) != 0 {
		t.Errorf("ConversationDBSources of another conversation after DeleteDBSource: got %d, want none", len(l))
	}
	// And a source of the same name added again is not attached anywhere.
	if err := s.CreateDBSource(ctx, &datachat.DBSource{Name: "shop", Kind: "mysql", SealedURL: "v1:y"}); err != nil {
		t.Fatalf("CreateDBSource again: %v", err)
	}
	if l := attached(other.ID); len(l) != 0 {
		t.Errorf("a source added again under a removed one's name: attached to %d conversations' lists, want none", len(l))
	}

	// Deleting a conversation drops its attachments, not the source.
	if err := s.AttachDBSource(ctx, c.ID, "warehouse"); err != nil {
		t.Fatalf("AttachDBSource: %v", err)
	}
	if err := s.DeleteConversation(ctx, alice.ID, c.ID); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	if _, err := s.DBSource(ctx, "warehouse"); err != nil {
		t.Errorf("DBSource after deleting a conversation it was attached to: %v", err)
	}
	if l := attached(c.ID); len(l) != 0 {
		t.Errorf("ConversationDBSources of a deleted conversation: got %d, want none", len(l))
	}
}
