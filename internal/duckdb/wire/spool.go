package wire

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A save job's spool (duckdb.Spool writes it, the save worker reads it) is
// its rows, each a frame holding one [Enc.Value] list. Its columns' types are
// chosen by the server from the values it spools, and the worker converts
// the values to them: both read a value's text by the functions here, so
// that a value the server found fits a type is one the worker can store.

// SaveTypes are the types a saved column may have; DECIMAL carries its
// width and scale.
var SaveTypes = regexp.MustCompile(`^(BIGINT|UBIGINT|DOUBLE|BOOLEAN|DATE|TIME|TIMESTAMP|TIMESTAMPTZ|UUID|BLOB|VARCHAR|DECIMAL\(([1-9]|[1-3][0-9]),([0-9]|[1-3][0-9])\))$`)

// NumberText is a scalar value's text: a string, or a number's decimal
// text; false for a list or another value.
func NumberText(v any) (string, bool) {
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

// ParseFloat reads a float as the results write one: a number, or NaN and
// ±Infinity as text.
func ParseFloat(s string) (float64, bool) {
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

// DecimalDigits returns the digits of a decimal's integer part (leading
// zeros left out) and of its fraction.
func DecimalDigits(s string) (intDigits, scale int, ok bool) {
	m := decimalRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	return len(strings.TrimLeft(m[1], "0")), len(m[2]), true
}

// Unscaled is a decimal's value times 10^scale, as DuckDB's appender takes
// a DECIMAL.
func Unscaled(s string, scale int) (*big.Int, bool) {
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

// ParseDate reads a date as the results write one (2006-01-02).
func ParseDate(s string) (time.Time, error) {
	return time.ParseInLocation("2006-01-02", s, time.UTC)
}

// ParseClock reads a time of day as the results write one, on 1970-01-01.
func ParseClock(s string) (time.Time, error) {
	t, err := time.ParseInLocation("15:04:05.999999999", s, time.UTC)
	if err != nil {
		return t, err
	}
	return time.Date(1970, 1, 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), nil
}

// ParseTimestamp reads a timestamp as the results write one: a local
// date-time, or with zone an instant ending in Z.
func ParseTimestamp(s string, zone bool) (time.Time, error) {
	if zone {
		if !strings.HasSuffix(s, "Z") {
			return time.Time{}, errors.New("no zone")
		}
		return time.ParseInLocation("2006-01-02T15:04:05.999999999Z", s, time.UTC)
	}
	return time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
}
