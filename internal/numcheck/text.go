package numcheck

import (
	"sort"
	"strings"
	"unicode"
)

// A doc is a text prepared for scanning: its runes, which of them are code,
// links or citations (masked: never a number), and its lines with their
// Markdown table structure.
type doc struct {
	rs     []rune
	mask   []bool
	lines  []line
	bounds []int // sentence boundaries, found on first use
}

// Line roles in a Markdown table.
const (
	plainLine = iota
	tableHeader
	tableRule
	tableBody
)

type line struct {
	start, end int // runes, end excluding the newline
	lead       int // where the line's content starts after indentation, "> ", a bullet or "#"s
	role       int
	table      int      // which table, for body and header lines
	pipes      []int    // positions of the cell separators
	headers    []string // the table's header cells, normalised
	leadPipe   bool     // the line starts with a pipe
}

func newDoc(s string) *doc {
	d := &doc{rs: []rune(s)}
	d.mask = make([]bool, len(d.rs))
	d.splitLines()
	d.maskFences()
	d.maskInline()
	d.findTables()
	return d
}

func (d *doc) splitLines() {
	start := 0
	for i, r := range d.rs {
		if r == '\n' {
			d.lines = append(d.lines, d.newLine(start, i))
			start = i + 1
		}
	}
	d.lines = append(d.lines, d.newLine(start, len(d.rs)))
}

func (d *doc) newLine(start, end int) line {
	l := line{start: start, end: end}
	rs := d.rs
	i := start
	for {
		for i < end && (rs[i] == ' ' || rs[i] == '\t') {
			i++
		}
		switch {
		case i < end && rs[i] == '>':
			i++
			continue
		case i+1 < end && (rs[i] == '-' || rs[i] == '*' || rs[i] == '+' || rs[i] == '•') && rs[i+1] == ' ':
			i += 2
			continue
		case i < end && rs[i] == '#':
			j := i
			for j < end && rs[j] == '#' {
				j++
			}
			if j < end && rs[j] == ' ' {
				i = j + 1
				continue
			}
		case i+1 < end && (rs[i] == '*' || rs[i] == '_') && rs[i+1] == rs[i]:
			i += 2
			continue
		}
		break
	}
	l.lead = i
	return l
}

