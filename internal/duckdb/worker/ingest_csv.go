package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// CSV and TSV uploads: the text encoding detected and transcoded to UTF-8,
// DuckDB's sniffer asked for the dialect, the header and the column types,
// our own read_csv call built from what it found, and numbers written with a
// decimal comma or thousands separators converted (csvnumbers.go).

// storeCSV reads a CSV/TSV file and writes it as Parquet to out. It returns
// the text encoding when it was not UTF-8, the delimiter, and notes on how
// it was read (numbers converted).
func (s *ingestSession) storeCSV(ctx context.Context, in, out string) (encName, delim string, notes []string, err error) {
	name := s.name
	head, err := readHead(in, 64<<10)
	if err != nil {
		return "", "", nil, err
	}
	enc, err := detectEncoding(head, name)
	if err != nil {
		return "", "", nil, err
	}
	src := in
	transcodeTo := func(enc textEncoding) error {
		src = fileUTF8
		if err := transcode(ctx, in, src, enc.enc, s.maxLine, name); err != nil {
			var de *datachat.Error
			if errors.As(err, &de) {
				return err
			}
			return datachat.Errorf(datachat.EINVALID, "%s cannot be read as %s text: %v", name, enc.name, err)
		}
		return nil
	}
	if enc.enc != nil {
		if err := transcodeTo(enc); err != nil {
			return "", "", nil, err
		}
	}
	delim, notes, err = s.copyCSV(src, out)
	if isInvalidUnicode(err) && enc.enc == nil {
		// Not UTF-8 after all, past the start of the file.
		if enc, err = legacyEncodingOfFile(in); err != nil {
			return "", "", nil, err
		}
		if err := transcodeTo(enc); err != nil {
			return "", "", nil, err
		}
		delim, notes, err = s.copyCSV(src, out)
	}
	if err != nil {
		var de *datachat.Error
		switch {
		case errors.As(err, &de):
			return "", "", nil, err
		case enc.name != "":
			return "", "", nil, datachat.Errorf(datachat.EINVALID, "%s (read as %s) cannot be loaded: %s", name, enc.name, s.message(err))
		}
		return "", "", nil, datachat.Errorf(datachat.EINVALID, "%s cannot be loaded as CSV: %s", name, s.message(err))
	}
	return enc.name, delim, notes, nil
}

// copyCSV converts a UTF-8 CSV file to Parquet and returns its delimiter,
// and notes on numbers it converted (numberFormats).
func (s *ingestSession) copyCSV(src, out string) (string, []string, error) {
	sn, err := s.sniff(src)
	if err != nil {
		return "", nil, err
	}
	// copyTo writes the file to dst, reading the columns of conv as text
	// and converting them.
	convert := func(read, dst string, conv []numConversion) error {
		sel := "FROM " + read
		if len(conv) > 0 {
			repl := make([]string, len(conv))
			for i, c := range conv {
				repl[i] = c.expr() + " AS " + datachat.QuoteIdent(c.name)
			}
			sel = "SELECT * REPLACE (" + strings.Join(repl, ", ") + ") FROM " + read
		}
		return execOne(s.conn, fmt.Sprintf("COPY (%s) TO %s (FORMAT parquet)", sel, datachat.QuoteLiteral(dst)))
	}
	copyTo := func(dst string, conv []numConversion) error {
		asText := map[string]bool{}
		for _, c := range conv {
			asText[c.name] = true
		}
		try := func(read string) error { return convert(read, dst, conv) }
		read := sn.readCall(src, s.maxLine, asText)
		if sn.header != sn.sniffedHeader {
			// We read the first row differently from the sniffer, so its
			// column names and types do not hold: let read_csv detect them
			// again.
			read = fmt.Sprintf("read_csv(%s, header = %t, max_line_size = %d%s)", datachat.QuoteLiteral(src), sn.header, s.maxLine, typesArg(asText))
		}
		err := try(read)
		if err != nil && !isInvalidUnicode(err) {
			// The sniffer guesses column types from a sample; a value
			// further down may not fit. Sniff the whole file instead.
			err = try(fmt.Sprintf("read_csv(%s, header = %t, sample_size = -1, max_line_size = %d%s)", datachat.QuoteLiteral(src), sn.header, s.maxLine, typesArg(asText)))
		}
		return err
	}
	if err := copyTo(out, nil); err != nil {
		return "", nil, err
	}
	conv, notes := s.csvNumbers(src, sn, out)
	if len(conv) > 0 {
		// Text columns hold their raw text in the stored file, which is
		// quicker to read again than the CSV; fractions do not.
		from := func() error { return convert("read_parquet("+datachat.QuoteLiteral(out)+")", fileRewritten, conv) }
		for _, c := range conv {
			if c.sniffed != "VARCHAR" {
				from = func() error { return copyTo(fileRewritten, conv) }
			}
		}
		if err := from(); err != nil {
			// Best effort: the numbers stay as DuckDB read them.
			os.Remove(fileRewritten)
			return sn.delim, nil, nil
		}
		if err := os.Rename(fileRewritten, out); err != nil {
			return "", nil, err
		}
	}
	return sn.delim, notes, nil
}

