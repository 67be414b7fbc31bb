package workspace

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"datachat"
	"datachat/internal/retrieval"
)

// Kinds of what a copy of a shared conversation may leave out.
const (
	NotCopiedSource   = "source"
	NotCopiedDataset  = "dataset"
	NotCopiedDocument = "document"
)

// NotCopied names something of a shared conversation its copy left out, and
// why.
type NotCopied struct {
	Kind   string `json:"kind"` // NotCopiedSource, NotCopiedDataset or NotCopiedDocument
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Reasons a copy left something out.
const (
	reasonNotGranted  = "This database is not granted to you; ask an administrator to grant it, then attach it to the copy."
	reasonFileMissing = "Its file is missing on the server; ask its owner to add it again."
	reasonRemoved     = "Its owner removed it while the conversation was being copied."
	reasonNoDocuments = "Documents are not available on this server."
)

// A copy's title is "Copy of " and the original's, at most
// maxCopyTitleChars characters (a conversation's longest title).
const (
	maxCopyTitleChars = 200
	copyTitlePrefix   = "Copy of "
)

// CopyShared copies a conversation shared with viewer into a new
// conversation of theirs, to ask follow-ups in: its messages (with their
// tool calls, results, number checks and citations) and notes; its
// datasets, each with a copy of its file; its documents with their chunks,
// indexed for search (with the vectors they had, where the index keeps
// them); and its attached database sources that viewer is granted
// (DBSource.Allows), of those the owner may use (the view lists no other).
// What it leaves out is named in the list, with why.
// Nothing of the copy reads or refers to the owner's files or rows, so the
// owner can delete theirs.
//
// Errors: ENOTFOUND when the conversation is not shared with viewer (their
// own, a disabled owner's, a share revoked even while copying: nothing is
// then left behind); datachat.NoSpace when the disk is full.
func (w *Workspace) CopyShared(ctx context.Context, viewer *datachat.User, conversationID string) (*datachat.Conversation, []NotCopied, error) {
	sc, err := w.Store.SharedConversation(ctx, viewer.ID, conversationID)
	if err != nil {
		return nil, nil, err
	}
	notCopied := []NotCopied{}
	cp := datachat.ShareCopy{ViewerID: viewer.ID, ConversationID: conversationID, Title: copyTitle(sc.Title), Datasets: map[string]string{}}

	attached, err := w.Store.ConversationDBSources(ctx, conversationID)
	if err != nil {
		return nil, nil, err
	}
	for _, src := range attached {
		if !src.Allows(sc.Owner) {
			continue // unused by the owner too, and not in the view: not theirs to pass on
		}
		if src.Allows(viewer.Name) {
			cp.Sources = append(cp.Sources, src.Name)
		} else {
			notCopied = append(notCopied, NotCopied{Kind: NotCopiedSource, Name: src.Name, Reason: reasonNotGranted})
		}
	}

	datasets, err := w.Store.Datasets(ctx, conversationID)
	if err != nil {
		return nil, nil, err
	}
	copies := map[string]string{} // a file copied → its dataset's table name
	defer func() {
		for path, name := range copies {
			if err := w.Loader.Remove(path); err != nil {
				w.Logger.Warn("remove the copy of a dataset file", slog.String("table", name), slog.String("error", err.Error()))
			}
		}
	}()
	for _, d := range datasets {
		path, err := w.Loader.Copy(ctx, d.Path)
		switch {
		case err == nil:
			cp.Datasets[d.ID] = path
			copies[path] = d.Name
		case errors.Is(err, os.ErrNotExist):
			notCopied = append(notCopied, NotCopied{Kind: NotCopiedDataset, Name: d.Name, Reason: reasonFileMissing})
		default:
			return nil, nil, err
		}
	}

	docs, err := w.Store.Documents(ctx, conversationID)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range docs {
		if w.Index == nil {
			notCopied = append(notCopied, NotCopied{Kind: NotCopiedDocument, Name: d.Name, Reason: reasonNoDocuments})
		} else {
			cp.Documents = append(cp.Documents, d.ID)
		}
	}

	copied, err := w.Store.CopyShared(ctx, cp)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range datasets {
		if path, ok := cp.Datasets[d.ID]; ok {
			if _, kept := copied.Datasets[d.ID]; kept {
				delete(copies, path) // the copy's now: not removed
			} else {
				notCopied = append(notCopied, NotCopied{Kind: NotCopiedDataset, Name: d.Name, Reason: reasonRemoved})
			}
		}
	}
	for _, d := range docs {
		if _, kept := copied.Documents[d.ID]; w.Index != nil && !kept {
			notCopied = append(notCopied, NotCopied{Kind: NotCopiedDocument, Name: d.Name, Reason: reasonRemoved})
		}
	}
	to := copied.Conversation.ID
	if len(copied.Documents) > 0 {
		w.indexCopies(ctx, conversationID, to, copied.Documents)
	}
	w.prepare(to)
	w.Logger.Info("shared conversation copied", slog.String("conversation_id", conversationID), slog.String("copy_id", to),
		slog.String("user", viewer.Name), slog.Int("datasets", len(copied.Datasets)), slog.Int("documents", len(copied.Documents)),
		slog.Int("sources", len(cp.Sources)), slog.Int("not_copied", len(notCopied)))
	return copied.Conversation, notCopied, nil
}

// indexCopies makes the copied documents searchable in the copy to, with
// the vectors of those they copy where the index can. A failure is logged:
// the document is the copy's, and the first search in it indexes what the
// index lacks (ensureIndexed).
func (w *Workspace) indexCopies(ctx context.Context, from, to string, docs map[string]*datachat.Document) {
	defer w.lock(docLock(to))()
	chunks, err := w.Store.Chunks(ctx, to)
	if err != nil {
		w.Logger.Warn("index a copied conversation's documents: read their chunks", slog.String("conversation_id", to), slog.String("error", err.Error()))
		return
	}
	byDoc := map[string][]*datachat.Chunk{}
	for _, c := range chunks {
		byDoc[c.DocumentID] = append(byDoc[c.DocumentID], c)
	}
	copier, _ := w.Index.(retrieval.Copier)
	for old, d := range docs {
		var err error
		if copier != nil {
			err = copier.CopyDocument(ctx, to, d, byDoc[d.ID], from, old)
		} else {
			err = w.Index.Add(ctx, to, d, byDoc[d.ID])
		}
		if err != nil {
			w.Logger.Warn("index a copied document; the first search in the copy tries again", slog.String("conversation_id", to),
				slog.String("document_id", d.ID), slog.String("error", err.Error()))
		}
	}
}

// copyTitle is the title of a copy of a conversation titled title.
func copyTitle(title string) string {
	t := []rune(copyTitlePrefix + title)
	if len(t) > maxCopyTitleChars {
		return string(t[:maxCopyTitleChars-1]) + "…"
	}
	return string(t)
}
