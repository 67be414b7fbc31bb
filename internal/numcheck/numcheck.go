// Package numcheck checks the numbers in an answer against the evidence the
// answer was built from: the cells and row counts of its SQL results, the
// document excerpts it cites, and the user's question. One call at the end of
// a turn, [CheckAnswer], returns a [Check] per number in the answer's prose,
// "matched" with the [Source] of a value that, displayed with some reasonable
// formatting, reads as the answer's number, or "unmatched". A number the model
// worked out itself (a sum, a difference, a ratio) is unmatched on purpose: the
// checker vouches only for numbers it can point at.
//
// # What counts as a number
//
// A number is a run of ASCII digits in prose with what belongs to it:
//
//   - thousands separators: "1,234,567" (a comma followed by exactly three
//     digits), "1 234 567" with a space, no-break, narrow no-break, thin or
//     figure space (each group exactly three digits), and "1.234.567" or
//     "1.234,5" (dots group only when there are two groups or a decimal
//     comma follows: "1.234" alone is one point two three four);
//   - a decimal point, or a decimal comma when the comma is followed by one,
//     two, or more than three digits ("12,5 %"); an exponent ("1.2e6");
//   - a sign just before it or its currency: "-", "+", "−" (U+2212), "±",
//     and "–" when it does not join two numbers (a range);
//   - a currency before or after it: $ € £ ¥ ₹ ₩, or USD EUR GBP JPY CHF CAD
//     AUD CNY INR separated by a space;
//   - a magnitude: k K, M MM mn mln, B bn bln, T tn (glued, or K M B T bn mn
//     after a space), and the words thousand, million, billion, trillion. A
//     glued "m" means million or a unit (metres, minutes) and is tried both
//     ways;
//   - a percent: "%", "percent", "per cent", "pct", "percentage point(s)",
//     "pp"; basis points ("bp", "bps", "basis points") and "‰";
//   - a ratio suffix "x" or "×" ("1.2x"), and glued units (kg, g, mm, cm, km,
//     ms, s, min, h, GB, …), which do not scale the value.
//
// [Check.Text] spans all of that ("-$97.35K", "15.3 percent", "1.2 million"),
// so a page can highlight it whole. Ranges ("10–20", "10 to 20%") are two
// numbers; the first also takes the second's percent or magnitude ("$1.2–1.5M").
//
// # What is not checked
//
//   - numbers in fenced code blocks, inline code, URLs and Markdown link
//     targets, HTML tags, citations ("[1]", "[2, 3]", "[^1]", "^1",
//     "<sup>1</sup>");
//   - numbers glued to letters or underscores: identifiers and labels such as
//     "p95", "Q3", "H1", "W14", "FY2024", "id_42", "utf8", "COVID-19",
//     "3Q24", "v1.2.3", "2023.csv"; ordinals "1st", "22nd"; decades "1990s";
//   - dates and times: ISO dates "2024-03-01" (with any time part),
//     "2024-03", "03/01/2024", "1.3.2024", "2024-W14", "2024-Q3", days next to
//     a month name ("March 3", "3 March") and the year after them, "'24",
//     times "14:30", "9:05:10", "10am", "9 p.m."; phone numbers "555-123-4567",
//     "(555) 123-4567"; version and IP numbers "1.2.3", "10.0.0.1";
//   - list markers: "1." or "1)" or "(1)" opening a line (after indentation,
//     "> ", a bullet or a heading's "#"); "#1"; "No. 5"; numbers after a
//     reference word: step, option, table, figure, fig, section, chapter,
//     page, p, pp, appendix, item, part, phase, tier, version, rule, note,
//     footnote, slide, exhibit, query, question, task, stage, round, rank,
//     ranked, week, wk, line, row, column, col, id;
//   - years: a bare four-digit integer from 1800 to 2100 is a year, not
//     checked, when its context says so — after in, since, during, from,
//     until, till, through, by, before, after, year(s), FY, fiscal, early,
//     late, mid, between, vs, versus, the, for, calendar, YTD, circa, season,
//     a season's name, a month name, a quarter or half label (Q1–Q4, H1, H2),
//     "of" after quarter/half/end/start/… ("the end of 2023"), or after
//     to/and/or/&/vs/dashes when the number before was a year; before a colon
//     ("2023: $1.2M"), a dash or to/through/and/vs and another year
//     ("2019–2021", "2019-21"), "/24" ("2023/24"), a quarter label, or one of
//     a few words that make it a date (was, were, saw, had, is, revenue,
//     sales, data, figures, results, total, budget, report, season, …); in
//     parentheses alone ("(2023)"); in a Markdown table's header row, or in a
//     column headed year/fy/period/date/month/quarter/week/day/season.
//     Otherwise it is a count: "2023 penguins" is checked;
//   - in a Markdown table, every number in a column headed "#", rank or no.
//
// Numbers written as words ("three") are not checked. Small integers are
// checked like any other number: a "3" matches any 3 in the evidence (often
// the row count); that is accepted, and attribution prefers the row the
// sentence names.
//
// # How a number matches
//
// A number matches an evidence value v when v, rounded to the digits the
// answer shows, gives the answer's value: "97,354", "97,354.2", "97.4k",
// "$97.35K" and "97 thousand" all match 97354.24; "97,355" (misrounded),
// "97,354.3", "97.4M" (wrong unit) do not. Rounding is half up or half to even;
// truncation is not accepted. Specifically, for an answer value A whose last
// shown digit is at 10^k (after applying its magnitude or percent):
//
//   - v == A, or v rounded at 10^k is A, provided 10^k does not exceed v's
//     leading digit (a "1" does not match 0.6, nor "0%" 0.4 %);
//   - trailing zeros of an integer may be rounding: "97,000" matches 97,354
//     when the rounding keeps two significant digits of v; after about,
//     around, approximately, roughly, nearly, almost, circa, some, close to,
//     ~ or ≈ one significant digit is enough ("about 100,000");
//   - bounds: after over, more than, above, exceeding, at least, upwards of,
//     in excess of, greater than, north of, > or ≥, A matches when
//     A ≤ |v| < A + 10^lead(v) ("over 90,000" for 97,354); after under, less
//     than, below, fewer than, at most, up to, no more than, < or ≤, when
//     A − 10^lead(v) < |v| ≤ A;
//   - a percent A% matches v = A/100 (a fraction, 0.153 ↔ "15.3%") and
//     v = A (a value already in percent), except that the second reading is
//     refused for a column whose numbers all lie in [-1, 1] with one not an
//     integer (a column of fractions: "0.15%" does not match its 0.15) unless
//     its name says percent (pct, percent, perc, %); for question and excerpt
//     values, A itself matches a value written with a percent or when |A| ≥ 1;
//   - a magnitude also reads its mantissa alone: "$1.2 billion" matches a
//     column revenue_bn = 1.2;
//   - signs: "-5" matches only negative values, "+5" only positive ones, an
//     unsigned number positive ones — or their absolute value when a word of
//     its sentence says so (decrease, decline, drop, fell, lower, less, fewer,
//     down, loss, lost, shrank, reduction, cut, deficit, negative, minus,
//     below, …) — so "a 5 % decline" matches -0.05 and "changed by 5 %" does
//     not;
//   - a value is every number in the evidence: int64 and json.Number cells,
//     strings that are numbers (DECIMAL, big integers; NaN and infinities are
//     not), numbers inside text cells ("Total: 1,234"), list and object
//     members (the cell's row and column), each result's row count, and the
//     numbers of the question and of the excerpts (read by the same rules as
//     the answer, a percent there standing for both A and A/100). Booleans,
//     dates and times are not values.
//
// When several values match, the closest kind of match wins (exact, then
// rounded at the shown digit, then rounded on trailing zeros, then
// approximate or bound; the plain reading before the mantissa-only or
// percent-unit one; the sign as written before an absolute value); then the
// row named next to the number (a text cell of the row, or a year in a year
// column, appearing between the previous number and this one, or after it),
// the row and column of the number before it in the same sentence or table
// row; then cells before row counts before excerpts before the question; then
// the first result, row and column.
package numcheck

