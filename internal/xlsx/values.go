package xlsx

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// parseNumber reads text as a number: an optional sign, digits with
// optional thousands commas in groups of three, an optional fraction and
// exponent, and an optional trailing % (then divided by 100). Text with a
// leading zero (007) or more than 15 significant digits is not a number.
func parseNumber(s string) (v float64, ok bool) {
	v, _, ok = parseNumberPct(s)
	return v, ok
}

func parseNumberPct(s string) (v float64, pct bool, ok bool) {
	if s == "" || len(s) > 64 {
		return 0, false, false
	}
	if strings.HasSuffix(s, "%") {
		pct = true
		s = strings.TrimRight(strings.TrimSuffix(s, "%"), " \u00a0")
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	var digits strings.Builder
	digits.WriteString(s[:i])
	intStart := i
	group := -1 // digits since the last comma; -1 before any comma
	lead := 0   // digits before the first comma
	for i < len(s) {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits.WriteByte(c)
			if group >= 0 {
				group++
			} else {
				lead++
			}
		case c == ',':
			if (group < 0 && (lead == 0 || lead > 3)) || (group >= 0 && group != 3) {
				return 0, false, false
			}
			group = 0
		default:
			goto frac
		}
		i++
	}
frac:
	if group >= 0 && group != 3 {
		return 0, false, false
	}
	intDigits := digits.Len() - intStart
	if intDigits > 1 && s[intStart] == '0' {
		return 0, false, false // a code with a leading zero
	}
	fracDigits := 0
	if i < len(s) && s[i] == '.' {
		digits.WriteByte('.')
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			digits.WriteByte(s[i])
			i++
			fracDigits++
		}
	}
	if intDigits+fracDigits == 0 {
		return 0, false, false
	}
	exp := false
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		exp = true
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == j {
			return 0, false, false
		}
		digits.WriteString(s[i:k])
		i = k
	}
	if i != len(s) {
		return 0, false, false
	}
	if significant(s[intStart:]) > 15 {
		return 0, false, false // an identifier, not a quantity
	}
	if pct && !exp {
		digits.WriteString("e-2") // 12.5% is 0.125, without 12.5/100's rounding
	}
	v, err := strconv.ParseFloat(digits.String(), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, false
	}
	if pct && exp {
		v /= 100
	}
	return v, pct, true
}

// significant counts a number's significant digits (before any exponent).
func significant(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, ",", ""), ".", "")
	s = strings.TrimLeft(s, "0")
	return len(s)
}

// formatNumber writes a number in its shortest decimal form: whole numbers
// without a fraction or exponent up to 10^15.
func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// cellText is a cell's value as text: text as it is, numbers in their
// shortest form, dates in ISO form, booleans as TRUE or FALSE, errors as "".
func cellText(c cell, sys dateSystem) string {
	switch c.kind {
	case kText:
		return c.text
	case kNum:
		if c.fmt.isDate() {
			if t, ok := serialTime(c.num, sys); ok {
				if c.fmt == fmtTime && c.num < 1 {
					return formatTime(t)
				}
				return formatStamp(t)
			}
			return ""
		}
		if c.fmt == fmtPercent {
			return formatNumber(math.Round(c.num*100*1e9)/1e9) + "%"
		}
		return formatNumber(c.num)
	case kStamp:
		return formatStamp(time.UnixMilli(int64(c.num)).UTC())
	case kBool:
		if c.num != 0 {
			return "TRUE"
		}
		return "FALSE"
	}
	return ""
}

// formatStamp writes a date, or a date and time when it has a time of day.
func formatStamp(t time.Time) string {
	if !timeOfDay(t) {
		return formatDate(t)
	}
	return formatTimestamp(t)
}

func formatDate(t time.Time) string { return t.Format("2006-01-02") }

