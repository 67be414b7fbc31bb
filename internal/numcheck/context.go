package numcheck

import (
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	// Words after which a number is a label or a reference, not a quantity.
	refWords = setOf("step", "steps", "option", "table", "figure", "fig", "section", "sec", "chapter",
		"page", "pages", "appendix", "item", "part", "phase", "tier", "version", "rule", "note",
		"footnote", "slide", "exhibit", "query", "question", "task", "stage", "round", "rank",
		"ranked", "week", "wk", "line", "row", "rows", "column", "col", "id", "cw", "kw", "month",
		"day", "quarter", "period", "wave", "clause", "article", "paragraph", "schedule",
		"options", "tables", "figures", "sections", "chapters", "items", "parts", "phases", "tiers",
		"rules", "notes", "slides", "questions", "tasks", "stages", "rounds", "weeks", "lines",
		"columns", "months", "days", "quarters", "clauses", "articles", "waves")
	// The same, written abbreviated with a dot: "p. 12", "No. 5".
	refAbbrev = setOf("p", "pp", "no", "nr", "fig", "sec", "ch", "vol", "art", "para")

	months = setOf("january", "february", "march", "april", "june", "july", "august",
		"september", "october", "november", "december", "jan", "feb", "mar", "apr", "jun",
		"jul", "aug", "sep", "sept", "oct", "nov", "dec")

	yearBefore = setOf("in", "since", "during", "from", "until", "till", "through", "thru", "by",
		"before", "after", "year", "years", "fy", "fiscal", "early", "late", "mid", "between",
		"vs", "versus", "the", "for", "calendar", "ytd", "circa", "season", "seasons", "cohort",
		"spring", "summer", "autumn", "fall", "winter", "q1", "q2", "q3", "q4", "h1", "h2",
		"ending", "ended", "starting")
	// "of" makes a year after these: "the end of 2023".
	ofYear = setOf("quarter", "half", "end", "start", "beginning", "middle", "rest", "first",
		"second", "third", "fourth", "last", "spring", "summer", "autumn", "fall", "winter",
		"course", "months", "month", "part", "q1", "q2", "q3", "q4", "h1", "h2", "year", "fy")
	// Joiners of two years: "2019 to 2021", "2022 and 2023".
	yearJoin = setOf("to", "and", "or", "through", "thru", "vs", "versus", "until", "till")
	// Words after a year that make it one: "2023 was", "2023 revenue".
	yearAfter = setOf("was", "were", "saw", "had", "is", "will", "brought", "showed", "revenue",
		"sales", "data", "figures", "figure", "results", "result", "total", "totals", "budget",
		"report", "season", "cohort", "census", "survey", "level", "levels", "values", "numbers",
		"average", "median", "baseline", "compared", "onwards", "onward", "q1", "q2", "q3", "q4",
		"h1", "h2", "fy", "annual", "full-year", "ytd", "forecast", "target", "actuals", "earnings",
		"profit", "growth", "estimates", "estimate", "edition", "version", "release", "and", "to",
		"through", "vs", "versus", "has", "have", "marked", "shows", "show", "did", "does", "began",
		"started", "ended", "closed", "finished", "delivered", "looked", "looks", "proved", "remains",
		"remained", "set", "came", "went", "brings", "saw", "sees", "outperformed", "underperformed")

	dateHeaders = setOf("year", "yr", "fy", "fiscal year", "period", "date", "month", "quarter", "week",
		"day", "season", "time", "hour")
	rankHeaders = setOf("#", "rank", "no", "no.", "n°", "pos", "position")

	approxWords = setOf("about", "around", "approximately", "approx", "roughly", "nearly", "almost",
		"circa", "ca", "some", "approaching", "estimated", "est", "close", "just", "~")
	overWords  = setOf("over", "above", "exceeding", "exceeds", "exceeded", "surpassing", "topping")
	underWords = setOf("under", "below")
	negWords   = setOf("decrease", "decreased", "decreases", "decreasing", "decline", "declined",
		"declines", "declining", "drop", "dropped", "drops", "dropping", "fell", "fall", "falls",
		"falling", "lower", "less", "fewer", "down", "loss", "losses", "lost", "lose", "loses",
		"shrank", "shrink", "shrinks", "shrunk", "shrinking", "contracted", "contraction",
		"negative", "minus", "below", "reduction", "reduced", "reduce", "reduces", "cut", "cuts",
		"deficit", "slipped", "slip", "slips", "dipped", "dip", "dips", "slid", "slide", "slides",
		"worse", "worsened", "downturn", "plunged", "plummeted", "tumbled", "sank", "sunk",
		"eroded", "underperformed", "shortfall", "behind", "retreated", "lost", "deficit",
		"decreasing", "contracting", "lowered", "cheaper", "smaller", "shorter", "lighter",
		"overspent", "overspend", "overspending", "overran", "overrun", "short")
)

