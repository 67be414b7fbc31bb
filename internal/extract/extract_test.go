package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"datachat"
	"datachat/internal/sharedtest"
	"datachat/internal/testfiles"
)

func extractFile(t *testing.T, path string) (*Document, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Extract(context.Background(), f, filepath.Base(path), 100<<20)
}

func extractBytes(t *testing.T, name string, data []byte) (*Document, error) {
	t.Helper()
	return Extract(context.Background(), bytes.NewReader(data), name, 100<<20)
}

// docCase says what one real document must give.
type docCase struct {
	media    string
	pages    int      // for PDF
	minText  int      // at least this many bytes of text
	phrases  []string // each must appear in the text
	headings []string // each must be a heading
	tables   []string // each must appear in a table block
	pagePhr  map[int]string
	absent   []string // none may appear in the text
	title    string   // if set, the document's title
	wantErr  error    // instead of a document
	errText  string
}

var sharedCases = map[string]docCase{
	"dmca.pdf": {media: MediaPDF, pages: 18, minText: 40_000,
		phrases: []string{"THE DIGITAL MILLENNIUM COPYRIGHT ACT OF 1998", "Vessel Hull Design Protection Act"},
		pagePhr: map[int]string{9: "Eligibility for Limitations Generally", 17: "EFFECTIVE DATES"}},
	"naacl06-shinyama.pdf": {media: MediaPDF, pages: 8, minText: 25_000,
		phrases: []string{"Preemptive Information Extraction", "Unrestricted Relation Discovery"},
		pagePhr: map[int]string{6: "We used twelve newspapers"}},
	"pr-00530-ml-lines.pdf": {media: MediaPDF, pages: 1, minText: 5_000,
		phrases: []string{"Airworthiness Directives", "737 MAX"}},
	"google-doc-document.pdf": {media: MediaPDF, pages: 1, minText: 800,
		phrases: []string{"Beautiful is better than ugly.", "Explicit is better than implicit.", "Readability counts."}},
	"libreoffice-writer-password.pdf": {wantErr: ErrEncrypted, errText: "encrypted document: a password is needed"},
	"redp5110_sampled.pdf": {media: MediaPDF, pages: 18, minText: 25_000,
		phrases: []string{"Row and Column Access Control", "CHGFCNUSG"},
		pagePhr: map[int]string{12: "CLIENT_IPADDR"}},
	"handbook-872p.docx": {media: MediaDOCX, minText: 800_000,
		phrases:  []string{"Handbook for", "Chapter 13", "positive pay arrangement"},
		headings: []string{"CHAPTER 1 – INTRODUCTION", "12. RECORD OF MEETING", "7. POSITIVE PAY"}},
	"autogen_test.docx": {media: MediaDOCX, minText: 3_000,
		phrases:  []string{"AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation"},
		headings: []string{"Abstract", "Introduction"},
		tables:   []string{"49e168b7-d2ae-407f-a055-2167576f39a1"}},
	"word_sample.docx": {media: MediaDOCX, minText: 500,
		phrases:  []string{"Swimming in the lake", "Use sun cream"},
		headings: []string{"Swimming in the lake", "Let’s eat"},
		tables:   []string{"Leaves | Ash, Elm, Maple | 50", "Berries | Blueberry, Strawberry, Cranberry | 150"}},
	"ch04-01-what-is-ownership.md": {media: MediaMarkdown, minText: 15_000,
		phrases:  []string{"is a set of rules that govern how a Rust program manages memory", "let s = String::from(\"hello\");"},
		headings: []string{"What Is Ownership?", "The Stack and the Heap", "Ownership Rules", "Stack-Only Data: Copy"}},
	"parquet-testing_data_README.md": {media: MediaMarkdown, minText: 20_000,
		phrases:  []string{`"hello", "parquet", "bloom", "filter"`},
		headings: []string{"Test data files for Parquet compatibility and regression testing", "Bloom Filter Files", "NaN in stats"}},
	"avengers_README.md": {media: MediaMarkdown, minText: 1_500,
		phrases: []string{"Joining The Avengers Is As Deadly As Jumping Off A Four-Story Building"},
		tables:  []string{"`Honorary` | The status of the avenger"}},
	"ibm_wiki.md": {media: MediaMarkdown, minText: 4_000,
		phrases:  []string{"Computing-Tabulating-Recording Company", "SABRE reservation system"},
		headings: []string{"IBM", "1910s–1950s", "1960s–1980s"}},
	"norwich-city.txt": {media: MediaText, minText: 45_000,
		phrases: []string{"Iwan Wyn Roberts", "1997–2004 Norwich City", "BBC Radio Cymru", "£300,000"}},
	"fake-text-utf-16-le.txt": {media: MediaText, minText: 150,
		phrases: []string{"This is a test document to use for unit tests.", "Doylestown, PA 18901", "Hamburgers are delicious"}},
	"autogen_blog.html": {media: MediaHTML, minText: 4_000,
		phrases:  []string{"Does Model and Inference Parameter Matter in LLM Applications?", "gpt-3.5-turbo", "level 4 Algebra"},
		headings: []string{"Experiment Setup", "Experiment Results", "Analysis and Discussion"}},
}

