package extract

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// cacheChildEnv, set, makes TestPDFCacheDir the start of a process reading
// a PDF with that CacheDir.
const cacheChildEnv = "DATACHAT_TEST_PDF_CACHE_DIR"

// TestPDFCacheDir: a process that read a PDF with a CacheDir leaves PDFium
// compiled there, and the next process reads it back instead of compiling it
// again: the cache holds the same file, not rewritten (compiling writes a new
// file in its place). A damaged file does not keep PDFs from being read, and
// does not stay.
func TestPDFCacheDir(t *testing.T) {
	if dir := os.Getenv(cacheChildEnv); dir != "" {
		e := newExtractor(t, PDFOptions{CacheDir: dir})
		doc, err := extractWith(t, e, t.Context(), "report.pdf", threePages)
		if err != nil || len(doc.Blocks) == 0 {
			t.Fatalf("read a PDF with the cache: %v, %+v", err, doc)
		}
		return
	}
	dir := filepath.Join(t.TempDir(), "cache")
	start := func(what string) map[string]os.FileInfo {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestPDFCacheDir$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), cacheChildEnv+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		files := map[string]os.FileInfo{}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			files[path] = info
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}

	first := start("first start")
	if len(first) != 1 {
		t.Fatalf("after the first start the cache holds %d files, want 1 (PDFium compiled): %v", len(first), first)
	}
	second := start("second start")
	for path, a := range first {
		b := second[path]
		if len(second) != 1 || b == nil || !os.SameFile(a, b) || !a.ModTime().Equal(b.ModTime()) {
			t.Fatalf("after the second start the cache holds %v, want %s as the first left it (read, not compiled again)", second, path)
		}
	}

	if testing.Short() {
		return
	}
	// Cut short after its header (which names this wazero's version): read,
	// it fails.
	var damaged []byte
	for path := range first {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		damaged = b[:64]
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for path := range start("start with a damaged cache") {
		if b, err := os.ReadFile(path); err != nil || bytes.Equal(b, damaged) {
			t.Errorf("after a start with a damaged cache, %s: %v, still damaged: %t", path, err, bytes.Equal(b, damaged))
		}
	}
}
