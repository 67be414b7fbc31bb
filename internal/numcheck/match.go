package numcheck

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

// interp is one reading of a number: its value and how precisely it is shown.
type interp struct {
	a        dec  // the value, signed
	last     int  // exponent of the last digit shown, in the value's units
	tz       int  // trailing zeros that may be rounding
	raw      bool // a second reading: the mantissa without its magnitude, a percent in percent units
	pctUnits bool // the percent-units reading of a percent
}

// interps lists the readings of t, the plain one first.
func interps(t *tok) []interp {
	scale := t.mag
	switch {
	case t.pct:
		scale -= 2
	case t.bps:
		scale -= 4
	case t.permille:
		scale -= 3
	}
	m := t.mant
	m.neg = t.neg
	at := func(s int, raw, pu bool) interp {
		a := m
		a.e += s
		return interp{a: a, last: t.last + s, tz: t.tz, raw: raw, pctUnits: pu}
	}
	ins := []interp{at(scale, false, false)}
	if t.shareMag != 0 {
		ins = append(ins, at(t.shareMag, false, false))
	}
	if t.sharePct {
		ins = append(ins, at(-2, false, false))
	}
	if t.mag != 0 {
		ins = append(ins, at(scale-t.mag, true, false))
	}
	switch {
	case t.pct:
		ins = append(ins, at(0, true, true))
	case t.bps:
		ins = append(ins, at(-2, true, true), at(0, true, false))
	case t.permille:
		ins = append(ins, at(0, true, false))
	}
	return ins
}

// span is the range of magnitudes that can match reading in of t: rounding
// at the coarsest digit it may stand for, and a bound's range.
func (t *tok) span(in interp) (lo, hi float64) {
	a := in.a.abs().norm()
	af := a.float()
	w := math.Pow10(in.last+in.tz) / 2
	lo, hi = af-w, af+w
	if t.bound != 0 && !in.raw && !a.isZero() {
		p := math.Pow10(a.mag())
		if t.bound > 0 {
			hi = max(hi, af+p)
		} else {
			lo = min(lo, p/10)
		}
	}
	return lo * (1 - 1e-9), hi * (1 + 1e-9)
}

// Quality of a match, lower is better. Qualities in the same ten form a
// group: within a group, where the value sits (its row named next to the
// number) counts before the rest of the quality.
const (
	qExact   = 0
	qRounded = 5  // rounded at the last digit shown
	qZeros   = 10 // rounded on trailing zeros
	qLoose   = 20 // approximate or bound
	qRaw     = 10 // added for a second reading
	qAbs     = 1  // added when the sign was dropped
	qNone    = math.MaxInt
)

// quality is how well v matches reading in of t, or qNone.
func (ix *index) quality(t *tok, in interp, v *val) int {
	q := 0
	vneg := v.d.neg && !v.d.isZero()
	switch {
	case t.neg:
		if !vneg {
			return qNone
		}
	case t.plus:
		if vneg {
			return qNone
		}
	case t.pm:
	case vneg:
		if !t.negCue {
			return qNone
		}
		q += qAbs
	}
	// Second readings: a mantissa without its magnitude matches only a result
	// cell (a column kept in millions); a percent in percent units only a cell
	// outside a column of fractions, or a number a text wrote with a percent.
	if t.ratio && v.ref.kind == kindRowCount {
		return qNone // "2.5x" is no count of rows
	}
	if in.raw {
		switch {
		case v.text && !(in.pctUnits && v.pctUnits):
			return qNone
		case v.ref.kind == kindRowCount:
			return qNone
		case in.pctUnits && !v.pctUnits && v.gcol >= 0 && ix.colFrac[v.gcol]:
			return qNone
		}
	}
	if in.raw {
		q += qRaw
	}
	a := in.a.abs().norm()
	vd := v.d.abs()
	if vd.norm() == a {
		return q + qExact
	}
	if vd.isZero() {
		return qNone
	}
	lead := vd.mag()
	k := in.last
	if k <= lead && vd.roundsTo(k, a, roundNearest) {
		return q + qRounded
	}
	for z := 1; z <= in.tz; z++ {
		if k+z <= lead-1 && vd.roundsTo(k+z, a, roundNearest) {
			return q + qZeros
		}
	}
	if in.raw {
		// A second reading is only ever read as shown.
		return qNone
	}
	if t.approx {
		for z := 0; z <= in.tz; z++ {
			if k+z <= lead && vd.roundsTo(k+z, a, roundNearest) {
				return q + qLoose
			}
		}
	}
	if t.bound != 0 && !a.isZero() {
		if t.bound > 0 {
			if hi, ok := addPow(a, a.mag(), 1); ok && cmpAbs(a, vd) <= 0 && cmpAbs(vd, hi) < 0 {
				return q + qLoose
			}
		} else if lead >= a.mag()-1 && cmpAbs(vd, a) <= 0 {
			return q + qLoose
		}
	}
	return qNone
}

