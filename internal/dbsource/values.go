package dbsource

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const maxSafeInt = 1 << 53

// cells turns engine values into the JSON-ready values (nil, bool, int64 within
// ±2^53, json.Number, string) within
// a result's limits.
type cells struct {
	maxCell int  // bytes of one text or blob value
	cut     bool // a value was cut
}

func intValue(v int64) any {
	if v > maxSafeInt || v < -maxSafeInt {
		return strconv.FormatInt(v, 10)
	}
	return v
}

func uintValue(v uint64) any {
	if v > maxSafeInt {
		return strconv.FormatUint(v, 10)
	}
	return int64(v)
}

// intText turns an integer written in decimal into an int64 or, beyond ±2^53
// (or beyond int64), the string itself.
func intText(s string) any {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intValue(v)
	}
	return s
}

// floatValue formats a finite float as encoding/json would, and NaN and ±Inf
// as strings.
func floatValue(f float64, bits int) any {
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

func (c *cells) text(s string) string {
	if len(s) <= c.maxCell {
		return s
	}
	b := s[:c.maxCell]
	for len(b) > 0 && !utf8.ValidString(b[max(0, len(b)-utf8.UTFMax):]) {
		b = b[:len(b)-1] // do not cut a character in half
	}
	c.cut = true
	return b + "…"
}

func (c *cells) blob(b []byte) string {
	if len(b) > c.maxCell {
		b = b[:c.maxCell]
		c.cut = true
	}
	return base64.StdEncoding.EncodeToString(b)
}

// isoYear writes years outside 0000–9999 in ISO 8601's expanded form.
func isoYear(y int) string {
	switch {
	case y >= 0 && y <= 9999:
		return fmt.Sprintf("%04d", y)
	case y < 0:
		return fmt.Sprintf("-%06d", -y)
	default:
		return fmt.Sprintf("+%06d", y)
	}
}

func formatDate(t time.Time) string {
	y, m, d := t.Date()
	return fmt.Sprintf("%s-%02d-%02d", isoYear(y), m, d)
}

// formatTimestamp writes t's wall clock to the microsecond, with zone "Z" for
// an instant (timestamptz) and none for a local date-time.
func formatTimestamp(t time.Time, zone string) string {
	y, m, d := t.Date()
	s := fmt.Sprintf("%s-%02d-%02dT%02d:%02d:%02d", isoYear(y), m, d, t.Hour(), t.Minute(), t.Second())
	return s + fraction(int64(t.Nanosecond()), 6) + zone
}

func fraction(nanos int64, digits int) string {
	if nanos == 0 {
		return ""
	}
	f := strings.TrimRight(fmt.Sprintf("%09d", nanos)[:digits], "0")
	if f == "" {
		return ""
	}
	return "." + f
}

// formatClock formats microseconds since midnight as hh:mm:ss[.ffffff].
func formatClock(micros int64) string {
	neg := micros < 0
	if neg {
		micros = -micros
	}
	h := micros / 3_600_000_000
	micros -= h * 3_600_000_000
	m := micros / 60_000_000
	micros -= m * 60_000_000
	s := micros / 1_000_000
	micros -= s * 1_000_000
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s) + fraction(micros*1000, 6)
	if neg {
		return "-" + out
	}
	return out
}

// formatInterval writes an ISO 8601 duration, e.g. P1Y2M3DT4H5M6.5S.
func formatInterval(months, days int32, micros int64) string {
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
			s := strconv.FormatInt(micros/1_000_000, 10) + fraction((micros%1_000_000)*1000, 6)
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

// sample cuts a sample value for the prompt to at most 40 characters.
func sample(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	r := []rune(s)
	return string(r[:39]) + "…"
}
