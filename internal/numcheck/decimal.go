package numcheck

import (
	"math"
	"strconv"
)

// dec is an exact decimal: (-1)^neg × c × 10^e. Parsing keeps at most 19
// significant digits, which is more than any answer shows; c is then below
// 10^19 and fits a uint64.
type dec struct {
	neg bool
	c   uint64
	e   int
}

const maxDigits = 19

var pow10u [maxDigits + 1]uint64

func init() {
	p := uint64(1)
	for i := range pow10u {
		pow10u[i] = p
		p *= 10
	}
}

// norm strips trailing zeros from the coefficient, so equal values compare
// equal field by field; zero has no sign.
func (d dec) norm() dec {
	if d.c == 0 {
		return dec{}
	}
	for d.c%10 == 0 {
		d.c /= 10
		d.e++
	}
	return d
}

func (d dec) abs() dec { d.neg = false; return d }

func (d dec) isZero() bool { return d.c == 0 }

// digits is the number of decimal digits of c (1 for zero).
func digits(c uint64) int {
	n := 1
	for n < maxDigits+1 && c >= pow10u[n] {
		n++
	}
	return n
}

// mag is floor(log10 |d|): the exponent of its leading digit. Zero has none;
// callers check isZero first.
func (d dec) mag() int { return digits(d.c) - 1 + d.e }

// float is d as a float64, close enough to search an index by.
func (d dec) float() float64 {
	if d.c == 0 {
		return 0
	}
	f := float64(d.c)
	switch {
	case d.e > 0:
		f *= math.Pow10(d.e)
	case d.e < 0:
		f /= math.Pow10(-d.e)
	}
	if d.neg {
		f = -f
	}
	return f
}

// roundings returns |d| rounded to a multiple of 10^k, as coefficients at
// exponent k: nearest (half up, and half to even when they differ), or down or
// up for bounds. ok is false when d is already a multiple of 10^k (exact).
type roundMode int

const (
	roundNearest roundMode = iota
	roundDown
	roundUp
)

// roundTo reports whether |d| rounded at 10^k gives |a| (a normalised).
func (d dec) roundsTo(k int, a dec, mode roundMode) bool {
	if d.e >= k {
		return d.abs().norm() == a.abs()
	}
	shift := k - d.e
	var q, r, half uint64
	if shift > maxDigits {
		q, r = 0, d.c
		// 10^shift/2 ≥ 5·10^19 > any c: strictly below half.
		half = math.MaxUint64
	} else {
		p := pow10u[shift]
		q, r, half = d.c/p, d.c%p, p/2
	}
	eq := func(c uint64) bool {
		return dec{c: c, e: k}.norm() == a.abs()
	}
	switch mode {
	case roundDown:
		return eq(q)
	case roundUp:
		if r > 0 {
			return eq(q + 1)
		}
		return eq(q)
	}
	switch {
	case r < half:
		return eq(q)
	case r > half:
		return eq(q + 1)
	default: // a tie: half up gives q+1, half to even gives the even one
		return eq(q+1) || (q%2 == 0 && eq(q))
	}
}

// cmpAbs compares |a| and |b|.
func cmpAbs(a, b dec) int {
	a, b = a.abs().norm(), b.abs().norm()
	if a.c == 0 || b.c == 0 {
		switch {
		case a.c == b.c:
			return 0
		case a.c == 0:
			return -1
		default:
			return 1
		}
	}
	if ma, mb := a.mag(), b.mag(); ma != mb {
		if ma < mb {
			return -1
		}
		return 1
	}
	// Same leading exponent: align the coefficients to the same number of digits.
	da, db := digits(a.c), digits(b.c)
	ca, cb := a.c, b.c
	for da < db {
		ca *= 10
		da++
	}
	for db < da {
		cb *= 10
		db++
	}
	switch {
	case ca < cb:
		return -1
	case ca > cb:
		return 1
	}
	return 0
}

// addPow adds s·10^k to |a| (s = ±1) and returns the magnitude, for bounds
// such as |v| < X + 10^k; ok is false when it does not fit.
func addPow(a dec, k int, s int) (dec, bool) {
	a = a.abs()
	if a.c == 0 {
		if s < 0 {
			return dec{}, false
		}
		return dec{c: 1, e: k}, true
	}
	// Bring both to the smaller exponent.
	e := min(a.e, k)
	if a.e-e > maxDigits || k-e > maxDigits {
		return dec{}, false
	}
	ca := a.c
	for i := e; i < a.e; i++ {
		if ca > math.MaxUint64/10 {
			return dec{}, false
		}
		ca *= 10
	}
	ck := pow10u[k-e]
	if s > 0 {
		if ca > math.MaxUint64-ck {
			return dec{}, false
		}
		return dec{c: ca + ck, e: e}.norm(), true
	}
	if ca < ck {
		return dec{}, false
	}
	return dec{c: ca - ck, e: e}.norm(), true
}

// parseDec parses a plain decimal: an optional sign, digits with an optional
// point, and an optional exponent ("1.5e+06", as JSON writes floats). Digits
// beyond the 19th significant one are dropped.
func parseDec(s string) (dec, bool) {
	var d dec
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		d.neg = s[i] == '-'
		i++
	}
	seen, point, sig := false, false, 0
	for ; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= '0' && ch <= '9':
			seen = true
			if sig == 0 && ch == '0' {
				if point {
					d.e--
				}
				continue
			}
			if sig < maxDigits {
				d.c = d.c*10 + uint64(ch-'0')
				sig++
				if point {
					d.e--
				}
			} else if !point {
				d.e++
			}
		case ch == '.' && !point:
			point = true
		case ch == 'e' || ch == 'E':
			if !seen {
				return dec{}, false
			}
			x, err := strconv.Atoi(s[i+1:])
			if err != nil || x > 400 || x < -400 {
				return dec{}, false
			}
			d.e += x
			i = len(s)
		default:
			return dec{}, false
		}
	}
	if !seen {
		return dec{}, false
	}
	return d.norm(), true
}

// decOfInt is an int64 as a dec.
func decOfInt(x int64) dec {
	d := dec{neg: x < 0}
	if x < 0 {
		d.c = uint64(-(x + 1)) + 1
	} else {
		d.c = uint64(x)
	}
	return d.norm()
}
