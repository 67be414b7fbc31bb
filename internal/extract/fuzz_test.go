package extract

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"datachat/internal/sharedtest"
	"datachat/internal/testfiles"
)

// checkBlocks checks what every decoder promises: valid UTF-8, no empty
// block.
func checkBlocks(t *testing.T, doc *Document) {
	t.Helper()
	for i, b := range doc.Blocks {
		if strings.TrimSpace(b.Text) == "" {
			t.Fatalf("block %d is empty", i)
		}
		if !utf8.ValidString(b.Text) {
			t.Fatalf("block %d is not valid UTF-8: %q", i, b.Text)
		}
	}
}

// addSharedSeed adds a file of ../shared as a seed, when ../shared is there.
// (Run the fuzzers with a short -fuzzminimizetime: minimizing a new input
// the size of these files takes the default minute, during which no
// progress shows.)
func addSharedSeed(f *testing.F, rel string) {
	if data := sharedtest.Seed(f, rel); data != nil {
		f.Add(data)
	}
}

func FuzzExtractText(f *testing.F) {
	addSharedSeed(f, "data/docs/fake-text-utf-16-le.txt")
	f.Add(testfiles.NotesUTF16())
	f.Add([]byte("plain\r\n\r\ntext\fpage"))
	f.Add([]byte("\xff\xfeh\x00i\x00"))
	f.Add([]byte("\xef\xbb\xbfbom \xc3\xa2\xc2\x80\xc2\x93"))
	f.Add([]byte("caf\xe9 \x80 \x9d"))
	f.Fuzz(func(t *testing.T, data []byte) {
		text, _ := decodeText(data)
		if !utf8.ValidString(text) {
			t.Fatalf("decodeText gave invalid UTF-8 %q", text)
		}
		checkBlocks(t, parsePlain(text))
	})
}

func FuzzExtractMarkdown(f *testing.F) {
	addSharedSeed(f, "data/docs/ibm_wiki.md")
	addSharedSeed(f, "data/docs/avengers_README.md")
	f.Add(testfiles.HistoryMarkdown())
	f.Add([]byte("---\ntitle: x\n---\n# a\n<!-- c\n-->\n```\ncode\n```\n> > q\n| a |\n|---|\n"))
	f.Add([]byte("````\n```\n~~~\nx\nSetext\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		text, _ := decodeText(data)
		checkBlocks(t, parseMarkdown(text))
	})
}

func FuzzExtractHTML(f *testing.F) {
	addSharedSeed(f, "data/docs/autogen_blog.html")
	f.Add(testfiles.BlogHTML())
	f.Add([]byte("<html><body><main><h1>t</h1><table><tr><td><table><tr><td>x</td></tr></table></td></tr></table><pre>a\n b</pre></main></body></html>"))
	f.Add([]byte("<nav><nav></nav>text<script>x</script><h2>h</h2><li>"))
	f.Add([]byte("<meta charset=\"shift_jis\"><p>\x82\xa0</p>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := parseHTML(data)
		if err != nil {
			return
		}
		checkBlocks(t, doc)
	})
}

func FuzzExtractDOCX(f *testing.F) {
	addSharedSeed(f, "data/docs/word_sample.docx")
	f.Add(testfiles.TripDOCX())
	f.Add(testfiles.DOCX(`<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>h</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>c</w:t></w:r></w:p></w:tc></w:tr></w:tbl>`, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := extractDOCX(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !isFileError(err) {
				t.Fatalf("error not attributed to the file: %v", err)
			}
			return
		}
		checkBlocks(t, doc)
	})
}

// FuzzExtractPDFText fuzzes the layout of the characters and positions
// PDFium gives for a page into paragraphs and blocks (PDFium itself runs in
// WebAssembly, behind its memory cap). Each byte of pos places one line.
func FuzzExtractPDFText(f *testing.F) {
	f.Add("Title\r\nline one ex\ufffetraction\r\n\r\nContents . . . . . . . . 3\fpage three", []byte{200, 10, 180, 10, 170, 10, 0, 0})
	f.Add("\r\n\ufffe\ufffe\f\f", []byte{})
	f.Add("a\r\nb\x00c\f\xff", []byte{255, 255, 1, 2, 3})
	f.Fuzz(func(t *testing.T, text string, pos []byte) {
		var pages []string
		for page := range strings.SplitSeq(text, "\f") {
			lines := splitPDFLines([]rune(page))
			for i := range lines {
				if 2*i+1 < len(pos) {
					lines[i].y = float64(pos[2*i]) * 4
					lines[i].size = float64(pos[2*i+1] % 32)
				}
			}
			pages = append(pages, layoutPage(lines))
		}
		doc := parsePDFPages(pages)
		checkBlocks(t, doc)
		for _, b := range doc.Blocks {
			if b.Page < 1 || b.Page > doc.Pages {
				t.Fatalf("block on page %d of %d", b.Page, doc.Pages)
			}
		}
	})
}

func FuzzRepairMojibake(f *testing.F) {
	f.Add("1986\u00e2\u0080\u00931990 \u00c2\u00a3 caf\u00c3\u00a9 it\u00e2\u20ac\u2122s")
	f.Add("Ångström \u00f0\u009f\u0098\u0080")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		got, n := repairMojibake(s)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 from %q", s)
		}
		if n == 0 && got != s {
			t.Fatalf("changed %q without a repair", s)
		}
		if len(got) > len(s) {
			t.Fatalf("repair grew %q to %q", s, got)
		}
	})
}
