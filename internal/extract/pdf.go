package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// PDFToText is the pdftotext program (Debian package poppler-utils) that
// extracts the text of PDF files.
var PDFToText = "pdftotext"

// extractPDF runs pdftotext on the file at path. pdftotext ends every page with
// a form feed, which keeps page numbers; it decrypts files whose user password
// is empty by itself, and fails with "Incorrect password" on the others.
func extractPDF(ctx context.Context, path, name string) (*Document, error) {
	prog, err := exec.LookPath(PDFToText)
	if err != nil {
		return nil, fmt.Errorf("pdf text extraction needs %s (Debian package poppler-utils): %w", PDFToText, err)
	}
	runCtx, cancel := context.WithTimeout(ctx, PDFTimeout)
	defer cancel()
	stdout := &cappedBuffer{max: MaxTextBytes}
	stderr := &cappedBuffer{max: 64 << 10}
	cmd := exec.CommandContext(runCtx, prog, "-enc", "UTF-8", "-eol", "unix", path, "-")
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if runCtx.Err() != nil {
		return nil, badFile(ErrDamaged, "text extraction took longer than %s", PDFTimeout)
	}
	if stdout.overflow {
		return nil, badFile(ErrTooLarge, "extracted text is larger than %d bytes", MaxTextBytes)
	}
	if err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return nil, fmt.Errorf("run %s: %w", prog, err)
		}
		msg := stderr.String()
		if strings.Contains(msg, "Incorrect password") {
			return nil, badFile(ErrEncrypted, "encrypted document: a password is needed")
		}
		if strings.Contains(msg, "Copying of text from this document is not allowed") {
			return nil, badFile(ErrEncrypted, "encrypted document: its permissions forbid copying its text")
		}
		return nil, badFile(ErrDamaged, "the PDF could not be read (damaged or not a PDF)%s", firstLine(msg))
	}
	return parsePDFText(stdout.String()), nil
}

// parsePDFText splits pdftotext's output into pages at form feeds and each page
// into paragraphs at blank lines.
func parsePDFText(out string) *Document {
	pages := strings.Split(out, "\f")
	// pdftotext ends every page with \f: the piece after the last one is empty.
	if len(pages) > 1 && strings.TrimSpace(pages[len(pages)-1]) == "" {
		pages = pages[:len(pages)-1]
	}
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
// when a lower-case letter is on both sides.
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

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return ": " + strings.ToValidUTF8(s, "")
}

// cappedBuffer keeps at most max bytes and records whether more came.
type cappedBuffer struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.overflow = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
