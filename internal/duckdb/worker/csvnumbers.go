package worker

import (
	"fmt"
	"slices"
	"strings"

	"datachat"
)

// Numbers written the way people write them, not the way DuckDB reads them:
// a European export ("1.234,56", "1 234,56"; ";" between fields) or
// thousands separators ("1,234.56"). DuckDB's sniffer finds the dialect and
// the dates, but reads such a column as text (so sum() fails), or worse,
// "1.234" as one point two three four. Each column is judged on its own,
// from its raw text: it is converted when every value reads as a number one
// way, and a column that reads two ways ("1,234": 1.234 or 1234) takes the
// way the file's other columns show, or stays text when none does. The
// dataset's notes say what was converted, and what was kept as text for
// being ambiguous.

// Value shapes, as RE2 patterns over a trimmed value. A thousands group is
// three digits after a lead of one to three (not starting with 0); spaces
// include the no-break and narrow no-break spaces French and Swiss
// exports use.
const (
	numSpace = `[ \x{00A0}\x{202F}]`
	// readable with a decimal comma: 1234, 1234,5, 1.234,56, 1 234,56
	reComma = `[+-]?([0-9]+|[1-9][0-9]{0,2}(\.[0-9]{3})+|[1-9][0-9]{0,2}(` + numSpace + `[0-9]{3})+)(,[0-9]+)?`
	// readable with a decimal point: 1234, 1234.5, 1,234.56, 1 234.56, 1'234.56
	rePoint = `[+-]?([0-9]+|[1-9][0-9]{0,2}(,[0-9]{3})+|[1-9][0-9]{0,2}(` + numSpace + `[0-9]{3})+|[1-9][0-9]{0,2}('[0-9]{3})+)(\.[0-9]+)?`
	// what DuckDB reads as a number by itself
	rePlain = `[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?`
	// a whole number with dots between thousands, which DuckDB reads as a
	// fraction (1.234)
	reDotThousands = `[+-]?[1-9][0-9]{0,2}(\.[0-9]{3})+`
)

// numSample is how many rows the first look at a file's columns reads; the
// whole file is read only for the columns that look convertible there
// (most files have none, and pay for this look alone).
const numSample = 2048

// numBatch is how many columns one query of the analysis counts.
const numBatch = 64

// numStats counts a column's non-empty values by shape.
type numStats struct {
	n, comma, point, plain, dotThousands int64
	commas, dots, spaces, apostrophes    int64 // values holding the character
	digits                               int64 // the most digits in a value
}

// numAggregates are the aggregates that fill numStats, over the trimmed
// text value v of a column.
func numAggregates(v string) []string {
	match := func(re string) string {
		return fmt.Sprintf("count(*) FILTER (WHERE regexp_full_match(%s, %s))", v, datachat.QuoteLiteral(re))
	}
	has := func(c string) string {
		return fmt.Sprintf("count(*) FILTER (WHERE contains(%s, %s))", v, datachat.QuoteLiteral(c))
	}
	return []string{
		fmt.Sprintf("count(*) FILTER (WHERE %s <> '')", v),
		match(reComma), match(rePoint), match(rePlain), match(reDotThousands),
		has(","), has("."),
		fmt.Sprintf("count(*) FILTER (WHERE regexp_matches(%s, %s))", v, datachat.QuoteLiteral(numSpace)),
		has("'"),
		fmt.Sprintf("coalesce(max(length(regexp_replace(%s, '[^0-9]', '', 'g'))), 0)", v),
	}
}

const numAggregateCount = 10

func (st *numStats) scan(row []any) {
	v := make([]int64, numAggregateCount)
	for i := range v {
		switch x := row[i].(type) {
		case int64:
			v[i] = x
		case int32:
			v[i] = int64(x)
		}
	}
	*st = numStats{n: v[0], comma: v[1], point: v[2], plain: v[3], dotThousands: v[4],
		commas: v[5], dots: v[6], spaces: v[7], apostrophes: v[8], digits: v[9]}
}

// Ways a column reads.
const (
	readComma = iota + 1 // decimal comma; ".", spaces between thousands
	readPoint            // decimal point; ",", spaces, ' between thousands
)

// numColumn is a column of the file, as the analysis sees it.
type numColumn struct {
	name    string
	sniffed string // DuckDB's type for it
	stats   numStats
}

// onlyComma and onlyPoint: every value reads one way and some not the
// other (evidence of how the file writes numbers).
func (s numStats) onlyComma() bool { return s.n > 0 && s.comma == s.n && s.point < s.n }
func (s numStats) onlyPoint() bool { return s.n > 0 && s.point == s.n && s.comma < s.n }

// bothWays: every value reads both ways.
func (s numStats) bothWays() bool { return s.n > 0 && s.comma == s.n && s.point == s.n }

// numConversion is a column converted, and how.
type numConversion struct {
	name    string
	sniffed string // the type it was stored with
	reading int
	sqlType string // BIGINT or DOUBLE
	stats   numStats
}

