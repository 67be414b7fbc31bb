// Package extract turns an uploaded document — PDF, DOCX, Markdown, HTML or
// plain text — into structured text: a list of blocks ([Block]: headings,
// paragraphs, tables, code) that keep the page or heading they came from, so
// that a citation can say "report.pdf, page 4" or "handbook.docx, section
// 3.2".
//
// [Extract] reads the upload as a stream into a temporary file (never more than
// the size cap), detects the type from the content and the file name, and
// dispatches to one decoder per format, all inside the process. PDF text
// comes from PDFium compiled to WebAssembly and run by wazero, with a memory
// cap, a timeout and a limit on concurrent reads per [Extractor] (see
// [PDFOptions]); everything else is decoded in Go.
//
// Every failure caused by the file itself is a *datachat.Error with code
// EINVALID whose message names the file; the sentinel errors below are in its
// chain for errors.Is.
package extract

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"datachat"
)

// Media types of the extracted formats.
const (
	MediaPDF      = "application/pdf"
	MediaDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	MediaMarkdown = "text/markdown"
	MediaHTML     = "text/html"
	MediaText     = "text/plain"
)

// Causes in the chain of the *datachat.Error that [Extract] returns.
var (
	ErrTooLarge    = errors.New("file too large")
	ErrUnsupported = errors.New("unsupported file type")
	ErrEncrypted   = errors.New("encrypted document")
	ErrNoText      = errors.New("no extractable text")
	ErrDamaged     = errors.New("damaged file")
	// ErrBusy is the cause of the EBUSY error when too many PDF files wait
	// to be read.
	ErrBusy = errors.New("pdf reader busy")
)

// Limits that guard the decoders against hostile input.
const (
	// MaxTextBytes caps the extracted text of one document.
	MaxTextBytes = 256 << 20
	// PDFTimeout is the default bound on reading one PDF file
	// ([PDFOptions.Timeout]).
	PDFTimeout = 2 * time.Minute
)

// BlockKind says what a [Block] is.
type BlockKind int

// Block kinds.
const (
	Paragraph BlockKind = iota
	Heading
	Table
	Code
)

func (k BlockKind) String() string {
	switch k {
	case Heading:
		return "heading"
	case Table:
		return "table"
	case Code:
		return "code"
	default:
		return "paragraph"
	}
}

// Block is one structural piece of a document's text.
type Block struct {
	Kind  BlockKind
	Level int    // heading level, 1 (top) to 6; 0 for other kinds
	Page  int    // 1-based page number for PDF; 0 when the format has no pages
	Text  string // never empty; no leading or trailing white space
}

// Document is the text of an uploaded file.
type Document struct {
	Name      string // the file name as uploaded (base name)
	MediaType string // one of the Media* constants
	Title     string // from the file's own metadata or first heading, if any
	Pages     int    // number of pages for PDF; 0 for formats without pages
	Encoding  string // the detected encoding of text formats (e.g. "utf-8", "utf-16le", "windows-1252")
	Bytes     int64  // size of the upload
	Blocks    []Block
}

// BlockSeparator joins blocks in [Document.Text]; chunk offsets count in that text.
const BlockSeparator = "\n\n"

// Text returns the document's text: its blocks joined by [BlockSeparator].
func (d *Document) Text() string {
	var n int
	for _, b := range d.Blocks {
		n += len(b.Text) + len(BlockSeparator)
	}
	var sb strings.Builder
	sb.Grow(n)
	for i, b := range d.Blocks {
		if i > 0 {
			sb.WriteString(BlockSeparator)
		}
		sb.WriteString(b.Text)
	}
	return sb.String()
}

// TextLen returns len(d.Text()) without building it.
func (d *Document) TextLen() int {
	n := 0
	for i, b := range d.Blocks {
		if i > 0 {
			n += len(BlockSeparator)
		}
		n += len(b.Text)
	}
	return n
}

// Extractor extracts the text of documents. It holds the PDF reader, whose
// WebAssembly runtime is started on the first PDF and reused; one Extractor
// serves any number of goroutines. Make one with [NewExtractor].
type Extractor struct {
	pdf *pdfReader
	// TempDir is where an upload is spooled while it is read, removed once
	// read ("": the system's temporary directory). serve gives each process
	// one of its own in the data directory (internal/scratch), so that what a
	// killed process left is removed by the next. Set it before use.
	TempDir string
}

// NewExtractor returns an Extractor whose PDF reading is bounded by opts.
func NewExtractor(opts PDFOptions) *Extractor {
	return &Extractor{pdf: newPDFReader(opts)}
}

// Warm starts PDFium in the background (compiling it takes seconds, once
// per process, or once for all with [PDFOptions.CacheDir]), so that the
// first PDF does not wait for it. With a CacheDir, PDFium is let go as soon
// as it is compiled there: the first PDF reads it back in milliseconds, and
// a server that reads none does not hold it.
func (e *Extractor) Warm() { e.pdf.warm() }

// Close releases the PDF reader. No Extract may run during or after it.
func (e *Extractor) Close() error { return e.pdf.close() }

