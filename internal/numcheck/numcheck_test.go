package numcheck

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func intp(i int) *int { return &i }

func TestSourceJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  Source
		want string
	}{
		{"cell", Source{ToolCallID: "c1", Row: intp(3), Column: intp(0)}, `{"tool_call_id":"c1","row":3,"column":0}`},
		{"row count", Source{ToolCallID: "c1"}, `{"tool_call_id":"c1","row":null,"column":null}`},
		{"question", Source{Question: true}, `{"question":true}`},
		{"excerpt", Source{SourceID: "doc-1#2 \"x\"\u2028"}, `{"source_id":"doc-1#2 \"x\"\u2028"}`},
		{"none", Source{}, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got %s, want %s", b, tc.want)
			}
			var back Source
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if b2, _ := json.Marshal(back); string(b2) != tc.want {
				t.Errorf("round trip: got %s, want %s", b2, tc.want)
			}
		})
	}
	b, _ := json.Marshal([]Check{
		{Text: "97.4k", Start: 3, End: 8, Status: Matched, Source: Source{ToolCallID: "c1", Row: intp(0), Column: intp(1)}},
		{Text: "12%", Start: 10, End: 13, Status: Unmatched},
	})
	want := `[{"text":"97.4k","start":3,"end":8,"status":"matched","source":{"tool_call_id":"c1","row":0,"column":1}},` +
		`{"text":"12%","start":10,"end":13,"status":"unmatched","source":null}]`
	if string(b) != want {
		t.Errorf("checks: got %s, want %s", b, want)
	}
}

// brief renders checks compactly: text=status@source.
func brief(cs []Check) string {
	var parts []string
	for _, c := range cs {
		s := c.Text + "=" + c.Status[:1]
		switch src := c.Source; {
		case src.Question:
			s += "@q"
		case src.SourceID != "":
			s += "@" + src.SourceID
		case src.IsRowCount():
			s += "@" + src.ToolCallID + ":n"
		case src.ToolCallID != "":
			s += fmt.Sprintf("@%s:%d,%d", src.ToolCallID, *src.Row, *src.Column)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

var revenue = Evidence{
	Question: "What was revenue by region in 2023? Show the top 4.",
	Results: []Result{{
		ToolCallID: "c1",
		Columns:    []string{"region", "revenue", "share", "change"},
		Rows: [][]any{
			{"North", json.Number("97354.24"), json.Number("0.153"), json.Number("-0.05")},
			{"South", "88120.50", json.Number("0.138"), json.Number("0.021")},
			{"East", int64(61003), json.Number("0.0958"), json.Number("0.1")},
			{"West", int64(-1200), json.Number("0.0019"), nil},
		},
		RowCount: 4,
	}},
	Excerpts: []Excerpt{{SourceID: "doc-1", Text: "Group revenue was $1.2 billion, up 7% on the year."}},
}

func TestCheckAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"exact and grouped", "North made 97,354.24 dollars.", "97,354.24=m@c1:0,1"},
		{"rounded", "North: 97,354 or 97,354.2.", "97,354=m@c1:0,1 97,354.2=m@c1:0,1"},
		{"magnitudes", "North: $97.4k, $97.35K, 97 thousand, 97.4M.", "$97.4k=m@c1:0,1 $97.35K=m@c1:0,1 97 thousand=m@c1:0,1 97.4M=u"},
		{"misrounded", "North made $97,355 and $97,354.3.", "$97,355=u $97,354.3=u"},
		{"truncation is not rounding", "East's share was 9.5%.", "9.5%=u"},
		{"percent of a fraction", "North has a 15.3% share, 15% rounded; 0.153 as a fraction.", "15.3%=m@c1:0,2 15%=m@c1:0,2 0.153=m@c1:0,2"},
		{"fraction read as percent", "North has a 0.153% share.", "0.153%=u"},
		{"decimal string", "South made $88,120.50, about $88.1K.", "$88,120.50=m@c1:1,1 $88.1K=m@c1:1,1"},
		{"sign words", "North fell 5%; North's change was 5%; North changed by -5%.", "5%=m@c1:0,3 5%=u -5%=m@c1:0,3"},
		{"loss", "West made a loss of $1,200, a profit of $1,200.", "$1,200=m@c1:3,1 $1,200=m@c1:3,1"},
		{"no sign no cue", "West made $1,200.", "$1,200=u"},
		{"explicit sign", "West: −$1,200; North: +97,354.", "−$1,200=m@c1:3,1 +97,354=m@c1:0,1"},
		{"row count and question", "All 4 regions are shown, as the top 4 you asked for.", "4=m@c1:n 4=m@c1:n"},
		{"excerpt", "Group revenue was $1.2bn [1], up 7%.", "$1.2bn=m@doc-1 7%=m@doc-1"},
		{"invented sum", "Together: $246,477.", "$246,477=u"},
		{"approximately", "North: about $100K, roughly 100,000; not 100,000 exactly.", "$100K=m@c1:0,1 100,000=m@c1:0,1 100,000=u"},
		{"bounds", "North made over $90,000 and under $100,000, more than 1 million: no.", "$90,000=m@c1:0,1 $100,000=m@c1:0,1 1 million=u"},
		{"row named", "East grew 10% and North fell 5%.", "10%=m@c1:2,3 5%=m@c1:0,3"},
		{"code is not checked", "Ran `LIMIT 10`:\n```sql\nSELECT 97354\n```\nNorth: 97,354.", "97,354=m@c1:0,1"},
		{"citations and footnotes", "North [1] 97,354[2] ^3 <sup>4</sup>.", "97,354=m@c1:0,1"},
		{"dates and years", "In 2023, on 2024-03-01 and March 3, 2024, FY2024, Q3 2024, 2019–2021: 2023 penguins.", "2023=u"},
		{"times phones versions", "At 14:30, 9 am, call 555-123-4567, v1.2.3, 10.0.0.1.", ""},
		{"ordinals and lists", "1. North\n2) South\n#1 and 2nd and 4th\n(3) West", ""},
		{"identifiers", "p95, id_42, COVID-19, utf8, W14, H1, 3Q24, 2023.csv.", ""},
		{"labels", "See table 2, page 14, step 3, week 12, row 5.", ""},
		{"ranges share a unit", "Between 10–12% of rows; $1.2–1.5 billion.", "10=m@c1:2,3 12%=u $1.2=m@doc-1 1.5 billion=u"},
		{"markdown table", "| Region | Revenue |\n|---|---:|\n| North | $97,354 |\n| East | $61,003 |", "$97,354=m@c1:0,1 $61,003=m@c1:2,1"},
		{"table year column", "| Year | Revenue |\n|---|---:|\n| 2023 | $97,354 |", "$97,354=m@c1:0,1"},
		{"continental and spaces", "North: 97.354,24 € or 97 354,24 € or 97\u202f354.", "97.354,24 €=m@c1:0,1 97 354,24 €=m@c1:0,1 97\u202f354=m@c1:0,1"},
		{"tiny share", "West's share is 0.19%, less than 1%.", "0.19%=m@c1:3,2 1%=m@c1:3,2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := brief(CheckAnswer(tc.answer, revenue))
			if got != tc.want {
				t.Errorf("CheckAnswer(%q)\n got %s\nwant %s", tc.answer, got, tc.want)
			}
		})
	}
}