// TestExtractSharedDocuments extracts every document of the shared test data
// and checks known text, headings, tables and pages, or the right error.
func TestExtractSharedDocuments(t *testing.T) {
	dir := sharedtest.Path(t, "data/docs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		tc, ok := sharedCases[e.Name()]
		if !ok {
			t.Errorf("%s: no test case for this shared document", e.Name())
			continue
		}
		seen++
		t.Run(e.Name(), func(t *testing.T) {
			start := time.Now()
			doc, err := extractFile(t, filepath.Join(dir, e.Name()))
			if tc.wantErr != nil {
				checkInvalid(t, err, tc.wantErr, e.Name(), tc.errText)
				return
			}
			if err != nil {
				t.Fatalf("extract: %v", err)
			}
			t.Logf("%s: %d blocks, %d bytes of text in %v", doc.MediaType, len(doc.Blocks), doc.TextLen(), time.Since(start))
			checkDoc(t, doc, tc)
		})
	}
	if seen != len(sharedCases) {
		t.Errorf("saw %d of the %d shared documents the test knows", seen, len(sharedCases))
	}
}

// generatedCases are the documents testfiles builds, with what each must
// give: the counterparts of sharedCases that need no shared folder.
var generatedCases = []struct {
	name string
	data func() []byte
	docCase
}{
	{testfiles.DMCAName, testfiles.DMCAPDF, docCase{media: MediaPDF, pages: testfiles.DMCAPages, minText: 12_000,
		phrases: []string{"The Digital Millennium Copyright Act: A Plain Summary", "Title V: Vessel Hull Design Protection"},
		pagePhr: map[int]string{testfiles.DMCAAnswerPage: "vessel hull", 5: "Title I: Exceptions to the Anti-Circumvention Rules"}}},
	{testfiles.GuideName, testfiles.GuidePDF, docCase{media: MediaPDF, pages: testfiles.GuidePages, minText: 1_000,
		pagePhr: map[int]string{testfiles.GuidePhrasePage: testfiles.GuidePhrase, 3: "Checklist"}}},
	{testfiles.LockedName, testfiles.LockedPDF, docCase{wantErr: ErrEncrypted, errText: "encrypted document: a password is needed"}},
	{testfiles.HistoryName, testfiles.HistoryMarkdown, docCase{media: MediaMarkdown, minText: 1_500,
		phrases:  []string{"it was renamed Harbour Instruments"},
		headings: []string{"Harbour Instruments", "Founding and early years (1908–1930)", "Timeline"},
		tables:   []string{"1921 | Renamed Harbour Instruments"}}},
	{"sourdough.html", testfiles.BlogHTML, docCase{media: MediaHTML, minText: 600,
		title:    "Does Hydration Matter for a Sourdough Starter? | The Test Kitchen",
		phrases:  []string{"The jar at 100 % hydration doubled fastest", "print(jar.name, jar.height_mm)"},
		headings: []string{"Does Hydration Matter for a Sourdough Starter?", "Experiment Setup", "Experiment Results", "Analysis and Discussion"},
		tables:   []string{"B | 100 % | 5"},
		absent:   []string{"Recent posts", "Proofing baskets compared", "Copyright", "__siteConfig", "sticky", "Search"}}},
	{"notes.txt", testfiles.NotesUTF16, docCase{media: MediaText, minText: 150,
		phrases: []string{"The café on Quay Street will host the next meeting.", "Bring the tide tables – the printed ones", "“any other business”"}}},
	{testfiles.TripName, testfiles.TripDOCX, docCase{media: MediaDOCX, minText: 300,
		title:    "Field Trip to the Lake",
		phrases:  []string{"- Shoes that can get wet", "tell us about allergies by Monday"},
		headings: []string{"Field Trip to the Lake", "Getting there", "What to bring", "Lunch"},
		tables:   []string{"Sandwiches | 30 | one each", "Apples | 40 | spares for the drivers"}}},
}

