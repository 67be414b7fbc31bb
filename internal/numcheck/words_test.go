package numcheck

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// allWordsIn is how the words of a span were read before lastWords and
// firstWords: every word of the doc, then those lying in [from, to).
func allWordsIn(d *doc, from, to int) []word {
	var all []word
	for i := 0; i < len(d.rs); {
		r := d.rs[i]
		if !isLetter(r) {
			if isCueSymbol(r) {
				all = append(all, word{i, i + 1, string(r)})
			}
			i++
			continue
		}
		j := i
		for j < len(d.rs) && isLetter(d.rs[j]) {
			j++
		}
		all = append(all, word{i, j, strings.ToLower(string(d.rs[i:j]))})
		i = j
	}
	var in []word
	for _, w := range all {
		if w.start >= from && w.end <= to {
			in = append(in, w)
		}
	}
	return in
}

// TestSpanWords: the last and first words of every span of random text
// (letters of three scripts, digits, spaces, the cue symbols, punctuation)
// are those of the whole text's words lying in it.
func TestSpanWords(t *testing.T) {
	alphabet := []rune("abXY éΣω 12 ~≈><≥≤.,-_|\n")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		rs := make([]rune, rng.IntN(60))
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		d := &doc{rs: rs}
		for from := 0; from <= len(rs); from++ {
			for to := from; to <= len(rs); to++ {
				want := allWordsIn(d, from, to)
				for _, n := range []int{1, 3, 6} {
					last := want[max(0, len(want)-n):]
					if got := d.lastWords(nil, from, to, n); !slices.Equal(got, last) {
						t.Fatalf("%q [%d,%d) last %d: %v, want %v", string(rs), from, to, n, got, last)
					}
					first := want[:min(n, len(want))]
					if got := d.firstWords(nil, from, to, n); !slices.Equal(got, first) {
						t.Fatalf("%q [%d,%d) first %d: %v, want %v", string(rs), from, to, n, got, first)
					}
				}
			}
		}
	}
}
