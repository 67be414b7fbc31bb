// Package sqlvalue writes the values of query results as the JSON-ready Go
// values every engine's results use (DuckDB's and the database sources'):
// integers as numbers within ±2^53 and as text beyond, floats as encoding/json
// writes them with NaN and ±Inf as text, dates with ISO 8601 years, intervals
// as ISO 8601 durations.
package sqlvalue

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxSafeInt is the largest integer a JSON reader's float64 holds exactly.
const MaxSafeInt = 1 << 53

// Int is an integer as a number, or as its decimal text beyond ±2^53, where
// a JSON reader's float64 would change it.
func Int(v int64) any {
	if v > MaxSafeInt || v < -MaxSafeInt {
		return strconv.FormatInt(v, 10)
	}
	return v
}

// Uint is [Int] for an unsigned integer.
func Uint(v uint64) any {
	if v > MaxSafeInt {
		return strconv.FormatUint(v, 10)
	}
	return int64(v)
}

// Float formats a finite float as encoding/json would, and NaN and ±Inf
// as strings.
func Float(f float64, bits int) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	s := strconv.FormatFloat(f, format, -1, bits)
	if format == 'e' {
		if n := len(s); n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
	}
	return json.Number(s)
}

// ISOYear writes years outside 0000–9999 in ISO 8601's expanded form.
func ISOYear(y int) string {
	switch {
	case y >= 0 && y <= 9999:
		return fmt.Sprintf("%04d", y)
	case y < 0:
		return fmt.Sprintf("-%06d", -y)
	default:
		return fmt.Sprintf("+%06d", y)
	}
}

// Fraction writes the first digits of a second's nanos as a decimal fraction
// (".5"), without trailing zeros; "" when they are all zero.
func Fraction(nanos int64, digits int) string {
	if nanos == 0 {
		return ""
	}
	f := strings.TrimRight(fmt.Sprintf("%09d", nanos)[:digits], "0")
	if f == "" {
		return ""
	}
	return "." + f
}

// Interval writes an ISO 8601 duration, e.g. P1Y2M3DT4H5M6.5S.
func Interval(months, days int32, micros int64) string {
	var b strings.Builder
	b.WriteString("P")
	if y := months / 12; y != 0 {
		fmt.Fprintf(&b, "%dY", y)
	}
	if m := months % 12; m != 0 {
		fmt.Fprintf(&b, "%dM", m)
	}
	if days != 0 {
		fmt.Fprintf(&b, "%dD", days)
	}
	if micros != 0 {
		b.WriteString("T")
		h := micros / 3_600_000_000
		micros -= h * 3_600_000_000
		m := micros / 60_000_000
		micros -= m * 60_000_000
		if h != 0 {
			fmt.Fprintf(&b, "%dH", h)
		}
		if m != 0 {
			fmt.Fprintf(&b, "%dM", m)
		}
		if micros != 0 {
			neg := micros < 0
			if neg {
				micros = -micros
			}
			s := strconv.FormatInt(micros/1_000_000, 10) + Fraction((micros%1_000_000)*1000, 6)
			if neg {
				s = "-" + s
			}
			fmt.Fprintf(&b, "%sS", s)
		}
	}
	if b.Len() == 1 {
		return "PT0S"
	}
	return b.String()
}

// Cut returns how much of b to keep to cut it to at most max bytes without
// cutting a UTF-8 character in half (text that is not UTF-8 is cut at max).
func Cut(b []byte, max int) int {
	if len(b) <= max {
		return len(b)
	}
	for i := max; i >= 0 && i > max-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			// b[i] starts the character that max cuts into, or is the
			// first byte after the kept text.
			if i < max && !utf8.FullRune(b[i:max]) {
				return i
			}
			return max
		}
	}
	return max
}
