package numcheck

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kinds of evidence, in the order attribution prefers them.
const (
	kindCell = iota
	kindRowCount
	kindExcerpt
	kindQuestion
)

// ref locates an evidence value.
type ref struct {
	kind     int32
	idx      int32 // the result or the excerpt
	row, col int32
	seq      int32 // order of the number within a text
}

func (r ref) cmp(o ref) int {
	switch {
	case r.kind != o.kind:
		return cmpInt(r.kind, o.kind)
	case r.idx != o.idx:
		return cmpInt(r.idx, o.idx)
	case r.row != o.row:
		return cmpInt(r.row, o.row)
	case r.col != o.col:
		return cmpInt(r.col, o.col)
	}
	return cmpInt(r.seq, o.seq)
}

func cmpInt(a, b int32) int {
	if a < b {
		return -1
	}
	return 1
}

// val is one number of the evidence.
type val struct {
	abs      float64
	d        dec
	ref      ref
	gcol     int32 // the column across all results, for its statistics; -1 for texts
	pctUnits bool  // written with a percent sign (in a text), or in a percent-named column
	text     bool  // read from a text: the question, an excerpt, a text cell
}

// window is a range of magnitudes an answer's numbers can match.
type window struct{ lo, hi float64 }

// index holds the evidence values that fall in the answer's windows, sorted
// by magnitude, and the per-column facts matching needs.
type index struct {
	vals    []val
	colFrac []bool // every number of the column is in [-1, 1], one of them not an integer
	colPct  []bool // the column's name says percent
	ev      *Evidence
}

type colStat struct{ any, outside, nonInt bool }

type builder struct {
	ix      *index
	windows []window
	stats   []colStat
}

func (b *builder) keep(f float64) bool {
	ws := b.windows
	lo, hi := 0, len(ws)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ws[m].hi < f {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(ws) && ws[lo].lo <= f
}

// buildIndex reads the evidence, keeping only values inside windows (sorted,
// disjoint).
func buildIndex(ev *Evidence, windows []window) *index {
	ix := &index{ev: ev}
	b := &builder{ix: ix, windows: windows}
	ncol := 0
	offsets := make([]int, len(ev.Results))
	for i, r := range ev.Results {
		offsets[i] = ncol
		ncol += len(r.Columns)
	}
	b.stats = make([]colStat, ncol)
	cells := 0
	for _, r := range ev.Results {
		cells += len(r.Rows) * len(r.Columns)
	}
	ix.vals = make([]val, 0, min(cells/8+16, 1024))
	ix.colPct = make([]bool, ncol)
	for i, r := range ev.Results {
		for c, name := range r.Columns {
			ix.colPct[offsets[i]+c] = percentName(name)
		}
		for row, cells := range r.Rows {
			for c, v := range cells {
				g := -1
				if c < len(r.Columns) {
					g = offsets[i] + c
				}
				b.cell(v, ref{kind: kindCell, idx: int32(i), row: int32(row), col: int32(c)}, g, 0)
			}
		}
		n := r.RowCount
		if n == 0 {
			n = len(r.Rows)
		}
		// A result of one row (an aggregate) would vouch for every "1".
		d := decOfInt(int64(n))
		if n > 1 && b.keep(d.float()) {
			ix.vals = append(ix.vals, val{abs: d.float(), d: d, ref: ref{kind: kindRowCount, idx: int32(i), row: -1, col: -1}, gcol: -1})
		}
	}
	for i, e := range ev.Excerpts {
		b.text(e.Text, ref{kind: kindExcerpt, idx: int32(i), row: -1, col: -1}, -1)
	}
	b.text(ev.Question, ref{kind: kindQuestion, row: -1, col: -1}, -1)
	ix.colFrac = make([]bool, ncol)
	for g, s := range b.stats {
		ix.colFrac[g] = s.any && !s.outside && s.nonInt
	}
	// Sort by magnitude, ties in the order the evidence gave them.
	type key struct {
		abs float64
		i   int32
	}
	keys := make([]key, len(ix.vals))
	for i := range ix.vals {
		keys[i] = key{ix.vals[i].abs, int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.abs, b.abs), int(a.i-b.i))
	})
	sorted := make([]val, len(keys))
	for i, k := range keys {
		sorted[i] = ix.vals[k.i]
	}
	ix.vals = sorted
	return ix
}

func percentName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pct", "percent", "perc", "%", "ppt", "points"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasSuffix(n, "_pc") || strings.HasSuffix(n, "_pp") || strings.Contains(n, "_pp_")
}