// maxCandidates caps how many values nearest a reading are examined, and
// maxTies how many of the best quality group attribution weighs.
const (
	maxCandidates = 256
	maxTies       = 64
)

// candidates calls f with the values in [lo, hi], nearest to a first.
func (ix *index) candidates(a, lo, hi float64, f func(i int)) {
	lo, hi = lo-1e-300, hi+1e-300
	vs := ix.vals
	c := sort.Search(len(vs), func(i int) bool { return vs[i].abs >= a })
	i, j := c-1, c
	for n := 0; n < maxCandidates; n++ {
		okI := i >= 0 && vs[i].abs >= lo
		okJ := j < len(vs) && vs[j].abs <= hi
		switch {
		case okI && okJ:
			if a-vs[i].abs <= vs[j].abs-a {
				f(i)
				i--
			} else {
				f(j)
				j++
			}
		case okI:
			f(i)
			i--
		case okJ:
			f(j)
			j++
		default:
			return
		}
	}
}

// sentenceCtx is what attribution reads around a number.
type sentenceCtx struct {
	before, after, whole string
	sentence             int // start of the sentence or table line, identifying it
	ss, se               int // the span read for attribution
	tableCol             [2]int
	inTable              bool
}

// choice is the source chosen for a number.
type choice struct {
	ref      ref
	sentence int
	ok       bool
}

func (ix *index) source(r ref) Source {
	switch r.kind {
	case kindCell:
		if m := ix.ev.Results[r.idx].Metric; m != "" {
			return Source{Metric: m}
		}
		row, col := int(r.row), int(r.col)
		return Source{ToolCallID: ix.ev.Results[r.idx].ToolCallID, Row: &row, Column: &col}
	case kindRowCount:
		return Source{ToolCallID: ix.ev.Results[r.idx].ToolCallID}
	case kindExcerpt:
		return Source{SourceID: ix.ev.Excerpts[r.idx].SourceID}
	}
	return Source{Question: true}
}

// contextID says where ts[n] sits: its sentence (by its start), or its
// table row and column.
func (d *doc) contextID(ts []*tok, n int) sentenceCtx {
	t := ts[n]
	l := d.lines[d.lineAt(t.cs)]
	var ctx sentenceCtx
	if l.role == tableBody || l.role == tableHeader {
		ctx.inTable = true
		ctx.tableCol = [2]int{l.table, d.cellIndex(l, t.cs)}
		ctx.sentence = l.start
		ctx.ss, ctx.se = max(l.start, t.start-300), min(l.end, t.end+300)
	} else {
		ctx.ss, ctx.se = d.sentence(t.start, t.end)
		ctx.sentence = ctx.ss
	}
	return ctx
}

// contextText reads the text around ts[n] for attribution: from the number
// before it (or the sentence's start) to it, from it to the next one (or the
// sentence's end), and the whole sentence or table row.
func (d *doc) contextText(ts []*tok, n int, ctx *sentenceCtx) {
	t := ts[n]
	from, to := ctx.ss, ctx.se
	if n > 0 && ts[n-1].end > from && ts[n-1].end <= t.start {
		from = ts[n-1].end
	}
	if n+1 < len(ts) && ts[n+1].start < to && ts[n+1].start >= t.end {
		to = ts[n+1].start
	}
	ctx.before = strings.ToLower(string(d.rs[from:t.start]))
	ctx.after = strings.ToLower(string(d.rs[t.end:to]))
	ctx.whole = strings.ToLower(string(d.rs[ctx.ss:ctx.se]))
}

// affinity scores how well v's place fits the number's context: its row
// named next to the number, the row and column of the number before.
func (ix *index) affinity(v *val, ctx sentenceCtx, prev choice, colPrev map[[2]int]ref) int {
	r := v.ref
	if r.kind != kindCell {
		return 0
	}
	s := ix.labelScore(int(r.idx), int(r.row), &ctx)
	if prev.ok && prev.sentence == ctx.sentence && prev.ref.kind == kindCell && prev.ref.idx == r.idx {
		if prev.ref.row == r.row {
			s += 2
		}
		if prev.ref.col == r.col {
			s++
		}
	}
	if ctx.inTable {
		if p, ok := colPrev[ctx.tableCol]; ok && p.idx == r.idx && p.col == r.col {
			s++
		}
	}
	return s
}

