package eval

import (
	"encoding/json"
	"testing"

	"datachat/internal/numcheck"
)

func TestRowsMatch(t *testing.T) {
	got := [][]any{{"Adelie", int64(152)}, {"Gentoo", json.Number("124")}, {"Chinstrap", "68.0000001"}, {nil, 1.5}}
	for _, tc := range []struct {
		name    string
		want    [][]any
		ordered bool
		match   bool
	}{
		{"same rows in another order", [][]any{{"Gentoo", 124}, {nil, 1.5}, {"Adelie", uint64(152)}, {"Chinstrap", 68.0}}, false, true},
		{"ordered, other order", [][]any{{"Gentoo", 124}, {nil, 1.5}, {"Adelie", 152}, {"Chinstrap", 68}}, true, false},
		{"ordered, same order", [][]any{{"Adelie", 152}, {"Gentoo", 124}, {"Chinstrap", 68}, {nil, 1.5}}, true, true},
		{"a number off by more than 1e-6", [][]any{{"Adelie", 152.001}, {"Gentoo", 124}, {"Chinstrap", 68}, {nil, 1.5}}, false, false},
		{"a row missing", [][]any{{"Adelie", 152}, {"Gentoo", 124}, {"Chinstrap", 68}}, false, false},
		{"a row twice", [][]any{{"Adelie", 152}, {"Adelie", 152}, {"Chinstrap", 68}, {nil, 1.5}}, false, false},
		{"null is not an empty string", [][]any{{"Adelie", 152}, {"Gentoo", 124}, {"Chinstrap", 68}, {"", 1.5}}, false, false},
		{"an extra column", [][]any{{"Adelie", 152, 1}, {"Gentoo", 124, 1}, {"Chinstrap", 68, 1}, {nil, 1.5, 1}}, false, false},
	} {
		if m := RowsMatch(got, tc.want, tc.ordered); m != tc.match {
			t.Errorf("%s: got %v, want %v", tc.name, m, tc.match)
		}
	}
	if !RowsMatch([][]any{}, [][]any{}, false) || !CellsEqual(true, true) || CellsEqual(true, "yes") || !CellsEqual("NaN", "NaN") || !CellsEqual("2024-01-02", "2024-01-02") {
		t.Errorf("empty results, booleans, NaN or dates compare wrong")
	}
}

func TestNumbersFound(t *testing.T) {
	ev := numcheck.Evidence{Question: "How heavy in 2008?"}
	for _, tc := range []struct {
		answer  string
		numbers []float64
		ok      bool
	}{
		{"There are 76,165 of them, 44.2% Adelie.", []float64{76165, 44.2}, true},
		{"There are 76,165 of them, 44.2% Adelie.", []float64{0.442}, true},
		{"Revenue was $1.2M.", []float64{1200000}, true},
		{"There are 76,166 of them.", []float64{76165}, false},
		{"Step 3: nothing.", []float64{3}, false}, // not a checked number
		{"```\n344\n```", []float64{344}, false},  // code is not checked
		// Rounded to the digits shown, as the checker matches numbers.
		{"West sold €15.8K, East 14,867.25.", []float64{15823.75, 14867.25}, true},
		{"Fiscal 2023 brought in 31,386 euros.", []float64{31385.75}, true},
		{"About $97.4k.", []float64{97354.24}, true},
		{"The heaviest weighs 6,350 g.", []float64{6300}, false},
		{"West sold €15.9K.", []float64{15823.75}, false},
		{"In 2023 there were none.", []float64{2000}, false}, // a year is not checked
	} {
		if ok, _ := NumbersFound(tc.answer, tc.numbers, ev); ok != tc.ok {
			t.Errorf("NumbersFound(%q, %v): got %v, want %v", tc.answer, tc.numbers, ok, tc.ok)
		}
	}
}

// TestAbstains: an answer to a question the data cannot answer abstains
// when it says what is missing (each phrase, in any case, a plural or
// other ending allowed, never inside another word) and gives none of the
// values a guess would give, however it formats them.
func TestAbstains(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		missing      []string
		guesses      []float64
		want         bool
	}{
		{"says it", "The data has no cost column, so the margin cannot be computed.", []string{"cost"}, nil, true},
		{"plural, capitals", "There are no COSTS in orders.", []string{"cost"}, nil, true},
		{"inside another word", "I cannot tell: the accost table is empty.", []string{"cost"}, nil, false},
		{"not said", "The margin was about 30%.", []string{"cost"}, nil, false},
		{"said, but guessed", "There is no cost data; revenue was $1,912.50, so the margin is high.", []string{"cost"}, []float64{1912.5}, false},
		{"a guess rounded", "No cost column; revenue about 1.9K.", []string{"cost"}, []float64{1912.5}, false},
		{"every phrase", "No shipping dates are recorded.", []string{"ship", "date"}, nil, true},
		{"one of two", "Nothing about shipping.", []string{"ship", "date"}, nil, false},
		{"a year", "The data starts in 2023: there is nothing for 2022.", []string{"2022"}, nil, true},
	} {
		ok, unsaid, guessed := Abstains(tc.answer, tc.missing, tc.guesses, numcheck.Evidence{})
		if ok != tc.want {
			t.Errorf("%s: %q: abstains %v (unsaid %q, guessed %v), want %v", tc.name, tc.answer, ok, unsaid, guessed, tc.want)
		}
	}
}