func formatTimestamp(t time.Time) string {
	if t.Nanosecond() != 0 {
		return t.Format("2006-01-02 15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05")
}

func formatTime(t time.Time) string {
	if t.Nanosecond() != 0 {
		return t.Format("15:04:05.000")
	}
	return t.Format("15:04:05")
}

// cellTime is a date or time cell's value; ok is false for a serial number
// that is no real date.
func cellTime(c cell, sys dateSystem) (time.Time, bool) {
	switch c.kind {
	case kNum:
		return serialTime(c.num, sys)
	case kStamp:
		return time.UnixMilli(int64(c.num)).UTC(), true
	case kText:
		return parseISO(c.text)
	}
	return time.Time{}, false
}

// colStat counts a column's values below the header by how they read.
type colStat struct {
	values   int // non-empty cells that are not errors
	text     int // text that reads as neither a number nor a date
	num      int // numbers and text that reads as a number
	fraction int // of those, not whole or beyond ±2^53
	percent  int // of those, shown as a percentage
	dates    int // dates and times
	withTime int // of those, with a time of day
	timeOnly int // of those, a time-only format under a day
	badDates int // date serials that are no real date (NULL)
	booleans int
	errors   int
}

const maxExactInt = 1 << 53

func (st *colStat) add(c cell, sys dateSystem) {
	switch c.kind {
	case kBlank:
		return
	case kErr:
		st.errors++
		return
	}
	st.values++
	switch c.kind {
	case kBool:
		st.booleans++
	case kStamp:
		st.addTime(time.UnixMilli(int64(c.num)).UTC(), false)
	case kNum:
		if c.fmt.isDate() {
			t, ok := serialTime(c.num, sys)
			if !ok {
				st.values--
				st.badDates++
				return
			}
			st.addTime(t, c.fmt == fmtTime && c.num < 1)
			return
		}
		st.addNum(c.num, c.fmt == fmtPercent)
	case kText:
		if v, pct, ok := parseNumberPct(c.text); ok {
			st.addNum(v, pct)
		} else if t, ok := parseISO(c.text); ok {
			st.addTime(t, false)
		} else {
			st.text++
		}
	}
}

func (st *colStat) addNum(v float64, pct bool) {
	st.num++
	if v != math.Trunc(v) || math.Abs(v) > maxExactInt {
		st.fraction++
	}
	if pct {
		st.percent++
	}
}

func (st *colStat) addTime(t time.Time, timeOnly bool) {
	st.dates++
	if timeOnly {
		st.timeOnly++
	}
	if timeOfDay(t) {
		st.withTime++
	}
}

// typ decides the column's DuckDB type.
func (st *colStat) typ() string {
	kinds := 0
	for _, n := range []int{st.text, st.num, st.dates, st.booleans} {
		if n > 0 {
			kinds++
		}
	}
	switch {
	case kinds != 1 || st.text > 0:
		return TypeVarchar
	case st.booleans > 0:
		return TypeBoolean
	case st.num > 0 && st.fraction > 0:
		return TypeDouble
	case st.num > 0:
		return TypeBigint
	case st.timeOnly == st.dates:
		return TypeTime
	case st.withTime > 0:
		return TypeTimestamp
	}
	return TypeDate
}

type valueKind uint8

const (
	vNull valueKind = iota
	vInt
	vFloat
	vBool
	vTime
	vText
)

// value is one typed value of the table.
type value struct {
	kind valueKind
	i    int64
	f    float64
	b    bool
	t    time.Time
	s    string
}

// convert reads a cell as a value of a column's type.
func convert(c cell, typ string, sys dateSystem) value {
	switch c.kind {
	case kBlank, kErr:
		return value{}
	}
	switch typ {
	case TypeBigint, TypeDouble:
		var f float64
		switch c.kind {
		case kNum:
			f = c.num
		case kText:
			v, ok := parseNumber(c.text)
			if !ok {
				return value{}
			}
			f = v
		default:
			return value{}
		}
		if typ == TypeBigint {
			return value{kind: vInt, i: int64(f)}
		}
		return value{kind: vFloat, f: f}
	case TypeBoolean:
		if c.kind == kBool {
			return value{kind: vBool, b: c.num != 0}
		}
		return value{}
	case TypeDate, TypeTimestamp, TypeTime:
		t, ok := cellTime(c, sys)
		if !ok {
			return value{}
		}
		if typ == TypeTime {
			h, m, s := t.Clock()
			t = time.Date(0, 1, 1, h, m, s, t.Nanosecond(), time.UTC)
		}
		return value{kind: vTime, t: t}
	}
	s := cellText(c, sys)
	if s == "" {
		return value{}
	}
	return value{kind: vText, s: s}
}

// csv writes a value as a CSV field for its column's type ("" for NULL).
func (v value) csv(typ string) string {
	switch v.kind {
	case vInt:
		return strconv.FormatInt(v.i, 10)
	case vFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case vBool:
		return strconv.FormatBool(v.b)
	case vTime:
		switch typ {
		case TypeDate:
			return formatDate(v.t)
		case TypeTime:
			return formatTime(v.t)
		}
		if v.t.Nanosecond() != 0 {
			return v.t.Format("2006-01-02 15:04:05.000")
		}
		return v.t.Format("2006-01-02 15:04:05")
	case vText:
		return v.s
	}
	return ""
}
