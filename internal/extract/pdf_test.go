package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
	"datachat/internal/sharedtest"
	"datachat/internal/testfiles"
)

// extractWith extracts data with e.
func extractWith(t *testing.T, e *Extractor, ctx context.Context, name string, data []byte) (*Document, error) {
	t.Helper()
	return e.Extract(ctx, bytes.NewReader(data), name, 100<<20)
}

// newExtractor returns an Extractor with opts, closed when the test ends.
func newExtractor(t *testing.T, opts PDFOptions) *Extractor {
	t.Helper()
	e := NewExtractor(opts)
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// threePages is a PDF of three pages: two paragraphs, nothing, one
// paragraph with a word broken by a hyphen.
var threePages = testfiles.PDF{Flate: true, Pages: [][]byte{
	testfiles.TextPage(
		[]string{"Quarterly report for the northern region.", "Revenue grew by twelve percent."},
		[]string{"Costs stayed flat over the year."}),
	nil,
	testfiles.TextPage([]string{"The third page explains the extrac-", "tion of text and ends here."}),
}}.Bytes()

func TestPDFPagesAndParagraphs(t *testing.T) {
	doc, err := extractBytes(t, "report.pdf", threePages)
	if err != nil {
		t.Fatal(err)
	}
	if doc.MediaType != MediaPDF || doc.Pages != 3 {
		t.Errorf("got %s with %d pages, want %s with 3", doc.MediaType, doc.Pages, MediaPDF)
	}
	var got []string
	for _, b := range doc.Blocks {
		got = append(got, fmt.Sprintf("%d:%s", b.Page, b.Text))
	}
	want := []string{
		"1:Quarterly report for the northern region.\nRevenue grew by twelve percent.",
		"1:Costs stayed flat over the year.",
		"3:The third page explains the extraction of text and ends here.",
	}
	if strings.Join(got, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
	}
}

func TestPDFManyPages(t *testing.T) {
	const n = 40
	var p testfiles.PDF
	for i := range n {
		p.Pages = append(p.Pages, testfiles.TextPage([]string{fmt.Sprintf("This is page number %d of the long document.", i+1)}))
	}
	doc, err := extractBytes(t, "long.pdf", p.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if doc.Pages != n || len(doc.Blocks) != n {
		t.Fatalf("got %d pages and %d blocks, want %d of each", doc.Pages, len(doc.Blocks), n)
	}
	for i, b := range doc.Blocks {
		if want := fmt.Sprintf("This is page number %d of", i+1); b.Page != i+1 || !strings.Contains(b.Text, want) {
			t.Errorf("block %d: page %d %q, want page %d with %q", i, b.Page, b.Text, i+1, want)
		}
	}
}

func TestPDFNoText(t *testing.T) {
	for name, data := range map[string][]byte{
		"scan.pdf":   imageOnlyPDF(),
		"image.pdf":  testfiles.PDF{Image: true, Pages: [][]byte{[]byte("q 200 0 0 200 72 500 cm /Im1 Do Q")}}.Bytes(),
		"blank.pdf":  testfiles.PDF{Pages: [][]byte{nil, nil}}.Bytes(),
		"spaces.pdf": testfiles.PDF{Pages: [][]byte{testfiles.TextPage([]string{"   "})}}.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := extractBytes(t, name, data)
			checkInvalid(t, err, ErrNoText, name, "no extractable text; OCR is not supported")
		})
	}
}

