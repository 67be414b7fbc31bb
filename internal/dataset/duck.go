package dataset

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"datachat"
	"datachat/internal/duckdb"
)

// openDuckDB opens a scratch in-memory DuckDB for one ingest, with the
// Loader's memory and thread limits, spilling into work, and no extension
// downloads. Only our own SQL runs on it.
func (l *Loader) openDuckDB(work string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("threads", strconv.Itoa(l.opts.Threads))
	q.Set("memory_limit", fmt.Sprintf("%dKiB", l.opts.MemoryLimit/1024))
	q.Set("temp_directory", filepath.Join(work, "spill"))
	q.Set("autoinstall_known_extensions", "false")
	q.Set("autoload_known_extensions", "false")
	connector, err := duckdbdriver.NewConnector("?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	return db, nil
}

func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// duckMessage is DuckDB's error message, first paragraph only, without the
// driver's prefix, and with our scratch file's path replaced by the name the
// user knows.
func duckMessage(err error, path, name string) string {
	var de *duckdbdriver.Error
	msg := err.Error()
	if errors.As(err, &de) {
		msg = de.Msg
	}
	msg, _, _ = strings.Cut(msg, "\n\n")
	msg, _, _ = strings.Cut(msg, "\nLINE ")
	return strings.ReplaceAll(strings.TrimSpace(msg), path, name)
}

func isOOM(err error) bool {
	var de *duckdbdriver.Error
	return errors.As(err, &de) && de.Type == duckdbdriver.ErrorTypeOutOfMemory
}

// storeParquet validates a Parquet file and writes the stored form to out:
// the file itself, or a rewrite whose un-annotated BINARY columns holding
// only text become VARCHAR.
func (l *Loader) storeParquet(ctx context.Context, db *sql.DB, in, out, name string) error {
	if err := verifyPageChecksums(in); err != nil {
		return datachat.Errorf(datachat.EINVALID, "%s is corrupt: %v", name, err)
	}
	src := "read_parquet(" + lit(in) + ")"
	cols, err := describeColumns(ctx, db, "SELECT * FROM "+src)
	if err != nil {
		return datachat.Errorf(datachat.EINVALID, "%s is not a readable Parquet file: %s", name, duckMessage(err, in, name))
	}
	if len(cols) == 0 {
		return datachat.Errorf(datachat.EINVALID, "%s has no columns", name)
	}
	// Decode every page of every column, so a bad codec or a corrupt page
	// fails now rather than at the first query. Running out of memory is not
	// corruption (a few huge values, a decompression bomb): such a file is
	// kept, and queries over it stop at their memory limit.
	if _, err := db.ExecContext(ctx, "SELECT max(hash(COLUMNS(*))) FROM "+src); err != nil && !isOOM(err) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return datachat.Errorf(datachat.EINVALID, "%s cannot be read: %s", name, duckMessage(err, in, name))
	}
	var texts []string
	for _, c := range cols {
		if c.SQLType != "BLOB" {
			continue
		}
		// Text stored as un-annotated BINARY: valid UTF-8 without control
		// characters in every value.
		q := fmt.Sprintf(`SELECT count(*) FILTER (WHERE %[1]s IS NOT NULL AND (try(decode(%[1]s)) IS NULL OR regexp_matches(try(decode(%[1]s)), '[\x{00}-\x{08}\x{0B}\x{0C}\x{0E}-\x{1F}\x{7F}]'))) = 0 FROM %[2]s`, duckdb.QuoteIdent(c.Name), src)
		var ok bool
		if err := db.QueryRowContext(ctx, q).Scan(&ok); err == nil && ok {
			texts = append(texts, c.Name)
		}
	}
	if len(texts) == 0 {
		return os.Rename(in, out)
	}
	repl := make([]string, len(texts))
	for i, c := range texts {
		repl[i] = fmt.Sprintf("decode(%[1]s) AS %[1]s", duckdb.QuoteIdent(c))
	}
	q := fmt.Sprintf("COPY (SELECT * REPLACE (%s) FROM %s) TO %s (FORMAT parquet)", strings.Join(repl, ", "), src, lit(out))
	if _, err := db.ExecContext(ctx, q); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return os.Rename(in, out) // keep the original rather than fail
	}
	return nil
}