// TestExtractGenerated runs the checks of TestExtractSharedDocuments on
// documents of the same kinds built by testfiles.
func TestExtractGenerated(t *testing.T) {
	for _, tc := range generatedCases {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := extractBytes(t, tc.name, tc.data())
			if tc.wantErr != nil {
				checkInvalid(t, err, tc.wantErr, tc.name, tc.errText)
				return
			}
			if err != nil {
				t.Fatalf("extract: %v", err)
			}
			checkDoc(t, doc, tc.docCase)
		})
	}
}

func checkDoc(t *testing.T, doc *Document, tc docCase) {
	t.Helper()
	if doc.MediaType != tc.media {
		t.Errorf("media type = %q, want %q", doc.MediaType, tc.media)
	}
	if tc.pages != 0 && doc.Pages != tc.pages {
		t.Errorf("pages = %d, want %d", doc.Pages, tc.pages)
	}
	text := doc.Text()
	if len(text) < tc.minText {
		t.Errorf("text is %d bytes, want at least %d", len(text), tc.minText)
	}
	if strings.Contains(text, "\u00e2\u0080\u0093") || strings.Contains(text, "\ufffd\ufffd") {
		t.Errorf("text has mojibake or replacement characters")
	}
	for _, p := range tc.phrases {
		if !strings.Contains(text, p) {
			t.Errorf("text lacks %q", p)
		}
	}
	for _, a := range tc.absent {
		if strings.Contains(text, a) {
			t.Errorf("text has %q", a)
		}
	}
	if tc.title != "" && doc.Title != tc.title {
		t.Errorf("title = %q, want %q", doc.Title, tc.title)
	}
	for _, h := range tc.headings {
		if !hasBlock(doc, Heading, h, 0) {
			t.Errorf("no heading %q", h)
		}
	}
	for _, tb := range tc.tables {
		if !hasBlock(doc, Table, tb, 0) {
			t.Errorf("no table with %q", tb)
		}
	}
	for page, p := range tc.pagePhr {
		if !hasBlock(doc, Paragraph, p, page) {
			t.Errorf("page %d lacks %q", page, p)
		}
	}
	for i, b := range doc.Blocks {
		if strings.TrimSpace(b.Text) == "" || strings.TrimRightFunc(b.Text, isSpace) != b.Text ||
			b.Kind != Code && strings.TrimSpace(b.Text) != b.Text {
			t.Fatalf("block %d (%s) is empty or untrimmed: %q", i, b.Kind, b.Text)
		}
		if (doc.MediaType == MediaPDF) != (b.Page > 0) {
			t.Fatalf("block %d has page %d in a %s", i, b.Page, doc.MediaType)
		}
	}
}