func TestPDFEncrypted(t *testing.T) {
	page := testfiles.TextPage([]string{"Only for the eyes of those who know the password."})
	t.Run("user password", func(t *testing.T) {
		data := testfiles.PDF{Encrypt: true, UserPassword: "secret", Pages: [][]byte{page}}.Bytes()
		_, err := extractBytes(t, "locked.pdf", data)
		checkInvalid(t, err, ErrEncrypted, "locked.pdf", "encrypted document: a password is needed")
	})
	t.Run("copying forbidden", func(t *testing.T) {
		data := testfiles.PDF{Encrypt: true, Permissions: -4 &^ 0x10, Pages: [][]byte{page}}.Bytes()
		_, err := extractBytes(t, "nocopy.pdf", data)
		checkInvalid(t, err, ErrEncrypted, "nocopy.pdf", "encrypted document: its permissions forbid copying its text")
	})
	t.Run("empty user password", func(t *testing.T) {
		// Like the DMCA summaries: encrypted, but anyone may open it.
		data := testfiles.PDF{Encrypt: true, Flate: true, Pages: [][]byte{page}}.Bytes()
		doc, err := extractBytes(t, "open.pdf", data)
		if err != nil {
			t.Fatal(err)
		}
		if got := doc.Text(); got != "Only for the eyes of those who know the password." {
			t.Errorf("text = %q", got)
		}
	})
}

func TestPDFDamaged(t *testing.T) {
	half := threePages[:len(threePages)/2]
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"garbage.pdf", []byte("%PDF-1.4\ngarbage that is not a PDF at all\n%%EOF\n")},
		{"header.pdf", []byte("%PDF-1.7\n")},
		{"noise.pdf", append([]byte("%PDF-1.5\n"), bytes.Repeat([]byte{0x9c, 0x01, 0xff, 0x42, 0x00}, 4000)...)},
		{"objects.pdf", []byte("%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := extractBytes(t, tc.name, tc.data)
			checkInvalid(t, err, ErrDamaged, tc.name, "the PDF could not be read (damaged or not a PDF)")
		})
	}
	t.Run("truncated.pdf", func(t *testing.T) {
		// PDFium rebuilds a missing cross-reference table from what is
		// left: the file may be read in part, or be refused as damaged,
		// never fail with an internal error.
		doc, err := extractBytes(t, "truncated.pdf", half)
		if err != nil {
			if code := datachat.ErrorCode(err); code != datachat.EINVALID {
				t.Fatalf("error code = %q, want %q (%v)", code, datachat.EINVALID, err)
			}
			return
		}
		if doc.Pages < 1 || len(doc.Blocks) == 0 || doc.Blocks[0].Page != 1 {
			t.Errorf("got %d pages, %d blocks", doc.Pages, len(doc.Blocks))
		}
		t.Logf("read the first half of the file: %d pages, %q", doc.Pages, doc.Text())
	})
}

// TestPDFFlateBomb reads a 200 KiB PDF whose content stream unpacks to 200
// MiB (the 596 KiB file that drove pdftotext to 9.2 GB had one such stream):
// with the default options it fails inside the memory cap, and the reader
// goes on reading other files.
func TestPDFFlateBomb(t *testing.T) {
	bomb := testfiles.FlateBomb()
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes, want well under 1 MiB", len(bomb))
	}
	e := newExtractor(t, PDFOptions{MaxConcurrent: 1})
	_, err := extractWith(t, e, t.Context(), "bomb.pdf", bomb)
	checkInvalid(t, err, ErrTooLarge, "bomb.pdf", fmt.Sprintf("needs more than the memory limit of %d MiB", DefaultPDFMemoryLimit>>20))
	st := e.PDFStats()
	if st.MaxMemory <= 0 || st.MaxMemory > DefaultPDFMemoryLimit {
		t.Errorf("WebAssembly memory reached %d bytes, want at most the cap of %d", st.MaxMemory, DefaultPDFMemoryLimit)
	}
	if st.Discarded != 1 {
		t.Errorf("discarded %d instances, want 1 (the one that trapped)", st.Discarded)
	}
	t.Logf("bomb: %d bytes of PDF, memory at failure %d MiB", len(bomb), st.LastMemory>>20)

	doc, err := extractWith(t, e, t.Context(), "report.pdf", threePages)
	if err != nil || doc.Pages != 3 {
		t.Fatalf("after the bomb: %v, %v", doc, err)
	}
	if st := e.PDFStats(); st.Instances != 2 || st.LastMemory > keepPDFMemory {
		t.Errorf("after the bomb: %d instances started, last memory %d; want a fresh second instance", st.Instances, st.LastMemory)
	}
}

