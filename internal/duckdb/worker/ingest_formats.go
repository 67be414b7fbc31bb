package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"datachat"
	"datachat/internal/duckdb/wire"
	"datachat/internal/xlsx"
)

// Parquet, JSON and Excel uploads: a Parquet file checked and, where DuckDB
// would misread it, rewritten; JSON records, nested no deeper than
// maxJSONDepth; a workbook's sheets, found by internal/xlsx.

// storeParquet validates a Parquet file and writes the stored form to out:
// the file itself, or a rewrite where un-annotated BINARY columns holding
// only text become VARCHAR and INT96 timestamps DuckDB cannot convert become
// NULL. It returns notes on what was changed.
func (s *ingestSession) storeParquet(in, out string) ([]string, error) {
	name := s.name
	if err := verifyPageChecksums(in); err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "%s is corrupt: %v", name, err)
	}
	src := "read_parquet(" + datachat.QuoteLiteral(in) + ")"
	cols, err := s.columns("SELECT * FROM " + src)
	if err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "%s is not a readable Parquet file: %s", name, s.message(err))
	}
	if len(cols) == 0 {
		return nil, datachat.Errorf(datachat.EINVALID, "%s has no columns", name)
	}
	// Decode every page of every column, so a bad codec or a corrupt page
	// fails now rather than at the first query. Running out of memory is not
	// corruption (a few huge values, a decompression bomb): such a file is
	// kept, and queries over it stop at their memory limit.
	if _, err := queryAll(s.conn, "SELECT max(hash(COLUMNS(*))) FROM "+src, 1, nil); err != nil && !isOOM(err) {
		return nil, datachat.Errorf(datachat.EINVALID, "%s cannot be read: %s", name, s.message(err))
	}
	var repl, notes []string
	for _, c := range cols {
		if c.SQLType != "BLOB" {
			continue
		}
		// Text stored as un-annotated BINARY: valid UTF-8 without control
		// characters in every value.
		q := fmt.Sprintf(`SELECT count(*) FILTER (WHERE %[1]s IS NOT NULL AND (try(decode(%[1]s)) IS NULL OR regexp_matches(try(decode(%[1]s)), '[\x{00}-\x{08}\x{0B}\x{0C}\x{0E}-\x{1F}\x{7F}]'))) = 0 FROM %[2]s`, datachat.QuoteIdent(c.Name), src)
		if r, err := queryAll(s.conn, q, 1, nil); err == nil && len(r.Rows) == 1 && r.Rows[0][0] == true {
			repl = append(repl, fmt.Sprintf("decode(%[1]s) AS %[1]s", datachat.QuoteIdent(c.Name)))
		}
	}
	r, n := s.int96Overflow(in, cols)
	repl, notes = append(repl, r...), append(notes, n...)
	if len(repl) == 0 {
		return nil, os.Rename(in, out)
	}
	q := fmt.Sprintf("COPY (SELECT * REPLACE (%s) FROM %s) TO %s (FORMAT parquet)", strings.Join(repl, ", "), src, datachat.QuoteLiteral(fileRewritten))
	if err := execOne(s.conn, q); err != nil {
		return nil, os.Rename(in, out) // keep the original rather than fail
	}
	return notes, os.Rename(fileRewritten, out)
}

// int96Floor is where a wrapped INT96 timestamp lands: DuckDB converts the
// deprecated 12-byte INT96 timestamps (Impala, older Spark) without an
// overflow check, so one beyond its range (Spark's year 290000) comes back
// as a date thousands of years before year 1, with no error.
const int96Floor = "TIMESTAMP '0001-01-01'"

