package dataset

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"datachat"
)

// Copy copies the stored dataset file rel (a Stored.Path) to a new stored
// file and returns its path: a copied conversation reads a file of its own,
// which it removes when it deletes the dataset, leaving the original's
// alone. The bytes are copied as they are, by the kernel where it can
// (copy_file_range, which may share the blocks); the copy appears under its
// name only once it is whole. ctx is checked before the copy starts.
//
// Errors: an error satisfying os.IsNotExist when rel's file is gone;
// datachat.NoSpace when the disk is full; others are internal. Nothing is
// left behind on an error.
func (l *Loader) Copy(ctx context.Context, rel string) (string, error) {
	src := filepath.Join(l.opts.Dir, filepath.Clean("/"+rel))
	if filepath.Dir(src) != l.opts.Dir {
		return "", fmt.Errorf("copy dataset: %q is not a stored dataset", rel)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("copy dataset: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(l.tmpDir, "copy-*")
	if err != nil {
		return "", datachat.ClassifyNoSpace(fmt.Errorf("copy dataset: %w", err))
	}
	out := newID() + ".parquet"
	err = func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// *os.File to *os.File: copy_file_range, which may share blocks.
		if _, err := io.Copy(tmp, in); err != nil {
			return err
		}
		if err := tmp.Sync(); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		return os.Rename(tmp.Name(), filepath.Join(l.opts.Dir, out))
	}()
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", datachat.ClassifyNoSpace(fmt.Errorf("copy dataset: %w", err))
	}
	return out, nil
}
