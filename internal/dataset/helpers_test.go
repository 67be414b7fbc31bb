package dataset

import (
	"os"
	"testing"

	"datachat/internal/duckdb"
	"datachat/internal/sharedtest"
)

// readShared reads a file of ../shared/data (skipping the test when it is
// absent); the error is always nil, for the callers' shape.
func readShared(t testing.TB, rel string) ([]byte, error) {
	t.Helper()
	return sharedtest.Read(t, "data/"+rel), nil
}

// mustLoader returns a loader with its own SQL engine, both closed at the end
// of the test.
func mustLoader(t testing.TB, o Options) *Loader {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Engine == nil {
		e, err := duckdb.New(duckdb.Options{TempDir: t.TempDir(), MemoryLimit: 256 << 20, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		o.Engine = e
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
