package xlsx

import (
	"math"
	"strings"
	"time"
)

// fmtClass is what a cell's number format says about its number.
type fmtClass uint8

const (
	fmtNumber  fmtClass = iota // General and every other number format
	fmtDate                    // a date, perhaps with a time of day
	fmtTime                    // a time of day only
	fmtPercent                 // a percentage
)

func (c fmtClass) isDate() bool { return c == fmtDate || c == fmtTime }

// classifyNumFmt classifies a number format: id is the built-in format's id
// (0 for a custom one), code the custom format's code.
func classifyNumFmt(id int, code string) fmtClass {
	if code == "" {
		switch {
		case id >= 14 && id <= 17, id == 22, id >= 27 && id <= 31, id >= 34 && id <= 36, id >= 50 && id <= 58:
			return fmtDate
		case id >= 18 && id <= 21, id == 45, id == 46, id == 47, id == 32, id == 33:
			if id == 46 { // [h]:mm:ss: elapsed time, a number of days
				return fmtNumber
			}
			return fmtTime
		case id == 9 || id == 10:
			return fmtPercent
		}
		return fmtNumber
	}
	return classifyCode(code)
}

// classifyCode classifies a custom format code by its first section: date
// and time tokens (d, m, y, h, s, e, AM/PM) outside quoted text, escaped
// characters and [brackets] make it a date or time format; an elapsed-time
// bracket ([h], [mm], [ss]) makes it a duration, read as a number; a % outside
// quotes makes it a percentage.
func classifyCode(code string) fmtClass {
	if i := sectionEnd(code); i >= 0 {
		code = code[:i]
	}
	var date, timeTok, pct bool
	lower := strings.ToLower(code)
	for i := 0; i < len(lower); i++ {
		c := lower[i]
		switch c {
		case '"':
			j := strings.IndexByte(lower[i+1:], '"')
			if j < 0 {
				i = len(lower)
			} else {
				i += j + 1
			}
		case '\\', '_', '*':
			i++ // the next character is literal (\x), padding (_x) or fill (*x)
		case '[':
			j := strings.IndexByte(lower[i+1:], ']')
			if j < 0 {
				i = len(lower)
				break
			}
			inner := lower[i+1 : i+1+j]
			if inner != "" && strings.Trim(inner, "hms") == "" {
				return fmtNumber // elapsed time
			}
			i += j + 1
		case 'y', 'd', 'e':
			if c == 'e' && i+1 < len(lower) && (lower[i+1] == '+' || lower[i+1] == '-') {
				i++ // scientific notation
				continue
			}
			if c == 'e' && strings.HasPrefix(lower[i:], "general") {
				continue
			}
			date = true
		case 'm':
			date = true // a month, or minutes next to h or s: either way a date/time
		case 'h', 's':
			timeTok = true
		case 'a':
			if strings.HasPrefix(lower[i:], "am/pm") || strings.HasPrefix(lower[i:], "a/p") {
				timeTok = true
			}
		case 'g':
			if strings.HasPrefix(lower[i:], "general") {
				i += len("general") - 1
			}
		case '%':
			pct = true
		}
	}
	switch {
	case timeTok && !hasDatePart(lower):
		return fmtTime
	case date || timeTok:
		return fmtDate
	case pct:
		return fmtPercent
	}
	return fmtNumber
}

// hasDatePart says whether a date/time format code shows a day, month or
// year, not only a time: y, d, or an m that is not minutes (minutes follow
// h or precede s).
func hasDatePart(code string) bool {
	code = strings.NewReplacer("am/pm", "", "a/p", "").Replace(stripLiterals(code))
	if strings.ContainsAny(code, "yd") {
		return true
	}
	for i := 0; i < len(code); i++ {
		if code[i] != 'm' {
			continue
		}
		j := i
		for j < len(code) && code[j] == 'm' {
			j++
		}
		prev := strings.TrimRight(code[:i], " :.0")
		next := strings.TrimLeft(code[j:], " :.0")
		if !strings.HasSuffix(prev, "h") && !strings.HasPrefix(next, "s") && !strings.HasSuffix(prev, "]") {
			return true
		}
		i = j
	}
	return false
}

// stripLiterals removes quoted text, escaped characters and brackets from a
// lower-cased format section.
func stripLiterals(code string) string {
	var b strings.Builder
	for i := 0; i < len(code); i++ {
		switch c := code[i]; c {
		case '"':
			j := strings.IndexByte(code[i+1:], '"')
			if j < 0 {
				return b.String()
			}
			i += j + 1
		case '\\', '_', '*':
			i++
		case '[':
			j := strings.IndexByte(code[i+1:], ']')
			if j < 0 {
				return b.String()
			}
			i += j + 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// sectionEnd is the index of the ';' ending a format's first section, or -1.
func sectionEnd(code string) int {
	for i := 0; i < len(code); i++ {
		switch code[i] {
		case '"':
			j := strings.IndexByte(code[i+1:], '"')
			if j < 0 {
				return -1
			}
			i += j + 1
		case '\\':
			i++
		case ';':
			return i
		}
	}
	return -1
}

// dateSystem is the workbook's date system: serial numbers count days from
// 1899-12-30 (the 1900 system, with its 29 February 1900) or from
// 1904-01-01.
type dateSystem uint8

const (
	date1900 dateSystem = iota
	date1904
)

// The largest serial number Excel shows as a date: 9999-12-31 23:59:59.999.
const maxSerial = 2958465.99999999

var (
	epoch1900 = time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC)
	epoch1904 = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
)

// serialTime converts a serial date number to the date and time Excel shows
// for it, rounded to the millisecond. ok is false for a number Excel shows as
// no real date: negative, beyond 9999, or 60 in the 1900 system (29 February
// 1900, a day that never was).
func serialTime(v float64, sys dateSystem) (t time.Time, ok bool) {
	if math.IsNaN(v) || v < 0 || v > maxSerial {
		return time.Time{}, false
	}
	ms := int64(math.Round(v * 86400000))
	days, rem := ms/86400000, ms%86400000
	epoch := epoch1904
	if sys == date1900 {
		epoch = epoch1900
		switch {
		case days == 60:
			return time.Time{}, false
		case days < 60:
			// Excel counts 29 February 1900, so its serials before it are
			// one day later than a count from 1899-12-30; 0 is "1900-01-00",
			// 1899-12-31.
			days++
		}
	}
	return epoch.AddDate(0, 0, int(days)).Add(time.Duration(rem) * time.Millisecond), true
}

// timeOfDay is true when t is not midnight.
func timeOfDay(t time.Time) bool {
	h, m, s := t.Clock()
	return h != 0 || m != 0 || s != 0 || t.Nanosecond() != 0
}
