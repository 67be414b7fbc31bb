package dataset

import (
	"os"
	"path/filepath"
	"testing"
)

// repoRoot walks up from the working directory to go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// sharedData returns ../shared/data beside the repository, or skips the test.
func sharedData(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "..", "shared", "data")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared test data not found at %s (it lives beside the repository as ../shared): %v", dir, err)
	}
	return dir
}

func mustLoader(t testing.TB, o Options) *Loader {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 256 << 20
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustBeClean fails if anything but stored datasets is left in the directory.
func mustBeClean(t testing.TB, l *Loader) {
	t.Helper()
	left, err := os.ReadDir(l.tmpDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in the temp directory: %s", e.Name())
	}
}
