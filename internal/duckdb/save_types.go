package duckdb

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"datachat"
)

// The type of a saved column, learnt from its values as they are spooled
// (colStats), and the reading of those values as the results write them:
// numbers, decimals, dates, times and timestamps.

// colStats is what the values of one column were, to choose its type.
type colStats struct {
	kind string // the column's friendly type
	// Whether every non-null value so far reads as the type (vacuously
	// true before any).
	int64s, uint64s, floats, decimals, dates, times, timestamps, timestampsTZ, uuids, blobs, bools bool
	intDigits, scale                                                                               int
}

func newColStats(c datachat.Column) colStats {
	return colStats{kind: c.Type, int64s: true, uint64s: true, floats: true, decimals: true,
		dates: true, times: true, timestamps: true, timestampsTZ: true, uuids: true, blobs: true, bools: true}
}

func (c *colStats) see(v any) {
	if v == nil {
		return
	}
	if _, ok := v.(bool); ok {
		c.int64s, c.uint64s, c.floats, c.decimals = false, false, false, false
		c.dates, c.times, c.timestamps, c.timestampsTZ, c.uuids, c.blobs = false, false, false, false, false, false
		return
	}
	c.bools = false
	s, isText := numberText(v)
	if !isText {
		// A list or another value: only text holds it.
		c.int64s, c.uint64s, c.floats, c.decimals = false, false, false, false
		c.dates, c.times, c.timestamps, c.timestampsTZ, c.uuids, c.blobs = false, false, false, false, false, false
		return
	}
	switch c.kind {
	case datachat.TypeInteger:
		if c.int64s {
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				c.int64s = false
			}
		}
		if c.uint64s {
			if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				c.uint64s = false
			}
		}
		// Beyond both, a DECIMAL of no scale: Parquet has no 128-bit
		// integer (DuckDB would write a HUGEINT as a DOUBLE).
		if c.decimals {
			if ip, sc, ok := decimalDigits(s); ok && sc == 0 {
				c.intDigits = max(c.intDigits, ip)
			} else {
				c.decimals = false
			}
		}
	case datachat.TypeFloat:
		if c.floats {
			if _, ok := parseFloat(s); !ok {
				c.floats = false
			}
		}
	case datachat.TypeDecimal:
		if c.decimals {
			if ip, sc, ok := decimalDigits(s); ok {
				c.intDigits, c.scale = max(c.intDigits, ip), max(c.scale, sc)
			} else {
				c.decimals = false
			}
		}
		if c.floats {
			if _, ok := parseFloat(s); !ok {
				c.floats = false
			}
		}
	case datachat.TypeDate:
		if _, err := parseDate(s); err != nil {
			c.dates = false
		}
	case datachat.TypeTime:
		if _, err := parseClock(s); err != nil {
			c.times = false
		}
	case datachat.TypeTimestamp:
		if c.timestamps {
			if _, err := parseTimestamp(s, false); err != nil {
				c.timestamps = false
			}
		}
		if c.timestampsTZ {
			if _, err := parseTimestamp(s, true); err != nil {
				c.timestampsTZ = false
			}
		}
	case datachat.TypeUUID:
		if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
			c.uuids = false
		}
	case datachat.TypeBlob:
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			c.blobs = false
		}
	}
}

// duckType is the type a column is stored with.
func (c *colStats) duckType() string {
	switch c.kind {
	case datachat.TypeInteger:
		switch {
		case c.int64s:
			return "BIGINT"
		case c.uint64s:
			return "UBIGINT"
		case c.decimals && c.intDigits <= 38:
			return fmt.Sprintf("DECIMAL(%d,0)", max(c.intDigits, 1))
		}
	case datachat.TypeFloat:
		if c.floats {
			return "DOUBLE"
		}
	case datachat.TypeDecimal:
		if w := c.intDigits + c.scale; c.decimals && w <= 38 {
			return fmt.Sprintf("DECIMAL(%d,%d)", max(w, 1), c.scale)
		}
		if c.floats {
			return "DOUBLE"
		}
	case datachat.TypeBoolean:
		if c.bools {
			return "BOOLEAN"
		}
	case datachat.TypeDate:
		if c.dates {
			return "DATE"
		}
	case datachat.TypeTime:
		if c.times {
			return "TIME"
		}
	case datachat.TypeTimestamp:
		switch {
		case c.timestamps:
			return "TIMESTAMP"
		case c.timestampsTZ:
			return "TIMESTAMPTZ"
		}
	case datachat.TypeUUID:
		if c.uuids {
			return "UUID"
		}
	case datachat.TypeBlob:
		if c.blobs {
			return "BLOB"
		}
	}
	return "VARCHAR"
}

// numberText is a scalar value's text: a string, or a number's decimal
// text; false for a list or another value.
func numberText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case json.Number:
		return string(x), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

// parseFloat reads a float as the results write one: a number, or NaN and
// ±Infinity as text.
func parseFloat(s string) (float64, bool) {
	switch s {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

var decimalRE = regexp.MustCompile(`^[+-]?([0-9]+)(?:\.([0-9]+))?$`)

// decimalDigits returns the digits of a decimal's integer part (leading
// zeros left out) and of its fraction.
func decimalDigits(s string) (intDigits, scale int, ok bool) {
	m := decimalRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	return len(strings.TrimLeft(m[1], "0")), len(m[2]), true
}

// unscaled is a decimal's value times 10^scale, as DuckDB's appender takes
// a DECIMAL.
func unscaled(s string, scale int) (*big.Int, bool) {
	m := decimalRE.FindStringSubmatch(s)
	if m == nil || len(m[2]) > scale {
		return nil, false
	}
	digits := m[1] + m[2] + strings.Repeat("0", scale-len(m[2]))
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, false
	}
	if strings.HasPrefix(s, "-") {
		n.Neg(n)
	}
	return n, true
}

func parseDate(s string) (time.Time, error) {
	return time.ParseInLocation("2006-01-02", s, time.UTC)
}

func parseClock(s string) (time.Time, error) {
	t, err := time.ParseInLocation("15:04:05.999999999", s, time.UTC)
	if err != nil {
		return t, err
	}
	return time.Date(1970, 1, 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), nil
}

// parseTimestamp reads a timestamp as the results write one: a local
// date-time, or with zone an instant ending in Z.
func parseTimestamp(s string, zone bool) (time.Time, error) {
	if zone {
		if !strings.HasSuffix(s, "Z") {
			return time.Time{}, errors.New("no zone")
		}
		return time.ParseInLocation("2006-01-02T15:04:05.999999999Z", s, time.UTC)
	}
	return time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
}
