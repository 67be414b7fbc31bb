package xlsx

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// layout is where a sheet's table is: its header rows, the rows of its body
// and its candidate columns (every column with a value on the sheet).
type layout struct {
	header    []int32 // the header rows' indices on the sheet, top to bottom; none when the table has no header
	bodyStart int32   // rows from here…
	bodyEnd   int32   // …to before here are the body; from here on notes
	firstCol  int32   // the table's first column, where section labels sit
	cols      []int32 // candidate columns, ascending
	names     []string
	ownHeader []bool              // per candidate column: a header cell of its own, not spread from a merge
	leafMerge []int               // per candidate column: the merged cell spanning columns in the last header row that covers it, or -1
	title     *cell               // a label alone in the first column on the row just above the header: the first section's
	headerSet []map[string]bool   // per candidate column: its header texts, folded, for repeated headers
	notes     []string            // rows skipped above and below
	width     int                 // the table's width W
	majority  []cellKind          // per sheet column: kNum, kStamp or kBool when most values are; else kText
	merges    map[[2]int32]string // merged cells' texts by (row, column) of every cell they cover in the header
	dates     dateSystem
}

const (
	headerWindow  = 10 // rows below a candidate header checked against the column kinds
	maxHeaderRows = 4  // header rows, the header row and those merged above it
	longNote      = 50 // characters: a longer text alone on a row below the table is a note
	maxName       = 255
)

// findLayout finds the table on a scanned sheet, by the rules of the package
// documentation.
func findLayout(sc *scan, dates dateSystem) *layout {
	lo := &layout{bodyEnd: sc.rows[len(sc.rows)-1].idx + 1, dates: dates}
	for c, cs := range sc.cols {
		if cs.n > 0 {
			lo.cols = append(lo.cols, int32(c))
		}
		if cs.n >= 2 {
			lo.width++
		}
	}
	if lo.width == 0 {
		lo.width = len(lo.cols)
	}
	lo.majority = make([]cellKind, len(sc.cols))
	for c, cs := range sc.cols {
		lo.majority[c] = kText
		for _, k := range []struct {
			kind cellKind
			n    int32
		}{{kNum, cs.num}, {kStamp, cs.date}, {kBool, cs.boolean}} {
			if k.n > 0 && float64(k.n) >= 0.6*float64(cs.num+cs.date+cs.boolean+cs.text) {
				lo.majority[c] = k.kind
			}
		}
	}

	h := lo.findHeader(sc)
	if h < 0 {
		lo.bodyStart = sc.rows[0].idx
		lo.firstCol = lo.firstWideColumn(sc)
	} else {
		lo.headerBand(sc, h)
		lo.bodyStart = lo.header[len(lo.header)-1] + 1
		if first := sc.rows[0].idx; first < lo.header[0] {
			lo.notes = append(lo.notes, fmt.Sprintf("%s above the header skipped (a title or notes)", rowSpan(first, lastBefore(sc, lo.header[0]))))
		}
	}
	lo.findNotes(sc)
	lo.nameColumns(sc)
	return lo
}

// findHeader returns the head row index (into sc.head) of the header row, or
// -1 when no row qualifies.
func (lo *layout) findHeader(sc *scan) int {
	need := max(1, (lo.width+1)/2)
	if lo.width >= 2 {
		need = max(2, need)
	}
	best, bestConflicts := -1, 0
	for i, row := range sc.head {
		if len(row) < need || !hasText(row) {
			continue
		}
		// Texts of this row and the rows just above it: a row below made
		// of them repeats the header and is no conflict.
		above := map[string]bool{}
		for _, r := range sc.head[max(0, i-maxHeaderRows+1) : i+1] {
			for _, c := range r {
				above[foldText(cellText(c, lo.dates))] = true
			}
		}
		conflicts := 0
		for _, below := range sc.head[i+1 : min(len(sc.head), i+1+headerWindow)] {
			repeat := true
			for _, c := range below {
				if !above[foldText(cellText(c, lo.dates))] {
					repeat = false
					break
				}
			}
			if repeat {
				continue
			}
			for _, c := range below {
				if layoutClass(c) == kText && lo.majority[c.col] != kText {
					conflicts++
				}
			}
		}
		// A later row must do clearly better: by one conflict when all its
		// values are text (as a header's are), else by two, or a fifth.
		margin := 2
		if allText(row) {
			margin = 1
		}
		if best < 0 || conflicts <= bestConflicts-max(margin, bestConflicts/5) {
			best, bestConflicts = i, conflicts
		}
	}
	return best
}