// storeCSV reads a CSV/TSV file with DuckDB's sniffer and writes it as Parquet
// to out. It returns the text encoding when it was not UTF-8, and the
// delimiter.
func (l *Loader) storeCSV(ctx context.Context, db *sql.DB, in, out, work, name string) (encName, delim string, err error) {
	head, err := readHead(in, 64<<10)
	if err != nil {
		return "", "", err
	}
	enc, err := detectEncoding(head, name)
	if err != nil {
		return "", "", err
	}
	src := in
	if enc.enc != nil {
		src = filepath.Join(work, "utf8.csv")
		if err := transcode(ctx, in, src, enc.enc); err != nil {
			return "", "", datachat.Errorf(datachat.EINVALID, "%s cannot be read as %s text: %v", name, enc.name, err)
		}
	}
	delim, err = l.copyCSV(ctx, db, src, out)
	if err != nil && enc.enc == nil && strings.Contains(err.Error(), "Invalid unicode") {
		// Not UTF-8 after all, past the start of the file.
		enc, err = legacyEncodingOfFile(in)
		if err != nil {
			return "", "", err
		}
		src = filepath.Join(work, "utf8.csv")
		if err := transcode(ctx, in, src, enc.enc); err != nil {
			return "", "", datachat.Errorf(datachat.EINVALID, "%s cannot be read as %s text: %v", name, enc.name, err)
		}
		delim, err = l.copyCSV(ctx, db, src, out)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		if enc.name != "" {
			return "", "", datachat.Errorf(datachat.EINVALID, "%s (read as %s) cannot be loaded: %s", name, enc.name, duckMessage(err, src, name))
		}
		return "", "", datachat.Errorf(datachat.EINVALID, "%s cannot be loaded as CSV: %s", name, duckMessage(err, src, name))
	}
	return enc.name, delim, nil
}

// copyCSV converts a UTF-8 CSV file to Parquet and returns its delimiter.
func (l *Loader) copyCSV(ctx context.Context, db *sql.DB, src, out string) (string, error) {
	sn, err := sniffCSV(ctx, db, src)
	if err != nil {
		return "", err
	}
	// The sniffer's own read_csv call (dialect and column types) saves
	// sniffing again, unless we decided the header differently.
	read := strings.TrimSuffix(strings.TrimSpace(sn.prompt), ";")
	if sn.header != sn.sniffedHeader || !strings.HasPrefix(read, "FROM read_csv(") {
		read = fmt.Sprintf("FROM read_csv(%s, header = %t)", lit(src), sn.header)
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf("COPY (%s) TO %s (FORMAT parquet)", read, lit(out)))
	if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "Invalid unicode") {
		// The sniffer guesses column types from a sample; a value further
		// down may not fit. Sniff the whole file instead.
		read = fmt.Sprintf("FROM read_csv(%s, header = %t, sample_size = -1)", lit(src), sn.header)
		_, err = db.ExecContext(ctx, fmt.Sprintf("COPY (%s) TO %s (FORMAT parquet)", read, lit(out)))
	}
	return sn.delim, err
}

type csvSniff struct {
	header        bool // our decision
	sniffedHeader bool // DuckDB's
	delim         string
	prompt        string // DuckDB's read_csv call for the file
}