import (
	"encoding/json"
	"strconv"

	"datachat"
)

// Check statuses.
const (
	Matched   = "matched"
	Unmatched = "unmatched"
)

// Check is one number of an answer and what it was checked against. Start and
// End are offsets in characters — Unicode code points, as Go's []rune(answer)
// counts them (an invalid UTF-8 byte counts as one) — not bytes and not UTF-16
// units: Text is string([]rune(answer)[Start:End]). Source is the zero Source
// (JSON null) when Status is Unmatched.
type Check struct {
	Text   string `json:"text"`
	Start  int    `json:"start"`
	End    int    `json:"end"`
	Status string `json:"status"`
	Source Source `json:"source"`
}

// Source names the evidence a number matched, in one of four JSON shapes:
//
//	{"tool_call_id":"c1","row":3,"column":2}       a result cell: 0-based row and column
//	{"tool_call_id":"c1","row":null,"column":null} the row count of that result
//	{"question":true}                              the user's question
//	{"source_id":"…"}                              a cited excerpt's id
//
// The zero Source is JSON null.
type Source struct {
	ToolCallID string `json:"tool_call_id,omitempty"`
	Row        *int   `json:"row,omitempty"`
	Column     *int   `json:"column,omitempty"`
	Question   bool   `json:"question,omitempty"`
	SourceID   string `json:"source_id,omitempty"`
}

