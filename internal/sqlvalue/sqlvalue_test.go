package sqlvalue

import (
	"encoding/json"
	"math"
	"testing"
)

func TestValues(t *testing.T) {
	for _, c := range []struct {
		got, want any
	}{
		{Int(MaxSafeInt), int64(MaxSafeInt)},
		{Int(MaxSafeInt + 1), "9007199254740993"},
		{Int(-MaxSafeInt - 1), "-9007199254740993"},
		{Uint(math.MaxUint64), "18446744073709551615"},
		{Uint(7), int64(7)},
		{Float(0.1, 64), json.Number("0.1")},
		{Float(1e21, 64), json.Number("1e+21")},
		{Float(1.5e-7, 64), json.Number("1.5e-7")},
		{Float(float64(float32(0.1)), 32), json.Number("0.1")},
		{Float(math.NaN(), 64), "NaN"},
		{Float(math.Inf(-1), 64), "-Infinity"},
		{ISOYear(2026), "2026"},
		{ISOYear(12), "0012"},
		{ISOYear(10000), "+010000"},
		{ISOYear(-44), "-000044"},
		{Fraction(500_000_000, 6), ".5"},
		{Fraction(123_456_789, 6), ".123456"},
		{Fraction(0, 6), ""},
		{Interval(14, 3, 4*3_600_000_000+5*60_000_000+6_500_000), "P1Y2M3DT4H5M6.5S"},
		{Interval(0, 0, -1_500_000), "PT-1.5S"},
		{Interval(0, 0, 0), "PT0S"},
	} {
		if c.got != c.want {
			t.Errorf("got %#v, want %#v", c.got, c.want)
		}
	}
	// Float's numbers are what encoding/json writes for the same value.
	for _, f := range []float64{0, 1, -2.5, 123456789.125, 1e-6, 9.999e20, 3e-300} {
		b, _ := json.Marshal(f)
		if got := Float(f, 64); got != json.Number(b) {
			t.Errorf("Float(%v) = %v, encoding/json writes %s", f, got, b)
		}
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"€€", 6, "€€"},
		{"€€", 5, "€"},
		{"€€", 4, "€"},
		{"€€", 3, "€"},
		{"a€", 2, "a"},
		{"😀x", 4, "😀"},
		{"😀x", 3, ""},
		{"\xff\xff\xff\xff\xff", 3, "\xff\xff\xff"}, // not UTF-8: cut at max, never emptied
	} {
		if got := c.s[:Cut([]byte(c.s), c.max)]; got != c.want {
			t.Errorf("Cut(%q, %d) keeps %q, want %q", c.s, c.max, got, c.want)
		}
	}
}
