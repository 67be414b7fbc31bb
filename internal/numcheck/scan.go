package numcheck

import (
	"strings"
)

// A tok is a number-like run of a text: a number to check, or one that is
// not a checkable number (skip says why: "identifier", "date", "year", …).
type tok struct {
	start, end int // the span reported: sign, currency, digits, suffixes
	cs, ce     int // the digits
	skip       string

	neg, plus, pm bool // "-", "+", "±"
	cur           bool // a currency
	mant          dec  // the digits as written, unsigned
	last          int  // exponent of the last digit shown
	point         bool // a decimal separator was shown
	grouped       bool
	intDigits     int // digits before the decimal separator
	tz            int // trailing zeros of an integer, which may be rounding
	mag           int // 3, 6, 9, 12 from k, M, B, T, thousand, …
	magAlt        bool
	pct           bool // %, percent, pp
	bps           bool
	permille      bool
	suffix        bool // any suffix: magnitude, percent, unit, ratio
	ratio         bool // "1.2x", "3×"

	approx bool // about, ~ …
	bound  int  // +1 over/at least, -1 under/at most
	negCue bool // decrease, fell … nearby

	shareMag int // from the second number of a range ("1.2–1.5M")
	sharePct bool
}

// plainInt reports a bare integer: digits and nothing else.
func (t *tok) plainInt() bool {
	return !t.point && !t.grouped && !t.neg && !t.plus && !t.pm && !t.cur && !t.suffix
}

// yearLike reports a bare four-digit integer from 1800 to 2100.
func (t *tok) yearLike() bool {
	if !t.plainInt() || t.intDigits != 4 {
		return false
	}
	v := t.mant.norm()
	x := v.c
	for range v.e {
		x *= 10
	}
	return x >= 1800 && x <= 2100
}

func (t *tok) intValue() (uint64, bool) {
	if t.point || t.intDigits > 6 {
		return 0, false
	}
	v := t.mant.norm()
	x := v.c
	for range v.e {
		x *= 10
	}
	return x, true
}

// scan finds the number-like tokens of d, in order, at most limit of
// them; from is where the first one past the limit starts, or -1.
func (d *doc) scan(limit int) (toks []tok, from int) {
	from = -1
	rs := d.rs
	for i := 0; i < len(rs); i++ {
		if d.mask[i] || !isDigit(rs[i]) {
			continue
		}
		if len(toks) == limit {
			from = i
			break
		}
		t := d.scanAt(i, toks)
		if t.end <= i {
			t.end = i + 1
		}
		// A sign or currency code is never taken from the token before.
		if n := len(toks); n > 0 && t.start < toks[n-1].end {
			t.start = toks[n-1].end
		}
		// A token never runs into masked text (code, a citation).
		for k := t.cs; k < t.end; k++ {
			if d.mask[k] {
				t.end = max(k, t.ce)
				break
			}
		}
		toks = append(toks, t)
		i = t.end - 1
	}
	for k := range toks {
		if toks[k].skip == "" {
			d.classify(toks, k)
		}
	}
	d.shareRanges(toks)
	return toks, from
}

func (d *doc) digitsAt(k int) int {
	n := 0
	for k+n < len(d.rs) && isDigit(d.rs[k+n]) {
		n++
	}
	return n
}

func (d *doc) at(k int) rune {
	if k < 0 || k >= len(d.rs) {
		return 0
	}
	return d.rs[k]
}

// ident consumes an identifier or label from i: word runes, and ".", "-"
// between them.
func (d *doc) ident(i int) tok {
	j := i
	for j < len(d.rs) {
		r := d.rs[j]
		if isWordRune(r) || ((r == '.' || r == '-') && isWordRune(d.at(j+1))) {
			j++
			continue
		}
		break
	}
	return tok{start: i, end: j, cs: i, ce: j, skip: "identifier"}
}