func TestPDFTimeout(t *testing.T) {
	t.Run("stuck page", func(t *testing.T) {
		// The first document waits on its first page until its timeout
		// has passed; the next one is read by a fresh instance.
		e := newExtractor(t, PDFOptions{Timeout: time.Second})
		var once sync.Once
		e.pdf.pageHook = func(ctx context.Context, page int) {
			once.Do(func() { <-ctx.Done() })
		}
		_, err := extractWith(t, e, t.Context(), "slow.pdf", threePages)
		checkInvalid(t, err, ErrDamaged, "slow.pdf", "reading the PDF took longer than 1s")
		if st := e.PDFStats(); st.Discarded != 1 {
			t.Errorf("discarded %d instances, want 1", st.Discarded)
		}
		if _, err := extractWith(t, e, t.Context(), "report.pdf", threePages); err != nil {
			t.Fatalf("after a timeout: %v", err)
		}
	})
	t.Run("inside PDFium", func(t *testing.T) {
		// Unpacking the bomb takes PDFium far longer than 10 ms: the
		// timeout kills the instance in the middle of a WebAssembly call.
		e := newExtractor(t, PDFOptions{Timeout: 10 * time.Millisecond})
		_, err := extractWith(t, e, t.Context(), "bomb.pdf", testfiles.FlateBomb())
		checkInvalid(t, err, ErrDamaged, "bomb.pdf", "reading the PDF took longer than 10ms")
	})
	t.Run("caller's deadline", func(t *testing.T) {
		// The caller's own deadline is the caller's error, not the file's.
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := Extract(ctx, bytes.NewReader(threePages), "report.pdf", 1<<20)
		if !errors.Is(err, context.DeadlineExceeded) || datachat.ErrorCode(err) != datachat.EINTERNAL {
			t.Errorf("got %v, want context.DeadlineExceeded", err)
		}
	})
}

// TestPDFConcurrencyLimit holds the only slot with a document stopped on its
// first page, fills the one place in the queue, and checks that one more is
// refused at once, that a waiting caller can give up, and that the queue
// moves on when the slot frees.
func TestPDFConcurrencyLimit(t *testing.T) {
	e := newExtractor(t, PDFOptions{MaxConcurrent: 1, MaxQueued: 1})
	reading := make(chan struct{})
	release := make(chan struct{})
	queued := make(chan struct{})
	e.pdf.pageHook = func(ctx context.Context, page int) {
		if page == 0 {
			reading <- struct{}{}
			<-release
		}
	}
	e.pdf.waitHook = func() { queued <- struct{}{} }

	type result struct {
		doc *Document
		err error
	}
	run := func(ctx context.Context, name string) chan result {
		ch := make(chan result, 1)
		go func() {
			doc, err := e.Extract(ctx, bytes.NewReader(threePages), name, 1<<20)
			ch <- result{doc, err}
		}()
		return ch
	}

	a := run(t.Context(), "a.pdf")
	<-reading // a holds the slot
	ctxB, cancelB := context.WithCancel(t.Context())
	b := run(ctxB, "b.pdf")
	<-queued // b waits

	_, err := extractWith(t, e, t.Context(), "c.pdf", threePages)
	if datachat.ErrorCode(err) != datachat.EBUSY || !errors.Is(err, ErrBusy) {
		t.Fatalf("c: got %v, want EBUSY with ErrBusy", err)
	}
	if msg := datachat.ErrorMessage(err); !strings.Contains(msg, `"c.pdf"`) || !strings.Contains(msg, "try again") {
		t.Errorf("c: message %q", msg)
	}
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() <= 0 {
		t.Errorf("c: no Retry-After in %v", err)
	}
	if st := e.PDFStats(); st.Running != 1 || st.Waiting != 1 {
		t.Errorf("running %d, waiting %d; want 1 and 1", st.Running, st.Waiting)
	}

	cancelB()
	if r := <-b; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("b: got %v, want context.Canceled", r.err)
	}
	d := run(t.Context(), "d.pdf")
	<-queued // d takes b's place in the queue
	close(release)
	for _, name := range []string{"a", "d"} {
		ch := a
		if name == "d" {
			<-reading // d's turn has come
			ch = d
		}
		if r := <-ch; r.err != nil || r.doc.Pages != 3 {
			t.Errorf("%s: %v, %v", name, r.doc, r.err)
		}
	}
	if st := e.PDFStats(); st.Running != 0 || st.Waiting != 0 || st.Instances != 1 {
		t.Errorf("at the end: %+v; want nothing running or waiting, one instance", st)
	}
}