func TestOffsetsAreRunes(t *testing.T) {
	answer := "Zürich 🚀 São Paulo — North: 97,354 (ça fait 15,3 %)."
	cs := CheckAnswer(answer, revenue)
	if len(cs) != 2 {
		t.Fatalf("got %d checks, want 2: %s", len(cs), brief(cs))
	}
	rs := []rune(answer)
	for i, want := range []string{"97,354", "15,3 %"} {
		c := cs[i]
		if c.Text != want || string(rs[c.Start:c.End]) != want {
			t.Errorf("check %d: text %q runes[%d:%d] %q, want %q", i, c.Text, c.Start, c.End, string(rs[c.Start:c.End]), want)
		}
	}
	if want := strings.Index(answer, "97,354"); cs[0].Start == want {
		t.Errorf("Start %d is a byte offset; want a rune offset", cs[0].Start)
	}
	if want := len([]rune(answer[:strings.Index(answer, "97,354")])); cs[0].Start != want {
		t.Errorf("Start = %d, want rune offset %d", cs[0].Start, want)
	}
}

func TestNoNumbers(t *testing.T) {
	for _, a := range []string{"", "No numbers here.", "Only a year: in 2023.", "```\n42\n```"} {
		cs := CheckAnswer(a, Evidence{})
		if cs == nil || len(cs) != 0 {
			t.Errorf("CheckAnswer(%q) = %#v, want an empty non-nil slice", a, cs)
		}
	}
	if cs := CheckAnswer("It is 42.", Evidence{}); brief(cs) != "42=u" {
		t.Errorf("no evidence: got %s, want 42=u", brief(cs))
	}
}

// object is an ordered object as internal/duckdb writes a STRUCT.
type object []struct {
	K string
	V any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.K)
		v, _ := json.Marshal(f.V)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

func TestEvidenceValues(t *testing.T) {
	ev := Evidence{Results: []Result{{
		ToolCallID: "t",
		Columns:    []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"},
		Rows: [][]any{{
			int64(7), json.Number("2.5e+06"), "123.45", "9007199254740993", "NaN", true,
			[]any{int64(11), json.Number("12.5")}, map[string]any{"x": int64(13)},
			object{{"k", int64(14)}, {"l", "Total: 1,234"}}, float64(0.25),
		}},
	}}}
	for _, tc := range []struct{ answer, want string }{
		{"7", "7=m@t:0,0"},
		{"2.5 million", "2.5 million=m@t:0,1"},
		{"123.45", "123.45=m@t:0,2"},
		{"9,007,199,254,740,993", "9,007,199,254,740,993=m@t:0,3"},
		{"11 and 12.5", "11=m@t:0,6 12.5=m@t:0,6"},
		{"13", "13=m@t:0,7"},
		{"14 of 1,234", "14=m@t:0,8 1,234=m@t:0,8"},
		{"25%", "25%=m@t:0,9"},
		{"1 row", "1=u"}, // a single row's count is not a value
	} {
		if got := brief(CheckAnswer(tc.answer, ev)); got != tc.want {
			t.Errorf("CheckAnswer(%q) = %s, want %s", tc.answer, got, tc.want)
		}
	}
}