// wordBefore is the word ending just before pos (letters and digits, lower
// case), skipping spaces and emphasis; dot says a "." came between.
func (d *doc) wordBefore(pos int) (w string, start int, dot bool) {
	rs := d.rs
	j := pos - 1
	for j >= 0 && (isSpace(rs[j]) || rs[j] == '*' || rs[j] == '_') {
		j--
	}
	if j >= 0 && rs[j] == '.' {
		dot = true
		j--
	}
	end := j + 1
	for j >= 0 && (isLetter(rs[j]) || isDigit(rs[j])) {
		j--
	}
	if end == j+1 {
		return "", pos, dot
	}
	return strings.ToLower(string(rs[j+1 : end])), j + 1, dot
}

// wordAfter is the word starting after pos (letters, digits and inner
// hyphens, lower case), skipping spaces and emphasis.
func (d *doc) wordAfter(pos int) (w string, end int) {
	rs := d.rs
	i := pos
	for i < len(rs) && (isSpace(rs[i]) || rs[i] == '*' || rs[i] == '_') {
		i++
	}
	j := i
	for j < len(rs) && (isLetter(rs[j]) || isDigit(rs[j]) || (rs[j] == '-' && j > i && isLetter(d.at(j+1)))) {
		j++
	}
	return strings.ToLower(string(rs[i:j])), j
}

// nextRune is the first rune at or after pos that is not a space or emphasis.
func (d *doc) nextRune(pos int) (rune, int) {
	for i := pos; i < len(d.rs); i++ {
		if r := d.rs[i]; !isSpace(r) && r != '*' && r != '_' {
			return r, i
		}
	}
	return 0, len(d.rs)
}

func (d *doc) prevRune(pos int) (rune, int) {
	for i := pos - 1; i >= 0; i-- {
		if r := d.rs[i]; !isSpace(r) && r != '*' && r != '_' {
			return r, i
		}
	}
	return 0, -1
}

// isMonth reports a month name; "May" and abbreviations only capitalised.
func (d *doc) isMonth(start int, w string) bool {
	if !months[w] && w != "may" {
		return false
	}
	if len(w) <= 4 && w != "june" && w != "july" {
		return start < len(d.rs) && d.rs[start] >= 'A' && d.rs[start] <= 'Z'
	}
	return true
}

// yearAt reports a year-like integer starting right at pos (after spaces).
func (d *doc) yearAt(pos int) bool {
	i := skipSpaces(d.rs, pos)
	for i < len(d.rs) && (d.rs[i] == '*' || d.rs[i] == '_') {
		i++
	}
	if d.digitsAt(i) != 4 || isWordRune(d.at(i+4)) {
		return false
	}
	y := atoi(d.rs[i : i+4])
	return y >= 1800 && y <= 2100
}

