package numcheck

import (
	"strings"
)

var currencyCodes = map[string]bool{
	"USD": true, "EUR": true, "GBP": true, "JPY": true, "CHF": true, "CAD": true,
	"AUD": true, "CNY": true, "INR": true,
}

func isCurrency(r rune) bool {
	switch r {
	case '$', '€', '£', '¥', '₹', '₩':
		return true
	}
	return false
}

// prefix takes the sign and currency before the digits into t.
func (d *doc) prefix(t *tok, prev []tok) {
	p := t.cs - 1
	if isCurrency(d.at(p)) {
		t.cur = true
		p--
	}
	switch r := d.at(p); r {
	case '-', '–', '−', '+', '±':
		before := d.at(p - 1)
		sign := true
		switch {
		case r == '±' || r == '+' && !isDigit(before):
		case isDigit(before) || before == '%':
			sign = false // a range or a subtraction: 10–20
		case isLetter(before) || before == '_':
			if r == '-' || r == '–' {
				if !t.cur {
					*t = d.ident(t.cs)
					return
				}
			}
			sign = false
		case isSpace(before) && r != '−':
			// "10 – 20" joins two numbers; "a change of -5" is a sign.
			q := p - 1
			for q >= 0 && isSpace(d.rs[q]) {
				q--
			}
			if q >= 0 && len(prev) > 0 && prev[len(prev)-1].end == q+1 {
				sign = false
			}
		}
		if sign && !d.mask[p] {
			switch r {
			case '+':
				t.plus = true
			case '±':
				t.pm = true
			default:
				t.neg = true
			}
			t.start = p
			p--
			if !t.cur && isCurrency(d.at(p)) {
				t.cur = true
				p--
			}
		}
	}
	if t.cur {
		t.start = min(t.start, p+1)
	}
	// A currency code before: "USD 1.2M".
	if isSpace(d.at(p)) && !t.cur && !t.neg {
		q := p
		for q > 0 && isASCIILetter(d.at(q-1)) {
			q--
		}
		if p-q == 3 && currencyCodes[string(d.rs[q:p])] && !isWordRune(d.at(q-1)) {
			t.cur = true
			t.start = q
		}
	}
}

var gluedMag = map[string]int{
	"k": 3, "K": 3, "M": 6, "MM": 6, "mn": 6, "mln": 6, "Mn": 6, "MN": 6,
	"B": 9, "b": 9, "bn": 9, "Bn": 9, "BN": 9, "bln": 9, "T": 12, "tn": 12, "trn": 12, "Tn": 12,
}

var spacedMag = map[string]int{
	"thousand": 3, "thousands": 3, "Thousand": 3, "million": 6, "millions": 6, "Million": 6,
	"billion": 9, "billions": 9, "Billion": 9, "trillion": 12, "trillions": 12, "Trillion": 12,
	"mn": 6, "mln": 6, "bn": 9, "bln": 9, "K": 3, "M": 6, "MM": 6, "B": 9, "Bn": 9, "BN": 9, "T": 12, "tn": 12,
}

var units = map[string]bool{
	"mm": true, "cm": true, "km": true, "g": true, "kg": true, "mg": true, "t": true,
	"lb": true, "lbs": true, "oz": true, "ms": true, "sec": true, "secs": true, "min": true,
	"mins": true, "h": true, "hr": true, "hrs": true, "d": true, "yr": true, "yrs": true, "wk": true,
	"wks": true, "mo": true, "mos": true, "KB": true, "kB": true, "MB": true, "GB": true, "TB": true,
	"PB": true, "KiB": true, "MiB": true, "GiB": true, "TiB": true, "W": true, "kW": true, "MW": true,
	"GW": true, "kWh": true, "MWh": true, "GWh": true, "Wh": true, "Hz": true, "kHz": true, "MHz": true,
	"GHz": true, "px": true, "pt": true, "pts": true, "ppm": true, "ml": true, "mL": true, "l": true,
	"L": true, "mi": true, "ft": true, "yd": true, "ha": true, "mph": true, "kph": true, "kmh": true,
	"µs": true, "ns": true, "rpm": true, "bpm": true,
}

