package extract

import (
	"errors"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/klippa-app/go-pdfium"
	pdfiumerrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/tetratelabs/wazero/sys"
)

// pdfDoc is a document open in a PDFium instance.
type pdfDoc struct {
	inst pdfium.Pdfium
	ref  references.FPDF_DOCUMENT
}

// openPDF opens the file for reading. PDFium decrypts files whose user
// password is empty by itself; it reads the file through f as it needs it,
// so the file does not count against the instance's memory.
func openPDF(inst pdfium.Pdfium, f io.ReaderAt, size int64) (*pdfDoc, error) {
	res, err := inst.OpenDocument(&requests.OpenDocument{
		FileReader:     io.NewSectionReader(f, 0, size),
		FileReaderSize: size,
	})
	switch {
	case errors.Is(err, pdfiumerrors.ErrPassword):
		return nil, badFile(ErrEncrypted, "encrypted document: a password is needed")
	case errors.Is(err, pdfiumerrors.ErrSecurity):
		return nil, badFile(ErrEncrypted, "encrypted document: its encryption scheme is not supported")
	case err != nil && !pdfiumFailed(err):
		return nil, badFile(ErrDamaged, "the PDF could not be read (damaged or not a PDF): %s", pdfiumReason(err))
	case err != nil:
		return nil, err
	}
	doc := &pdfDoc{inst: inst, ref: res.Document}
	perms, err := inst.FPDF_GetDocPermissions(&requests.FPDF_GetDocPermissions{Document: doc.ref})
	if err != nil {
		doc.close()
		return nil, err
	}
	// As pdftotext did: the owner of an encrypted file can forbid copying
	// its text (bit 5; 0xFFFFFFFF when the file is not encrypted).
	if !perms.CopyOrExtractText {
		doc.close()
		return nil, badFile(ErrEncrypted, "encrypted document: its permissions forbid copying its text")
	}
	return doc, nil
}

func (d *pdfDoc) close() {
	d.inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: d.ref})
}

func (d *pdfDoc) pageCount() (int, error) {
	res, err := d.inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: d.ref})
	if err != nil {
		return 0, err
	}
	return res.PageCount, nil
}

// pageText returns the text of page i (0-based), its lines joined by "\n"
// and its paragraphs by "\n\n" (see [layoutPage]). A page PDFium cannot load
// has no text; only a failure of PDFium itself is an error.
func (d *pdfDoc) pageText(i int) (string, error) {
	inst := d.inst
	page, err := inst.FPDF_LoadPage(&requests.FPDF_LoadPage{Document: d.ref, Index: i})
	if err != nil {
		return "", fatalOnly(err)
	}
	defer inst.FPDF_ClosePage(&requests.FPDF_ClosePage{Page: page.Page})
	tp, err := inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: requests.Page{ByReference: &page.Page}})
	if err != nil {
		return "", fatalOnly(err)
	}
	defer inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage})
	count, err := inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil || count.Count <= 0 {
		return "", fatalOnly(err)
	}
	n := count.Count

	// One call for the text. It leaves out characters without Unicode, and
	// then its runes no longer match PDFium's character indexes, which the
	// positions below need: ask for each character instead.
	text, err := inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, Count: n})
	if err != nil {
		return "", fatalOnly(err)
	}
	chars := []rune(text.Text)
	if len(chars) != n {
		chars = make([]rune, n)
		for k := range chars {
			u, err := inst.FPDFText_GetUnicode(&requests.FPDFText_GetUnicode{TextPage: tp.TextPage, Index: k})
			if err != nil {
				return "", fatalOnly(err)
			}
			chars[k] = rune(u.Unicode)
		}
	}

	lines := splitPDFLines(chars)
	for k := range lines {
		l := &lines[k]
		// The loose box spans the font's ascent and descent at the size
		// the character is drawn: its height is the line's size whatever
		// mix of font size and text matrix made it.
		box, err := inst.FPDFText_GetLooseCharBox(&requests.FPDFText_GetLooseCharBox{TextPage: tp.TextPage, Index: l.first})
		if err != nil {
			if err = fatalOnly(err); err != nil {
				return "", err
			}
			continue
		}
		r := box.Rect
		l.y, l.size = float64(r.Bottom), math.Abs(float64(r.Top-r.Bottom))
	}
	return layoutPage(lines), nil
}