// classify applies the rules of context to toks[k]: tables, list markers,
// references, dates and years; then reads the cue words around it.
func (d *doc) classify(toks []tok, k int) {
	t := &toks[k]
	l := d.lines[d.lineAt(t.cs)]
	switch l.role {
	case tableHeader:
		if t.yearLike() {
			t.skip = "year"
			return
		}
	case tableBody:
		if c := d.cellIndex(l, t.cs); c >= 0 && c < len(l.headers) {
			h := l.headers[c]
			if dateHeaders[h] || strings.Contains(h, "year") {
				t.skip = "date"
				return
			}
			if rankHeaders[h] {
				t.skip = "ordinal"
				return
			}
		}
	case plainLine:
		if t.start == l.lead || (t.start == l.lead+1 && d.at(l.lead) == '(') {
			after := d.at(t.ce)
			follow := d.at(t.ce + 1)
			if t.plainInt() && t.intDigits <= 3 &&
				((after == '.' || after == ')') && (t.ce+1 >= l.end || isSpace(follow) || follow == '*')) {
				t.skip = "list"
				return
			}
		}
	}
	if p := d.at(t.start - 1); p == '#' {
		t.skip = "ordinal"
		return
	}
	if p := d.at(t.start - 1); (p == '\'' || p == '’' || p == '‘') && t.plainInt() && t.intDigits == 2 && !isLetter(d.at(t.start-2)) {
		t.skip = "year"
		return
	}
	w, ws, dot := d.wordBefore(t.start)
	bare := !t.grouped && !t.cur && !t.suffix && !t.neg && !t.plus
	if ((refWords[w] && !dot) || (refAbbrev[w] && dot)) && bare {
		t.skip = "label"
		return
	}
	// "per 100,000 residents", "per 1k": a rate's denominator, a unit.
	if w == "per" && !dot && !t.neg && !t.pct {
		t.skip = "label"
		return
	}
	// "Lines 1 and 3", "steps 2–4": the numbers after a label's.
	if k > 0 && toks[k-1].skip == "label" && bare && !t.point {
		switch strings.TrimSpace(string(d.rs[toks[k-1].end:t.start])) {
		case "and", "or", ",", "&", "to", "-", "–", "through":
			t.skip = "label"
			return
		}
	}
	// "95% CI", "95% confidence interval": a convention, not a finding.
	if t.pct {
		if wa, _ := d.wordAfter(t.end); wa == "ci" || wa == "confidence" {
			t.skip = "label"
			return
		}
	}
	if t.plainInt() && t.intDigits <= 2 {
		if x, _ := t.intValue(); x >= 1 && x <= 31 {
			wa, _ := d.wordAfter(t.end)
			if (d.isMonth(ws, w) && (!dot || len(w) <= 4)) || d.isMonth(skipSpaces(d.rs, t.end), wa) {
				t.skip = "date"
				return
			}
		}
	}
	if d.isScale(toks, k, w) {
		t.skip = "scale"
		return
	}
	if t.plainInt() && d.at(t.end) == '-' {
		if wa, _ := d.letters(t.end + 1); windowUnits[strings.ToLower(wa)] {
			t.skip = "label"
			return
		}
	}
	if t.yearLike() && d.isYear(toks, k, w, ws, dot) {
		t.skip = "year"
		return
	}
	d.cues(t)
}

// isYear applies the year rules of the package doc to the year-like toks[k],
// w being the word before it.
func (d *doc) isYear(toks []tok, k int, w string, ws int, dot bool) bool {
	t := &toks[k]
	var prev *tok
	if k > 0 {
		prev = &toks[k-1]
	}
	prevYear := prev != nil && (prev.skip == "year" || prev.skip == "date") && t.start-prev.end < 12
	if !dot {
		switch {
		case yearBefore[w], d.isMonth(ws, w), w == "on":
			return true
		case yearJoin[w] && prevYear:
			return true
		case w == "of":
			if w2, _, _ := d.wordBefore(ws); ofYear[w2] || months[w2] {
				return true
			}
		}
	}
	if w != "" && dot && (d.isMonth(ws, w) || w == "vs") {
		return true
	}
	pr, pi := d.prevRune(t.start)
	switch {
	case (pr == '-' || pr == '–' || pr == '—' || pr == '&' || pr == '/') && prevYear:
		return true
	case pr == ',' && prev != nil && prev.skip == "date" && pi-prev.end < 3:
		return true
	case pr == '(' && d.at(t.end) == ')':
		return true
	}
	nr, ni := d.nextRune(t.end)
	switch nr {
	case ':':
		return true
	case '-', '–', '—':
		j := skipSpaces(d.rs, ni+1)
		if d.yearAt(j) || (d.digitsAt(j) == 2 && !isWordRune(d.at(j+2))) {
			return true
		}
	case '/':
		if dl := d.digitsAt(ni + 1); (dl == 2 || dl == 4) && !isWordRune(d.at(ni+1+dl)) {
			return true
		}
	}
	wa, we := d.wordAfter(t.end)
	if yearJoin[wa] {
		return d.yearAt(we)
	}
	return yearAfter[wa]
}

