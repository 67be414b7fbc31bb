package retrieval

import (
	"slices"
	"testing"
)

func TestTextRanker(t *testing.T) {
	r := NewTextRanker()
	for _, q := range []string{
		"How many penguins are there per species?",
		"What is the average body mass of the penguins?",
		"Which island has the most birds?",
		"Average bill length by species",
	} {
		r.Add(q)
	}
	if got := r.Search("average body mass by species", 2, nil); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("Search: got %v, want [1 3]", got)
	}
	if got := r.Search("average mass", 3, func(i int) bool { return i != 1 }); !slices.Equal(got, []int{3}) {
		t.Errorf("Search with keep: got %v, want [3] (texts sharing no term are left out)", got)
	}
	if got := r.Search("the of", 3, nil); len(got) != 0 {
		t.Errorf("Search of stop words: got %v, want none", got)
	}
	if r.Len() != 4 {
		t.Errorf("Len: got %d, want 4", r.Len())
	}
}
