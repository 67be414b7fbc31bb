package extract

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// parseHTML keeps an HTML page's visible text: headings, paragraphs, lists,
// tables and preformatted text. Scripts, styles and the boilerplate around an
// article (navigation, sidebars, footers, forms, hidden elements) are dropped;
// when the page has a <main> element, only its content is kept. The page is
// read with the streaming tokenizer, so memory stays near the text's size.
func parseHTML(data []byte) (*Document, error) {
	text, enc := decodeHTML(data)
	doc := &Document{Encoding: enc}
	onlyMain := hasMainElement(text)
	doc.Blocks, doc.Title = walkHTML(text, onlyMain)
	if onlyMain && len(doc.Blocks) == 0 {
		doc.Blocks, _ = walkHTML(text, false)
	}
	return doc, nil
}

func decodeHTML(data []byte) (string, string) {
	if bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}) {
		return decodeText(data)
	}
	if _, ok := sniffUTF16(data); ok {
		return decodeText(data)
	}
	enc, name, _ := charset.DetermineEncoding(data, "text/html")
	if name == "utf-8" || enc == nil {
		return decodeText(data)
	}
	b, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return decodeText(data)
	}
	return normalizeNewlines(strings.ToValidUTF8(string(b), "\uFFFD")), name
}

func hasMainElement(s string) bool {
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return false
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "main" {
				return true
			}
		}
	}
}

// skipped elements: their content is never visible text.
var htmlSkip = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Nav: true, atom.Aside: true, atom.Footer: true,
	atom.Form: true, atom.Button: true, atom.Select: true, atom.Iframe: true,
	atom.Object: true, atom.Canvas: true, atom.Dialog: true, atom.Head: true, atom.Textarea: true,
}

// htmlBlock elements end the current paragraph.
var htmlBlock = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true,
	atom.Header: true, atom.Blockquote: true, atom.Ul: true, atom.Ol: true, atom.Li: true,
	atom.Dl: true, atom.Dt: true, atom.Dd: true, atom.Figure: true, atom.Figcaption: true,
	atom.Hr: true, atom.Address: true, atom.Details: true, atom.Summary: true, atom.Body: true,
	atom.Caption: true, atom.Fieldset: true, atom.Center: true,
}

func headingLevel(a atom.Atom) int {
	switch a {
	case atom.H1:
		return 1
	case atom.H2:
		return 2
	case atom.H3:
		return 3
	case atom.H4:
		return 4
	case atom.H5:
		return 5
	case atom.H6:
		return 6
	}
	return 0
}

// htmlWalker collects blocks from the token stream.
type htmlWalker struct {
	blocks  []Block
	buf     strings.Builder
	heading int // level of the heading being read, 0 outside headings
	pre     int // depth of <pre>
	// table being read (outermost only; nested tables flow into the cell)
	tblDepth int
	rows     []string
	cells    []string
	size     int
}

func (w *htmlWalker) text(s string) {
	if w.pre > 0 {
		w.buf.WriteString(s)
		return
	}
	// collapse white space as a browser does
	first, _ := utf8.DecodeRuneInString(s)
	space := isSpace(first)
	fields := strings.FieldsFunc(s, isSpace)
	if len(fields) == 0 {
		if w.buf.Len() > 0 && s != "" {
			w.space()
		}
		return
	}
	if space {
		w.space()
	}
	for i, f := range fields {
		if i > 0 {
			w.buf.WriteByte(' ')
		}
		w.buf.WriteString(f)
	}
	if isSpace(lastRune(s)) {
		w.space()
	}
}

