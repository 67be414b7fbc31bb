package xlsx

import (
	"archive/zip"
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Excel's own bounds of a sheet.
const (
	excelRows = 1 << 20
	excelCols = 1 << 14
)

// The rows kept in memory at a sheet's top and bottom for finding its table,
// and how much of each text they keep.
const (
	headRows    = 64
	tailRows    = 64
	keptText    = 1024
	maxRowBytes = 64 << 20
)

type cellKind uint8

const (
	kBlank cellKind = iota
	kNum            // a number; fmt says whether it is a date serial or a percentage
	kText
	kBool  // num is 0 or 1
	kErr   // a cached error; text is its name
	kStamp // a cell stored as an ISO 8601 date (t="d"); num is Unix milliseconds
)

// cell is one non-empty cell as stored: its kind, its number format's class
// and its value.
type cell struct {
	col  int32
	kind cellKind
	fmt  fmtClass
	num  float64
	text string
	// textLen is the text's length in bytes before a kept copy was cut to
	// keptText.
	textLen int32
}

// excelErrors are the values Excel shows for a formula that failed.
var excelErrors = map[string]bool{
	"#NULL!": true, "#DIV/0!": true, "#VALUE!": true, "#REF!": true, "#NAME?": true, "#NUM!": true,
	"#N/A": true, "#GETTING_DATA": true, "#SPILL!": true, "#CALC!": true, "#FIELD!": true,
	"#BLOCKED!": true, "#CONNECT!": true, "#BUSY!": true, "#UNKNOWN!": true, "#EXTERNAL!": true,
}

// reader reads the sheets of one workbook.
type reader struct {
	name   string
	lim    Limits
	sst    *sharedStrings
	styles []fmtClass
	dir    string
}

// rowSum summarises one non-empty row of a sheet for finding the table.
type rowSum struct {
	idx         int32 // the row's index on the sheet, from 0
	n           int32 // non-empty cells
	first, last int32 // their first and last columns
}

// colSum counts a column's values over the whole sheet by how they read.
type colSum struct {
	n, text, num, date, boolean int32
}

// mergeRange is a merged cell: rows r0..r1 and columns c0..c1, from 0.
type mergeRange struct{ r0, c0, r1, c1 int32 }

// scan is what the first read of a sheet found.
type scan struct {
	rows   []rowSum
	cols   []colSum
	head   [][]cell // the first non-empty rows, texts cut to keptText
	tail   [][]cell // the last non-empty rows, oldest first
	merges []mergeRange
	errors map[string]int // cached errors by name
}

// readSheet reads one sheet: it spools its cells, finds its table and types
// its columns. It returns nil for a sheet without values.
func (rd *reader) readSheet(zf *zip.File, sheet string, index int, dates dateSystem) (*Sheet, error) {
	spoolPath := filepath.Join(rd.dir, fmt.Sprintf("sheet%d.spool", index))
	sc, err := rd.scanSheet(zf, sheet, spoolPath)
	if err != nil {
		return nil, err
	}
	if len(sc.rows) == 0 {
		os.Remove(spoolPath)
		return nil, nil
	}
	s := &Sheet{Name: sheet, spool: spoolPath, dates: dates}
	s.layout = findLayout(sc, dates)
	if err := s.typeColumns(sc); err != nil {
		return nil, err
	}
	if len(s.Columns) > rd.lim.MaxColumns {
		return nil, userError(ErrTooLarge, "sheet %q of %s has a table of %d columns, over the limit of %d", sheet, rd.name, len(s.Columns), rd.lim.MaxColumns)
	}
	return s, nil
}

// scanSheet reads a sheet's XML once, writing its non-empty rows to the spool.
func (rd *reader) scanSheet(zf *zip.File, sheet, spoolPath string) (*scan, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, rd.sheetDamaged(sheet, err)
	}
	defer rc.Close()
	out, err := os.Create(spoolPath)
	if err != nil {
		return nil, fmt.Errorf("xlsx: spool: %w", err)
	}
	defer out.Close()
	sw := &spoolWriter{w: bufio.NewWriterSize(out, 256<<10)}
	sc := &scan{errors: map[string]int{}}
	x, err := newXMLScanner(rc, rd.lim.MaxCellBytes*2)
	if err != nil {
		return nil, rd.sheetDamaged(sheet, err)
	}
	var (
		inSheetData, inCell, inV, inIS, inT bool
		phonetic                            int
		row                                 = -1
		col                                 int
		rowBytes                            int
		c                                   cell
		cellType                            string
		v, is                               []byte
		cells                               []cell
	)
	for {
		x.wantText = inV || inT
		if !x.next() {
			break
		}
		switch x.kind {
		case tokStart:
			switch string(x.name) {
			case "sheetData":
				inSheetData = true
			case "row":
				if !inSheetData {
					continue
				}
				r := row + 1
				if a := x.attr("r"); a != nil {
					n, err := strconv.Atoi(string(a))
					if err != nil || n < 1 {
						return nil, rd.sheetDamaged(sheet, fmt.Errorf("bad row number %q", a))
					}
					r = n - 1
				}
				if r >= excelRows {
					return nil, rd.sheetDamaged(sheet, fmt.Errorf("row %d is beyond Excel's last row", r+1))
				}
				row, col, rowBytes, cells = r, 0, 0, cells[:0]
			case "c":
				if !inSheetData || row < 0 {
					continue
				}
				inCell = true
				c = cell{}
				v, is = v[:0], is[:0]
				cellType = cellTypeName(x.attr("t"))
				if ref := x.attr("r"); ref != nil {
					cc, _, ok := parseRef(string(ref))
					if !ok {
						return nil, rd.sheetDamaged(sheet, fmt.Errorf("bad cell reference %q", ref))
					}
					col = cc
				}
				if col >= excelCols {
					return nil, rd.sheetDamaged(sheet, fmt.Errorf("a cell is beyond Excel's last column"))
				}
				c.col = int32(col)
				if st := x.attr("s"); st != nil {
					if n, err := strconv.Atoi(string(st)); err == nil && n >= 0 && n < len(rd.styles) {
						c.fmt = rd.styles[n]
					}
				}
			case "v":
				inV = inCell
			case "is":
				inIS = inCell
			case "rPh":
				phonetic++
				inT = false
			case "t":
				inT = inIS && phonetic == 0
			case "mergeCell":
				// Merged cells matter in the rows where the header may be:
				// those kept at the top (the merges follow the cells).
				m, ok := parseRange(string(x.attr("ref")))
				if ok && len(sc.head) > 0 && m.r0 <= sc.rows[len(sc.head)-1].idx {
					sc.merges = append(sc.merges, m)
				}
			}
		case tokEnd:
			switch string(x.name) {
			case "v":
				inV = false
			case "t":
				inT = false
			case "rPh":
				phonetic = max(0, phonetic-1)
			case "is":
				inIS, inT = false, false
			case "c":
				if !inCell {
					continue
				}
				inCell, inV, inIS, inT = false, false, false, false
				if err := rd.finishCell(&c, cellType, v, is, sheet); err != nil {
					return nil, err
				}
				col = int(c.col) + 1
				if c.kind == kBlank {
					continue
				}
				if c.kind == kErr {
					if excelErrors[c.text] {
						sc.errors[c.text]++
					} else {
						sc.errors["#ERROR"]++ // a name Excel does not write: not kept, so they stay few
					}
				}
				rowBytes += len(c.text) + 16
				if rowBytes > maxRowBytes {
					return nil, userError(ErrTooLarge, "row %d of sheet %q of %s holds more than %s", row+1, sheet, rd.name, byteSize(maxRowBytes))
				}
				cells = append(cells, c)
			case "row":
				if row < 0 || !inSheetData {
					continue
				}
				if err := rd.finishRow(sc, sw, row, cells, sheet); err != nil {
					return nil, err
				}
				cells = cells[:0]
			case "sheetData":
				inSheetData = false
			}
		case tokText:
			switch {
			case inV:
				v = append(v, x.text...)
			case inT:
				is = append(is, x.text...)
			}
			if len(v)+len(is) > rd.lim.MaxCellBytes*2 {
				return nil, rd.cellTooLong(sheet, row, col)
			}
		}
	}
	if x.err != nil {
		if x.err == errTextTooLong {
			return nil, rd.cellTooLong(sheet, row, col)
		}
		return nil, rd.sheetDamaged(sheet, x.err)
	}
	if err := sw.w.Flush(); err != nil {
		return nil, fmt.Errorf("xlsx: spool: %w", err)
	}
	return sc, nil
}

