package numcheck

import (
	"slices"
	"testing"
)

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []float64
	}{
		{"76,165", []float64{76165}},
		{"-$1.2M", []float64{-1.2e6, -1.2}},
		{"15.3%", []float64{0.153, 15.3}},
		{"1.2 million", []float64{1.2e6, 1.2}},
		{"3,750.5", []float64{3750.5}},
		{"EUR 1.204.000", []float64{1204000}},
		{"no number", nil},
	} {
		if got := Values(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("Values(%q): got %v, want %v", tc.text, got, tc.want)
		}
	}
	// Every checked number of an answer reads back through Values.
	checks := CheckAnswer("There are 344 penguins, 44.2% of them Adelie, weighing 1.2M grams.", Evidence{})
	if len(checks) != 3 {
		t.Fatalf("%d numbers checked, want 3", len(checks))
	}
	for _, c := range checks {
		if len(Values(c.Text)) == 0 {
			t.Errorf("Values(%q) of a checked number: none", c.Text)
		}
	}
}
