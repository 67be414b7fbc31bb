package numcheck

import "testing"

func TestContainsWord(t *testing.T) {
	for _, c := range []struct {
		hay, needle string
		want        bool
	}{
		{"total revenue in 2024", "revenue", true},
		{"revenue", "revenue", true},
		{"revenues grew", "revenue", false},
		{"prerevenue, then revenue.", "revenue", true}, // the second one
		{"net_revenue", "revenue", false},
		{"café revenue", "caf", false}, // é's bytes are a word's
		{"anything", "", false},
		{"", "revenue", false},
	} {
		if got := ContainsWord(c.hay, c.needle, isWordByte); got != c.want {
			t.Errorf("ContainsWord(%q, %q) = %v, want %v", c.hay, c.needle, got, c.want)
		}
	}
}