// cellTypeName interns a cell's type attribute.
func cellTypeName(t []byte) string {
	switch string(t) {
	case "s":
		return "s"
	case "n", "":
		return "n"
	case "str":
		return "str"
	case "b":
		return "b"
	case "e":
		return "e"
	case "inlineStr":
		return "inlineStr"
	case "d":
		return "d"
	}
	return string(t)
}

// finishCell sets a cell's kind and value from its type and content.
func (rd *reader) finishCell(c *cell, typ string, v, is []byte, sheet string) error {
	var text string
	switch typ {
	case "s":
		i, err := strconv.Atoi(strings.TrimSpace(string(v)))
		if len(v) == 0 {
			return nil
		}
		s, ok := rd.sst.get(i)
		if err != nil || !ok {
			return rd.sheetDamaged(sheet, errSharedString)
		}
		text = s
	case "inlineStr":
		text = unescapeOOXML(string(is))
		if len(is) == 0 {
			text = string(v)
		}
	case "str":
		text = unescapeOOXML(string(v))
	case "b":
		switch strings.TrimSpace(string(v)) {
		case "1", "true", "TRUE":
			c.kind, c.num = kBool, 1
		case "0", "false", "FALSE":
			c.kind, c.num = kBool, 0
		}
		return nil
	case "e":
		if len(v) > 0 {
			c.kind, c.text = kErr, strings.TrimSpace(string(v))
		}
		return nil
	case "d":
		s := strings.TrimSpace(string(v))
		if s == "" {
			return nil
		}
		if t, ok := parseISO(s); ok {
			c.kind, c.num = kStamp, float64(t.UnixMilli())
			return nil
		}
		text = s
	default: // "n" and none
		s := strings.TrimSpace(string(v))
		if s == "" {
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			c.kind, c.num = kNum, f
			return nil
		}
		text = s
	}
	if len(text) > rd.lim.MaxCellBytes {
		return rd.cellTooLong(sheet, -1, int(c.col))
	}
	text = cleanText(text)
	switch {
	case text == "":
	case excelErrors[text]:
		c.kind, c.text = kErr, text
	default:
		c.kind, c.text = kText, text
	}
	return nil
}

