package numcheck

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits bound the work of checking one answer.
type Limits struct {
	// MaxNumbers is the most numbers read, the first in reading order
	// (DefaultMaxNumbers when 0).
	MaxNumbers int
	// Timeout bounds the check (DefaultTimeout when 0); the context given
	// to CheckAnswerWithin may end it sooner.
	Timeout time.Duration
}

// Defaults of [Limits]: an answer of a few thousand characters has tens of
// numbers; a 5,000-number answer takes some 30 ms (BenchmarkCheckAnswerMany).
const (
	DefaultMaxNumbers = 5000
	DefaultTimeout    = 2 * time.Second
)

// Checked is the outcome of [CheckAnswerWithin]: the checks of the numbers
// read and, when it stopped early, from where and why the rest of the
// answer was not checked. Those numbers are left out of Checks, as every
// number the checker does not check is (code, years, labels): the page
// marks nothing on them and claims nothing about them.
type Checked struct {
	Checks []Check
	// From is the character offset where checking stopped, Stopped why:
	// "numbers" (more than MaxNumbers), "time" (the timeout or the
	// context). Both are zero when every number was checked.
	From    int
	Stopped string
}

// CheckAnswer checks the numbers of answer against ev within the default
// [Limits]; see [CheckAnswerWithin].
func CheckAnswer(answer string, ev Evidence) []Check {
	return CheckAnswerWithin(context.Background(), answer, ev, Limits{}).Checks
}

// CheckAnswerWithin checks every number of answer against ev, as the package
// doc describes, and returns one [Check] per checked number, in order, up to
// lim.MaxNumbers numbers and until lim.Timeout or ctx ends. Offsets are in
// characters (runes), not bytes. It never fails: text it cannot read as a
// number is simply not checked. Checks is never nil.
func CheckAnswerWithin(ctx context.Context, answer string, ev Evidence, lim Limits) Checked {
	if lim.MaxNumbers <= 0 {
		lim.MaxNumbers = DefaultMaxNumbers
	}
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	out := Checked{Checks: []Check{}}
	if strings.IndexAny(answer, "0123456789") < 0 {
		// Every number starts with a digit: an answer without one has none,
		// and is not read (a long answer in prose, held as runes with its
		// mask and lines, cost a check its size four times over).
		return out
	}
	// Only the start of a long answer is read: it holds the first numbers.
	text, cut := prefixOf(answer, lim.MaxNumbers)
	d := newDoc(text)
	toks, from := d.scan(lim.MaxNumbers)
	switch {
	case from >= 0:
		out.From, out.Stopped = from, StoppedNumbers
	case cut:
		out.From, out.Stopped = len(d.rs), StoppedNumbers
	}
	years := yearColumns(&ev)
	var names []nameRef
	var colNums map[string]bool
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
		if t.plainInt() && d.at(t.end) == '-' && isLetter(d.at(t.end+1)) && columnNumbers(&ev, &colNums)[string(d.rs[t.cs:t.ce])] {
			// "the 52-week high" beside a column high_52w: a label.
			t.skip = "label"
			continue
		}
		if t.plainInt() && !t.point {
			if w, _, dot := d.wordBefore(t.start); w != "" && !dot {
				names = append(names, nameRef{w + " " + string(d.rs[t.cs:t.ce]), t})
			}
		}
		r := interps(t)
		ts = append(ts, t)
		ins = append(ins, r)
		for _, in := range r {
			if lo, hi := t.span(in); !math.IsNaN(lo) && !math.IsNaN(hi) {
				ws = append(ws, window{lo, hi})
			}
		}
	}
	if named := rowNames(&ev, names); len(named) > 0 {
		// Drop the numbers that are part of a row's name ("Scope 1").
		var ts2 []*tok
		var ins2 [][]interp
		ws = ws[:0]
		for n, t := range ts {
			if named[t] {
				t.skip = "label"
				continue
			}
			ts2 = append(ts2, t)
			ins2 = append(ins2, ins[n])
			for _, in := range ins[n] {
				if lo, hi := t.span(in); !math.IsNaN(lo) && !math.IsNaN(hi) {
					ws = append(ws, window{lo, hi})
				}
			}
		}
		ts, ins = ts2, ins2
	}
	checks := make([]Check, 0, len(ts))
	out.Checks = checks
	if len(ts) == 0 {
		return out
	}
	ix := buildIndex(&ev, mergeWindows(ws))

	var prev choice
	colPrev := map[[2]int]ref{}
	type cand struct{ i, q int }
	var cands []cand
	for n, t := range ts {
		if n%64 == 63 && ctx.Err() != nil {
			out.From, out.Stopped = t.start, StoppedTime
			break
		}
		c := Check{Text: string(d.rs[t.start:t.end]), Start: t.start, End: t.end, Status: Unmatched}
		// The candidates of the best quality group, then the best of them.
		cands = cands[:0]
		group := math.MaxInt
		for _, in := range ins[n] {
			lo, hi := t.span(in)
			ix.candidates(math.Abs(in.a.float()), lo, hi, func(i int) {
				q := ix.quality(t, in, &ix.vals[i])
				if q == qNone || q/10 > group {
					return
				}
				if q/10 < group {
					group, cands = q/10, cands[:0]
				}
				if len(cands) < maxTies {
					cands = append(cands, cand{i, q})
				}
			})
		}
		ctx := d.contextID(ts, n)
		if len(cands) > 0 {
			best, bestQ, bestS := cands[0].i, cands[0].q, 0
			if len(cands) > 1 {
				d.contextText(ts, n, &ctx)
				bestS = ix.affinity(&ix.vals[best], ctx, prev, colPrev)
				for _, k := range cands[1:] {
					s := ix.affinity(&ix.vals[k.i], ctx, prev, colPrev)
					if better(k.q, s, ix.vals[k.i].ref, bestQ, bestS, best, ix) {
						best, bestQ, bestS = k.i, k.q, s
					}
				}
			}
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
	out.Checks = checks
	return out
}

// prefixOf returns the start of answer that holds its first max numbers:
// up to the end of the line of its 4×max-th run of digits (a number has up
// to four: "1,234,567.89"), at most 512 bytes further, and at most 64 bytes
// a number; and whether that cut anything. It bounds the memory of a check
// (the text is held as runes, with a mask and its lines) by the limit,
// whatever the answer's length.
func prefixOf(answer string, max int) (string, bool) {
	limit := min(len(answer), 64*max+512)
	runs, end := 0, limit
	for i := 0; i < limit; i++ {
		if isDigit(rune(answer[i])) && (i == 0 || !isDigit(rune(answer[i-1]))) {
			if runs++; runs == 4*max+1 {
				end = i
				if nl := strings.IndexByte(answer[i:min(len(answer), i+512)], '\n'); nl >= 0 {
					end = i + nl
				}
				break
			}
		}
	}
	if end >= len(answer) {
		return answer, false
	}
	for end > 0 && !utf8.RuneStart(answer[end]) {
		end--
	}
	return answer[:end], true
}

// Reasons in [Checked.Stopped].
const (
	StoppedNumbers = "numbers"
	StoppedTime    = "time"
)

func mergeWindows(ws []window) []window {
	slices.SortFunc(ws, func(a, b window) int { return cmp.Compare(a.lo, b.lo) })
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