// num records a number of a cell: f its float value, s its text when d is
// still to be parsed.
func (b *builder) num(f float64, d dec, s string, r ref, gcol int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return
	}
	if gcol >= 0 {
		st := &b.stats[gcol]
		st.any = true
		if f > 1 || f < -1 {
			st.outside = true
		}
		if f != math.Trunc(f) {
			st.nonInt = true
		}
	}
	af := math.Abs(f)
	if !b.keep(af) {
		return
	}
	if s != "" {
		var ok bool
		if d, ok = parseDec(s); !ok {
			return
		}
	}
	b.ix.vals = append(b.ix.vals, val{abs: af, d: d, ref: r, gcol: int32(gcol), pctUnits: gcol >= 0 && b.ix.colPct[gcol]})
}

const maxDepth = 8

// cell records the numbers of one result value.
func (b *builder) cell(v any, r ref, gcol, depth int) {
	switch x := v.(type) {
	case nil, bool:
	case int, int8, int16, int32, int64:
		n := reflect.ValueOf(x).Int()
		b.num(float64(n), decOfInt(n), "", r, gcol)
	case uint, uint8, uint16, uint32, uint64:
		n := reflect.ValueOf(x).Uint()
		b.num(float64(n), dec{c: n}.norm(), "", r, gcol)
	case float64:
		b.num(x, dec{}, strconv.FormatFloat(x, 'g', -1, 64), r, gcol)
	case float32:
		b.num(float64(x), dec{}, strconv.FormatFloat(float64(x), 'g', -1, 32), r, gcol)
	case json.Number:
		if f, ok := quickFloat(string(x)); ok {
			b.num(f, dec{}, string(x), r, gcol)
		}
	case string:
		if f, ok := quickFloat(x); ok {
			b.num(f, dec{}, x, r, gcol)
			return
		}
		if hasDigit(x) && !isoDate(x) {
			b.text(x, r, gcol)
		}
	case []any:
		if depth < maxDepth {
			for _, e := range x {
				b.cell(e, r, gcol, depth+1)
			}
		}
	case map[string]any:
		if depth < maxDepth {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				b.cell(x[k], r, gcol, depth+1)
			}
		}
	default:
		// Ordered objects and anything else JSON can write.
		if depth >= maxDepth {
			return
		}
		raw, err := json.Marshal(x)
		if err != nil {
			return
		}
		dj := json.NewDecoder(bytes.NewReader(raw))
		dj.UseNumber()
		var y any
		if dj.Decode(&y) == nil {
			b.cell(y, r, gcol, depth+1)
		}
	}
}

// quickFloat reads a plain number (an optional sign, digits, an optional
// point and exponent: DECIMAL, big integers, JSON floats) close enough to
// filter by windows; exact values are parsed later for the few kept. NaN and
// infinities are not numbers here.
func quickFloat(s string) (float64, bool) {
	if !numericString(s) {
		return 0, false
	}
	var m uint64
	e, i, neg, digits := 0, 0, false, 0
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		i++
	}
	point := false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits < 18 {
				m = m*10 + uint64(c-'0')
				if m > 0 {
					digits++
				}
				if point {
					e--
				}
			} else if !point {
				e++
			}
			continue
		case c == '.':
			point = true
			continue
		}
		x, err := strconv.Atoi(s[i+1:])
		if err != nil {
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil && !math.IsInf(f, 0)
		}
		e += x
		break
	}
	f := float64(m)
	switch {
	case e > 0:
		f *= math.Pow10(e)
	case e < 0:
		f /= math.Pow10(-e)
	}
	if neg {
		f = -f
	}
	return f, !math.IsInf(f, 0)
}

// numericString reports a string that is a plain number: an optional sign,
// digits, an optional point and exponent (DECIMAL, big integers, floats).
func numericString(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	i := 0
	if s[0] == '-' || s[0] == '+' {
		i++
	}
	digits, point := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point:
			point = true
		case (c == 'e' || c == 'E') && digits > 0:
			j := i + 1
			if j < len(s) && (s[j] == '+' || s[j] == '-') {
				j++
			}
			if j == len(s) {
				return false
			}
			for ; j < len(s); j++ {
				if s[j] < '0' || s[j] > '9' {
					return false
				}
			}
			return true
		default:
			return false
		}
	}
	return digits > 0
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// isoDate reports a string that starts as an ISO date, time or timestamp:
// "2024-03-01", "2024-03-01T10:00:00Z", "10:30:00"; it holds no values.
func isoDate(s string) bool {
	d := func(i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }
	if len(s) >= 10 && d(0) && d(1) && d(2) && d(3) && s[4] == '-' && d(5) && d(6) && s[7] == '-' && d(8) && d(9) {
		return true
	}
	return len(s) >= 5 && d(0) && d(1) && s[2] == ':' && d(3) && d(4)
}

