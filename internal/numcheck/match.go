package numcheck

import (
	"encoding/json"
	"math"
	"slices"
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

// width is how far from |a| a value may be and still match in.
func (t *tok) width(in interp) float64 {
	a := in.a.abs().norm()
	w := math.Pow10(in.last+in.tz) / 2
	if t.approx && !a.isZero() {
		w = max(w, a.float())
	}
	if t.bound != 0 && !a.isZero() {
		w = max(w, math.Pow10(a.mag()))
	}
	return w
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
	if in.pctUnits && !v.pctUnits {
		if v.ref.kind == kindRowCount {
			return qNone
		}
		if v.text {
			if cmpAbs(in.a, dec{c: 1}) < 0 {
				return qNone
			}
		} else if v.gcol >= 0 && ix.colFrac[v.gcol] {
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
	if t.approx {
		for z := 0; z <= in.tz+1; z++ {
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

// maxCandidates caps how many values nearest a reading are examined.
const maxCandidates = 256

// candidates calls f with the values within w of |a|, nearest first.
func (ix *index) candidates(a, w float64, f func(i int)) {
	lo, hi := (a-w)*(1-1e-9)-1e-300, (a+w)*(1+1e-9)+1e-300
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
	tableCol             [2]int
	inTable              bool
}

// choice is the source chosen for a number.
type choice struct {
	ref      ref
	sentence int
	ok       bool
}

// CheckAnswer checks every number of answer against ev, as the package doc
// describes, and returns one [Check] per checked number, in order. Offsets are
// in characters (runes), not bytes. It never fails: text it cannot read as a
// number is simply not checked. The result is never nil.
func CheckAnswer(answer string, ev Evidence) []Check {
	d := newDoc(answer)
	toks := d.scan()
	years := yearColumns(&ev)
	var names cellNames
	var ts []*tok
	var ins [][]interp
	var ws []window
	for k := range toks {
		t := &toks[k]
		if t.skip != "" {
			continue
		}
		if t.yearLike() && years[t.mant.float()] {
			t.skip = "year"
			continue
		}
		if t.plainInt() && !t.point && nameCells(&ev, &names).has(d, t) {
			t.skip = "label"
			continue
		}
		r := interps(t)
		ts = append(ts, t)
		ins = append(ins, r)
		for _, in := range r {
			a := math.Abs(in.a.float())
			w := t.width(in)
			ws = append(ws, window{(a - w) * (1 - 1e-9), (a + w) * (1 + 1e-9)})
		}
	}
	checks := make([]Check, 0, len(ts))
	if len(ts) == 0 {
		return checks
	}
	ix := buildIndex(&ev, mergeWindows(ws))

	var prev choice
	colPrev := map[[2]int]ref{}
	for n, t := range ts {
		c := Check{Text: string(d.rs[t.start:t.end]), Start: t.start, End: t.end, Status: Unmatched}
		ctx := d.context(ts, n)
		best, bestQ, bestS := -1, qNone, -1
		for _, in := range ins[n] {
			ix.candidates(math.Abs(in.a.float()), t.width(in), func(i int) {
				q := ix.quality(t, in, &ix.vals[i])
				if q == qNone || (best >= 0 && q/10 > bestQ/10) {
					return
				}
				s := ix.affinity(&ix.vals[i], ctx, prev, colPrev)
				if better(q, s, ix.vals[i].ref, bestQ, bestS, best, ix) {
					best, bestQ, bestS = i, q, s
				}
			})
		}
		if best >= 0 {
			r := ix.vals[best].ref
			c.Status = Matched
			c.Source = ix.source(r)
			prev = choice{ref: r, sentence: ctx.sentence, ok: true}
			if ctx.inTable && r.kind == kindCell {
				colPrev[ctx.tableCol] = r
			}
		}
		checks = append(checks, c)
	}
	return checks
}

func mergeWindows(ws []window) []window {
	slices.SortFunc(ws, func(a, b window) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var out []window
	for _, w := range ws {
		if n := len(out); n > 0 && w.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, w.hi)
			continue
		}
		out = append(out, w)
	}
	return out
}

func (ix *index) source(r ref) Source {
	switch r.kind {
	case kindCell:
		row, col := r.row, r.col
		return Source{ToolCallID: ix.ev.Results[r.idx].ToolCallID, Row: &row, Column: &col}
	case kindRowCount:
		return Source{ToolCallID: ix.ev.Results[r.idx].ToolCallID}
	case kindExcerpt:
		return Source{SourceID: ix.ev.Excerpts[r.idx].SourceID}
	}
	return Source{Question: true}
}

// context reads the text around ts[n] for attribution: from the number
// before it (or the sentence's start) to it, from it to the next one (or the
// sentence's end), and the whole sentence; in a table, the table row.
func (d *doc) context(ts []*tok, n int) sentenceCtx {
	t := ts[n]
	li := d.lineAt(t.cs)
	l := d.lines[li]
	var ctx sentenceCtx
	var ss, se int
	if l.role == tableBody || l.role == tableHeader {
		ss, se = l.start, l.end
		ctx.inTable = true
		ctx.tableCol = [2]int{l.table, d.cellIndex(l, t.cs)}
	} else {
		ss, se = d.sentence(t.start, t.end)
	}
	from, to := ss, se
	if n > 0 && ts[n-1].end > from && ts[n-1].end <= t.start {
		from = ts[n-1].end
	}
	if n+1 < len(ts) && ts[n+1].start < to && ts[n+1].start >= t.end {
		to = ts[n+1].start
	}
	ctx.before = strings.ToLower(string(d.rs[from:t.start]))
	ctx.after = strings.ToLower(string(d.rs[t.end:to]))
	ctx.whole = strings.ToLower(string(d.rs[ss:se]))
	ctx.sentence = ss
	return ctx
}

// affinity scores how well v's place fits the number's context: its row
// named next to the number, the row and column of the number before.
func (ix *index) affinity(v *val, ctx sentenceCtx, prev choice, colPrev map[[2]int]ref) int {
	r := v.ref
	if r.kind != kindCell {
		return 0
	}
	s := 0
	label := 0
	for _, l := range ix.rowLabels(r.idx, r.row) {
		switch {
		case containsWord(ctx.before, l):
			label = max(label, 4)
		case containsWord(ctx.after, l):
			label = max(label, 3)
		case containsWord(ctx.whole, l):
			label = max(label, 1)
		}
	}
	s += label
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

// cellNames are the results' short text cells that end in a number ("Scope
// 1", "Line 3", "Store 12"), lower case: such a word and number in the answer
// name a row, they are not a quantity.
type cellNames map[string]bool

// nameCells builds the set on first use.
func nameCells(ev *Evidence, names *cellNames) cellNames {
	if *names != nil {
		return *names
	}
	m := cellNames{}
	for _, r := range ev.Results {
		for _, row := range r.Rows {
			for _, v := range row {
				s, ok := v.(string)
				if !ok || len(s) > 60 || s == "" || !isDigit(rune(s[len(s)-1])) {
					continue
				}
				m[strings.ToLower(strings.Join(strings.Fields(s), " "))] = true
			}
		}
	}
	*names = m
	return m
}

func (m cellNames) has(d *doc, t *tok) bool {
	if len(m) == 0 {
		return false
	}
	w, _, dot := d.wordBefore(t.start)
	if w == "" || dot {
		return false
	}
	return m[w+" "+string(d.rs[t.cs:t.ce])]
}
