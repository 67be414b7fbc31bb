package retrieval

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"datachat"
	"datachat/internal/extract"
)

// ChunkOptions tune [Chunk]. Sizes count bytes of UTF-8 text, which is
// characters for Latin-script text.
type ChunkOptions struct {
	// Size is the target length of a chunk; 0 means [DefaultChunkSize]. A
	// section up to 20 % longer stays one chunk.
	Size int
	// Overlap is how much of the end of a chunk the next chunk of the same
	// section repeats; 0 means 15 % of Size, negative means none.
	Overlap int
}

// DefaultChunkSize is the target chunk length when [ChunkOptions.Size] is 0.
const DefaultChunkSize = 1000

// HeadingSeparator joins the headings of a chunk's section path
// ("Chapter 3 > A. Initial review").
const HeadingSeparator = " > "

// Chunk splits an extracted document into chunks that keep its structure: a
// chunk never crosses a heading or a page, is cut at a paragraph, sentence or
// word boundary when one is near, and overlaps the previous chunk of its
// section. Each chunk carries the document id, its sequence number, its page
// (PDF) or heading path (DOCX, Markdown, HTML), and its start and end as
// character (code point) offsets in [extract.Document.Text]. Chunk ids are
// docID + ":" + seq.
func Chunk(doc *extract.Document, docID string, opts ChunkOptions) []*datachat.Chunk {
	size := opts.Size
	if size <= 0 {
		size = DefaultChunkSize
	}
	overlap := opts.Overlap
	switch {
	case overlap == 0:
		overlap = size * 15 / 100
	case overlap < 0:
		overlap = 0
	}
	if overlap > size/2 {
		overlap = size / 2
	}

	var (
		chunks   []*datachat.Chunk
		headings [7]string
		off      int // byte offset of the current block in the document text
		roff     int // the same in code points
	)
	// A section is a run of non-heading blocks under the same heading path
	// and on the same page.
	secStart, secRStart := -1, 0
	secPage, secHeading := 0, ""
	var sec strings.Builder
	flush := func() {
		if secStart < 0 {
			return
		}
		text := sec.String()
		for _, sp := range splitSection(text, size, overlap) {
			chunks = append(chunks, &datachat.Chunk{
				ID:         fmt.Sprintf("%s:%d", docID, len(chunks)),
				DocumentID: docID,
				Seq:        len(chunks),
				Page:       secPage,
				Heading:    secHeading,
				Start:      secRStart + sp.rstart,
				End:        secRStart + sp.rend,
				Text:       text[sp.start:sp.end],
			})
		}
		sec.Reset()
		secStart = -1
	}
	for i, b := range doc.Blocks {
		if i > 0 {
			off += len(extract.BlockSeparator)
			roff += len(extract.BlockSeparator)
		}
		if b.Kind == extract.Heading {
			flush()
			level := min(max(b.Level, 1), 6)
			headings[level] = b.Text
			for l := level + 1; l < len(headings); l++ {
				headings[l] = ""
			}
		} else {
			heading := headingPath(headings[:])
			if secStart >= 0 && (b.Page != secPage || heading != secHeading) {
				flush()
			}
			if secStart < 0 {
				secStart, secRStart = off, roff
				secPage, secHeading = b.Page, heading
			} else {
				sec.WriteString(extract.BlockSeparator)
			}
			sec.WriteString(b.Text)
		}
		off += len(b.Text)
		roff += utf8.RuneCountInString(b.Text)
	}
	flush()
	return chunks
}

func headingPath(h []string) string {
	var parts []string
	for _, s := range h {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, HeadingSeparator)
}

// span is a chunk of a section: byte offsets start, end and code point
// offsets rstart, rend, all relative to the section.
type span struct{ start, end, rstart, rend int }

// splitSection cuts s into pieces of about size bytes that overlap by about
// overlap bytes, preferring to cut at a paragraph break, then a sentence end,
// then a line break, then a space.
func splitSection(s string, size, overlap int) []span {
	var spans []span
	start := skipSpace(s, 0)
	for start < len(s) {
		end := len(s)
		if len(s)-start > size+size/5 {
			end = cut(s, start+size/2, start+size)
		}
		a, b := start, start+len(strings.TrimRightFunc(s[start:end], unicode.IsSpace))
		if b > a {
			spans = append(spans, span{start: a, end: b})
		}
		if end >= len(s) {
			break
		}
		next := end
		if overlap > 0 {
			next = wordStart(s, max(end-overlap, start+1), end)
		}
		if next <= start {
			next = end
		}
		start = skipSpace(s, next)
	}
	// code point offsets: starts and ends each increase monotonically
	var sc, ec counter
	for i := range spans {
		spans[i].rstart = sc.at(s, spans[i].start)
		spans[i].rend = ec.at(s, spans[i].end)
	}
	return spans
}

// counter converts increasing byte offsets of s into code point offsets.
type counter struct{ byteOff, runeOff int }

func (c *counter) at(s string, off int) int {
	c.runeOff += utf8.RuneCountInString(s[c.byteOff:off])
	c.byteOff = off
	return c.runeOff
}

// cut returns where to end a piece that starts before lo and may not end
// after hi.
func cut(s string, lo, hi int) int {
	hi = min(hi, len(s))
	lo = min(lo, hi)
	w := s[lo:hi]
	if i := strings.LastIndex(w, "\n\n"); i >= 0 {
		return lo + i
	}
	if i := lastSentenceEnd(w); i >= 0 {
		return lo + i
	}
	if i := strings.LastIndexByte(w, '\n'); i >= 0 {
		return lo + i
	}
	if i := strings.LastIndexFunc(w, unicode.IsSpace); i >= 0 {
		return lo + i
	}
	// no boundary: cut at a code point boundary
	for hi > lo && !utf8.RuneStart(s[hi]) {
		hi--
	}
	if hi == lo { // the window holds less than a code point: take the next one whole
		hi = lo + 1
		for hi < len(s) && !utf8.RuneStart(s[hi]) {
			hi++
		}
	}
	return hi
}

// lastSentenceEnd returns the offset just after the last sentence-ending
// punctuation in w that is followed by a space, or -1.
func lastSentenceEnd(w string) int {
	for i := len(w) - 2; i >= 0; i-- {
		switch w[i] {
		case '.', '!', '?', ';':
			if c := w[i+1]; c == ' ' || c == '\n' || c == '\t' {
				return i + 1
			}
		}
	}
	for _, p := range []string{"。", "！", "？"} {
		if i := strings.LastIndex(w, p); i >= 0 {
			return i + len(p)
		}
	}
	return -1
}

// wordStart returns the first offset in [from, to) where a word starts (a
// non-space byte after a space), preferring the start of a sentence in the
// first half of the range; it returns to if there is none.
func wordStart(s string, from, to int) int {
	if from <= 0 {
		return 0
	}
	for i := from; i < to && i < from+(to-from)/2; i++ {
		if !isSpaceByte(s[i]) && isSpaceByte(s[i-1]) && i >= 2 && strings.ContainsRune(".!?\n", rune(s[i-2])) {
			return i
		}
	}
	for i := from; i < to; i++ {
		if !isSpaceByte(s[i]) && isSpaceByte(s[i-1]) {
			return i
		}
	}
	return to
}

func skipSpace(s string, i int) int {
	return len(s) - len(strings.TrimLeftFunc(s[i:], unicode.IsSpace))
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}
