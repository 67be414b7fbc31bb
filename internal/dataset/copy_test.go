package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCopy: a stored dataset's copy is a new file with the same bytes,
// independent of the original; a missing file, a path outside the dataset
// directory and a cancelled copy fail leaving nothing behind.
func TestCopy(t *testing.T) {
	l := mustLoader(t, Options{})
	sts, err := l.Ingest(context.Background(), strings.NewReader("a,b\n1,2\n3,4\n"), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(l.Dir(), sts[0].Path)
	want, _ := os.ReadFile(orig)

	rel, err := l.Copy(context.Background(), sts[0].Path)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if rel == sts[0].Path || filepath.Dir(filepath.Join(l.Dir(), rel)) != l.Dir() || !strings.HasSuffix(rel, ".parquet") {
		t.Fatalf("the copy's path: %q (original %q)", rel, sts[0].Path)
	}
	got, err := os.ReadFile(filepath.Join(l.Dir(), rel))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy's bytes: %d, %v; want the original's %d", len(got), err, len(want))
	}
	// Independent: removing the original leaves the copy, and the other way.
	if err := l.Remove(sts[0].Path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), rel)); err != nil {
		t.Errorf("the copy after the original is removed: %v", err)
	}

	if _, err := l.Copy(context.Background(), sts[0].Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Copy of a removed file: got %v, want not exist", err)
	}
	outside := filepath.Join(t.TempDir(), "secret.parquet")
	os.WriteFile(outside, []byte("secret"), 0o600)
	for _, bad := range []string{"../secret.parquet", outside, "sub/x.parquet", "/etc/passwd", ""} {
		if p, err := l.Copy(context.Background(), bad); err == nil {
			t.Errorf("Copy(%q): got %q, want an error", bad, p)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Copy(ctx, rel); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Copy: got %v", err)
	}
	entries, _ := os.ReadDir(l.Dir())
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 || names[0] != rel {
		t.Errorf("dataset directory: %v, want only the copy %s", names, rel)
	}
	mustBeClean(t, l)
}