func (d *doc) scanAt(i int, prev []tok) tok {
	rs := d.rs
	p := d.at(i - 1)
	// "id_42" is an identifier; "_8.1%_" is emphasis.
	if isLetter(p) || (p == '_' && isWordRune(d.at(i-2))) {
		return d.ident(i)
	}
	if (p == '-' || p == '.') && (isLetter(d.at(i-2)) || d.at(i-2) == '_') {
		return d.ident(i)
	}
	j := i + d.digitsAt(i)
	if end, why := d.special(i, j); end > 0 {
		return tok{start: i, end: end, cs: i, ce: end, skip: why}
	}

	t := tok{start: i, cs: i}
	var buf []byte
	buf = append(buf, string(rs[i:j])...)
	k := j
	r1 := j - i
	frac := ""
	continental := false
	if r1 <= 3 {
		switch {
		case d.at(k) == ',' && d.digitsAt(k+1) == 3:
			for d.at(k) == ',' && d.digitsAt(k+1) == 3 {
				buf = append(buf, string(rs[k+1:k+4])...)
				k += 4
			}
			t.grouped = true
		case d.at(k) == '.' && d.digitsAt(k+1) == 3 &&
			((d.at(k+4) == '.' && d.digitsAt(k+5) == 3) || (d.at(k+4) == ',' && d.digitsAt(k+5) > 0)):
			for d.at(k) == '.' && d.digitsAt(k+1) == 3 {
				buf = append(buf, string(rs[k+1:k+4])...)
				k += 4
			}
			t.grouped, continental = true, true
			if d.at(k) == ',' && d.digitsAt(k+1) > 0 {
				dl := d.digitsAt(k + 1)
				frac = string(rs[k+1 : k+1+dl])
				k += 1 + dl
			}
		case (isGroupSpace(d.at(k)) || d.at(k) == ' ') && d.digitsAt(k+1) == 3:
			for (isGroupSpace(d.at(k)) || d.at(k) == ' ') && d.digitsAt(k+1) == 3 {
				buf = append(buf, string(rs[k+1:k+4])...)
				k += 4
			}
			t.grouped = true
			if d.at(k) == ',' && d.digitsAt(k+1) > 0 {
				dl := d.digitsAt(k + 1)
				frac = string(rs[k+1 : k+1+dl])
				k += 1 + dl
				continental = true
			}
		}
	}
	t.intDigits = len(buf)
	if !continental {
		switch dl := d.digitsAt(k + 1); {
		case d.at(k) == '.' && dl > 0:
			frac = string(rs[k+1 : k+1+dl])
			k += 1 + dl
			if d.at(k) == '.' && d.digitsAt(k+1) > 0 {
				for d.at(k) == '.' && d.digitsAt(k+1) > 0 {
					k += 1 + d.digitsAt(k+1)
				}
				return tok{start: i, end: k, cs: i, ce: k, skip: "version"}
			}
		case d.at(k) == ',' && dl > 0 && dl != 3 && !t.grouped &&
			!(d.at(k+1+dl) == ',' && d.digitsAt(k+2+dl) > 0):
			frac = string(rs[k+1 : k+1+dl])
			k += 1 + dl
		}
	}
	if frac != "" {
		t.point = true
		buf = append(buf, '.')
		buf = append(buf, frac...)
	}
	exp := 0
	if r := d.at(k); r == 'e' || r == 'E' {
		m := k + 1
		sgn := 1
		if d.at(m) == '+' || d.at(m) == '-' {
			if d.at(m) == '-' {
				sgn = -1
			}
			m++
		}
		if dl := d.digitsAt(m); dl > 0 && dl <= 3 && !isWordRune(d.at(m+dl)) {
			for _, c := range rs[m : m+dl] {
				exp = exp*10 + int(c-'0')
			}
			exp *= sgn
			k = m + dl
			t.point = true // an exponent shows its precision in the mantissa
		}
	}
	t.ce = k
	t.mant, _ = parseDec(string(buf))
	t.mant.neg = false
	t.mant.e += exp
	t.last = -len(frac) + exp
	if !t.point {
		for z := len(buf) - 1; z > 0 && buf[z] == '0'; z-- {
			t.tz++
		}
	}
	d.prefix(&t, prev)
	if t.skip != "" {
		return t
	}
	d.suffix(&t)
	// Accounting notation: "($1.25M)" or "(12,300)" filling a table cell is
	// negative. In prose "(124)" or "($590K)" is an aside, and positive.
	if t.skip == "" && !t.neg && !t.plus && d.at(t.start-1) == '(' && d.at(t.end) == ')' && d.fillsCell(t.start-1, t.end+1) {
		t.neg = true
		t.start--
		t.end++
	}
	return t
}

// fillsCell reports whether rs[from:to] is all of a table body cell but
// spaces and emphasis.
func (d *doc) fillsCell(from, to int) bool {
	l := d.lines[d.lineAt(from)]
	if l.role != tableBody {
		return false
	}
	i := from - 1
	for i >= l.start && (isSpace(d.rs[i]) || d.rs[i] == '*' || d.rs[i] == '_') {
		i--
	}
	j := to
	for j < l.end && (isSpace(d.rs[j]) || d.rs[j] == '*' || d.rs[j] == '_') {
		j++
	}
	return (i < l.start || d.rs[i] == '|') && (j >= l.end || d.rs[j] == '|')
}