// int96Overflow finds the top-level INT96 timestamp columns of a Parquet file
// holding such wrapped values, and returns the replacements that make them
// NULL and a note for each column.
func (s *ingestSession) int96Overflow(in string, cols []datachat.Column) (repl, notes []string) {
	schema, err := queryAll(s.conn, "SELECT name FROM parquet_schema("+datachat.QuoteLiteral(in)+") WHERE type = 'INT96'", 10_000, nil)
	if err != nil || len(schema.Rows) == 0 {
		return nil, nil
	}
	int96 := map[string]bool{}
	for _, r := range schema.Rows {
		if n, ok := r[0].(string); ok {
			int96[n] = true
		}
	}
	src := "read_parquet(" + datachat.QuoteLiteral(in) + ")"
	for _, c := range cols {
		if !int96[c.Name] || !strings.HasPrefix(c.SQLType, "TIMESTAMP") {
			continue
		}
		col := datachat.QuoteIdent(c.Name)
		q := fmt.Sprintf("SELECT count(*) FILTER (WHERE %[1]s < %[2]s), min(%[1]s)::VARCHAR FROM %[3]s", col, int96Floor, src)
		r, err := queryAll(s.conn, q, 1, nil)
		if err != nil || len(r.Rows) != 1 {
			continue
		}
		n, _ := r.Rows[0][0].(int64)
		if n == 0 {
			continue
		}
		repl = append(repl, fmt.Sprintf("if(%[1]s < %[2]s, NULL, %[1]s) AS %[1]s", col, int96Floor))
		what := "1 value"
		if n > 1 {
			what = fmt.Sprint(n, " values")
		}
		notes = append(notes, fmt.Sprintf("%s of the INT96 timestamp column %q lay outside the range DuckDB converts and would have read as a date before year 1 (such as %v): NULL",
			what, c.Name, r.Rows[0][1]))
	}
	return repl, notes
}

// storeJSON reads a JSON file — an array of records, or one record per line
// (NDJSON) — and writes it as Parquet: nested objects become STRUCTs, arrays
// LISTs. A file that is one object gives a table for each of its keys that
// holds an array of records (an API response's "items", a graph's "nodes"
// and "links"), or, when none does, a one-row table of the object.
//
// Records whose nested objects differ from one to the next (an event log's
// payloads) would give a STRUCT of thousands of fields, too wide to write
// within the memory limit: then the objects whose fields appear in fewer
// than half the records become MAPs, and failing that everything below the
// second level is kept as JSON text.
func (s *ingestSession) storeJSON(in string) ([]wire.IngestTable, error) {
	if err := checkJSONDepth(in, s.name); err != nil {
		return nil, err
	}
	var err error
	for _, opts := range []string{"", ", field_appearance_threshold = 0.5", ", maximum_depth = 2"} {
		var tables []wire.IngestTable
		tables, err = s.storeJSONAs(in, opts)
		if err == nil {
			return tables, nil
		}
		if !isOOM(err) {
			break
		}
	}
	var de *datachat.Error
	if errors.As(err, &de) {
		return nil, err
	}
	return nil, datachat.Errorf(datachat.EINVALID, "%s cannot be loaded as JSON: %s", s.name, s.message(err))
}