func TestPDFPanicRecovered(t *testing.T) {
	e := newExtractor(t, PDFOptions{})
	var once sync.Once
	e.pdf.pageHook = func(context.Context, int) {
		once.Do(func() { panic("boom") })
	}
	_, err := extractWith(t, e, t.Context(), "report.pdf", threePages)
	checkInvalid(t, err, ErrDamaged, "report.pdf", "the PDF reader failed on it (pdf reader panic: boom)")
	if doc, err := extractWith(t, e, t.Context(), "report.pdf", threePages); err != nil || doc.Pages != 3 {
		t.Fatalf("after a panic: %v, %v", doc, err)
	}
	if st := e.PDFStats(); st.Discarded != 1 || st.Instances != 2 {
		t.Errorf("got %+v; want the instance that panicked discarded and a second one", st)
	}
}

// TestPDFReuse reads several files with one instance and checks that its
// memory is visible (go-pdfium does not expose it; wasmMemory finds it).
func TestPDFReuse(t *testing.T) {
	e := newExtractor(t, PDFOptions{MaxConcurrent: 1})
	for i := range 3 {
		if _, err := extractWith(t, e, t.Context(), fmt.Sprintf("r%d.pdf", i), threePages); err != nil {
			t.Fatal(err)
		}
	}
	st := e.PDFStats()
	if st.Documents != 3 || st.Instances != 1 || st.Discarded != 0 {
		t.Errorf("got %+v; want 3 documents read by one instance", st)
	}
	if st.LastMemory < 16<<20 || st.LastMemory > keepPDFMemory {
		t.Errorf("WebAssembly memory %d bytes: wasmMemory does not find PDFium's memory", st.LastMemory)
	}
	t.Logf("start (compile from the process's cache) %v, memory %d MiB", st.Start, st.LastMemory>>20)
}

func TestPDFOptionsDefaults(t *testing.T) {
	o := PDFOptions{MemoryLimit: 1 << 20}.withDefaults()
	if o.MemoryLimit != minPDFMemoryLimit || o.Timeout != PDFTimeout || o.MaxConcurrent < 1 || o.MaxQueued != 8*o.MaxConcurrent {
		t.Errorf("got %+v", o)
	}
	if o := (PDFOptions{MemoryLimit: 100<<20 + 123}).withDefaults(); o.MemoryLimit != 100<<20 {
		t.Errorf("memory limit %d, want whole pages", o.MemoryLimit)
	}
}