// csvNumbers finds the columns of numbers written with a decimal comma or
// thousands separators (numberFormats) in a CSV file stored as out. It is
// best effort: what it cannot read is left as DuckDB read it.
func (s *ingestSession) csvNumbers(src string, sn *csvSniff, out string) ([]numConversion, []string) {
	stored := "read_parquet(" + datachat.QuoteLiteral(out) + ")"
	cols, err := s.columns("SELECT * FROM " + stored)
	if err != nil {
		return nil, nil
	}
	// The raw text of fractions comes from the sniffer's read of the file,
	// when it named the columns as they were stored.
	var asText func([]string) string
	if sn.header == sn.sniffedHeader && len(cols) == len(sn.columns) {
		asText = func(names []string) string {
			m := make(map[string]bool, len(names))
			for _, n := range names {
				m[n] = true
			}
			return sn.readCall(src, s.maxLine, m)
		}
		for i, c := range cols {
			if sn.columns[i][0] != c.Name {
				asText = nil
				break
			}
		}
	}
	conv, notes, err := s.numberFormats(stored, cols, asText)
	if err != nil {
		return nil, nil
	}
	return conv, notes
}

// typesArg is read_csv's types argument reading the named columns as text,
// or "" for none.
func typesArg(text map[string]bool) string {
	if len(text) == 0 {
		return ""
	}
	var fields []string
	for name := range text {
		fields = append(fields, datachat.QuoteLiteral(name)+": 'VARCHAR'")
	}
	sort.Strings(fields)
	return ", types = {" + strings.Join(fields, ", ") + "}"
}

// csvSniff is what DuckDB's sniffer found in a CSV file, as data.
type csvSniff struct {
	header        bool // our decision
	sniffedHeader bool // DuckDB's
	delim         string
	quote         string
	escape        string
	newline       string
	comment       string
	skip          int64
	columns       [][2]string // name, type
	dateFormat    string
	tsFormat      string
}

// dialectArgs are read_csv's arguments for the file and its sniffed
// dialect: every value a literal.
func (sn *csvSniff) dialectArgs(file string) []string {
	return []string{
		datachat.QuoteLiteral(file),
		"delim = " + datachat.QuoteLiteral(sn.delim),
		"quote = " + datachat.QuoteLiteral(sn.quote),
		"escape = " + datachat.QuoteLiteral(sn.escape),
		"new_line = " + datachat.QuoteLiteral(sn.newline),
		"comment = " + datachat.QuoteLiteral(sn.comment),
		fmt.Sprintf("skip = %d", sn.skip),
	}
}

// readCall builds the read_csv call for the sniffed dialect and columns:
// every value a literal, every name a quoted string. The columns named in
// text are read as VARCHAR, whatever the sniffer made of them.
func (sn *csvSniff) readCall(file string, maxLine int, text map[string]bool) string {
	cols := make([]string, len(sn.columns))
	for i, c := range sn.columns {
		typ := c[1]
		if text[c[0]] {
			typ = "VARCHAR"
		}
		cols[i] = datachat.QuoteLiteral(c[0]) + ": " + datachat.QuoteLiteral(typ)
	}
	args := append(sn.dialectArgs(file),
		"auto_detect = false",
		fmt.Sprintf("header = %t", sn.header),
		"columns = {"+strings.Join(cols, ", ")+"}",
		fmt.Sprintf("max_line_size = %d", maxLine),
	)
	if sn.dateFormat != "" {
		args = append(args, "dateformat = "+datachat.QuoteLiteral(sn.dateFormat))
	}
	if sn.tsFormat != "" {
		args = append(args, "timestampformat = "+datachat.QuoteLiteral(sn.tsFormat))
	}
	return "read_csv(" + strings.Join(args, ", ") + ")"
}

