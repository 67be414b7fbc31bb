package workspace

import (
	"reflect"
	"testing"
)

// TestRankExamples: the chat's verified examples, ranked by their questions
// as chat.SelectExamples ranks those that fit the conversation's tables.
func TestRankExamples(t *testing.T) {
	questions := []string{
		"How many penguins per species?",
		"Average body mass per species",
		"Heaviest species by body mass",
		"Lightest species by body mass",
	}
	got := Rank("What is the average body mass of each species?", questions, 3)
	if want := []int{1, 2, 3}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, want := Rank("How many penguins?", questions, 3), []int{0}; !reflect.DeepEqual(got, want) {
		t.Errorf("How many penguins?: got %v, want %v", got, want)
	}
}

// TestRank: BM25 with the document index's stemming and stop words.
func TestRank(t *testing.T) {
	texts := []string{"Revenue by region", "The penguins of the islands", "penguin counts per island", "nothing shared"}
	for _, c := range []struct {
		query string
		n     int
		want  []int
	}{
		{"How many penguins?", 10, []int{1, 2}}, // stemmed; the shorter text first
		{"island", 1, []int{1}},
		{"the of", 10, []int{}}, // stop words only
		{"revenue", 10, []int{0}},
	} {
		got := Rank(c.query, texts, c.n)
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Rank(%q, %d): got %v, want %v", c.query, c.n, got, c.want)
		}
	}
}