// PDFStats returns the statistics of the PDF reader.
func (e *Extractor) PDFStats() PDFStats { return e.pdf.Stats() }

// defaultExtractor serves [Extract], with the default [PDFOptions], for the
// life of the process.
var defaultExtractor = sync.OnceValue(func() *Extractor { return NewExtractor(PDFOptions{}) })

// Default returns the process's default [Extractor], which [Extract] uses.
func Default() *Extractor { return defaultExtractor() }

// Extract extracts a document with the process's default [Extractor]; see
// [Extractor.Extract].
func Extract(ctx context.Context, r io.Reader, filename string, maxBytes int64) (*Document, error) {
	return defaultExtractor().Extract(ctx, r, filename, maxBytes)
}

// Extract reads a document from r, at most maxBytes of it (0 or less: no cap),
// and returns its text. filename is the upload's name: its extension helps
// tell the type, and every error message names it. The content decides over
// the extension (a PDF named .txt is read as PDF).
//
// Errors: EINVALID (with [ErrTooLarge], [ErrUnsupported], [ErrEncrypted],
// [ErrNoText] or [ErrDamaged] in the chain) when the file cannot be used,
// including a PDF that needs more than the memory limit or takes longer than
// the timeout; EBUSY with [ErrBusy] when too many PDF files wait to be read,
// and EBUSY when the PDF reader cannot start; ctx.Err() when ctx ends; other
// errors (I/O on the temporary file) are internal.
func (e *Extractor) Extract(ctx context.Context, r io.Reader, filename string, maxBytes int64) (*Document, error) {
	name := filepath.Base(strings.ReplaceAll(filename, `\`, "/"))
	if name == "." || name == "/" {
		name = "document"
	}
	f, size, err := spool(e.TempDir, r, name, maxBytes)
	if err != nil {
		return nil, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()

	head := make([]byte, 1024)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("extract %q: read: %w", name, err)
	}
	head = head[:n]

	kind := detect(head, f, size, name)
	var doc *Document
	switch kind {
	case MediaPDF:
		doc, err = e.pdf.extract(ctx, f, size, name)
	case MediaDOCX:
		doc, err = extractDOCX(f, size)
	case MediaMarkdown, MediaHTML, MediaText:
		doc, err = extractTextFile(f, size, kind)
	default:
		return nil, invalid(name, ErrUnsupported, "unsupported file type%s; upload PDF, DOCX, Markdown, HTML or plain text", kind)
	}
	if err != nil {
		var de *datachat.Error
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("extract %q: %w", name, ctx.Err())
		case errors.As(err, &de):
			return nil, err
		case isFileError(err):
			return nil, invalid(name, err, "%s", err.Error())
		default:
			return nil, fmt.Errorf("extract %q: %w", name, err)
		}
	}
	doc.Name = name
	doc.MediaType = kind
	doc.Bytes = size
	tidy(doc)
	if len(doc.Blocks) == 0 {
		msg := "no extractable text"
		if kind == MediaPDF {
			msg = "no extractable text; OCR is not supported"
		}
		return nil, invalid(name, ErrNoText, "%s", msg)
	}
	return doc, nil
}

// fileError marks an error caused by the file's content (as opposed to I/O).
type fileError struct {
	cause error
	msg   string
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.cause }

func badFile(cause error, format string, args ...any) error {
	return &fileError{cause: cause, msg: fmt.Sprintf(format, args...)}
}

func isFileError(err error) bool {
	var fe *fileError
	return errors.As(err, &fe)
}

// invalid returns the EINVALID error for file name with cause in its chain.
func invalid(name string, cause error, format string, args ...any) error {
	return datachat.WrapError(datachat.EINVALID,
		fmt.Sprintf("cannot read document %q: ", name)+fmt.Sprintf(format, args...), cause)
}

// spool copies r into a temporary file, failing once more than maxBytes arrive.
func spool(dir string, r io.Reader, name string, maxBytes int64) (*os.File, int64, error) {
	f, err := os.CreateTemp(dir, "datachat-document-*")
	if err != nil {
		return nil, 0, datachat.ClassifyNoSpace(fmt.Errorf("extract %q: %w", name, err))
	}
	src := r
	if maxBytes > 0 {
		src = io.LimitReader(r, maxBytes+1)
	}
	n, err := io.Copy(f, src)
	if err == nil && maxBytes > 0 && n > maxBytes {
		err = invalid(name, ErrTooLarge, "file is larger than the limit of %d bytes", maxBytes)
	} else if err != nil {
		// A full disk is the server's condition, not the document's fault.
		err = datachat.ClassifyNoSpace(fmt.Errorf("extract %q: read upload: %w", name, err))
	} else if n == 0 {
		err = invalid(name, ErrNoText, "file is empty")
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	return f, n, nil
}

// detect returns the media type of the file from its first bytes, its
// content and its name; for an unsupported file it returns a description
// (starting with ": " or "") used in the error message.
func detect(head []byte, f *os.File, size int64, name string) string {
	ext := strings.ToLower(filepath.Ext(name))
	named := mediaOfExt(ext) // what Formats says the name is
	textExt := named == MediaMarkdown || named == MediaHTML || named == MediaText
	switch {
	// PDF readers accept the header anywhere in the first KiB; a text file
	// that merely mentions it further in stays text.
	case bytes.HasPrefix(head, []byte("%PDF-")) || bytes.Contains(head, []byte("%PDF-")) && !textExt:
		return MediaPDF
	case bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")):
		if isDOCX(f, size) {
			return MediaDOCX
		}
		switch officeZip(f, size) {
		case "xl":
			return " (an Excel workbook: add it as a dataset, where each sheet becomes a table)"
		case "ppt":
			return " (a PowerPoint presentation: save it as PDF and upload that)"
		}
		if ext == ".docx" {
			return " (a zip archive without word/document.xml: not a Word document)"
		}
		return " (a zip archive)"
	case bytes.HasPrefix(head, oleMagic):
		return oleKind(f, size, ext)
	case bytes.HasPrefix(head, []byte("{\\rtf")):
		return " (RTF)"
	}
	if binaryMagic(head) {
		return fmt.Sprintf(" (%s looks like a binary file)", ext)
	}
	// Text of some kind.
	switch {
	case named == MediaPDF:
		return " (named .pdf but not a PDF)"
	case named == MediaDOCX:
		return " (named .docx but not a Word document)"
	case textExt:
		return named
	case ext == ".csv" || ext == ".tsv":
		return MediaText
	}
	if looksHTML(head) {
		return MediaHTML
	}
	if isBinary(head) {
		return " (binary content)"
	}
	return MediaText
}

func binaryMagic(head []byte) bool {
	for _, m := range []string{
		"\x89PNG", "\xFF\xD8\xFF", "GIF87a", "GIF89a", "\x1F\x8B", "BZh", "\xFD7zXZ",
		"7z\xBC\xAF", "Rar!", "\x7FELF", "MZ", "RIFF", "\x00\x00\x01\x00", "OggS", "fLaC", "ID3",
		"PAR1", "SQLite format 3",
	} {
		if bytes.HasPrefix(head, []byte(m)) {
			return true
		}
	}
	return false
}

// isBinary reports whether head has control bytes that text never has, once
// UTF-16 (which has NULs in every other byte) is ruled out.
func isBinary(head []byte) bool {
	if _, ok := sniffUTF16(head); ok {
		return false
	}
	bad := 0
	for _, c := range head {
		if c == 0 {
			return true
		}
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v' && c != 0x1b {
			bad++
		}
	}
	return bad > len(head)/10
}

func looksHTML(head []byte) bool {
	s := bytes.ToLower(head)
	s = bytes.TrimPrefix(s, []byte("\xef\xbb\xbf"))
	s = bytes.TrimSpace(s)
	for _, p := range []string{"<!doctype html", "<html", "<head", "<body"} {
		if bytes.HasPrefix(s, []byte(p)) {
			return true
		}
	}
	if bytes.HasPrefix(s, []byte("<?xml")) && bytes.Contains(s, []byte("<html")) {
		return true
	}
	return bytes.HasPrefix(s, []byte("<!--")) && (bytes.Contains(s, []byte("<html")) || bytes.Contains(s, []byte("<body")))
}

// extractTextFile decodes a text, Markdown or HTML file.
func extractTextFile(f *os.File, size int64, kind string) (*Document, error) {
	if size > MaxTextBytes {
		return nil, badFile(ErrTooLarge, "text is larger than %d bytes", MaxTextBytes)
	}
	data, err := io.ReadAll(bufio.NewReader(io.NewSectionReader(f, 0, size)))
	if err != nil {
		return nil, err
	}
	switch kind {
	case MediaHTML:
		return parseHTML(data)
	case MediaMarkdown:
		text, enc := decodeText(data)
		doc := parseMarkdown(text)
		doc.Encoding = enc
		return doc, nil
	default:
		text, enc := decodeText(data)
		doc := parsePlain(text)
		doc.Encoding = enc
		return doc, nil
	}
}

// invisible are format characters that carry no text: zero-width spaces and
// joiners, the word joiner, a stray byte order mark and the soft hyphen.
var invisible = strings.NewReplacer("\u200b", "", "\u200c", "", "\u200d", "", "\u2060", "", "\ufeff", "", "\u00ad", "")

// tidy removes invisible characters and blocks left empty, and takes the title
// from the first heading when the file gave none.
func tidy(doc *Document) {
	out := doc.Blocks[:0]
	for _, b := range doc.Blocks {
		if strings.ContainsAny(b.Text, "\u200b\u200c\u200d\u2060\ufeff\u00ad") {
			b.Text = strings.TrimSpace(invisible.Replace(b.Text))
		}
		if b.Text != "" {
			out = append(out, b)
		}
	}
	clear(doc.Blocks[len(out):])
	doc.Blocks = out
	if doc.Title == "" {
		for _, b := range doc.Blocks {
			if b.Kind == Heading {
				doc.Title = b.Text
				break
			}
		}
	}
}