func (s *ingestSession) storeJSONAs(in, opts string) ([]wire.IngestTable, error) {
	// Strings become dates and timestamps when they are ISO 8601, as JSON
	// writes them. DuckDB's default also tries its other formats on every
	// string it samples, which on one long value costs minutes (a 20 MiB
	// string: 30 s a pass, against 3.7 s with ISO alone).
	read := func(more string) string {
		return fmt.Sprintf("read_json(%s, format = 'auto', dateformat = 'ISO', timestampformat = 'ISO'%s%s)", datachat.QuoteLiteral(in), opts, more)
	}
	src := read("")
	cols, err := s.columns("SELECT * FROM " + src)
	if err != nil && strings.Contains(err.Error(), "maximum_object_size") {
		// One value (a record, or the whole top-level object) is larger than
		// DuckDB's 16 MB default: allow one as large as the memory limit
		// holds twice over.
		src = read(fmt.Sprintf(", maximum_object_size = %d", max(min(s.memoryLimit/4, 512<<20), 16<<20)))
		cols, err = s.columns("SELECT * FROM " + src)
	}
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, datachat.Errorf(datachat.EINVALID, "%s holds no records", s.name)
	}
	r, err := queryAll(s.conn, "SELECT count(*) FROM "+src, 1, nil)
	if err != nil {
		return nil, err
	}
	n, _ := r.Rows[0][0].(int64)
	head, err := readHead(in, 4096)
	if err != nil {
		return nil, err
	}
	object := bytes.HasPrefix(bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n"), []byte("{"))
	if n == 1 && object {
		var tables []wire.IngestTable
		for _, c := range cols {
			if !strings.HasPrefix(c.SQLType, "STRUCT(") || !strings.HasSuffix(c.SQLType, "[]") {
				continue // not an array of records
			}
			out := fmt.Sprintf("dc-output-%d.parquet", len(tables)+1)
			q := fmt.Sprintf("COPY (SELECT r.* FROM (SELECT unnest(%s) AS r FROM %s)) TO %s (FORMAT parquet)", datachat.QuoteIdent(c.Name), src, datachat.QuoteLiteral(out))
			if err := execOne(s.conn, q); err != nil {
				return nil, err
			}
			tables = append(tables, wire.IngestTable{Suffix: c.Name, Output: out})
		}
		if len(tables) > 0 {
			return tables, nil
		}
	}
	if err := execOne(s.conn, fmt.Sprintf("COPY (FROM %s) TO %s (FORMAT parquet)", src, datachat.QuoteLiteral(fileOutput))); err != nil {
		return nil, err
	}
	return []wire.IngestTable{{Output: fileOutput}}, nil
}

// storeWorkbook reads an Excel workbook (internal/xlsx finds each sheet's
// table and types its columns) and writes each sheet with data as Parquet,
// through a typed CSV and our own read_csv call.
func (s *ingestSession) storeWorkbook(in string) ([]wire.IngestTable, error) {
	lim := xlsx.DefaultLimits()
	lim.TempDir = "xlsx-tmp"
	if err := os.MkdirAll(lim.TempDir, 0o700); err != nil {
		return nil, err
	}
	wb, err := xlsx.Open(in, s.name, lim)
	if err != nil {
		return nil, err // a message for the user already
	}
	defer wb.Close()
	var tables []wire.IngestTable
	for i, sh := range wb.Sheets {
		csvName := fmt.Sprintf("dc-sheet-%d.csv", i+1)
		f, err := os.Create(csvName)
		if err != nil {
			return nil, err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		info, err := sh.WriteCSV(bw)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s, sheet %q: %w", s.name, sh.Name, err)
		}
		cols := make([]string, len(sh.Columns))
		var notes []string
		for j, c := range sh.Columns {
			cols[j] = datachat.QuoteLiteral(c.Name) + ": " + datachat.QuoteLiteral(c.Type)
			if c.Percent {
				notes = append(notes, fmt.Sprintf("column %q holds fractions the sheet showed as percentages (0.125 for 12.5%%)", c.Name))
			}
		}
		out := fmt.Sprintf("dc-output-%d.parquet", i+1)
		q := fmt.Sprintf("COPY (FROM read_csv(%s, auto_detect = false, header = true, delim = ',', quote = '\"', escape = '\"', new_line = '\\n', columns = {%s}, max_line_size = %d)) TO %s (FORMAT parquet)",
			datachat.QuoteLiteral(csvName), strings.Join(cols, ", "), max(info.MaxLineSize+1, s.maxLine), datachat.QuoteLiteral(out))
		if err := execOne(s.conn, q); err != nil {
			return nil, datachat.Errorf(datachat.EINVALID, "%s, sheet %q, cannot be stored: %s", s.name, sh.Name, s.message(err))
		}
		os.Remove(csvName)
		tables = append(tables, wire.IngestTable{Suffix: sh.Name, Output: out, Notes: append(sh.Notes, notes...)})
	}
	if len(tables) > 0 && len(wb.Skipped) > 0 {
		tables[0].Notes = append(tables[0].Notes, wb.Skipped...)
	}
	return tables, nil
}

// maxJSONDepth is the deepest nesting of arrays and objects accepted: DuckDB's
// JSON reader recurses once per level, and a few hundred thousand levels
// (a few hundred kilobytes of brackets) overflow its stack.
const maxJSONDepth = 1000

// checkJSONDepth refuses a file nested deeper than maxJSONDepth, or that
// DuckDB would not read as JSON in a way that could hide nesting from the
// count (scanJSON).
func checkJSONDepth(path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = scanJSON(bufio.NewReaderSize(f, 1<<20), name, maxJSONDepth)
	return err
}
