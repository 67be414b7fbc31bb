package workspace

import (
	"context"
	"log/slog"
)

// DeleteUser removes a user with everything they own: first in the store
// (datachat.Store.DeleteUser, in one transaction, which refuses the last
// active admin and leaves everything as it was when it fails), then the
// files of their datasets and their documents' entries in the index, which
// nothing refers to any more. A file that cannot be removed is logged, not
// an error: the user is gone. It works on a full disk.
func (w *Workspace) DeleteUser(ctx context.Context, userID string) error {
	convs, err := w.Store.Conversations(ctx, userID)
	if err != nil {
		return err
	}
	var paths []string
	for _, c := range convs {
		ds, err := w.Store.Datasets(ctx, c.ID)
		if err != nil {
			return err
		}
		for _, d := range ds {
			paths = append(paths, d.Path)
		}
	}
	return w.freeing(func() error {
		if err := w.Store.DeleteUser(ctx, userID); err != nil {
			return err
		}
		for _, c := range convs {
			w.Engine.Evict(c.ID)
			w.mu.Lock()
			delete(w.indexed, c.ID)
			w.mu.Unlock()
			if w.Index != nil {
				if err := w.Index.DeleteConversation(ctx, c.ID); err != nil {
					w.Logger.Warn("remove document index", slog.String("conversation_id", c.ID), slog.String("error", err.Error()))
				}
			}
		}
		for _, p := range paths {
			if err := w.Loader.Remove(p); err != nil {
				w.Logger.Warn("remove dataset file", slog.String("path", p), slog.String("error", err.Error()))
			}
		}
		return nil
	})
}