// lineAt is the index of the line holding rune i.
func (d *doc) lineAt(i int) int {
	lo, hi := 0, len(d.lines)-1
	for lo < hi {
		m := (lo + hi + 1) / 2
		if d.lines[m].start <= i {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

func (d *doc) setMask(from, to int) {
	for i := max(from, 0); i < to && i < len(d.mask); i++ {
		d.mask[i] = true
	}
}

// maskFences masks fenced code blocks (``` or ~~~, up to three spaces of
// indentation), fence lines included; an unclosed fence runs to the end.
func (d *doc) maskFences() {
	var fch rune
	flen := 0
	for _, l := range d.lines {
		i := l.start
		for i < l.end && i-l.start < 3 && d.rs[i] == ' ' {
			i++
		}
		n := 0
		var ch rune
		if i < l.end && (d.rs[i] == '`' || d.rs[i] == '~') {
			ch = d.rs[i]
			for i+n < l.end && d.rs[i+n] == ch {
				n++
			}
		}
		switch {
		case fch == 0 && n >= 3:
			fch, flen = ch, n
			d.setMask(l.start, l.end+1)
		case fch != 0:
			d.setMask(l.start, l.end+1)
			if ch == fch && n >= flen && strings.TrimSpace(string(d.rs[i+n:l.end])) == "" {
				fch = 0
			}
		}
	}
}

var urlPrefixes = []string{"http://", "https://", "ftp://", "www.", "mailto:", "s3://", "gs://", "file://"}

// maskInline masks inline code, URLs, link targets, citations, footnote
// markers and HTML tags.
func (d *doc) maskInline() {
	rs, n := d.rs, len(d.rs)
	for i := 0; i < n; i++ {
		if d.mask[i] {
			continue
		}
		switch r := rs[i]; {
		case r == '`':
			j := i
			for j < n && rs[j] == '`' {
				j++
			}
			runLen := j - i
			if end := d.closingTicks(j, runLen); end > 0 {
				d.setMask(i, end)
				i = end - 1
			} else {
				i = j - 1
			}
		case r == '[':
			if end := citationEnd(rs, i); end > 0 {
				d.setMask(i, end)
				i = end - 1
			}
		case r == ']' && i+1 < n && rs[i+1] == '(':
			if end := indexRune(rs, i+2, ')'); end > 0 {
				d.setMask(i+1, end+1)
				i = end
			}
		case r == '^' && i+1 < n && isDigit(rs[i+1]):
			j := i + 1
			for j < n && isDigit(rs[j]) {
				j++
			}
			d.setMask(i, j)
			i = j - 1
		case r == '<':
			if hasPrefixFold(rs, i, "<sup>") {
				end := indexString(rs, i, "</sup>")
				if end < 0 {
					end = i + 5
				} else {
					end += 6
				}
				d.setMask(i, end)
				i = end - 1
			} else if i+1 < n && (isASCIILetter(rs[i+1]) || rs[i+1] == '/' || rs[i+1] == '!') {
				if end := indexRune(rs, i+1, '>'); end > 0 {
					d.setMask(i, end+1)
					i = end
				}
			}
		default:
			if isASCIILetter(r) && (i == 0 || !isWordRune(rs[i-1])) {
				for _, p := range urlPrefixes {
					if hasPrefixFold(rs, i, p) {
						end := i
						for end < n && !unicode.IsSpace(rs[end]) && !strings.ContainsRune(`<>"`, rs[end]) {
							end++
						}
						for end > i && strings.ContainsRune(".,;:!?)'*_", rs[end-1]) {
							end--
						}
						d.setMask(i, end)
						i = end - 1
						break
					}
				}
			}
		}
	}
}

// closingTicks is the end of the backtick run of exactly n that closes inline
// code opened before from, or -1; it does not cross a blank line.
func (d *doc) closingTicks(from, n int) int {
	rs := d.rs
	for j := from; j < len(rs); j++ {
		if rs[j] == '\n' && j+1 < len(rs) && rs[j+1] == '\n' {
			return -1
		}
		if rs[j] != '`' {
			continue
		}
		k := j
		for k < len(rs) && rs[k] == '`' {
			k++
		}
		if k-j == n {
			return k
		}
		j = k - 1
	}
	return -1
}

// citationEnd is the end of a citation such as "[1]", "[2, 3]", "[1-3]" or
// "[^4]" starting at i, or -1. A bracketed number that is a link's text
// ("[5](…)") is not a citation.
func citationEnd(rs []rune, i int) int {
	digitsSeen := false
	for j := i + 1; j < len(rs) && j < i+40; j++ {
		switch r := rs[j]; {
		case isDigit(r):
			digitsSeen = true
		case r == ']':
			if !digitsSeen || (j+1 < len(rs) && rs[j+1] == '(') {
				return -1
			}
			return j + 1
		case r == ',' || r == ' ' || r == '-' || r == '–' || r == '^' || r == ';':
		default:
			return -1
		}
	}
	return -1
}

// findTables marks Markdown tables: a line with a pipe followed by a rule
// line (|---|:--:|), then the lines with pipes after it.
func (d *doc) findTables() {
	table := 0
	for li := 0; li+1 < len(d.lines); li++ {
		h := &d.lines[li]
		if h.role != plainLine || !d.hasPipe(*h) || !d.isRule(d.lines[li+1]) {
			continue
		}
		table++
		h.role, h.table, h.pipes = tableHeader, table, d.pipesOf(h)
		var headers []string
		for _, c := range d.cells(*h) {
			headers = append(headers, normHeader(c))
		}
		h.headers = headers
		d.lines[li+1].role = tableRule
		lj := li + 2
		for ; lj < len(d.lines) && d.hasPipe(d.lines[lj]); lj++ {
			b := &d.lines[lj]
			b.role, b.table, b.pipes, b.headers = tableBody, table, d.pipesOf(b), headers
		}
		li = lj - 1
	}
}

func (d *doc) hasPipe(l line) bool {
	return l.end > l.start && indexRune(d.rs[:l.end], l.start, '|') >= 0
}

func (d *doc) isRule(l line) bool {
	s := strings.TrimSpace(string(d.rs[l.start:l.end]))
	if !strings.Contains(s, "-") || !strings.Contains(s, "|") {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("|:- \t", r) {
			return false
		}
	}
	return true
}

func (d *doc) pipesOf(l *line) []int {
	var ps []int
	for i := l.start; i < l.end; i++ {
		if d.rs[i] == '|' && !d.mask[i] && (i == 0 || d.rs[i-1] != '\\') {
			ps = append(ps, i)
		}
	}
	l.leadPipe = len(ps) > 0 && strings.TrimSpace(string(d.rs[l.start:ps[0]])) == ""
	return ps
}

// cellIndex is the 0-based table cell of position i on table line l.
func (d *doc) cellIndex(l line, i int) int {
	n := sort.SearchInts(l.pipes, i)
	if l.leadPipe {
		n--
	}
	return n
}

func (d *doc) cells(l line) []string {
	var cs []string
	prev := l.start
	for k, p := range append(l.pipes, l.end) {
		seg := string(d.rs[prev:p])
		prev = p + 1
		if k == 0 && strings.TrimSpace(seg) == "" {
			continue
		}
		if p == l.end && strings.TrimSpace(seg) == "" {
			continue
		}
		cs = append(cs, seg)
	}
	return cs
}

func normHeader(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.Trim(s, "*_ ")
	return s
}

func indexRune(rs []rune, from int, r rune) int {
	for j := from; j < len(rs); j++ {
		if rs[j] == r {
			return j
		}
		if rs[j] == '\n' {
			return -1
		}
	}
	return -1
}

func indexString(rs []rune, from int, s string) int {
	for j := from; j < len(rs); j++ {
		if hasPrefixFold(rs, j, s) {
			return j
		}
	}
	return -1
}

// hasPrefixFold reports whether rs[i:] starts with the ASCII string p,
// ignoring ASCII case.
func hasPrefixFold(rs []rune, i int, p string) bool {
	if i+len(p) > len(rs) {
		return false
	}
	for k := 0; k < len(p); k++ {
		r := rs[i+k]
		c := rune(p[k])
		if r != c && !(r < 128 && lowerASCII(r) == lowerASCII(c)) {
			return false
		}
	}
	return true
}

// lowerASCII lowers an ASCII capital letter, a byte or a rune, and returns
// anything else as it is.
func lowerASCII[C byte | rune](c C) C {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isDigit(r rune) bool       { return r >= '0' && r <= '9' }
func isASCIILetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
func isLetter(r rune) bool      { return isASCIILetter(r) || r > 127 && unicode.IsLetter(r) }
func isWordRune(r rune) bool    { return isDigit(r) || isLetter(r) || r == '_' }

// isGroupSpace reports the spaces that group thousands: no-break, narrow
// no-break, thin and figure space.
func isGroupSpace(r rune) bool {
	return r == '\u00a0' || r == '\u202f' || r == '\u2009' || r == '\u2007'
}

// isSpace is a space between a number and its unit, within a line.
func isSpace(r rune) bool { return r == ' ' || r == '\t' || isGroupSpace(r) }