// suffix takes the magnitude, percent, currency and unit after the digits.
func (d *doc) suffix(t *tok) {
	rs := d.rs
	k := t.ce
	end := k
	if isLetter(d.at(k)) {
		w, m := d.letters(k)
		if isDigit(d.at(m)) || (d.at(m) == '_' && isWordRune(d.at(m+1))) {
			*t = d.ident(t.cs)
			return
		}
		switch {
		case gluedMag[w] != 0:
			t.mag = gluedMag[w]
		case w == "m":
			t.mag, t.magAlt = 6, true
		case w == "x" || w == "X":
			t.ratio = true
		case w == "st" || w == "nd" || w == "rd" || w == "th":
			t.skip, t.end = "ordinal", m
			return
		case w == "s" && t.tz > 0 && (t.intDigits == 2 || t.intDigits == 4) && t.plainInt():
			t.skip, t.end = "decade", m
			return
		case strings.EqualFold(w, "am") || strings.EqualFold(w, "pm"):
			t.skip, t.end = "time", m
			return
		case w == "pct" || w == "pp" || w == "ppt":
			t.pct = true
		case w == "bp" || w == "bps":
			t.bps = true
		case units[w] || w == "s":
		default:
			*t = d.ident(t.cs)
			return
		}
		t.suffix = true
		end, k = m, m
	} else if isSpace(d.at(k)) && isLetter(d.at(k+1)) {
		w, m := d.letters(k + 1)
		tw, tm := d.wordAt(k + 1)
		switch {
		case spacedMag[w] != 0:
			t.mag = spacedMag[w]
			t.suffix = true
			end, k = m, m
		case isTimeWord(tw) && t.intDigits <= 2 && !isLetter(d.at(tm)):
			m = tm
			if x, ok := t.intValue(); ok && x >= 1 && x <= 12 {
				t.skip, t.end = "time", m
				return
			}
		}
	}
	// Percent.
	switch {
	case d.at(k) == '%' || d.at(k) == '‰':
		t.pct, t.permille = d.at(k) == '%', d.at(k) == '‰'
		k++
		end = k
	case isSpace(d.at(k)) && (d.at(k+1) == '%' || d.at(k+1) == '‰'):
		t.pct, t.permille = d.at(k+1) == '%', d.at(k+1) == '‰'
		k += 2
		end = k
	case isSpace(d.at(k)) && isLetter(d.at(k+1)):
		for _, ph := range []struct {
			s        string
			pct, bps bool
		}{
			{"percentage points", true, false}, {"percentage point", true, false},
			{"per cent", true, false}, {"percent", true, false}, {"pct", true, false},
			{"pp", true, false}, {"p.p.", true, false},
			{"basis points", false, true}, {"basis point", false, true}, {"bps", false, true}, {"bp", false, true},
		} {
			if hasPrefixFold(rs, k+1, ph.s) && !isLetter(d.at(k+1+len(ph.s))) {
				t.pct, t.bps = ph.pct, ph.bps
				k += 1 + len(ph.s)
				end = k
				break
			}
		}
	}
	if t.pct || t.bps || t.permille {
		t.suffix = true
	}
	// Currency after.
	switch {
	case isCurrency(d.at(k)) && !isDigit(d.at(k+1)):
		t.cur = true
		end = k + 1
	case isSpace(d.at(k)) && isCurrency(d.at(k+1)) && !isDigit(d.at(k+2)) && !isDigit(d.at(k+3)):
		t.cur = true
		end = k + 2
	case isSpace(d.at(k)) && currencyCodes[string(rs[k+1:min(k+4, len(rs))])] && !isLetter(d.at(k+4)):
		t.cur = true
		end = k + 4
	}
	if d.at(end) == '×' {
		end++
		t.suffix, t.ratio = true, true
	}
	t.end = end
	// Glued on: "2023.csv", "42_x"; "the 1990's".
	if (d.at(end) == '.' && isLetter(d.at(end+1))) || (d.at(end) == '_' && isWordRune(d.at(end+1))) {
		*t = d.ident(t.cs)
		return
	}
	if (d.at(end) == '\'' || d.at(end) == '’') && d.at(end+1) == 's' && !isLetter(d.at(end+2)) && t.plainInt() && t.tz > 0 {
		t.skip, t.end = "decade", end+2
	}
}