// text records the numbers of a text: the question, an excerpt or a text
// cell, read by the rules that read answers. A percent stands for both A and
// A/100, a magnitude for the scaled value and the mantissa; a number near a
// word of decrease also for its negative.
func (b *builder) text(s string, r ref, gcol int) {
	if !hasDigit(s) || !b.mayHold(s) {
		return
	}
	d := newDoc(s)
	toks, _ := d.scan(math.MaxInt)
	for _, t := range toks {
		if t.skip != "" {
			continue
		}
		for _, in := range interps(&t) {
			a := in.a
			if t.pm {
				a.neg = false
			}
			b.textVal(a, r, in.pctUnits)
			if t.negCue && !a.neg {
				a.neg = true
				b.textVal(a, r, in.pctUnits)
			}
		}
		r.seq++
	}
}

// mayHold reports whether a number of text s could fall in a window, before
// s is read properly: each run of digits and separators is tried read as one
// integer, with its last group as decimals, and each group alone, scaled by
// the percent, magnitude or exponent that follows the run (and unscaled).
func (b *builder) mayHold(s string) bool {
	try := func(v float64, e int) bool {
		return b.keep(v * math.Pow10(e))
	}
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		var whole, group float64
		var buf [8]float64
		groups := buf[:0]
		lastLen := 0
	run:
		for ; i < len(s); i++ {
			c := s[i]
			if c >= '0' && c <= '9' {
				whole = whole*10 + float64(c-'0')
				group = group*10 + float64(c-'0')
				lastLen++
				continue
			}
			next := i + 1
			if c == 0xc2 || c == 0xe2 { // U+00A0, U+2007, U+2009, U+202F
				for next < len(s) && s[next] >= 0x80 && s[next] < 0xc0 {
					next++
				}
			} else if c != ',' && c != '.' && c != ' ' {
				break
			}
			if next >= len(s) || s[next] < '0' || s[next] > '9' {
				break run
			}
			groups = append(groups, group)
			group, lastLen = 0, 0
			i = next - 1
		}
		groups = append(groups, group)
		scale := b.scaleAfter(s, i)
		for _, sc := range [3]int{0, scale, scale / 2} { // bps: also in percent units
			if try(whole, sc) || (len(groups) > 1 && try(whole, sc-lastLen)) {
				return true
			}
			for _, g := range groups {
				if len(groups) > 1 && try(g, sc) {
					return true
				}
			}
		}
	}
	return false
}

// scaleAfter is the power of ten a percent, magnitude or exponent at s[i:]
// gives the number before it (0 if none).
func (b *builder) scaleAfter(s string, i int) int {
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		neg := false
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			neg = s[j] == '-'
			j++
		}
		x := 0
		for ; j < len(s) && s[j] >= '0' && s[j] <= '9' && x < 1000; j++ {
			x = x*10 + int(s[j]-'0')
		}
		if neg {
			return -x
		}
		return x
	}
	if i < len(s) && s[i] == ' ' {
		i++
	}
	if strings.HasPrefix(s[i:], "%") {
		return -2
	}
	if strings.HasPrefix(s[i:], "‰") {
		return -3
	}
	j := i
	for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
		j++
	}
	switch w := strings.ToLower(s[i:j]); w {
	case "k", "thousand", "thousands":
		return 3
	case "m", "mm", "mn", "mln", "million", "millions":
		return 6
	case "b", "bn", "bln", "billion", "billions":
		return 9
	case "t", "tn", "trn", "trillion", "trillions":
		return 12
	case "bp", "bps", "basis":
		return -4
	case "pct", "percent", "per", "pp", "ppt", "percentage":
		return -2
	}
	return 0
}

func (b *builder) textVal(a dec, r ref, pctUnits bool) {
	a = a.norm()
	f := a.float()
	af := math.Abs(f)
	if math.IsInf(f, 0) || !b.keep(af) {
		return
	}
	b.ix.vals = append(b.ix.vals, val{abs: af, d: a, ref: r, gcol: -1, pctUnits: pctUnits, text: true})
}