func hasBlock(doc *Document, kind BlockKind, text string, page int) bool {
	for _, b := range doc.Blocks {
		if b.Kind == kind && strings.Contains(b.Text, text) && (page == 0 || b.Page == page) {
			return true
		}
	}
	return false
}

// checkInvalid checks that err is an EINVALID *datachat.Error naming the
// file, with cause in its chain and want in its message.
func checkInvalid(t *testing.T, err error, cause error, name, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", cause)
	}
	if code := datachat.ErrorCode(err); code != datachat.EINVALID {
		t.Errorf("error code = %q, want %q (%v)", code, datachat.EINVALID, err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("error %v is not %v", err, cause)
	}
	msg := datachat.ErrorMessage(err)
	if !strings.Contains(msg, name) {
		t.Errorf("message %q does not name %q", msg, name)
	}
	if want != "" && !strings.Contains(msg, want) {
		t.Errorf("message %q lacks %q", msg, want)
	}
}

func TestExtractHandbookTimeAndMemory(t *testing.T) {
	dir := sharedtest.Path(t, "data/docs")
	start := time.Now()
	doc, err := extractFile(t, filepath.Join(dir, "handbook-872p.docx"))
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	n := doc.TextLen()
	if n < 800_000 || n > 830_000 {
		t.Errorf("handbook text is %d bytes, want about 814,000", n)
	}
	headings := 0
	for _, b := range doc.Blocks {
		if b.Kind == Heading {
			headings++
		}
	}
	if headings < 250 {
		t.Errorf("handbook has %d headings, want at least 250", headings)
	}
	// Measured, not asserted: BENCHMARKS.md has the figures.
	t.Logf("handbook: %d bytes of text, %d blocks, %d headings in %v", n, len(doc.Blocks), headings, d)
}

func TestDecodeText(t *testing.T) {
	const s = "Café – “naïve” déjà vu\nline two"
	utf16le, _ := unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewEncoder().Bytes([]byte(s))
	utf16be, _ := unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewEncoder().Bytes([]byte(s))
	cp1252, err := charmap.Windows1252.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		want    string
		wantEnc string
	}{
		{"utf-8", []byte(s), s, "utf-8"},
		{"utf-8 BOM", append([]byte{0xEF, 0xBB, 0xBF}, s...), s, "utf-8"},
		{"utf-16le BOM", append([]byte{0xFF, 0xFE}, utf16le...), s, "utf-16le"},
		{"utf-16be BOM", append([]byte{0xFE, 0xFF}, utf16be...), s, "utf-16be"},
		{"utf-16le no BOM", utf16le, s, "utf-16le"},
		{"utf-16be no BOM", utf16be, s, "utf-16be"},
		{"windows-1252", cp1252, s, "windows-1252"},
		{"CRLF", []byte("a\r\nb\rc"), "a\nb\nc", "utf-8"},
		{"double-encoded UTF-8", []byte("1986\u00e2\u0080\u00931990 and \u00c2\u00a3300 and caf\u00c3\u00a9"), "1986–1990 and £300 and café", "utf-8"},
		{"cp1252 mojibake", []byte("it\u00e2\u20ac\u2122s"), "it’s", "utf-8"},
		{"legitimate accents kept", []byte("Ångström, São Paulo, Øresund, ÂB"), "Ångström, São Paulo, Øresund, ÂB", "utf-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, enc := decodeText(tc.in)
			if got != tc.want || enc != tc.wantEnc {
				t.Errorf("decodeText = %q, %q; want %q, %q", got, enc, tc.want, tc.wantEnc)
			}
		})
	}
}