// cleanText trims a text of surrounding white space (no-break spaces too),
// drops NUL characters and replaces invalid UTF-8.
func cleanText(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\u00a0' || r == '\u200b' || r == '\ufeff' })
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\ufffd")
	}
	return s
}

// finishRow records a non-empty row: to the spool, the row summaries, the
// column counts and the rows kept at the top and bottom.
func (rd *reader) finishRow(sc *scan, sw *spoolWriter, row int, cells []cell, sheet string) error {
	if len(cells) == 0 {
		return nil
	}
	if len(sc.rows) > 0 && int32(row) <= sc.rows[len(sc.rows)-1].idx {
		return rd.sheetDamaged(sheet, fmt.Errorf("row %d comes after row %d", row+1, sc.rows[len(sc.rows)-1].idx+1))
	}
	if len(sc.rows) >= rd.lim.MaxRows {
		return userError(ErrTooLarge, "sheet %q of %s has more than %d rows, over the limit", sheet, rd.name, rd.lim.MaxRows)
	}
	if !slices.IsSortedFunc(cells, func(a, b cell) int { return int(a.col - b.col) }) {
		slices.SortStableFunc(cells, func(a, b cell) int { return int(a.col - b.col) })
	}
	// A column given twice keeps its last cell.
	out := cells[:0]
	for i, c := range cells {
		if i+1 < len(cells) && cells[i+1].col == c.col {
			continue
		}
		out = append(out, c)
	}
	cells = out
	if err := sw.writeRow(int32(row), cells); err != nil {
		return fmt.Errorf("xlsx: spool: %w", err)
	}
	sum := rowSum{idx: int32(row), n: int32(len(cells)), first: cells[0].col, last: cells[len(cells)-1].col}
	sc.rows = append(sc.rows, sum)
	if need := int(sum.last) + 1; need > len(sc.cols) {
		sc.cols = slices.Grow(sc.cols, need-len(sc.cols))[:need]
	}
	for _, c := range cells {
		cs := &sc.cols[c.col]
		cs.n++
		switch layoutClass(c) {
		case kText:
			cs.text++
		case kNum:
			cs.num++
		case kStamp:
			cs.date++
		case kBool:
			cs.boolean++
		}
	}
	kept := make([]cell, len(cells))
	for i, c := range cells {
		c.textLen = int32(len(c.text))
		if len(c.text) > keptText {
			c.text = strings.ToValidUTF8(c.text[:keptText], "")
		}
		kept[i] = c
	}
	if len(sc.head) < headRows {
		sc.head = append(sc.head, kept)
	}
	if len(sc.tail) == tailRows {
		copy(sc.tail, sc.tail[1:])
		sc.tail = sc.tail[:tailRows-1]
	}
	sc.tail = append(sc.tail, kept)
	return nil
}

// layoutClass is how a cell reads when finding the table: kNum for numbers
// and text that reads as a number, kStamp for dates and times, kBool, kText
// for other text, kBlank for errors.
func layoutClass(c cell) cellKind {
	switch c.kind {
	case kNum:
		if c.fmt.isDate() {
			return kStamp
		}
		return kNum
	case kStamp, kBool:
		return c.kind
	case kText:
		if _, ok := parseNumber(c.text); ok {
			return kNum
		}
		if _, ok := parseISO(c.text); ok {
			return kStamp
		}
		return kText
	}
	return kBlank
}

func (rd *reader) sheetDamaged(sheet string, err error) error {
	return damaged(rd.name, fmt.Sprintf("sheet %q cannot be read", sheet), err)
}

func (rd *reader) cellTooLong(sheet string, row, col int) error {
	where := "a cell"
	if row >= 0 {
		where = "cell " + cellName(row, col)
	}
	return userError(ErrTooLarge, "%s of sheet %q of %s holds more than %d bytes of text, over the limit", where, sheet, rd.name, rd.lim.MaxCellBytes)
}

// isoLayouts are the ISO 8601 forms read as dates and times from text.
var isoLayouts = []string{
	"2006-01-02",
	"2006-01-02 15:04",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05.999999999Z07:00",
}

// parseISO reads a date or date and time in ISO 8601 form, as UTC.
func parseISO(s string) (time.Time, bool) {
	if len(s) < 10 || len(s) > 35 || s[4] != '-' || s[7] != '-' {
		return time.Time{}, false
	}
	for _, l := range isoLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC().Round(time.Millisecond), true
		}
	}
	return time.Time{}, false
}
