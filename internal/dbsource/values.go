package dbsource

import (
	"datachat/internal/sqlvalue"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// cells turns engine values into the JSON-ready values (nil, bool, int64 within
// ±2^53, json.Number, string) within
// a result's limits.
type cells struct {
	maxCell int  // bytes of one text or blob value
	cut     bool // a value was cut
}

// intText turns an integer written in decimal into an int64 or, beyond ±2^53
// (or beyond int64), the string itself.
func intText(s string) any {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return sqlvalue.Int(v)
	}
	return s
}

func (c *cells) text(s string) string {
	if len(s) <= c.maxCell {
		return s
	}
	c.cut = true
	return s[:sqlvalue.Cut([]byte(s), c.maxCell)] + "…"
}

func (c *cells) blob(b []byte) string {
	if len(b) > c.maxCell {
		b = b[:c.maxCell]
		c.cut = true
	}
	return base64.StdEncoding.EncodeToString(b)
}

func formatDate(t time.Time) string {
	y, m, d := t.Date()
	return fmt.Sprintf("%s-%02d-%02d", sqlvalue.ISOYear(y), m, d)
}

// formatTimestamp writes t's wall clock to the microsecond, with zone "Z" for
// an instant (timestamptz) and none for a local date-time.
func formatTimestamp(t time.Time, zone string) string {
	y, m, d := t.Date()
	s := fmt.Sprintf("%s-%02d-%02dT%02d:%02d:%02d", sqlvalue.ISOYear(y), m, d, t.Hour(), t.Minute(), t.Second())
	return s + sqlvalue.Fraction(int64(t.Nanosecond()), 6) + zone
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
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s) + sqlvalue.Fraction(micros*1000, 6)
	if neg {
		return "-" + out
	}
	return out
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
