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

// revokingStore revokes every share of the conversation just before the
// copy's transaction, as an owner revoking while the files are copied.
type revokingStore struct {
	datachat.Store
	ownerID string
}

func (s revokingStore) CopyShared(ctx context.Context, cp datachat.ShareCopy) (*datachat.ShareCopied, error) {
	shares, err := s.Store.Shares(ctx, s.ownerID, cp.ConversationID)
	if err != nil {
		return nil, err
	}
	for _, sh := range shares {
		if _, err := s.Store.DeleteShare(ctx, s.ownerID, cp.ConversationID, sh.ID); err != nil {
			return nil, err
		}
	}
	return s.Store.CopyShared(ctx, cp)
}

// TestCopySharedEdges: a dataset whose file is gone and documents on a
// server without them are named as not copied, with why; a copy refused
// because the share was revoked while the files were being copied leaves
// no file behind; the copy's datasets answer SQL from their own files.
func TestCopySharedEdges(t *testing.T) {
	ctx := context.Background()
	st := sqlitetest.Open(t)
	w := newIndexedWorkspace(t, st)
	alice, bob := mustEnsure(t, st, "alice"), mustEnsure(t, st, "bob")
	c := &datachat.Conversation{UserID: alice.ID, Title: strings.Repeat("long title ", 30)}
	if err := st.CreateConversation(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kept.csv", "lost.csv"} {
		if _, err := w.AddUpload(ctx, c.ID, strings.NewReader("a,b\n1,2\n3,4\n"), name, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.AddDocument(ctx, c.ID, strings.NewReader("# Penguins\n\nAdelie penguins nest on rocks."), "notes.md", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateShares(ctx, alice.ID, c.ID, []string{"bob"}, false); err != nil {
		t.Fatal(err)
	}
	ds, _ := st.Datasets(ctx, c.ID)
	if err := os.Remove(filepath.Join(w.Loader.Dir(), ds[1].Path)); err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		entries, _ := os.ReadDir(w.Loader.Dir())
		var out []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".parquet") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	before := files()

	// Revoked while the files were copied: nothing is left.
	racing := &Workspace{Store: revokingStore{st, alice.ID}, Loader: w.Loader, Engine: w.Engine, Index: w.Index, Logger: w.Logger}
	if _, _, err := racing.CopyShared(ctx, bob, c.ID); datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Fatalf("a copy whose share is revoked meanwhile: got %v, want ENOTFOUND", err)
	}
	if after := files(); len(after) != len(before) {
		t.Errorf("files after a refused copy: %v, want %v", after, before)
	}
	if list, _ := st.Conversations(ctx, bob.ID); len(list) != 0 {
		t.Errorf("bob has %d conversations after a refused copy", len(list))
	}

	// Shared again; documents off on this server.
	if _, _, err := st.CreateShares(ctx, alice.ID, c.ID, nil, true); err != nil {
		t.Fatal(err)
	}
	noDocs := &Workspace{Store: st, Loader: w.Loader, Engine: w.Engine, Logger: w.Logger}
	conv, notCopied, err := noDocs.CopyShared(ctx, bob, c.ID)
	if err != nil {
		t.Fatalf("CopyShared: %v", err)
	}
	want := []NotCopied{
		{Kind: NotCopiedDataset, Name: "lost", Reason: reasonFileMissing},
		{Kind: NotCopiedDocument, Name: "notes.md", Reason: reasonNoDocuments},
	}
	if len(notCopied) != len(want) || notCopied[0] != want[0] || notCopied[1] != want[1] {
		t.Errorf("not copied: %+v, want %+v", notCopied, want)
	}
	if n := len([]rune(conv.Title)); n != 200 || !strings.HasPrefix(conv.Title, "Copy of long title") || !strings.HasSuffix(conv.Title, "…") {
		t.Errorf("the copy's title (%d characters): %q", n, conv.Title)
	}
	if after := files(); len(after) != len(before)+1 {
		t.Errorf("files after the copy: %d, want %d", len(after), len(before)+1)
	}
	// Its table answers from its own file, even once the original's is gone.
	if err := os.Remove(filepath.Join(w.Loader.Dir(), ds[0].Path)); err != nil {
		t.Fatal(err)
	}
	res, err := w.Query(ctx, conv.ID, "SELECT sum(a) AS s FROM kept")
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] != int64(4) && res.Rows[0][0] != float64(4) {
		t.Errorf("query on the copy: %+v, %v", res, err)
	}
	if docs, _ := st.Documents(ctx, conv.ID); len(docs) != 0 {
		t.Errorf("documents copied on a server without documents: %d", len(docs))
	}
}