// sniffCSV runs DuckDB's sniffer and decides whether the first row is a
// header. DuckDB decides by types: a first row of text over columns of numbers
// or dates is a header. When every column is text it cannot tell, and it says
// no even for a plain header (fivethirtyeight's cabinet-turnover.csv, with two
// empty column names). Then the first row is taken as a header when its
// non-empty cells are most of the row, none looks like a number, all differ,
// and none recurs further down its column.
func sniffCSV(ctx context.Context, db *sql.DB, src string) (csvSniff, error) {
	var sn csvSniff
	var allText bool
	err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT HasHeader, Delimiter, list_bool_and(list_transform(Columns, c -> c.type = 'VARCHAR')), Prompt FROM sniff_csv(%s)", lit(src))).Scan(&sn.sniffedHeader, &sn.delim, &allText, &sn.prompt)
	sn.header = sn.sniffedHeader
	if err != nil || sn.header || !allText {
		return sn, err
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT * FROM read_csv(%s, header = false, all_varchar = true) LIMIT 1000", lit(src)))
	if err != nil {
		return sn, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return sn, err
	}
	var grid [][]sql.NullString
	for rows.Next() {
		row := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return sn, err
		}
		grid = append(grid, row)
	}
	if err := rows.Err(); err != nil {
		return sn, err
	}
	sn.header = looksLikeHeader(grid)
	return sn, nil
}

func looksLikeHeader(grid [][]sql.NullString) bool {
	if len(grid) < 2 {
		return false
	}
	first := grid[0]
	seen := map[string]bool{}
	nonEmpty := 0
	for i, c := range first {
		v := strings.TrimSpace(c.String)
		if !c.Valid || v == "" {
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
			if row[i].Valid && strings.TrimSpace(row[i].String) == v {
				return false
			}
		}
	}
	return nonEmpty*2 > len(first)
}

// describeColumns returns the columns of a query as DuckDB's DESCRIBE names them.
func describeColumns(ctx context.Context, db *sql.DB, query string) ([]datachat.Column, error) {
	rows, err := db.QueryContext(ctx, "SELECT column_name, column_type FROM (DESCRIBE "+query+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []datachat.Column
	for rows.Next() {
		var c datachat.Column
		if err := rows.Scan(&c.Name, &c.SQLType); err != nil {
			return nil, err
		}
		c.Type = duckdb.FriendlyType(c.SQLType)
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// describe fills in the stored file's columns, row count and sample values.
func describe(ctx context.Context, db *sql.DB, path string, st *Stored) error {
	src := "read_parquet(" + lit(path) + ")"
	cols, err := describeColumns(ctx, db, "SELECT * FROM "+src)
	if err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+src).Scan(&st.RowCount); err != nil {
		return err
	}
	st.Columns = cols
	samples(ctx, db, src, cols)
	return nil
}

const (
	maxSamples    = 3
	maxSampleChar = 40
)

// samples sets a few distinct values of each scalar column, from the first
// rows, for the model's prompt. It is best effort: on any error (a column too
// big to read within the memory limit) columns keep no samples.
func samples(ctx context.Context, db *sql.DB, src string, cols []datachat.Column) {
	var exprs []string
	var idx []int
	for i, c := range cols {
		switch c.Type {
		case duckdb.TypeBlob, duckdb.TypeList, duckdb.TypeStruct, duckdb.TypeMap:
			continue
		}
		exprs = append(exprs, fmt.Sprintf("list_filter(list(DISTINCT left(%s::VARCHAR, %d)), x -> x IS NOT NULL)[1:%d]::VARCHAR[]", duckdb.QuoteIdent(c.Name), maxSampleChar+1, maxSamples))
		idx = append(idx, i)
	}
	if len(exprs) == 0 {
		return
	}
	q := fmt.Sprintf("SELECT %s FROM (SELECT * FROM %s LIMIT 2000)", strings.Join(exprs, ", "), src)
	vals := make([]any, len(exprs))
	ptrs := make([]any, len(exprs))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := db.QueryRowContext(ctx, q).Scan(ptrs...); err != nil {
		return
	}
	for k, v := range vals {
		list, _ := v.([]any)
		var out []string
		for _, s := range list {
			str, ok := s.(string)
			if !ok {
				continue
			}
			if utf8.RuneCountInString(str) > maxSampleChar {
				str = string([]rune(str)[:maxSampleChar]) + "…"
			}
			out = append(out, str)
		}
		cols[idx[k]].Samples = out
	}
}