// sniffText reads one of sniff_csv's text fields, which says "(empty)" for
// an empty one.
func sniffText(v any) string {
	s, _ := v.(string)
	if s == "(empty)" {
		return ""
	}
	return s
}

// sniff runs DuckDB's sniffer and decides whether the first row is a header.
// DuckDB decides by types: a first row of text over columns of numbers or
// dates is a header. When every column is text it cannot tell, and it says
// no even for a plain header (fivethirtyeight's cabinet-turnover.csv, with
// two empty column names). Then the first row is taken as a header when its
// non-empty cells are most of the row, none looks like a number, all differ,
// and none recurs further down its column.
func (s *ingestSession) sniff(src string) (*csvSniff, error) {
	r, err := queryAll(s.conn, fmt.Sprintf("SELECT Delimiter, Quote, Escape, NewLineDelimiter, Comment, SkipRows, HasHeader, Columns, DateFormat, TimestampFormat FROM sniff_csv(%s, max_line_size = %d)", datachat.QuoteLiteral(src), s.maxLine), 1, nil)
	if err != nil {
		return nil, err
	}
	if len(r.Rows) != 1 {
		return nil, errors.New("the sniffer returned nothing")
	}
	row := r.Rows[0]
	sn := &csvSniff{
		delim: sniffText(row[0]), quote: sniffText(row[1]), escape: sniffText(row[2]), newline: sniffText(row[3]),
		comment: sniffText(row[4]), dateFormat: sniffText(row[8]), tsFormat: sniffText(row[9]),
	}
	switch v := row[5].(type) {
	case int64:
		sn.skip = v
	case string:
		sn.skip, _ = strconv.ParseInt(v, 10, 64)
	}
	sn.sniffedHeader, _ = row[6].(bool)
	sn.header = sn.sniffedHeader
	allText := true
	list, _ := row[7].([]any)
	for _, c := range list {
		obj, _ := c.(wire.Object)
		var name, typ string
		for _, f := range obj {
			switch f.Key {
			case "name":
				name, _ = f.Value.(string)
			case "type":
				typ, _ = f.Value.(string)
			}
		}
		if typ != "VARCHAR" {
			allText = false
		}
		sn.columns = append(sn.columns, [2]string{name, typ})
	}
	if len(sn.columns) == 0 {
		return nil, errors.New("the sniffer found no columns")
	}
	if sn.header || !allText {
		return sn, nil
	}
	grid, err := queryAll(s.conn, fmt.Sprintf("SELECT * FROM read_csv(%s, header = false, all_varchar = true, max_line_size = %d) LIMIT 1000", datachat.QuoteLiteral(src), s.maxLine), -1, nil)
	if err != nil {
		return nil, err
	}
	sn.header = looksLikeHeader(grid.Rows)
	return sn, nil
}

func looksLikeHeader(grid [][]any) bool {
	if len(grid) < 2 {
		return false
	}
	cell := func(row []any, i int) (string, bool) {
		s, ok := row[i].(string)
		return strings.TrimSpace(s), ok
	}
	first := grid[0]
	seen := map[string]bool{}
	nonEmpty := 0
	for i := range first {
		v, ok := cell(first, i)
		if !ok || v == "" {
			continue
		}
		nonEmpty++
		if _, err := strconv.ParseFloat(strings.ReplaceAll(v, ",", ""), 64); err == nil {
			return false
		}
		if seen[v] {
			return false
		}
		seen[v] = true
		for _, row := range grid[1:] {
			if w, ok := cell(row, i); ok && w == v {
				return false
			}
		}
	}
	return nonEmpty*2 > len(first)
}