// pdfiumFailed reports whether err is a failure of the PDF reader itself (a
// WebAssembly trap such as PDFium's abort when out of memory, a killed
// instance, a panic in go-pdfium) rather than PDFium's answer about the
// file. After one, the instance must not be used again.
func pdfiumFailed(err error) bool {
	if err == nil {
		return false
	}
	for _, known := range []error{
		pdfiumerrors.ErrUnknown, pdfiumerrors.ErrFile, pdfiumerrors.ErrFormat, pdfiumerrors.ErrPassword,
		pdfiumerrors.ErrSecurity, pdfiumerrors.ErrPage, pdfiumerrors.ErrUnexpected, pdfiumerrors.ErrSuccess,
	} {
		if errors.Is(err, known) {
			return false
		}
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return true
	}
	// wazero reports traps as "wasm error: …"; go-pdfium turns a panic into
	// "panic occurred in …" and refuses a killed instance.
	msg := err.Error()
	return strings.Contains(msg, "wasm error") || strings.Contains(msg, "panic occurred") ||
		strings.Contains(msg, "instance is closed") || strings.Contains(msg, "instance is already closed")
}

// fatalOnly returns err if it is a failure of the reader, nil otherwise.
func fatalOnly(err error) error {
	if pdfiumFailed(err) {
		return err
	}
	return nil
}

// pdfiumReason describes one of PDFium's errors ("3: incorrect format").
func pdfiumReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 && i < 3 {
		msg = msg[i+2:]
	}
	return msg
}

// pdfLine is one line of a page as PDFium orders them: the text, and how
// high its first character is (PDF units, y upwards: the bottom of its box)
// and how large (the height of its box).
type pdfLine struct {
	text   string
	first  int     // PDFium's index of the first character
	y      float64 // the bottom of the first character's box
	size   float64 // the height of that box; 0 when unknown
	hyphen bool    // the line ends with a hyphen that PDFium found breaks a word
}

// splitPDFLines cuts a page's characters into lines at the line breaks PDFium
// generates (CR LF) and at U+FFFE, with which PDFium replaces a hyphen that
// breaks a word at the end of a line (dropping the line break).
func splitPDFLines(chars []rune) []pdfLine {
	var lines []pdfLine
	var sb strings.Builder
	first := -1
	flush := func(hyphen bool) {
		if first >= 0 {
			lines = append(lines, pdfLine{text: sb.String(), first: first, hyphen: hyphen})
		}
		sb.Reset()
		first = -1
	}
	for i, c := range chars {
		switch {
		case c == '\r' || c == '\n' || c == '\f':
			flush(false)
		case c == 0xFFFE:
			flush(true)
		case c == 0 || c == 0xFFFF || c == 0xFEFF:
		default:
			if first < 0 {
				if unicode.IsSpace(c) {
					continue
				}
				first = i
			}
			sb.WriteRune(c)
		}
	}
	flush(false)
	return lines
}