func TestRoundsTo(t *testing.T) {
	for _, tc := range []struct {
		v, a string
		k    int
		mode roundMode
		want bool
	}{
		{"97354.24", "97354", 0, roundNearest, true},
		{"97354.24", "97355", 0, roundNearest, false},
		{"97354.25", "97354.3", -1, roundNearest, true}, // half up
		{"97354.25", "97354.2", -1, roundNearest, true}, // half to even
		{"97354.35", "97354.3", -1, roundNearest, false},
		{"97354.35", "97354.4", -1, roundNearest, true},
		{"0.153", "0.15", -2, roundNearest, true},
		{"5000", "5000", 3, roundNearest, true},
		{"5", "0", 3, roundNearest, true},
		{"1e-30", "0", 0, roundNearest, true},
		{"97354", "90000", 4, roundDown, true},
		{"97354", "100000", 4, roundUp, true},
	} {
		v, _ := parseDec(tc.v)
		a, _ := parseDec(tc.a)
		if got := v.roundsTo(tc.k, a, tc.mode); got != tc.want {
			t.Errorf("%s rounded at 1e%d to %s: got %v, want %v", tc.v, tc.k, tc.a, got, tc.want)
		}
	}
}

func TestParseDec(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want dec
		ok   bool
	}{
		{"123.450", dec{c: 12345, e: -2}, true},
		{"-0.05", dec{neg: true, c: 5, e: -2}, true},
		{"1.5e+06", dec{c: 15, e: 5}, true},
		{"2.5E-5", dec{c: 25, e: -6}, true},
		{"18446744073709551615", dec{c: 1844674407370955161, e: 1}, true},
		{"0", dec{}, true},
		{"", dec{}, false},
		{"1.2.3", dec{}, false},
		{"e5", dec{}, false},
	} {
		got, ok := parseDec(tc.s)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseDec(%q) = %+v, %v; want %+v, %v", tc.s, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a := "North and South: 97,354 and 88,120.5; East 61,003; 4 regions; 15%."
	first := brief(CheckAnswer(a, revenue))
	for range 20 {
		if got := brief(CheckAnswer(a, revenue)); got != first {
			t.Fatalf("got %s, then %s", first, got)
		}
	}
}

func TestRules(t *testing.T) {
	ev := Evidence{
		Question: "How many riders used lines 1 to 3 in 2024, and what is the rating out of 5?",
		Results: []Result{{
			ToolCallID: "r",
			Columns:    []string{"line", "year", "riders", "rating", "change_pct", "profit"},
			Rows: [][]any{
				{"Line 1", int64(2024), int64(1812000), json.Number("4.62"), json.Number("6.1"), int64(-1250000)},
				{"Line 3", int64(2023), int64(2390400), json.Number("4.18"), json.Number("-2.3"), int64(420000)},
			},
			RowCount: 2,
		}},
	}
	for _, tc := range []struct{ name, answer, want string }{
		{"rating scale", "Line 1 is rated 4.6/5 and Line 3 4.2 out of 5.", "4.6=m@r:0,3 4.2=m@r:1,3"},
		{"row names and labels", "Lines 1 and 3 carried 1.81M and 2.39M riders.", "1.81M=m@r:0,2 2.39M=m@r:1,2"},
		{"year column", "2024 saw 1,812,000 riders; 2023 had 2,390,400.", "1,812,000=m@r:0,2 2,390,400=m@r:1,2"},
		{"percent units column", "Ridership grew 6.1% on line one and fell 2.3% on the other.", "6.1%=m@r:0,4 2.3%=m@r:1,4"},
		{"accounting in a table", "| Line | Profit |\n|---|---:|\n| Line 1 | ($1.25M) |\n| Line 3 | $0.42M |", "($1.25M)=m@r:0,5 $0.42M=m@r:1,5"},
		{"aside in prose", "Line 3 made a profit ($0.42M).", "$0.42M=m@r:1,5"},
		{"confidence and compounds", "A 95% CI; a 64-bit id; a 5-star line; a 30-day window.", "30=u"},
		{"just under", "Just under 2.4 million rode Line 3.", "2.4 million=m@r:1,2"},
		{"year after on", "Line 3 grew on 2023 by 2,390,400 riders.", "2,390,400=m@r:1,2"},
		{"question numbers", "Lines 1 to 3, as you asked, out of 5 lines in total.", "5=m@q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := brief(CheckAnswer(tc.answer, ev)); got != tc.want {
				t.Errorf("CheckAnswer(%q)\n got %s\nwant %s", tc.answer, got, tc.want)
			}
		})
	}
}
