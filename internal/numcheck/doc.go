// Package numcheck checks the numbers of an answer against the evidence the
// answer was built from: the cells and row counts of its SQL results, the
// document excerpts it cites, and the user's question. One call when a turn
// ends, [CheckAnswer], returns a [Check] per number of the answer's prose:
// "matched", with the [Source] of a value that, displayed with a reasonable
// formatting, reads as the answer's number; or "unmatched". A number the model
// worked out itself (a sum, a difference, a share, a unit conversion) is
// unmatched on purpose: the checker vouches only for numbers it can point at.
//
// # What is a number
//
// A run of ASCII digits in prose, with what belongs to it:
//
//   - thousands separators: "1,234,567" (a comma then exactly three digits);
//     "1 234 567" with a space, no-break, narrow no-break, thin or figure
//     space (groups of exactly three digits); "1.234.567" and "1.234,5" (dots
//     group only when there are two groups or a decimal comma follows: "1.234"
//     alone is one point two three four). English, French/SI and German
//     grouping are read; Indian "12,34,567" is not;
//   - a decimal point; a decimal comma when the comma is followed by one, two
//     or more than three digits ("12,5 %"); an exponent ("1.2e6", "2.5E-05");
//   - a sign touching it or its currency: "-", "+", "−" (U+2212), "±", and "–"
//     unless it joins two numbers ("10–20" is a range);
//   - a currency before or after it: $ € £ ¥ ₹ ₩, or USD EUR GBP JPY CHF CAD
//     AUD CNY INR with a space. A number in parentheses that fills a table
//     cell, "($1.25M)" or "(12,300)", is negative (accounting); in prose
//     "($590K)" is an aside;
//   - a magnitude: glued k K, M MM mn mln, B b bn bln, T tn; after a space K M
//     B T mn bn and thousand, million, billion, trillion. A glued "m" is tried
//     as million and as a unit (metres, minutes);
//   - a percent: "%", "percent", "per cent", "pct", "pp", "percentage
//     point(s)"; "‰"; basis points "bp", "bps", "basis points";
//   - a ratio "x" or "×" ("1.2x"), and glued units (kg, mm, ms, GB, kWh, …),
//     which do not scale the value.
//
// [Check.Text] spans all of that ("-$97.35K", "15.3 percent", "1.2 million",
// "EUR 1,204,000") but not approximation marks ("~", "about") nor units after
// a space ("5,076 g" gives "5,076"). Ranges ("10–20", "10 to 20%") are two
// numbers; the first also reads with the second's percent or magnitude
// ("10–15%", "$1.2–1.5M").
//
// # What is not checked
//
//   - text in fenced code blocks (``` and ~~~, closed or not), inline code,
//     URLs and Markdown link targets, HTML tags; citations "[1]", "[2, 3]",
//     "[^1]", footnote markers "^1" and "<sup>1</sup>";
//   - numbers glued to letters or underscores: "p95", "Q3", "H1", "W14",
//     "FY2024", "id_42", "utf8", "COVID-19", "3Q24", "v1.2.3", "2023.csv",
//     "M4" (an underscore is emphasis, not a letter, when no letter or digit
//     touches it on the other side: "_8.1%_"); ordinals "1st", "90th";
//     decades "1990s", "90's";
//   - dates and times: "2024-03-01" (any time part), "2024-03", "2024-W14",
//     "2024-Q3", "03/01/2024", "1.3.2024", a day next to a month name ("March
//     3", "3 March", "Sept. 12") and the year after it, "'24"; times "14:30",
//     "9:05:10", "10am", "9 p.m."; phone numbers "555-123-4567", "(555)
//     123-4567"; versions and IP addresses "1.2.3", "10.0.0.1";
//   - list markers opening a line (after indentation, "> ", a bullet, "#"s or
//     "**"): "1.", "1)", "(1)"; "#1"; after "No.", "p.", "pp.", "fig.": labels;
//   - a bare number (no grouping, currency, sign or suffix) after a reference
//     word: step, option, table, figure, section, chapter, page, appendix,
//     item, part, phase, tier, version, rule, note, footnote, slide, exhibit,
//     query, question, task, stage, round, rank, ranked, week, wk, month, day,
//     quarter, period, wave, line, row, column, col, id, clause, article,
//     paragraph, schedule (and their plurals), and the numbers joined to it
//     ("Lines 1 and 3", "steps 2–4");
//   - a word and number that are a text cell of a result, or its last words
//     ("Scope 1", "Line 3", "Viz 101" of "Data Viz 101"): they name a row; a
//     number after "per" ("38.2 per
//     100k residents"): a rate's unit;
//   - the top of a rating scale after a decimal: the 5 of "4.6/5" and "4.2
//     out of 5" (also 10 and 100); the confidence of "95% CI"; technical
//     compounds "64-bit", "8-core", "5-star", and compounds whose number is in
//     a result's column name ("52-week high" beside high_52w, "12-month"
//     beside month_12_retention). Other windows and targets, "30-day",
//     "4-hour target", are checked: they are claims;
//   - years. A bare four-digit integer from 1800 to 2100 is a year when a
//     result has it in a column named year, yr, fy or season, or when its
//     context says so: after in, since, during, from, until, till, through,
//     by, before, after, on, year(s), FY, fiscal, early, late, mid, between,
//     vs, versus, the, for, calendar, YTD, circa, season, cohort, a season's
//     name, a month name, Q1–Q4, H1, H2, "of" after quarter/half/end/start/…
//     ("the end of 2023"), or after to/and/or/&/a dash when the number before
//     was a year; before a colon ("2023: $1.2M"), a dash or to/through/and/vs
//     and another year ("2019–2021", "2019-21"), "/24", or a word that makes
//     it a date ("2023 was", "2024 did", "2023 revenue", …); alone in
//     parentheses; in a Markdown table's header row or in a column headed
//     year, fy, period, date, month, quarter, week, day or season. Otherwise
//     it is a count: "2023 penguins" is checked;
//   - in a Markdown table, the numbers of a column headed "#", rank, no. or
//     position.
//
// Numbers written as words ("three", "a quarter") are not checked. Small
// integers are checked like any other number: a "3" matches any 3 of the
// evidence, often the row count; that is accepted (attribution then prefers
// the row the sentence names). A result of one row has no row count value,
// or it would vouch for every "1".
//
// # How a number matches
//
// A number matches an evidence value v when v, rounded to the digits the
// answer shows, gives the answer's value: "97,354", "97,354.2", "97.4k",
// "$97.35K" and "97 thousand" match 97354.24; "97,355", "97,354.3" and "97.4M"
// do not. Rounding is half up or half to even; truncation is not rounding.
// Precisely, for a value A whose last shown digit is at 10^k (after its
// magnitude and percent):
//
//   - v equals A, or v rounded at 10^k is A and 10^k does not exceed v's
//     leading digit ("1" does not match 0.6, nor "0%" 0.4 %);
//   - an integer's trailing zeros may be rounding: "97,000" matches 97,354 if
//     the rounding keeps two significant digits of v; after about, around,
//     approximately, approx., roughly, nearly, almost, circa, ca., some, close
//     to, just over/under, "~" or "≈" one significant digit is enough ("about
//     100,000" matches 97,354; "100,000" alone does not);
//   - bounds: after over, more than, above, exceeding, at least, upwards of,
//     in excess of, greater than, north of, ">" or "≥", A matches a v with
//     A ≤ |v| < A + 10^lead(A) ("over 90,000" for 97,354, not for 150,000);
//     after under, less than, below, fewer than, at most, up to, no/not more
//     than, "<" or "≤", a v with |v| ≤ A whose leading digit is at most one
//     place below A's ("less than 1%" matches 0.4 %, not 0.04 %);
//   - a percent A% reads as A/100 (a fraction: "15.3%" ↔ 0.153) and, second,
//     as A in percent units ("15.3%" ↔ a pct column's 15.3). The second
//     reading is refused for a column whose numbers all lie in [-1, 1], one
//     of them not an integer (fractions: "0.153%" does not match its 0.153),
//     unless the column's name says percent (pct, perc, percent, %, ppt,
//     points, _pp, _pc); in a question or excerpt it needs a number written
//     with a percent; it never matches a row count;
//   - a magnitude reads, second, as its mantissa alone, which matches only a
//     result cell ("$1.2 billion" ↔ a revenue_bn column's 1.2);
//   - second readings match only as shown: not approximately, not as bounds;
//   - signs: "-5" matches negative values, "+5" positive ones, "±5" either,
//     an unsigned number positive ones, or negative ones by their absolute
//     value when a word near it (six words before, three after, same
//     sentence) says so: decrease, decline, drop, fell, lower, less, fewer,
//     down, loss, lost, shrank, reduction, cut, deficit, negative, minus,
//     below, slipped, dipped, overspent, … So "a 5% decline" matches -0.05;
//     "the change was 5%" does not;
//   - a ratio ("2.5x") never matches a row count;
//   - values are every number of the evidence: int64, json.Number, float64
//     and other Go numbers; strings that are numbers (DECIMAL, big integers;
//     not NaN or infinities); numbers inside text cells ("Total: 1,234"),
//     lists and objects (their cell's row and column); each result's row
//     count (when above one); the numbers of the question and of the excerpts,
//     read by the rules above (a percent there stands for A and A/100, a
//     magnitude for the scaled value and its mantissa, a number near a word of
//     decrease also for its negative). Booleans, dates, times and NULLs are
//     not values.
//
// # Which source
//
// When several values match, matches form three groups: exact or rounded at
// the shown digit; rounded on trailing zeros or by a second reading;
// approximate or bound. The best group wins. Within it, the value whose row
// the answer names wins: a text cell of the row (or its year, in a year
// column) between the previous number and this one (strongest), just after
// it, or elsewhere in the sentence or table row; then the row and column of
// the number matched before it in the same sentence or table row, and the
// column of the number above it in a table. Then an exact match before a
// rounded one, the sign as written before an absolute value; then cells
// before row counts before excerpts before the question; then the first
// result, row and column. The choice is deterministic.
//
// # Cost
//
// The answer is read first; only evidence values inside the ranges its
// numbers can match are parsed and indexed (sorted by magnitude), text cells
// are read only when a quick look at their digits says they may hold such a
// value, and each number examines at most the 256 values nearest it. A
// 1,000-row × 20-column result and a 4,000-character answer take a few
// milliseconds (BenchmarkCheckAnswer).
//
// An answer is checked up to [DefaultMaxNumbers] numbers, the first in
// reading order, and for at most [DefaultTimeout] ([CheckAnswerWithin] takes
// other [Limits] and a context); only the start of the text that holds those
// numbers is read. The numbers after are left out of the checks, as numbers
// the checker does not check are, and [Checked] says from where and why. An
// answer of 300,000 numbers (4.7 MiB) takes 13 ms and 11 MB
// (BenchmarkCheckAnswerMany).
package numcheck