func (w *htmlWalker) space() {
	if n := w.buf.Len(); n > 0 {
		s := w.buf.String()
		if c := s[n-1]; c != ' ' && c != '\n' {
			w.buf.WriteByte(' ')
		}
	}
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// flush ends the current paragraph (or cell, inside a table).
func (w *htmlWalker) flush(kind BlockKind) {
	var t string
	if kind == Code {
		t = strings.Trim(w.buf.String(), "\n")
		t = strings.TrimRightFunc(t, isSpace)
	} else {
		t = strings.TrimSpace(w.buf.String())
	}
	w.buf.Reset()
	if strings.TrimSpace(t) == "" {
		return
	}
	if w.tblDepth > 0 {
		w.cells = append(w.cells, oneLine(t))
		return
	}
	b := Block{Kind: kind, Text: t}
	if kind == Heading {
		b.Level = w.heading
		b.Text = oneLine(t)
	}
	w.size += len(b.Text)
	w.blocks = append(w.blocks, b)
}

func (w *htmlWalker) endRow() {
	w.flush(Paragraph)
	if len(w.cells) > 0 {
		w.rows = append(w.rows, strings.Join(w.cells, " | "))
		w.cells = w.cells[:0]
	}
}

func walkHTML(s string, onlyMain bool) ([]Block, string) {
	z := html.NewTokenizer(strings.NewReader(s))
	w := &htmlWalker{}
	var (
		title     string
		inTitle   bool
		skipTag   string
		skipDepth int
		mainDepth int
		article   int
	)
	inScope := func() bool { return !onlyMain || mainDepth > 0 }
	for w.size <= MaxTextBytes {
		tt := z.Next()
		if tt == html.ErrorToken { // io.EOF, or input too malformed to go on
			break
		}
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			a := atom.Lookup(name)
			if skipTag != "" {
				if tag == skipTag && tt == html.StartTagToken {
					skipDepth++
				} else if tag == skipTag && tt == html.EndTagToken {
					skipDepth--
					if skipDepth == 0 {
						skipTag = ""
					}
				}
				continue
			}
			if tt == html.EndTagToken {
				w.end(a)
				switch a {
				case atom.Main:
					if mainDepth > 0 {
						mainDepth--
					}
				case atom.Article:
					if article > 0 {
						article--
					}
				case atom.Title:
					inTitle = false
				}
				continue
			}
			// start or self-closing tag
			hidden := false
			if hasAttr {
				for {
					k, v, more := z.TagAttr()
					key, val := string(k), strings.ToLower(strings.TrimSpace(string(v)))
					if key == "hidden" || key == "aria-hidden" && val == "true" ||
						key == "role" && (val == "navigation" || val == "banner" || val == "contentinfo" || val == "complementary" || val == "search") {
						hidden = true
					}
					if !more {
						break
					}
				}
			}
			if a == atom.Title && tt == html.StartTagToken {
				inTitle = true
				continue
			}
			skip := htmlSkip[a] || hidden || a == atom.Header && article == 0 && mainDepth == 0
			if skip && tt == html.StartTagToken && !isVoid(a) {
				if a == atom.Head {
					// the title lives in head: read it, skip the rest
					continue
				}
				w.flush(Paragraph)
				skipTag, skipDepth = tag, 1
				continue
			}
			switch a {
			case atom.Main:
				mainDepth++
			case atom.Article:
				article++
			}
			if !inScope() {
				continue
			}
			w.start(a)
		case html.TextToken:
			if inTitle {
				if title == "" {
					title = oneLine(string(z.Text()))
				}
				continue
			}
			if skipTag != "" || !inScope() {
				continue
			}
			w.text(string(z.Text()))
		}
	}
	w.flush(Paragraph)
	for w.tblDepth > 0 {
		w.end(atom.Table)
	}
	return w.blocks, title
}

func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Source, atom.Track, atom.Wbr:
		return true
	}
	return false
}

func (w *htmlWalker) start(a atom.Atom) {
	switch {
	case headingLevel(a) > 0:
		w.flush(Paragraph)
		w.heading = headingLevel(a)
	case a == atom.Pre:
		w.flush(Paragraph)
		w.pre++
	case a == atom.Br:
		if w.pre > 0 {
			w.buf.WriteByte('\n')
		} else if w.tblDepth > 0 {
			w.buf.WriteByte(' ')
		} else {
			w.buf.WriteByte('\n')
		}
	case a == atom.Table:
		w.flush(Paragraph)
		w.tblDepth++
		if w.tblDepth == 1 {
			w.rows, w.cells = w.rows[:0], w.cells[:0]
		}
	case a == atom.Tr:
		if w.tblDepth == 1 {
			w.endRow()
		}
	case a == atom.Td || a == atom.Th:
		if w.tblDepth == 1 {
			w.flush(Paragraph)
		} else {
			w.space()
		}
	case a == atom.Li:
		w.flush(Paragraph)
		if w.tblDepth == 0 {
			w.buf.WriteString("- ")
		}
	case htmlBlock[a]:
		if w.tblDepth == 0 {
			w.flush(Paragraph)
		} else {
			w.space()
		}
	}
}

func (w *htmlWalker) end(a atom.Atom) {
	switch {
	case headingLevel(a) > 0:
		if w.heading > 0 {
			if w.tblDepth > 0 {
				w.flush(Paragraph)
			} else {
				w.flush(Heading)
			}
			w.heading = 0
		}
	case a == atom.Pre:
		if w.pre > 0 {
			w.pre--
			if w.pre == 0 {
				if w.tblDepth > 0 {
					w.flush(Paragraph)
				} else {
					w.flush(Code)
				}
			}
		}
	case a == atom.Table:
		if w.tblDepth == 0 {
			return
		}
		if w.tblDepth == 1 {
			w.endRow()
			w.tblDepth = 0
			if len(w.rows) > 0 {
				t := strings.Join(w.rows, "\n")
				w.size += len(t)
				w.blocks = append(w.blocks, Block{Kind: Table, Text: t})
			}
			w.rows = w.rows[:0]
			return
		}
		w.tblDepth--
	case a == atom.Tr:
		if w.tblDepth == 1 {
			w.endRow()
		}
	case a == atom.Td || a == atom.Th:
		if w.tblDepth == 1 {
			w.flush(Paragraph)
		}
	case htmlBlock[a]:
		if w.tblDepth == 0 {
			w.flush(Paragraph)
		}
	}
}