// better orders candidates: quality group, then affinity, then quality, then
// the evidence's order.
func better(q, s int, r ref, bestQ, bestS, best int, ix *index) bool {
	if best < 0 {
		return true
	}
	switch {
	case q/10 != bestQ/10:
		return q/10 < bestQ/10
	case s != bestS:
		return s > bestS
	case q != bestQ:
		return q < bestQ
	}
	return r.cmp(ix.vals[best].ref) < 0
}

// yearColumns collects the values of the results' year columns (named year,
// yr, fy or season): a year-like number of the answer that is one of them
// names a row, it is not a quantity.
func yearColumns(ev *Evidence) map[float64]bool {
	var ys map[float64]bool
	for _, r := range ev.Results {
		for c, name := range r.Columns {
			n := strings.ToLower(name)
			if !strings.Contains(n, "year") && n != "yr" && n != "fy" && !strings.Contains(n, "season") {
				continue
			}
			for _, row := range r.Rows {
				if c >= len(row) {
					continue
				}
				var f float64
				switch x := row[c].(type) {
				case int64:
					f = float64(x)
				case json.Number:
					f, _ = x.Float64()
				case string:
					f, _ = strconv.ParseFloat(x, 64)
				case int:
					f = float64(x)
				default:
					continue
				}
				if ys == nil {
					ys = map[float64]bool{}
				}
				ys[f] = true
			}
		}
	}
	return ys
}

// nameRef is a word and a number of the answer ("scope 1") that may be a
// row's name.
type nameRef struct {
	phrase string
	t      *tok
}

// rowNames returns the tokens whose word and number are, ignoring case and
// spacing, a text cell of a result or its last words ("Scope 1", "Line 3",
// "Data Viz 101"): they name a row, they are not a quantity.
func rowNames(ev *Evidence, names []nameRef) map[*tok]bool {
	if len(names) == 0 {
		return nil
	}
	// The phrases by their number, so that a cell costs one lookup.
	byNum := map[string][]nameRef{}
	for _, n := range names {
		num := n.phrase[strings.LastIndexByte(n.phrase, ' ')+1:]
		byNum[num] = append(byNum[num], n)
	}
	var named map[*tok]bool
	for _, r := range ev.Results {
		for _, row := range r.Rows {
			for _, v := range row {
				s, ok := v.(string)
				if !ok || len(s) > 60 {
					continue
				}
				s = strings.TrimSpace(s)
				j := len(s)
				for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
					j--
				}
				if j == len(s) || j == 0 {
					continue
				}
				for _, n := range byNum[s[j:]] {
					if endsWithPhrase(s, n.phrase) {
						if named == nil {
							named = map[*tok]bool{}
						}
						named[n.t] = true
					}
				}
			}
		}
	}
	return named
}

// endsWithPhrase reports whether the cell is the phrase, or ends with it
// after a space ("Data Viz 101" and "viz 101"), ignoring case and spacing.
func endsWithPhrase(cell, phrase string) bool {
	if equalFoldSpaces(cell, phrase) {
		return true
	}
	for i := len(cell) - 1; i > 0; i-- {
		if cell[i] == ' ' && equalFoldSpaces(cell[i+1:], phrase) {
			return true
		}
	}
	return false
}

// equalFoldSpaces compares a cell with a lower-case phrase of words joined by
// single spaces, ignoring case and runs of spaces in the cell.
func equalFoldSpaces(cell, phrase string) bool {
	i, j := 0, 0
	for i < len(cell) && j < len(phrase) {
		c := cell[i]
		if c == ' ' || c == '\t' {
			if phrase[j] != ' ' {
				return false
			}
			for i < len(cell) && (cell[i] == ' ' || cell[i] == '\t') {
				i++
			}
			j++
			continue
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != phrase[j] {
			return false
		}
		i++
		j++
	}
	return i == len(cell) && j == len(phrase)
}

// columnNumbers collects the runs of digits in the results' column names
// ("high_52w", "month_12_retention"), on first use.
func columnNumbers(ev *Evidence, m *map[string]bool) map[string]bool {
	if *m != nil {
		return *m
	}
	*m = map[string]bool{}
	for _, r := range ev.Results {
		for _, c := range r.Columns {
			for i := 0; i < len(c); {
				if c[i] < '0' || c[i] > '9' {
					i++
					continue
				}
				j := i
				for j < len(c) && c[j] >= '0' && c[j] <= '9' {
					j++
				}
				(*m)[c[i:j]] = true
				i = j
			}
		}
	}
	return *m
}