// sentence is the span of the sentence around [from, to): up to a line end,
// "!", "?", ";", a table cell's "|" or a full stop followed by a space (not an
// abbreviation's), at most 160 runes either side.
func (d *doc) sentence(from, to int) (int, int) {
	if d.bounds == nil {
		d.bounds = make([]int, 0, len(d.rs)/40+1)
		for i := range d.rs {
			if d.boundary(i) {
				d.bounds = append(d.bounds, i)
			}
		}
	}
	// The last boundary before from, the first at or after to.
	k := sort.SearchInts(d.bounds, from)
	s := 0
	if k > 0 {
		s = d.bounds[k-1] + 1
	}
	k = sort.SearchInts(d.bounds, to)
	e := len(d.rs)
	if k < len(d.bounds) {
		e = d.bounds[k]
	}
	return max(s, from-160), min(e, to+160)
}

func (d *doc) boundary(i int) bool {
	switch d.rs[i] {
	case '\n', '!', '?', ';', '|':
		return true
	case '.':
		if i+1 < len(d.rs) && !isSpace(d.rs[i+1]) && d.rs[i+1] != '\n' {
			return false
		}
		w, _, _ := d.wordBefore(i + 1)
		return !refAbbrev[w] && !approxWords[w] && w != "vs" && w != "e" && w != "g" && w != "i"
	}
	return false
}

// word is a run of letters of a doc, lower case, or one of the symbols
// ~ ≈ > < ≥ ≤.
type word struct {
	start, end int
	lower      string
}

func isCueSymbol(r rune) bool {
	return r == '~' || r == '≈' || r == '>' || r == '<' || r == '≥' || r == '≤'
}

// lastWords appends to dst the last n words lying in rs[from:to], in order:
// the runs of letters that start and end there, and the cue symbols. Only
// the span is read, from its end, not the whole answer: a long answer with
// few numbers was read whole, each word a string, for the few words around
// them.
func (d *doc) lastWords(dst []word, from, to, n int) []word {
	rs := d.rs
	from, to = max(from, 0), min(to, len(rs))
	i := to
	// A word that runs on past to does not lie in the span.
	if i < len(rs) && isLetter(rs[i]) {
		for i > from && isLetter(rs[i-1]) {
			i--
		}
	}
	k := len(dst)
	for i > from && len(dst)-k < n {
		r := rs[i-1]
		if !isLetter(r) {
			if isCueSymbol(r) {
				dst = append(dst, word{i - 1, i, string(r)})
			}
			i--
			continue
		}
		j := i
		for i > 0 && isLetter(rs[i-1]) {
			i--
		}
		if i < from {
			break // began before the span
		}
		dst = append(dst, word{i, j, lower(rs[i:j])})
	}
	slices.Reverse(dst[k:])
	return dst
}

// firstWords appends to dst the first n words lying in rs[from:to] (as
// [doc.lastWords]), reading only the span.
func (d *doc) firstWords(dst []word, from, to, n int) []word {
	rs := d.rs
	from, to = max(from, 0), min(to, len(rs))
	i := from
	// A word that began before from does not lie in the span.
	if i > 0 {
		for i < to && isLetter(rs[i]) && isLetter(rs[i-1]) {
			i++
		}
	}
	k := len(dst)
	for i < to && len(dst)-k < n {
		r := rs[i]
		if !isLetter(r) {
			if isCueSymbol(r) {
				dst = append(dst, word{i, i + 1, string(r)})
			}
			i++
			continue
		}
		j := i
		for j < len(rs) && isLetter(rs[j]) {
			j++
		}
		if j > to {
			break // runs on past the span
		}
		dst = append(dst, word{i, j, lower(rs[i:j])})
		i = j
	}
	return dst
}