// layoutPage joins the lines of a page into text: "\n" between the lines of a
// paragraph, "\n\n" between paragraphs. PDFium gives lines, not paragraphs; a
// paragraph ends where the next line is further below than the usual line
// spacing of its font size, above it (a new column), or in another font size
// (a heading). A line ending in a hyphen that breaks a word is joined to the
// next one.
func layoutPage(lines []pdfLine) string {
	// The usual distance between the baselines of two lines of the same
	// size, per size.
	gaps := map[float64][]float64{}
	for i := 1; i < len(lines); i++ {
		a, b := lines[i-1], lines[i]
		if !sameSize(a.size, b.size) {
			continue
		}
		if dy := a.y - b.y; dy > 0.5*b.size && dy < 3*b.size {
			k := sizeKey(b.size)
			gaps[k] = append(gaps[k], dy)
		}
	}
	pitch := map[float64]float64{}
	for k, g := range gaps {
		// The lower median: with few lines, paragraph gaps must not
		// count as the usual spacing.
		slices.Sort(g)
		pitch[k] = g[(len(g)-1)/2]
	}

	var sb strings.Builder
	for i, l := range lines {
		if i > 0 {
			p := lines[i-1]
			switch {
			case p.hyphen:
				if !endsLower(p.text) || !startsLower(l.text) {
					sb.WriteString("-\n")
				}
			case paragraphBreak(p, l, pitch[sizeKey(l.size)]):
				sb.WriteString("\n\n")
			default:
				sb.WriteString("\n")
			}
		}
		sb.WriteString(l.text)
	}
	if n := len(lines); n > 0 && lines[n-1].hyphen {
		sb.WriteString("-")
	}
	return sb.String()
}

// paragraphBreak reports whether line b starts a new paragraph after line a;
// pitch is the usual line spacing at b's size (0 if unknown).
func paragraphBreak(a, b pdfLine, pitch float64) bool {
	if !(a.size > 0) || !(b.size > 0) || math.IsInf(a.y, 0) || math.IsInf(b.y, 0) {
		return false // position unknown: keep the lines together
	}
	if !sameSize(a.size, b.size) {
		return true
	}
	dy := a.y - b.y
	switch {
	case math.Abs(dy) <= 0.5*b.size:
		return false // the same row: a line PDFium split, or table cells
	case dy < 0:
		return true // up the page: the next column or block
	case pitch > 0:
		return dy > 1.3*pitch+0.5
	default:
		return dy > 1.6*b.size
	}
}

func sameSize(a, b float64) bool {
	return a > 0 && b > 0 && math.Abs(a-b) <= 0.15*max(a, b)
}

// sizeKey groups font sizes to half points.
func sizeKey(size float64) float64 { return math.Round(size*2) / 2 }

func endsLower(s string) bool {
	r := []rune(s)
	return len(r) > 0 && unicode.IsLower(r[len(r)-1])
}

func startsLower(s string) bool {
	for _, c := range s {
		return unicode.IsLower(c)
	}
	return false
}

// parsePDFPages makes the document of the pages' texts (from [layoutPage]),
// one paragraph block per paragraph, each with its page number.
func parsePDFPages(pages []string) *Document {
	doc := &Document{Pages: len(pages)}
	for i, page := range pages {
		page = strings.ToValidUTF8(normalizeNewlines(page), "\uFFFD")
		page = dotLeaders.ReplaceAllString(page, " … ")
		for _, para := range splitParagraphs(page) {
			doc.Blocks = append(doc.Blocks, Block{Kind: Paragraph, Page: i + 1, Text: dehyphenate(para)})
		}
	}
	return doc
}

// dotLeaders matches the runs of dots a table of contents puts between a title
// and its page number.
var dotLeaders = regexp.MustCompile(`(?:[ \t]*\.){5,}[ \t]*`)

// dehyphenate joins words broken across lines with a hyphen ("extrac-\ntion")
// when a lower-case letter is on both sides. (PDFium marks most such
// hyphens itself; this catches the ones it leaves.)
func dehyphenate(s string) string {
	if !strings.Contains(s, "-\n") {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for {
		i := strings.Index(s, "-\n")
		if i < 0 {
			sb.WriteString(s)
			return sb.String()
		}
		if i > 0 && isLowerASCII(s[i-1]) && i+2 < len(s) && isLowerASCII(s[i+2]) {
			sb.WriteString(s[:i])
		} else {
			sb.WriteString(s[:i+2])
		}
		s = s[i+2:]
	}
}

func isLowerASCII(c byte) bool { return c >= 'a' && c <= 'z' }