func TestLayoutPage(t *testing.T) {
	line := func(text string, y, size float64) pdfLine { return pdfLine{text: text, y: y, size: size} }
	for _, tc := range []struct {
		name  string
		lines []pdfLine
		want  string
	}{
		{"lines and a gap", []pdfLine{line("a1", 700, 10), line("a2", 688, 10), line("a3", 676, 10), line("b1", 652, 10), line("b2", 640, 10)},
			"a1\na2\na3\n\nb1\nb2"},
		{"heading", []pdfLine{line("Title", 700, 16), line("body", 680, 10), line("more", 668, 10)},
			"Title\n\nbody\nmore"},
		{"next column", []pdfLine{line("left", 100, 10), line("left2", 88, 10), line("right", 700, 10)},
			"left\nleft2\n\nright"},
		{"same row", []pdfLine{line("cell1", 700, 10), line("cell2", 700.5, 10), line("next", 688, 10)},
			"cell1\ncell2\nnext"},
		{"position unknown", []pdfLine{line("x", 0, 0), line("y", 0, 0)}, "x\ny"},
		{"hyphen joins words", []pdfLine{{text: "extrac", y: 700, size: 10, hyphen: true}, line("tion done", 688, 10)},
			"extraction done"},
		{"hyphen kept", []pdfLine{{text: "DB2", y: 700, size: 10, hyphen: true}, line("Based", 688, 10)},
			"DB2-\nBased"},
		{"hyphen at the end", []pdfLine{{text: "end", y: 700, size: 10, hyphen: true}}, "end-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := layoutPage(tc.lines); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSplitPDFLines(t *testing.T) {
	got := splitPDFLines([]rune("  one\r\ntwo-ex\ufffeample\r\n\r\n \x00three"))
	want := []pdfLine{{text: "one", first: 2}, {text: "two-ex", first: 7, hyphen: true}, {text: "ample", first: 14}, {text: "three", first: 25}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestExtractSharedPDFs extracts every PDF in ../shared/data/docs, known to
// the test or not: each gives pages of text, or the clear EINVALID error of
// an encrypted or damaged file. Of the shared files, only
// libreoffice-writer-password.pdf (it needs a user password) fails.
func TestExtractSharedPDFs(t *testing.T) {
	dir := sharedtest.Path(t, "data/docs")
	paths, err := filepath.Glob(filepath.Join(dir, "*.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no PDF in %s", dir)
	}
	wantErr := map[string]error{"libreoffice-writer-password.pdf": ErrEncrypted}
	for _, path := range paths {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			doc, err := extractFile(t, path)
			if err != nil {
				var cause error
				switch {
				case errors.Is(err, ErrEncrypted):
					cause = ErrEncrypted
				case errors.Is(err, ErrDamaged):
					cause = ErrDamaged
				default:
					t.Fatalf("got %v, want text or an encrypted or damaged PDF", err)
				}
				checkInvalid(t, err, cause, name, "")
				if wantErr[name] != cause {
					t.Errorf("got %v, want %v", err, wantErr[name])
				}
				t.Logf("%s: %s", name, datachat.ErrorMessage(err))
				return
			}
			if wantErr[name] != nil {
				t.Errorf("read it; want %v", wantErr[name])
			}
			if doc.Pages < 1 || doc.TextLen() == 0 {
				t.Fatalf("got %d pages, %d bytes of text", doc.Pages, doc.TextLen())
			}
			pagesWithText := map[int]bool{}
			for _, b := range doc.Blocks {
				if b.Page < 1 || b.Page > doc.Pages {
					t.Fatalf("block on page %d of %d", b.Page, doc.Pages)
				}
				pagesWithText[b.Page] = true
			}
			t.Logf("%s: %d pages (%d with text), %d blocks, %d bytes of text in %v",
				name, doc.Pages, len(pagesWithText), len(doc.Blocks), doc.TextLen(), time.Since(start))
		})
	}
}

// TestPDFReaderUnavailable: when PDFium cannot start, the error says so and
// what to do, and is not an internal error ("Internal error.").
func TestPDFReaderUnavailable(t *testing.T) {
	e := newExtractor(t, PDFOptions{})
	rt := &pdfRuntime{ready: make(chan struct{}), err: errors.New("compile: out of memory")}
	close(rt.ready)
	e.pdf.rt = rt
	_, err := extractWith(t, e, t.Context(), "report.pdf", threePages)
	if code := datachat.ErrorCode(err); code != datachat.EBUSY {
		t.Fatalf("error code = %q, want %q (%v)", code, datachat.EBUSY, err)
	}
	msg := datachat.ErrorMessage(err)
	for _, want := range []string{`"report.pdf"`, "PDF reader could not start (compile: out of memory)", "upload the text as DOCX"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// Other formats do not need it.
	if _, err := extractWith(t, e, t.Context(), "notes.md", []byte("# Notes\n\nStill readable.\n")); err != nil {
		t.Errorf("markdown: %v", err)
	}
}