func TestExtractErrors(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	var zipNoDoc bytes.Buffer
	zw := zip.NewWriter(&zipNoDoc)
	w, _ := zw.Create("hello.txt")
	w.Write([]byte("hello"))
	zw.Close()
	var xlsx bytes.Buffer
	zw = zip.NewWriter(&xlsx)
	for name, content := range map[string]string{
		"[Content_Types].xml": "<Types/>",
		"_rels/.rels":         `<Relationships><Relationship Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml":     "<workbook/>",
	} {
		w, _ := zw.Create(name)
		io.WriteString(w, content)
	}
	zw.Close()
	var pptx bytes.Buffer
	zw = zip.NewWriter(&pptx)
	w, _ = zw.Create("ppt/presentation.xml")
	io.WriteString(w, "<presentation/>")
	zw.Close()
	// OLE2 compound files name their streams in UTF-16 in their directory.
	// OLE2 compound files name their streams in 128-byte directory entries
	// (UTF-16 name, then at byte 64 its length with the terminator); text
	// that merely spells a name elsewhere does not count.
	ole := func(streams ...string) []byte {
		b := append([]byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), make([]byte, 504)...)
		b = append(b, []byte("W\x00o\x00r\x00k\x00b\x00o\x00o\x00k\x00")...) // no length at byte 64: not an entry
		b = append(b, make([]byte, 1024-len(b))...)
		for _, s := range streams {
			e := make([]byte, 128)
			for i, r := range s {
				e[2*i] = byte(r)
			}
			e[64] = byte(2 * (len(s) + 1))
			b = append(b, e...)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		max   int64
		cause error
		want  string
	}{
		{"sheet.xlsx", xlsx.Bytes(), 0, ErrUnsupported, "an Excel workbook: add it as a dataset"},
		{"slides.pptx", pptx.Bytes(), 0, ErrUnsupported, "a PowerPoint presentation: save it as PDF"},
		{"locked.xlsx", ole("EncryptionInfo", "EncryptedPackage"), 0, ErrUnsupported, "a password-protected Excel workbook"},
		{"locked.docx", ole("EncryptionInfo", "EncryptedPackage"), 0, ErrUnsupported, "a password-protected Office document: remove the password"},
		{"old.xls", ole("Workbook"), 0, ErrUnsupported, "an Excel 97–2003 workbook (.xls)"},
		{"old.ppt", ole("PowerPoint Document"), 0, ErrUnsupported, "a PowerPoint 97–2003 presentation"},
		{"older.doc", ole("WordDocument"), 0, ErrUnsupported, "a Word 97–2003 document (.doc): save it as .docx"},
		{"empty.txt", nil, 0, ErrNoText, "empty"},
		{"blank.txt", []byte(" \n\t\n "), 0, ErrNoText, "no extractable text"},
		{"picture.png", png, 0, ErrUnsupported, "unsupported file type"},
		{"archive.zip", zipNoDoc.Bytes(), 0, ErrUnsupported, "zip archive"},
		{"fake.docx", zipNoDoc.Bytes(), 0, ErrUnsupported, "not a Word document"},
		{"old.doc", []byte("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1rest"), 0, ErrUnsupported, "an old Microsoft Office file"},
		{"notes.pdf", []byte("just some text"), 0, ErrUnsupported, "not a PDF"},
		{"big.txt", bytes.Repeat([]byte("a"), 2000), 1000, ErrTooLarge, "larger than the limit of 1000 bytes"},
		{"binary.bin", []byte{1, 2, 3, 0, 5, 6, 7, 8, 0, 0, 0, 1}, 0, ErrUnsupported, "binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			_, err := Extract(context.Background(), bytes.NewReader(tc.data), tc.name, max)
			checkInvalid(t, err, tc.cause, tc.name, tc.want)
			if strings.Contains(tc.name, "locked") && strings.Contains(err.Error(), "legacy") {
				t.Errorf("%s: an encrypted file is called legacy: %v", tc.name, err)
			}
		})
	}
	// A real password-protected workbook (Agile encryption) uploaded as a
	// document.
	t.Run("shared encryptSHA1.xlsx", func(t *testing.T) {
		locked := sharedtest.Read(t, "data/xlsx/encryptSHA1.xlsx")
		_, err := Extract(context.Background(), bytes.NewReader(locked), "encryptSHA1.xlsx", 1<<20)
		checkInvalid(t, err, ErrUnsupported, "encryptSHA1.xlsx", "a password-protected Excel workbook")
	})
}

// imageOnlyPDF builds a one-page PDF whose page shows a 2×2 image and no text.
func imageOnlyPDF() []byte {
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Resources << /XObject << /Im1 4 0 R >> >> /Contents 5 0 R >>")
	obj("<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 4 >>\nstream\n\x00\xff\xff\x00\nendstream")
	content := "q 200 0 0 200 0 0 cm /Im1 Do Q"
	obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, o := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offsets)+1, xref)
	return b.Bytes()
}

func TestExtractContentDecidesType(t *testing.T) {
	// HTML without an .html name, and Markdown named .md.
	doc, err := extractBytes(t, "page", []byte("<!DOCTYPE html><html><head><title>T</title><script>var x=1;</script></head><body><nav>Menu</nav><h1>Hello</h1><p>World &amp; more</p></body></html>"))
	if err != nil {
		t.Fatal(err)
	}
	if doc.MediaType != MediaHTML || doc.Title != "T" || doc.Text() != "Hello\n\nWorld & more" {
		t.Errorf("got %s %q %q", doc.MediaType, doc.Title, doc.Text())
	}
	// A PDF uploaded with a .txt name is still a PDF.
	doc, err = extractBytes(t, "notes.txt", threePages)
	if err != nil {
		t.Fatal(err)
	}
	if doc.MediaType != MediaPDF {
		t.Errorf("media type = %s, want %s", doc.MediaType, MediaPDF)
	}
}

func TestTextMentioningPDF(t *testing.T) {
	doc, err := extractBytes(t, "pdf-notes.md", []byte("# PDF\n\nA PDF file starts with %PDF-1.7 and ends with %%EOF.\n"))
	if err != nil || doc.MediaType != MediaMarkdown {
		t.Fatalf("got %v, %v; want Markdown", doc, err)
	}
}

func TestMarkdownStructure(t *testing.T) {
	md := "---\ntitle: Front\n---\n# Top #\n\nIntro <!-- hidden\nstill hidden --> visible [link](http://x.example/a_(b)) and `Vec<T>`.\n\n" +
		"> ### Quoted heading\n> quoted text\n\nSetext\n======\n\n```go\n# not a heading\n{{#include ../x.rs}}\nfmt.Println(\"<b>\")\n```\n\n| a | b |\n|---|:-:|\n| 1 | 2 |\n"
	doc := parseMarkdown(md)
	var got []string
	for _, b := range doc.Blocks {
		got = append(got, fmt.Sprintf("%s%d:%s", b.Kind, b.Level, b.Text))
	}
	want := []string{
		"heading1:Top",
		"paragraph0:Intro\nvisible link and `Vec<T>`.",
		"heading3:Quoted heading",
		"paragraph0:quoted text",
		"heading1:Setext",
		"code0:# not a heading\nfmt.Println(\"<b>\")",
		"table0:| a | b |\n| 1 | 2 |",
	}
	if strings.Join(got, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
	}
	if doc.Title != "Front" {
		t.Errorf("title = %q, want Front", doc.Title)
	}
}

func TestHTMLBoilerplate(t *testing.T) {
	page := `<html><head><style>p{}</style></head><body>
<header>Site header</header><nav><a>Home</a></nav>
<main><article><header><h1>Title</h1></header>
<p>First <b>bold</b>
 paragraph.</p><div hidden>secret</div><p aria-hidden="true">icon</p>
<ul><li>one</li><li>two</li></ul>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre>  code
  block</pre><script>alert(1)</script><noscript>x</noscript>
</article><aside>Related</aside></main><footer>Copyright</footer></body></html>`
	doc, err := parseHTML([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	got := doc.Text()
	want := "Title\n\nFirst bold paragraph.\n\n- one\n\n- two\n\nk | v\na | 1\n\n  code\n  block"
	if got != want {
		t.Errorf("text:\n%q\nwant:\n%q", got, want)
	}
	for _, bad := range []string{"Site header", "Home", "secret", "icon", "alert", "Related", "Copyright"} {
		if strings.Contains(got, bad) {
			t.Errorf("text has boilerplate %q", bad)
		}
	}
}

func TestDOCXStructure(t *testing.T) {
	styles := `<?xml version="1.0"?><w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:style w:type="paragraph" w:styleId="1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="Mine"><w:name w:val="My Heading"/><w:basedOn w:val="1"/></w:style>
<w:style w:type="paragraph" w:styleId="Outline"><w:name w:val="Custom"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>
</w:styles>`
	body := `<w:p><w:pPr><w:pStyle w:val="1"/></w:pPr><w:r><w:t>Chapter</w:t></w:r><w:r><w:t xml:space="preserve"> One</w:t></w:r></w:p>
<w:p><w:r><w:t>Body</w:t><w:tab/><w:t>text</w:t><w:br/><w:t>next line</w:t></w:r><w:r><w:instrText>PAGEREF x</w:instrText></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del></w:p>
<w:p><w:pPr><w:pStyle w:val="Outline"/></w:pPr><w:r><w:t>Section</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="Mine"/><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>Inherited</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>item</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b</w:t></w:r></w:p><w:p><w:r><w:t>c</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:tbl><w:tr><w:tc><w:p><w:r><w:t>nested</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:tc><w:tc/></w:tr></w:tbl>`
	doc, err := extractBytes(t, "s.docx", testfiles.DOCX(body, map[string]string{"word/styles.xml": styles}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range doc.Blocks {
		got = append(got, fmt.Sprintf("%s%d:%s", b.Kind, b.Level, b.Text))
	}
	want := []string{"heading1:Chapter One", "paragraph0:Body text\nnext line", "heading2:Section", "heading1:Inherited", "paragraph0:- item", "table0:a | b c\nnested |"}
	if strings.Join(got, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n---\n"), strings.Join(want, "\n---\n"))
	}
}

func TestDOCXZipBomb(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		defer func(n int) { maxZipEntries = n }(maxZipEntries)
		maxZipEntries = 5
		extra := map[string]string{}
		for i := range 6 {
			extra[fmt.Sprintf("word/media/%d.bin", i)] = "x"
		}
		_, err := extractBytes(t, "many.docx", testfiles.DOCX("<w:p/>", extra))
		checkInvalid(t, err, ErrTooLarge, "many.docx", "more than 5 entries")
	})
	t.Run("part size", func(t *testing.T) {
		defer func(n int64) { maxPartBytes = n }(maxPartBytes)
		maxPartBytes = 64 << 10
		// 1 MiB of paragraphs compresses to a few KiB.
		body := strings.Repeat("<w:p><w:r><w:t>aaaaaaaaaaaaaaaa</w:t></w:r></w:p>", 1<<20/48)
		_, err := extractBytes(t, "bomb.docx", testfiles.DOCX(body, nil))
		checkInvalid(t, err, ErrTooLarge, "bomb.docx", "unpacks to more than")
	})
	t.Run("declared total", func(t *testing.T) {
		defer func(n int64) { maxZipDeclared = n }(maxZipDeclared)
		maxZipDeclared = 1 << 10
		_, err := extractBytes(t, "big.docx", testfiles.DOCX(strings.Repeat("<w:p/>", 1000), nil))
		checkInvalid(t, err, ErrTooLarge, "big.docx", "unpacks to more than")
	})
	t.Run("damaged", func(t *testing.T) {
		data := testfiles.DOCX("<w:p><w:r><w:t>x</w:t></w:r></w:p>", nil)
		data = data[:len(data)-30] // cut the central directory
		_, err := extractBytes(t, "cut.docx", data)
		if datachat.ErrorCode(err) != datachat.EINVALID {
			t.Errorf("got %v, want an EINVALID error", err)
		}
	})
}

func TestExtractContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Extract(ctx, bytes.NewReader(threePages), "report.pdf", 1<<20)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}
