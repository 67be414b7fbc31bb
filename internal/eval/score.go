package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"datachat/internal/numcheck"
)

// Tolerance is the relative difference under which two numbers are equal.
const Tolerance = 1e-6

// RowsMatch reports whether got equals want: as lists when ordered, else as
// multisets. Rows must have the same number of cells; cells compare with
// [CellsEqual].
func RowsMatch(got, want [][]any, ordered bool) bool {
	if len(got) != len(want) {
		return false
	}
	if ordered {
		for i := range got {
			if !rowEqual(got[i], want[i]) {
				return false
			}
		}
		return true
	}
	// A multiset: each wanted row takes an equal row not taken yet. Equality
	// within a tolerance is not transitive, so a row is matched greedily in
	// order; results compared are at most the engine's 1000 rows.
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && rowEqual(g, w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func rowEqual(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !CellsEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// CellsEqual compares two cells: numbers (Go numbers, json.Number, and
// strings that are numbers, as DECIMAL and big integers come) to Tolerance
// relative; nulls only to nulls; anything else by its text.
func CellsEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, xok := number(a)
	y, yok := number(b)
	if xok && yok {
		return NumbersEqual(x, y)
	}
	return text(a) == text(b)
}

// NumbersEqual reports whether x and y differ by at most Tolerance of the
// larger magnitude.
func NumbersEqual(x, y float64) bool {
	if x == y {
		return true
	}
	return math.Abs(x-y) <= Tolerance*math.Max(math.Abs(x), math.Abs(y))
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n)
	case float32:
		return float64(n), true
	case int, int8, int16, int32, int64:
		return float64(reflect.ValueOf(n).Int()), true
	case uint, uint8, uint16, uint32, uint64:
		return float64(reflect.ValueOf(n).Uint()), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(n).Float64()
		return f, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

func text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case []byte:
		return string(t)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// NumbersFound reports whether every one of numbers is found in answer, as
// the checker of answers (numcheck.CheckAnswer) finds numbers: a number the
// checker reads in the text (with the turn's evidence, so years, list
// markers and code are left out as they are there) whose value is that
// number to Tolerance relative, or one the checker matches to that number
// when it is given as a result cell — so formatting and rounding to the
// digits shown count as they do for checked numbers ("$15.8K" for 15823.75,
// "31,386" for 31385.75, "15.3%" for 0.153). It returns the numbers not
// found.
func NumbersFound(answer string, numbers []float64, ev numcheck.Evidence) (bool, []float64) {
	var read []float64
	for _, c := range numcheck.CheckAnswer(answer, ev) {
		read = append(read, numcheck.Values(c.Text)...)
	}
	var missing []float64
	for _, want := range numbers {
		found := false
		for _, v := range read {
			if NumbersEqual(v, want) {
				found = true
				break
			}
		}
		if !found {
			found = checkerMatches(answer, want)
		}
		if !found {
			missing = append(missing, want)
		}
	}
	return len(missing) == 0, missing
}

// expectedCall names the one-cell result checkerMatches gives the checker.
const expectedCall = "eval-expected"

// checkerMatches reports whether the checker matches a number of answer to
// want, given want as the only evidence: one cell of a one-row result.
func checkerMatches(answer string, want float64) bool {
	ev := numcheck.Evidence{Results: []numcheck.Result{{ToolCallID: expectedCall, Columns: []string{"expected"}, Rows: [][]any{{want}}, RowCount: 1}}}
	for _, c := range numcheck.CheckAnswer(answer, ev) {
		if c.Status == numcheck.Matched && c.Source.ToolCallID == expectedCall && !c.Source.IsRowCount() {
			return true
		}
	}
	return false
}

// Abstains reports whether answer abstains as an answer to a question the
// data cannot answer should: it says every one of missing (a word or
// phrase, in any case, not inside a longer word) and none of guesses is
// among its numbers (read as NumbersFound reads them). It returns the
// phrases it lacks and the guesses it gave.
func Abstains(answer string, missing []string, guesses []float64, ev numcheck.Evidence) (bool, []string, []float64) {
	lower := strings.ToLower(answer)
	var unsaid []string
	for _, m := range missing {
		if !containsWord(lower, strings.ToLower(strings.TrimSpace(m))) {
			unsaid = append(unsaid, m)
		}
	}
	var guessed []float64
	for _, g := range guesses {
		if ok, _ := NumbersFound(answer, []float64{g}, ev); ok {
			guessed = append(guessed, g)
		}
	}
	return len(unsaid) == 0 && len(guessed) == 0, unsaid, guessed
}

// containsWord reports whether s holds w not as a part of a longer word (a
// word may take a plural or other ending: "refund" is in "refunds").
func containsWord(s, w string) bool {
	if w == "" {
		return true
	}
	for from := 0; ; {
		i := strings.Index(s[from:], w)
		if i < 0 {
			return false
		}
		i += from
		if i == 0 || !isWordByte(s[i-1]) {
			return true
		}
		from = i + 1
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}