func allText(row []cell) bool {
	for _, c := range row {
		if layoutClass(c) != kText {
			return false
		}
	}
	return true
}

func hasText(row []cell) bool {
	for _, c := range row {
		if layoutClass(c) == kText {
			return true
		}
	}
	return false
}

// firstWideColumn is the first column holding values in two rows or more.
func (lo *layout) firstWideColumn(sc *scan) int32 {
	for _, c := range lo.cols {
		if sc.cols[c].n >= 2 {
			return c
		}
	}
	return lo.cols[0]
}

// headerBand sets the header rows: head row h and the rows directly above it
// whose every value sits in a merged cell spanning columns or reaching down
// into the rows below it.
func (lo *layout) headerBand(sc *scan, h int) {
	hIdx := sc.rows[h].idx
	band := []int{h}
	for i := h - 1; i >= 0 && len(band) < maxHeaderRows; i-- {
		if sc.rows[i].idx != sc.rows[i+1].idx-1 {
			break
		}
		ok := len(sc.head[i]) >= 2 // one cell over the table is its title
		for _, c := range sc.head[i] {
			m, found := mergeAt(sc.merges, sc.rows[i].idx, c.col)
			if !found || m.r0 != sc.rows[i].idx || m.c0 != c.col || (m.c1 == m.c0 && m.r1 < sc.rows[i+1].idx) {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		band = append([]int{i}, band...)
	}
	for _, i := range band {
		lo.header = append(lo.header, sc.rows[i].idx)
	}
	first := int32(-1)
	for _, i := range band {
		for _, c := range sc.head[i] {
			if first < 0 || c.col < first {
				first = c.col
			}
		}
	}
	for _, m := range sc.merges {
		if m.r0 >= lo.header[0] && m.r0 <= hIdx && m.c0 < first {
			first = m.c0
		}
	}
	lo.firstCol = first
	// Texts of the merged cells that cover the header rows.
	lo.merges = map[[2]int32]string{}
	for _, i := range band {
		for _, c := range sc.head[i] {
			m, found := mergeAt(sc.merges, sc.rows[i].idx, c.col)
			if !found || m.r0 != sc.rows[i].idx || m.c0 != c.col {
				continue
			}
			text := cellText(c, lo.dates)
			for col := m.c0; col <= m.c1 && col-m.c0 < excelCols; col++ {
				lo.merges[[2]int32{m.r0, col}] = text
			}
		}
	}
}

// mergeAt finds the merged cell covering a cell.
func mergeAt(merges []mergeRange, row, col int32) (mergeRange, bool) {
	for _, m := range merges {
		if row >= m.r0 && row <= m.r1 && col >= m.c0 && col <= m.c1 {
			return m, true
		}
	}
	return mergeRange{}, false
}

// lastBefore is the last non-empty row's index before row idx.
func lastBefore(sc *scan, idx int32) int32 {
	last := idx - 1
	for _, r := range sc.rows {
		if r.idx >= idx {
			break
		}
		last = r.idx
	}
	return last
}

func rowSpan(a, b int32) string {
	if a == b {
		return fmt.Sprintf("row %d", a+1)
	}
	return fmt.Sprintf("rows %d–%d", a+1, b+1)
}

// findNotes finds notes below the table among the rows kept at its bottom.
func (lo *layout) findNotes(sc *scan) {
	n := len(sc.rows)
	tail := sc.tail
	start := -1 // the run's first row, as an index into tail
	definite := false
	sparse := max(1, lo.width/3)
	for i := len(tail) - 1; i >= 0; i-- {
		r := sc.rows[n-len(tail)+i]
		if r.idx < lo.bodyStart {
			return // the run reaches the header: it is the body itself
		}
		row := tail[i]
		if len(row) > sparse {
			break
		}
		text := true
		for _, c := range row {
			if c.kind != kText || layoutClass(c) != kText {
				text = false
			}
		}
		if !text {
			break
		}
		start = i
		gap := n-len(tail)+i > 0 && sc.rows[n-len(tail)+i-1].idx < r.idx-1
		if lo.width <= 2 {
			if gap && lo.isNote(row) {
				definite = true
			}
			if definite {
				break
			}
			continue
		}
		if gap || lo.isNote(row) || (len(row) == 1 && row[0].col != lo.firstCol) {
			definite = true
		}
	}
	if start < 0 || !definite {
		return
	}
	// The run must leave a row of the body above it.
	first := n - len(tail) + start
	if first == 0 || sc.rows[first-1].idx < lo.bodyStart {
		return
	}
	lo.bodyEnd = sc.rows[first].idx
	lo.notes = append(lo.notes, fmt.Sprintf("%s below the table skipped (notes)", rowSpan(lo.bodyEnd, sc.rows[n-1].idx)))
}

// isNote says whether a sparse row of text is clearly a note: a long text, or
// text in a column of numbers, dates or booleans.
func (lo *layout) isNote(row []cell) bool {
	for _, c := range row {
		if c.textLen > 200 || utf8.RuneCountInString(c.text) > longNote {
			return true
		}
		if lo.majority[c.col] != kText {
			return true
		}
	}
	return false
}

// nameColumns names the candidate columns from the header rows.
func (lo *layout) nameColumns(sc *scan) {
	lo.names = make([]string, len(lo.cols))
	lo.ownHeader = make([]bool, len(lo.cols))
	lo.headerSet = make([]map[string]bool, len(lo.cols))
	lo.leafMerge = make([]int, len(lo.cols))
	for k := range lo.leafMerge {
		lo.leafMerge[k] = -1
	}
	if len(lo.header) == 0 {
		return
	}
	rows := map[int32][]cell{}
	for i, r := range sc.rows[:len(sc.head)] {
		rows[r.idx] = sc.head[i]
		if r.idx == lo.header[0] && i > 0 {
			if above := sc.head[i-1]; len(above) == 1 && above[0].col == lo.firstCol && above[0].kind == kText {
				lo.title = &above[0]
			}
		}
	}
	leaf := lo.header[len(lo.header)-1]
	for k, col := range lo.cols {
		for i, m := range sc.merges {
			if m.c1 > m.c0 && leaf >= m.r0 && leaf <= m.r1 && col >= m.c0 && col <= m.c1 {
				lo.leafMerge[k] = i
				break
			}
		}
		var parts []string
		set := map[string]bool{}
		for _, ri := range lo.header {
			text := ""
			for _, c := range rows[ri] {
				if c.col == col {
					text = cellText(c, lo.dates)
					lo.ownHeader[k] = true
				}
			}
			if text == "" {
				if t, ok := lo.merges[[2]int32{ri, col}]; ok {
					text = t
				} else if m, ok := mergeAt(sc.merges, ri, col); ok && m.r0 < ri && m.r0 >= lo.header[0] {
					continue // a merged cell from the row above, already named
				}
			}
			text = strings.Join(strings.Fields(text), " ")
			if text == "" || (len(parts) > 0 && parts[len(parts)-1] == text) {
				continue
			}
			parts = append(parts, text)
			set[foldText(text)] = true
		}
		lo.names[k] = cutName(strings.Join(parts, " "))
		lo.headerSet[k] = set
	}
}

// foldText is a text as compared with the header's: white space runs as one
// space, lower case.
func foldText(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// cutName cuts a column name to maxName bytes, at a character boundary.
func cutName(s string) string {
	if len(s) <= maxName {
		return s
	}
	s = s[:maxName]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.TrimSpace(s)
}

// uniqueNames gives empty names column1, column2… (by position, from 1) and
// repeated names _2, _3… (compared as DuckDB does, ignoring case). A name
// from the header keeps it over a made-up one.
func uniqueNames(names []string) []string {
	out := make([]string, len(names))
	used := map[string]bool{}
	header := map[string]bool{}
	for _, n := range names {
		header[strings.ToLower(n)] = true
	}
	for i, n := range names {
		made := n == ""
		if made {
			n = fmt.Sprintf("column%d", i+1)
		}
		taken := func(s string) bool {
			s = strings.ToLower(s)
			return used[s] || (made && header[s]) || (s != strings.ToLower(n) && header[s])
		}
		cand := n
		for k := 2; taken(cand); k++ {
			cand = fmt.Sprintf("%s_%d", n, k)
		}
		used[strings.ToLower(cand)] = true
		out[i] = cand
	}
	return out
}