// IsZero reports whether s names nothing (an unmatched check's source).
func (s Source) IsZero() bool {
	return s.ToolCallID == "" && s.Row == nil && s.Column == nil && !s.Question && s.SourceID == ""
}

// IsRowCount reports whether s is a result's row count.
func (s Source) IsRowCount() bool {
	return s.ToolCallID != "" && s.Row == nil && s.Column == nil
}

// MarshalJSON writes exactly one of the shapes documented on [Source].
func (s Source) MarshalJSON() ([]byte, error) {
	switch {
	case s.Question:
		return []byte(`{"question":true}`), nil
	case s.SourceID != "":
		id, err := json.Marshal(s.SourceID)
		if err != nil {
			return nil, err
		}
		b := append([]byte(`{"source_id":`), id...)
		return append(b, '}'), nil
	case s.ToolCallID != "":
		id, err := json.Marshal(s.ToolCallID)
		if err != nil {
			return nil, err
		}
		b := append([]byte(`{"tool_call_id":`), id...)
		b = append(b, `,"row":`...)
		b = appendIntOrNull(b, s.Row)
		b = append(b, `,"column":`...)
		b = appendIntOrNull(b, s.Column)
		return append(b, '}'), nil
	}
	return []byte("null"), nil
}

func appendIntOrNull(b []byte, p *int) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*p), 10)
}

// Evidence is what an answer may take its numbers from.
type Evidence struct {
	// Question is the user's message the answer replies to.
	Question string
	// Results are the turn's SQL results, in the order they ran.
	Results []Result
	// Excerpts are the document excerpts the answer cites.
	Excerpts []Excerpt
}

// Result is one SQL result of the turn.
type Result struct {
	// ToolCallID names the tool call in a matched [Source].
	ToolCallID string
	// Columns are the column names.
	Columns []string
	// Rows hold the JSON-ready values of DESIGN.md §3: nil, bool, int64,
	// json.Number, string, []any and ordered objects (any value JSON
	// marshals); float64 and the other Go integer types are accepted too.
	Rows [][]any
	// RowCount is the row count the model was told (len(Rows) when zero).
	RowCount int
}

// Excerpt is a document excerpt the answer cites.
type Excerpt struct {
	SourceID string
	Text     string
}

// ResultFromQuery is r as the evidence of tool call toolCallID.
func ResultFromQuery(toolCallID string, r *datachat.QueryResult) Result {
	cols := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		cols[i] = c.Name
	}
	return Result{ToolCallID: toolCallID, Columns: cols, Rows: r.Rows, RowCount: r.RowCount}
}

// ExcerptsFromSources is the excerpts of an answer's cited sources, each
// named by its ID.
func ExcerptsFromSources(srcs []datachat.Source) []Excerpt {
	ex := make([]Excerpt, len(srcs))
	for i, s := range srcs {
		ex[i] = Excerpt{SourceID: s.ID, Text: s.Text}
	}
	return ex
}