// lower is rs in lower case, as strings.ToLower(string(rs)) with one
// allocation.
func lower(rs []rune) string {
	var buf [64]byte
	b := buf[:0]
	for _, r := range rs {
		b = utf8.AppendRune(b, unicode.ToLower(r))
	}
	return string(b)
}

// cues reads the approximation, bound and negative words around t.
func (d *doc) cues(t *tok) {
	ss, se := d.sentence(t.start, t.end)
	var bw, aw [6]word
	before := d.lastWords(bw[:0], max(ss, t.start-80), t.start, 6)
	after := d.firstWords(aw[:0], t.end, min(se, t.end+50), 3)
	last := func(k int) string {
		if k <= len(before) {
			return before[len(before)-k].lower
		}
		return ""
	}
	w1, w2, w3 := last(1), last(2), last(3)
	// Symbols right before the number.
	if pr, _ := d.prevRune(t.start); pr == '~' || pr == '≈' {
		t.approx = true
	} else if pr == '>' || pr == '≥' {
		t.bound = 1
	} else if pr == '<' || pr == '≤' {
		t.bound = -1
	}
	switch {
	case approxWords[w1] && w1 != "close" && w1 != "just", w1 == "to" && w2 == "close", w1 == "of" && w2 == "shy":
		t.approx = true
	case w1 == "than" && (w2 == "more" || w2 == "greater" || w2 == "higher" || w2 == "larger"):
		t.bound = 1
		if w3 == "no" || w3 == "not" {
			t.bound = -1
		}
	case w1 == "than" && (w2 == "less" || w2 == "fewer" || w2 == "lower" || w2 == "smaller"):
		t.bound = -1
	case w1 == "least" && w2 == "at", w1 == "of" && (w2 == "upwards" || w2 == "excess" || w2 == "north"):
		t.bound = 1
	case w1 == "most" && w2 == "at", w1 == "to" && w2 == "up":
		t.bound = -1
	case overWords[w1]:
		t.bound = 1
	case underWords[w1]:
		t.bound = -1
	}
	if w2 == "just" && (overWords[w1] || underWords[w1]) {
		t.approx = true
	}
	for k := 1; k <= 6 && k <= len(before); k++ {
		if negWords[before[len(before)-k].lower] {
			t.negCue = true
		}
	}
	for k := 0; k < 3 && k < len(after); k++ {
		if negWords[after[k].lower] {
			t.negCue = true
		}
	}
}

// shareRanges gives the first number of a range the percent or magnitude
// of the second: "10–15%", "$1.2–1.5M", "3 to 4 million".
func (d *doc) shareRanges(toks []tok) {
	for k := 0; k+1 < len(toks); k++ {
		a, b := &toks[k], &toks[k+1]
		if a.skip != "" || b.skip != "" || a.mag != 0 || a.pct || (b.mag == 0 && !b.pct) {
			continue
		}
		between := strings.TrimSpace(string(d.rs[a.end:b.start]))
		switch between {
		case "-", "–", "—", "to", "and":
			a.shareMag, a.sharePct = b.mag, b.pct
		}
	}
}

// windowUnits make a compound that names a technical size or a rating, not
// a quantity of the data: "64-bit", "8-core", "5-star". ("30-day" and
// "4-hour" are checked: a window or a target the model states is a claim.)
var windowUnits = setOf("bit", "byte", "digit", "character", "char", "core", "star")

// isScale reports the top of a rating scale: the 5 of "4.6/5" or "4.2 out
// of 5" (after a number with a decimal point; also 10 and 100).
func (d *doc) isScale(toks []tok, k int, w string) bool {
	t := &toks[k]
	if !t.plainInt() || k == 0 {
		return false
	}
	if x, _ := t.intValue(); x != 5 && x != 10 && x != 100 {
		return false
	}
	p := &toks[k-1]
	if p.skip != "" || !p.point || p.suffix {
		return false
	}
	between := strings.TrimSpace(string(d.rs[p.end:t.start]))
	return between == "/" || between == "out of"
}
