package numcheck

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzCheck feeds arbitrary answers, questions, excerpts and text cells:
// CheckAnswer must not panic, and its checks must be in order, apart, within
// the answer, with Text the answer's runes [Start, End) and a source exactly
// when matched.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"North made $97,354.24 (15.3%) in 2023 [1].",
		"| a | b |\n|---|---|\n| 1 | 2 |",
		"```\n42\n``` `7` 1. x\n2) y #3 4th v1.2.3 2024-03-01 14:30",
		"−$12.5K, ($1.25M), 1 234,56 €, 1.234.567, 97\u202f354, 1.2e6, ~5%, > 10",
		"Zürich 🚀 12,5 % 3:1 2019–2021 Q3 '24 90s 5-year 4.6/5",
		"\xff\xfe1\x00,2\u2212\u2028",
		"10–15% $1.2–1.5M between 3 and 4 million 25 bps 0.35 pp 2x 3×",
	} {
		f.Add(s, "top 5 in 2023 above 1,000", "Revenue was $4.2 billion, up 12%.", "Total: 1,234")
	}
	f.Fuzz(func(t *testing.T, answer, question, excerpt, cell string) {
		ev := Evidence{
			Question: question,
			Results: []Result{{
				ToolCallID: "c1",
				Columns:    []string{"name", "v", "share", "year"},
				Rows: [][]any{
					{cell, int64(1234), json.Number("0.153"), int64(2023)},
					{"Scope 1", json.Number("-97354.24"), "12.5", nil},
				},
				RowCount: 2,
			}},
			Excerpts: []Excerpt{{SourceID: "s1", Text: excerpt}},
		}
		checks := CheckAnswer(answer, ev)
		if checks == nil {
			t.Fatal("nil checks")
		}
		rs := []rune(answer)
		end := 0
		for i, c := range checks {
			if c.Start < end || c.Start >= c.End || c.End > len(rs) {
				t.Fatalf("check %d [%d,%d) after %d in %d runes", i, c.Start, c.End, end, len(rs))
			}
			end = c.End
			if c.Text != string(rs[c.Start:c.End]) {
				t.Fatalf("check %d: Text %q, runes %q", i, c.Text, string(rs[c.Start:c.End]))
			}
			switch c.Status {
			case Matched:
				if c.Source.IsZero() {
					t.Fatalf("check %d matched without a source", i)
				}
			case Unmatched:
				if !c.Source.IsZero() {
					t.Fatalf("check %d unmatched with a source", i)
				}
			default:
				t.Fatalf("check %d: status %q", i, c.Status)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatal(err)
			}
		}
		if utf8.ValidString(answer) && len(checks) > len(rs) {
			t.Fatalf("%d checks for %d runes", len(checks), len(rs))
		}
	})
}