// decideNumbers returns the conversions of a file's columns, and the notes
// on columns kept as text for reading two ways. commaFile and pointFile are
// the file's evidence: some column reads only with a decimal comma, or only
// with a decimal point.
func decideNumbers(cols []numColumn, commaFile, pointFile bool) (conv []numConversion, ambiguous []numColumn) {
	fileWay := 0
	switch {
	case commaFile && !pointFile:
		fileWay = readComma
	case pointFile && !commaFile:
		fileWay = readPoint
	}
	for _, c := range cols {
		s := c.stats
		way := 0
		text := c.sniffed == "VARCHAR"
		switch {
		case s.n == 0:
		case s.plain == s.n:
			// DuckDB reads it; but in a file of decimal commas, 1.234 is
			// a thousand and more, not a fraction. In a file that writes
			// numbers both ways, it cannot be told: said so.
			if s.dotThousands > 0 && s.comma == s.n {
				switch {
				case fileWay == readComma:
					way = readComma
				case commaFile:
					ambiguous = append(ambiguous, c)
				}
			}
		case !text:
			// A column DuckDB typed (a number, a date): left to it.
		case s.onlyComma():
			way = readComma
		case s.onlyPoint():
			way = readPoint
		case s.bothWays():
			switch {
			case s.commas == 0 && s.dots == 0:
				way = readComma // spaces between thousands: the same either way
			case fileWay != 0:
				way = fileWay
			default:
				ambiguous = append(ambiguous, c)
			}
		}
		if way == 0 {
			continue
		}
		typ := "BIGINT"
		if way == readComma && s.commas > 0 || way == readPoint && s.dots > 0 || s.digits > 18 {
			typ = "DOUBLE"
		}
		conv = append(conv, numConversion{name: c.name, sniffed: c.sniffed, reading: way, sqlType: typ, stats: s})
	}
	return conv, ambiguous
}

// expr is the SQL converting the column's text.
func (c numConversion) expr() string {
	v := fmt.Sprintf("NULLIF(trim(%s), '')", datachat.QuoteIdent(c.name))
	var clean string
	if c.reading == readComma {
		clean = fmt.Sprintf("replace(regexp_replace(%s, %s, '', 'g'), ',', '.')", v, datachat.QuoteLiteral(`[.`+numSpace[1:len(numSpace)-1]+`]`))
	} else {
		clean = fmt.Sprintf("regexp_replace(%s, %s, '', 'g')", v, datachat.QuoteLiteral(`[,'`+numSpace[1:len(numSpace)-1]+`]`))
	}
	return fmt.Sprintf("CAST(%s AS %s)", clean, c.sqlType)
}

