package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
)

// TestDeleteUser removes a user with their conversations' files and index
// entries, leaving another user's, and removes nothing when the store
// refuses (the last admin).
func TestDeleteUser(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	w := newIndexedWorkspace(t, st)

	// fill gives a user a conversation with a dataset and a document, and
	// returns the conversation and the dataset's file.
	fill := func(name string, role datachat.Role) (*datachat.Account, string, string) {
		t.Helper()
		a := &datachat.Account{User: datachat.User{Name: name}, Role: role}
		if err := st.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
		c := &datachat.Conversation{UserID: a.ID}
		if err := st.CreateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
		ds, err := w.AddUpload(ctx, c.ID, strings.NewReader("a,b\n1,2\n"), "t.csv", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.AddDocument(ctx, c.ID, strings.NewReader("# Penguins\n\nAdelie penguins nest on rocks."), "notes.md", nil); err != nil {
			t.Fatal(err)
		}
		return a, c.ID, filepath.Join(w.Loader.Dir(), ds[0].Path)
	}
	root, rootConv, rootFile := fill("root", datachat.RoleAdmin)
	alice, aliceConv, aliceFile := fill("alice", datachat.RoleMember)
	_, bobConv, bobFile := fill("bob", datachat.RoleMember)
	found := func(conv string) int {
		t.Helper()
		docs, err := w.Index.Documents(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		return len(docs)
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}

	if err := w.DeleteUser(ctx, alice.ID); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if exists(aliceFile) || found(aliceConv) != 0 {
		t.Errorf("after DeleteUser: alice's dataset file there %v, %d documents indexed; want none", exists(aliceFile), found(aliceConv))
	}
	if _, err := st.Account(ctx, alice.ID); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("alice's account after DeleteUser: %v", err)
	}
	if !exists(bobFile) || found(bobConv) != 1 {
		t.Errorf("bob's dataset file there %v, %d documents indexed; want both kept", exists(bobFile), found(bobConv))
	}
	// The last admin: refused, and nothing of theirs removed.
	if err := w.DeleteUser(ctx, root.ID); datachat.ErrorCode(err) != datachat.ECONFLICT {
		t.Errorf("DeleteUser of the last admin: %v, want ECONFLICT", err)
	}
	if !exists(rootFile) || found(rootConv) != 1 {
		t.Errorf("after a refused DeleteUser: root's file there %v, %d documents indexed; want both kept", exists(rootFile), found(rootConv))
	}
	if err := w.DeleteUser(ctx, "no-such-user"); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("DeleteUser of an unknown user: %v, want ENOTFOUND", err)
	}
}