// special recognises dates, times, phone numbers and year ranges at the digit
// run rs[i:j], returning their end and kind.
func (d *doc) special(i, j int) (int, string) {
	rs := d.rs
	r1 := j - i
	sep := d.at(j)
	if r1 == 4 && (sep == '-' || sep == '/') {
		k := j + 1
		if sep == '-' && (d.at(k) == 'W' || d.at(k) == 'Q' || d.at(k) == 'H') {
			if dl := d.digitsAt(k + 1); dl >= 1 && dl <= 2 && !isWordRune(d.at(k+1+dl)) {
				return k + 1 + dl, "date"
			}
		}
		dl := d.digitsAt(k)
		y := atoi(rs[i:j])
		if (dl == 1 || dl == 2) && y >= 1000 && y <= 2999 && !isWordRune(d.at(k+dl)) {
			m := atoi(rs[k : k+dl])
			e := k + dl
			if dl == 2 && m > 12 && sep == '-' && d.at(e) != '-' && y >= 1800 && y <= 2100 {
				return e, "year"
			}
			if m >= 1 && m <= 12 {
				if d.at(e) == sep && d.digitsAt(e+1) >= 1 && d.digitsAt(e+1) <= 2 {
					e += 1 + d.digitsAt(e+1)
					if (d.at(e) == 'T' || d.at(e) == ' ') && d.timeEnd(e+1) > 0 {
						e = d.timeEnd(e + 1)
						if d.at(e) == 'Z' {
							e++
						} else if (d.at(e) == '+' || d.at(e) == '-') && d.digitsAt(e+1) == 2 {
							e += 3
							if d.at(e) == ':' && d.digitsAt(e+1) == 2 {
								e += 3
							} else if d.digitsAt(e) == 2 {
								e += 2
							}
						}
					}
				}
				return e, "date"
			}
		}
	}
	if (r1 == 1 || r1 == 2) && (sep == '/' || sep == '-' || sep == '.') {
		if dl := d.digitsAt(j + 1); dl == 1 || dl == 2 {
			e := j + 1 + dl
			if d.at(e) == sep {
				if dl3 := d.digitsAt(e + 1); dl3 == 2 || dl3 == 4 {
					e2 := e + 1 + dl3
					if !isWordRune(d.at(e2)) && !(d.at(e2) == sep && isDigit(d.at(e2+1))) {
						return e2, "date"
					}
				}
			}
		}
	}
	if (r1 == 1 || r1 == 2) && sep == ':' {
		if e := d.timeEnd(i); e > 0 {
			if w, we := d.wordAt(skipSpaces(rs, e)); isTimeWord(w) {
				e = we
			}
			return e, "time"
		}
	}
	if r1 == 3 && sep == '-' && d.digitsAt(j+1) == 3 && d.at(j+4) == '-' && d.digitsAt(j+5) == 4 && !isWordRune(d.at(j+9)) {
		return j + 9, "phone"
	}
	if r1 == 3 && d.at(i-1) == '(' && sep == ')' && d.at(j+1) == ' ' && d.digitsAt(j+2) == 3 && d.at(j+5) == '-' && d.digitsAt(j+6) == 4 {
		return j + 10, "phone"
	}
	return 0, ""
}

// timeEnd is the end of a time of day "9:05", "14:30:00", "14:30:00.25" at i,
// or 0.
func (d *doc) timeEnd(i int) int {
	h := d.digitsAt(i)
	if h < 1 || h > 2 || d.at(i+h) != ':' || d.digitsAt(i+h+1) != 2 {
		return 0
	}
	e := i + h + 3
	if d.at(e) == ':' && d.digitsAt(e+1) == 2 {
		e += 3
		if d.at(e) == '.' && d.digitsAt(e+1) > 0 {
			e += 1 + d.digitsAt(e+1)
		}
	}
	if isDigit(d.at(e)) {
		return 0
	}
	return e
}

func isTimeWord(w string) bool {
	if len(w) > 2 && w[len(w)-1] == '.' && w[len(w)-3] != '.' {
		w = w[:len(w)-1] // "2 pm." ending a sentence
	}
	switch strings.ToLower(w) {
	case "am", "pm", "a.m.", "p.m.", "a.m", "p.m", "utc", "gmt":
		return true
	}
	return false
}

// wordAt reads the word at i: letters, and dots inside it ("a.m."), and
// returns it with its end.
func (d *doc) wordAt(i int) (string, int) {
	j := i
	for j < len(d.rs) && (isLetter(d.rs[j]) || (d.rs[j] == '.' && j > i && isLetter(d.rs[j-1]))) {
		j++
	}
	return string(d.rs[i:j]), j
}

func skipSpaces(rs []rune, i int) int {
	for i < len(rs) && isSpace(rs[i]) {
		i++
	}
	return i
}

func atoi(rs []rune) int {
	n := 0
	for _, r := range rs {
		n = n*10 + int(r-'0')
		if n > 1e9 {
			return n
		}
	}
	return n
}

// letters reads the run of letters at i.
func (d *doc) letters(i int) (string, int) {
	j := i
	for j < len(d.rs) && isLetter(d.rs[j]) {
		j++
	}
	return string(d.rs[i:j]), j
}