// numberNotes says, for the dataset's notes, which columns were read as
// numbers written how, and which were kept as text for reading two ways.
func numberNotes(conv []numConversion, ambiguous []numColumn) []string {
	var notes []string
	for _, way := range []int{readComma, readPoint} {
		var names []string
		var commas, dots, spaces, apostrophes bool
		for _, c := range conv {
			if c.reading != way {
				continue
			}
			names = append(names, datachat.QuoteIdent(c.name))
			commas, dots = commas || c.stats.commas > 0, dots || c.stats.dots > 0
			spaces, apostrophes = spaces || c.stats.spaces > 0, apostrophes || c.stats.apostrophes > 0
		}
		if len(names) == 0 {
			continue
		}
		var ex []string
		var how string
		if way == readComma {
			if dots {
				ex = append(ex, "1.234")
			}
			if spaces {
				ex = append(ex, "1 234")
			}
			if len(ex) == 0 {
				ex = append(ex, "1234")
			}
			how = "numbers written with a decimal comma"
			if commas {
				for i := range ex {
					ex[i] += ",56"
				}
			} else {
				how = `whole numbers written with "." or spaces between thousands`
			}
		} else {
			if commas {
				ex = append(ex, "1,234")
			}
			if spaces {
				ex = append(ex, "1 234")
			}
			if apostrophes {
				ex = append(ex, "1'234")
			}
			if dots {
				for i := range ex {
					ex[i] += ".56"
				}
			}
			how = "numbers written with separators between thousands"
		}
		notes = append(notes, fmt.Sprintf("%s (such as %s) were read as numbers in %s", strings.ToUpper(how[:1])+how[1:], strings.Join(ex, " or "), joinAnd(names)))
	}
	for _, c := range ambiguous {
		if c.sniffed != "VARCHAR" {
			notes = append(notes, fmt.Sprintf("Column %s was read as fractions (such as 1.234 for 1.234), though other columns write numbers with a decimal comma: if its numbers are thousands (1.234 for 1234), the file writes numbers both ways; fix it where it was made and load it again", datachat.QuoteIdent(c.name)))
			continue
		}
		sep := ","
		if c.stats.commas == 0 {
			sep = "."
		}
		q := datachat.QuoteIdent(c.name)
		notes = append(notes, fmt.Sprintf("Kept as text: %s, whose numbers (such as 1%s234) read as a fraction or as thousands, and nothing in the file shows which; convert it in SQL once you know: CAST(replace(%s, %s, '.') AS DOUBLE) for a fraction, CAST(replace(%s, %s, '') AS BIGINT) for thousands",
			q, sep, q, datachat.QuoteLiteral(sep), q, datachat.QuoteLiteral(sep)))
	}
	return notes
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// numberFormats judges the columns of a CSV file that DuckDB read as text
// or as fractions, and returns the conversions and the notes. stored reads
// the file as DuckDB stored it (its text columns hold their raw text);
// asText, when not nil, is the read_csv call reading the named columns of
// the CSV file as text, for the raw text of its fractions.
//
// Most files hold no such numbers, and pay for one look at the first
// numSample rows of their text columns. The others are read whole, for the
// columns that look convertible only; the raw text of fractions is read
// only where the text columns show numbers written another way.
func (s *ingestSession) numberFormats(stored string, cols []datachat.Column, asText func(names []string) string) ([]numConversion, []string, error) {
	var text, fractions []numColumn
	for _, c := range cols {
		switch c.SQLType {
		case "VARCHAR":
			text = append(text, numColumn{name: c.Name, sniffed: c.SQLType})
		case "DOUBLE", "FLOAT":
			fractions = append(fractions, numColumn{name: c.Name, sniffed: c.SQLType})
		}
	}
	if len(text) == 0 {
		// Numbers with decimal commas or thousands separators are text to
		// DuckDB: without a text column there are none (and 1.234 read as a
		// fraction has no decimal comma beside it to show that it is not).
		return nil, nil, nil
	}
	// The columns are counted numBatch at a time: a wide file would make one
	// query of thousands of aggregates.
	stats := func(read string, cs []numColumn, limit string) error {
		for from := 0; from < len(cs); from += numBatch {
			batch := cs[from:min(from+numBatch, len(cs))]
			var aggs []string
			for _, c := range batch {
				aggs = append(aggs, numAggregates(fmt.Sprintf("trim(%s)", datachat.QuoteIdent(c.name)))...)
			}
			r, err := queryAll(s.conn, fmt.Sprintf("SELECT %s FROM (SELECT * FROM %s%s)", strings.Join(aggs, ", "), read, limit), 1, nil)
			if err != nil {
				return err
			}
			if len(r.Rows) != 1 || len(r.Rows[0]) != len(batch)*numAggregateCount {
				return fmt.Errorf("the number analysis returned %d rows", len(r.Rows))
			}
			for i := range batch {
				batch[i].stats.scan(r.Rows[0][i*numAggregateCount:])
			}
		}
		return nil
	}
	names := func(cs []numColumn) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.name
		}
		return out
	}
	evidence := func(cs []numColumn) (comma, point bool) {
		for _, c := range cs {
			comma = comma || c.stats.onlyComma()
			point = point || c.stats.onlyPoint()
		}
		return comma, point
	}
	sample := fmt.Sprintf(" LIMIT %d", numSample)
	if err := stats(stored, text, sample); err != nil {
		return nil, nil, err
	}
	commaFile, pointFile := evidence(text)
	conv, ambiguous := decideNumbers(text, commaFile, pointFile)
	if len(conv) == 0 && len(ambiguous) == 0 {
		return nil, nil, nil
	}
	// Numbers written another way: the fractions' raw text, for thousands
	// read as fractions, and for what it shows of the file's way.
	if len(fractions) == 0 || asText == nil {
		fractions = nil
	} else if err := stats(asText(names(fractions)), fractions, sample); err != nil {
		return nil, nil, err
	}
	c2, p2 := evidence(fractions)
	commaFile, pointFile = commaFile || c2, pointFile || p2
	all := append(slices.Clone(text), fractions...)
	conv, ambiguous = decideNumbers(all, commaFile, pointFile)
	if len(conv) == 0 && len(ambiguous) == 0 {
		return nil, nil, nil
	}
	// The columns to convert (or that are ambiguous), read whole.
	chosen := map[string]bool{}
	for _, n := range convNames(conv, ambiguous) {
		chosen[n] = true
	}
	var textAgain, fractionsAgain []numColumn
	for _, c := range text {
		if chosen[c.name] {
			textAgain = append(textAgain, numColumn{name: c.name, sniffed: c.sniffed})
		}
	}
	for _, c := range fractions {
		if chosen[c.name] {
			fractionsAgain = append(fractionsAgain, numColumn{name: c.name, sniffed: c.sniffed})
		}
	}
	if err := stats(stored, textAgain, ""); err != nil {
		return nil, nil, err
	}
	if len(fractionsAgain) > 0 {
		if err := stats(asText(names(fractionsAgain)), fractionsAgain, ""); err != nil {
			return nil, nil, err
		}
	}
	conv, ambiguous = decideNumbers(append(textAgain, fractionsAgain...), commaFile, pointFile)
	return conv, numberNotes(conv, ambiguous), nil
}

func convNames(conv []numConversion, ambiguous []numColumn) []string {
	var out []string
	for _, c := range conv {
		out = append(out, c.name)
	}
	for _, c := range ambiguous {
		out = append(out, c.name)
	}
	return out
}
