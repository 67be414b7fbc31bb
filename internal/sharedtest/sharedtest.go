// Package sharedtest finds the files others wrote for us to test against:
// ../shared beside the repository (real Parquet, CSV, PDF… files and recorded
// provider streams). They are read from there, never copied into the
// repository. A test that needs one skips, saying where it looks, when
// ../shared is absent — and fails instead under CI=true, where it must be.
package sharedtest

import (
	"datachat/internal/testenv"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	root     string // ../shared, or "" when not found
	rootErr  string
)

// findRoot walks up from the working directory to go.mod and looks beside
// the repository for shared/.
func findRoot() {
	dir, err := os.Getwd()
	if err != nil {
		rootErr = err.Error()
		return
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			rootErr = "go.mod not found above " + dir
			return
		}
		dir = parent
	}
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if fi, err := os.Stat(shared); err != nil || !fi.IsDir() {
		rootErr = "the shared test files are not at " + shared + ": this test reads real files written by others, " +
			"which are never copied into the repository; put the shared folder beside the repository as ../shared to run it"
		return
	}
	root = shared
}

// Dir returns the absolute path of ../shared, or skips tb (fails it under
// CI=true) when it is absent.
func Dir(tb testing.TB) string {
	tb.Helper()
	rootOnce.Do(findRoot)
	if root == "" {
		missing(tb, rootErr)
	}
	return root
}

// Path returns the absolute path of rel inside ../shared (for example
// "data/parquet/alltypes_plain.parquet"), or skips tb (fails it under
// CI=true) when it is absent.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(Dir(tb), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		missing(tb, "shared test file: "+err.Error())
	}
	return p
}

// Read returns the content of rel inside ../shared, as Path finds it.
func Read(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Path(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Seed returns the content of rel inside ../shared for a fuzz target's seed
// corpus, or nil when ../shared is absent (the target still runs on its
// other seeds); under CI=true an absent file fails tb.
func Seed(tb testing.TB, rel string) []byte {
	tb.Helper()
	rootOnce.Do(findRoot)
	if root == "" {
		if testenv.CI() {
			tb.Fatalf("%s; CI must have it", rootErr)
		}
		return nil
	}
	return Read(tb, rel)
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	testenv.Missing(tb, why)
}
