package chat

import (
	"sort"
	"strings"
	"unicode"
)

// wordRanker is the tests' Ranker: a text scores the number of distinct
// words it shares with the query (letters and digits, case folded, a plural
// s dropped). The workspace's BM25 ranking is tested with workspace.Rank.
type wordRanker struct{}

func (wordRanker) Rank(query string, texts []string, n int) []int {
	q := words(query)
	type scored struct{ i, score int }
	var hits []scored
	for i, t := range texts {
		s := 0
		tw := words(t)
		for w := range q {
			if tw[w] {
				s++
			}
		}
		if s > 0 {
			hits = append(hits, scored{i, s})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	out := []int{}
	for _, h := range hits[:min(n, len(hits))] {
		out = append(out, h.i)
	}
	return out
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		m[strings.TrimSuffix(w, "s")] = true
	}
	return m
}
