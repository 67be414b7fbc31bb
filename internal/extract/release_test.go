package extract

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// released returns a channel told each time the extractor lets PDFium go.
func released(e *Extractor) <-chan struct{} {
	ch := make(chan struct{}, 16)
	e.pdf.releaseHook = func() { ch <- struct{}{} }
	return ch
}

func waitReleased(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Minute): // compiling PDFium on a busy machine takes tens of seconds
		t.Fatalf("PDFium was not let go %s", what)
	}
}

// cacheFiles returns the files of a cache directory with their modification
// times.
func cacheFiles(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	files := map[string]time.Time{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			files[path] = info.ModTime()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestPDFWarmThenLetGo: with a CacheDir, Warm compiles PDFium into the cache
// and lets it go at once (an idle server holds neither its machine code nor
// the compiler's garbage); the first PDF reads it back from the cache — not
// compiled again — and reads the document.
func TestPDFWarmThenLetGo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	e := newExtractor(t, PDFOptions{CacheDir: dir, IdleRelease: time.Hour})
	rel := released(e)
	e.Warm()
	waitReleased(t, rel, "after Warm")
	st := e.PDFStats()
	if st.Starts != 1 || st.Releases != 1 {
		t.Fatalf("after Warm: %d starts, %d releases; want 1 and 1", st.Starts, st.Releases)
	}
	e.pdf.mu.Lock()
	rt := e.pdf.rt
	e.pdf.mu.Unlock()
	if rt != nil {
		t.Fatal("after Warm the reader still holds PDFium")
	}
	wasmCachesMu.Lock()
	kept := wasmCaches[dir]
	wasmCachesMu.Unlock()
	if kept != nil {
		t.Error("the cache of the directory is still open, holding PDFium's machine code")
	}
	compiled := cacheFiles(t, dir)
	if len(compiled) != 1 {
		t.Fatalf("the cache holds %v, want PDFium compiled", compiled)
	}

	doc, err := extractWith(t, e, t.Context(), "report.pdf", threePages)
	if err != nil || doc.Pages != 3 {
		t.Fatalf("the first PDF after Warm: %+v, %v", doc, err)
	}
	if st := e.PDFStats(); st.Starts != 2 {
		t.Errorf("%d starts, want 2 (Warm's, then the PDF's from the cache)", st.Starts)
	} else {
		t.Logf("started again from the cache in %v", st.Start)
	}
	if got := cacheFiles(t, dir); len(got) != 1 || !got[firstKey(compiled)].Equal(compiled[firstKey(compiled)]) {
		t.Errorf("the cache holds %v after the PDF, want %v: read back, not compiled again", got, compiled)
	}
}

func firstKey(m map[string]time.Time) string {
	for k := range m {
		return k
	}
	return ""
}

// TestPDFIdleRelease: PDFium read back from the cache is let go once no
// document has been read for IdleRelease, with the instances kept for the
// next document and the memory budget they held; documents read at once
// keep it; the next document starts it again.
func TestPDFIdleRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	e := newExtractor(t, PDFOptions{CacheDir: dir, IdleRelease: time.Millisecond, MaxConcurrent: 2})
	rel := released(e)
	// Held by the test while the documents are read, so that PDFium is let
	// go once, after all of them.
	held, err := e.pdf.use()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := extractWith(t, e, t.Context(), "report.pdf", threePages); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	e.pdf.done(held, false)
	waitReleased(t, rel, "once idle")
	st := e.PDFStats()
	if st.Starts != 1 || st.Releases != 1 || st.Reserved != 0 {
		t.Errorf("after four PDFs and the idle time: %d starts, %d releases, %d bytes of the budget held; want 1, 1, 0", st.Starts, st.Releases, st.Reserved)
	}
	if !e.pdf.budget.TryAcquire(e.pdf.opts.MemoryBudget) {
		t.Error("the memory budget was not all given back")
	} else {
		e.pdf.budget.Release(e.pdf.opts.MemoryBudget)
	}
	if _, err := extractWith(t, e, t.Context(), "report.pdf", threePages); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, rel, "after the next PDF")
	if st := e.PDFStats(); st.Starts != 2 || st.Releases != 2 {
		t.Errorf("%d starts, %d releases; want 2 and 2", st.Starts, st.Releases)
	}
}

// TestPDFKeptWithoutCache: without a CacheDir, PDFium is kept (compiling it
// again would take seconds), and with IdleRelease negative too.
func TestPDFKeptWithoutCache(t *testing.T) {
	for _, c := range []struct {
		name string
		opts PDFOptions
	}{
		{"no cache dir", PDFOptions{IdleRelease: time.Millisecond}},
		{"negative IdleRelease", PDFOptions{CacheDir: filepath.Join(t.TempDir(), "cache"), IdleRelease: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newExtractor(t, c.opts)
			if _, err := extractWith(t, e, t.Context(), "report.pdf", threePages); err != nil {
				t.Fatal(err)
			}
			e.pdf.mu.Lock()
			defer e.pdf.mu.Unlock()
			rt := e.pdf.rt
			if rt == nil || rt.users != 0 {
				t.Fatalf("after the PDF: %+v, want PDFium started and unused", rt)
			}
			if e.pdf.idleLocked(rt, true) {
				t.Error("PDFium would be let go")
			}
		})
	}
}
