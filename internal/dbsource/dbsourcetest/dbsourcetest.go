// Package dbsourcetest loads the real CSV files of ../shared/data/csv into
// PostgreSQL and MySQL/MariaDB as tables, for the tests of database sources
// (internal/dbsource and the commands' end-to-end tests). The files are read
// from ../shared, never copied into the repository, and decoded as
// datachat's own CSV loader reads them: the BOM dropped, CP932 and stray
// Windows-1252 bytes decoded to UTF-8, empty column names named.
package dbsourcetest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/sharedtest"
)

// CSV is one file of ../shared/data/csv, decoded and typed for loading.
type CSV struct {
	File     string      // the file's name, e.g. cabinet-turnover.csv
	Name     string      // the table's: the file's name as datachat names a dataset (cabinet_turnover)
	Encoding string      // what the bytes were read as
	Cols     []string    // the header, UTF-8, empty names made columnN
	Kinds    []string    // each column's: int (every value an integer), float (every value a number) or text
	MaxLen   []int       // each column's longest value, in characters
	Rows     [][]*string // the records; nil for an empty field
}

// legacy are the files that are not UTF-8 at all, with their encoding (the
// folder's README names it). Test_mskanji.csv is CP932: x/text's ShiftJIS
// decodes Windows-31J, CP932's extensions included.
var legacy = map[string]struct {
	name string
	enc  encoding.Encoding
}{
	"test_mskanji.csv": {"Shift_JIS (CP932)", japanese.ShiftJIS},
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*CSV{}
)

// Read reads data/csv/NAME.csv of ../shared (skipping tb when ../shared is
// absent, failing it under CI=true). Each file is read once per test binary:
// the result is shared, and callers must not change it.
func Read(tb testing.TB, name string) *CSV {
	tb.Helper()
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if c := cache[name]; c != nil {
		return c
	}
	file := name + ".csv"
	c, err := parse(file, sharedtest.Read(tb, "data/csv/"+file))
	if err != nil {
		tb.Fatalf("read %s: %v", file, err)
	}
	cache[name] = c
	return c
}

// parse decodes and types one CSV file.
func parse(file string, b []byte) (*CSV, error) {
	c := &CSV{File: file, Name: datachat.TableName(file, nil)}
	text, enc, err := decode(file, b)
	if err != nil {
		return nil, err
	}
	c.Encoding = enc
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("no header")
	}
	c.Cols = ColumnNames(recs[0])
	c.Kinds = make([]string, len(c.Cols))
	c.MaxLen = make([]int, len(c.Cols))
	seen := make([]bool, len(c.Cols)) // a value in the column
	for i := range c.Kinds {
		c.Kinds[i] = "int"
	}
	for _, rec := range recs[1:] {
		row := make([]*string, len(rec))
		for i, v := range rec {
			if v == "" {
				continue
			}
			row[i] = &rec[i]
			seen[i] = true
			c.MaxLen[i] = max(c.MaxLen[i], utf8.RuneCountInString(v))
			if c.Kinds[i] == "int" {
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					c.Kinds[i] = "float"
				}
			}
			if c.Kinds[i] == "float" {
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					c.Kinds[i] = "text"
				}
			}
		}
		c.Rows = append(c.Rows, row)
	}
	for i := range c.Kinds {
		if !seen[i] {
			c.Kinds[i] = "text" // always empty: nothing says it is a number
		}
	}
	return c, nil
}

// decode returns a file's text as UTF-8 without a BOM: a file of legacy in
// its encoding, any other as UTF-8 with each byte that is not part of valid
// UTF-8 read as Windows-1252 (avengers.csv has one, 0xE6 for æ), which is
// what datachat's CSV loader falls back to for text that is not UTF-8.
func decode(file string, b []byte) (text, enc string, err error) {
	if l, ok := legacy[file]; ok {
		out, err := l.enc.NewDecoder().Bytes(b)
		if err != nil {
			return "", "", fmt.Errorf("decode as %s: %w", l.name, err)
		}
		return string(bytes.TrimPrefix(out, []byte("\uFEFF"))), l.name, nil
	}
	enc = "UTF-8"
	if bytes.HasPrefix(b, []byte("\uFEFF")) {
		b, enc = b[3:], "UTF-8 with a BOM"
	}
	if utf8.Valid(b) {
		return string(b), enc, nil
	}
	var sb strings.Builder
	stray := 0
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			r = charmap.Windows1252.DecodeByte(b[0])
			stray++
		}
		sb.WriteRune(r)
		b = b[n:]
	}
	return sb.String(), fmt.Sprintf("%s, %d byte(s) as Windows-1252", enc, stray), nil
}

// ColumnNames returns a header with each empty name replaced as datachat's
// CSV loader (DuckDB's read_csv) names it: column and the 0-based position,
// zero-padded to the width of the last one (column8 and column9 of ten
// columns, column08 of a hundred).
func ColumnNames(header []string) []string {
	out := make([]string, len(header))
	width := len(strconv.Itoa(max(len(header)-1, 0)))
	for i, n := range header {
		if n == "" {
			n = fmt.Sprintf("column%0*d", width, i)
		}
		out[i] = n
	}
	return out
}

// Col returns the position of the column named name, failing tb when there
// is none.
func (c *CSV) Col(tb testing.TB, name string) int {
	tb.Helper()
	for i, n := range c.Cols {
		if n == name {
			return i
		}
	}
	tb.Fatalf("%s has no column %q (columns %q)", c.File, name, c.Cols)
	return -1
}

// LoadPostgres creates the table schema.Name (bigint, double precision and
// text columns, every name quoted by pgx) and copies the rows in.
func (c *CSV) LoadPostgres(ctx context.Context, conn *pgx.Conn, schema string) error {
	defs := make([]string, len(c.Cols))
	for i, col := range c.Cols {
		defs[i] = pgx.Identifier{col}.Sanitize() + " " + map[string]string{"int": "bigint", "float": "double precision", "text": "text"}[c.Kinds[i]]
	}
	table := pgx.Identifier{schema, c.Name}
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", table.Sanitize(), strings.Join(defs, ", "))); err != nil {
		return fmt.Errorf("create %s: %w", c.Name, err)
	}
	rows := make([][]any, len(c.Rows))
	for r, row := range c.Rows {
		vals := make([]any, len(row))
		for i, v := range row {
			if v == nil {
				continue
			}
			switch c.Kinds[i] {
			case "int":
				vals[i], _ = strconv.ParseInt(*v, 10, 64)
			case "float":
				vals[i], _ = strconv.ParseFloat(*v, 64)
			default:
				vals[i] = *v
			}
		}
		rows[r] = vals
	}
	n, err := conn.CopyFrom(ctx, table, c.Cols, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("copy %s: %w", c.Name, err)
	}
	if int(n) != len(c.Rows) {
		return fmt.Errorf("copy %s: %d rows, want %d", c.Name, n, len(c.Rows))
	}
	return nil
}

// mysqlType is column i's type in MySQL: BIGINT, DOUBLE, or for text
// VARCHAR(255), and TEXT where a value fills it (avengers.csv's Notes are cut
// at 255 characters upstream: longer ones may come) or is longer.
func (c *CSV) mysqlType(i int) string {
	switch {
	case c.Kinds[i] == "int":
		return "BIGINT"
	case c.Kinds[i] == "float":
		return "DOUBLE"
	case c.MaxLen[i] >= 255:
		return "TEXT"
	}
	return "VARCHAR(255)"
}

// LoadMySQL creates the table database.Name (columns typed by mysqlType,
// every name quoted by dbsource.QuoteIdent) and inserts the rows in batches,
// the values as placeholders' arguments.
func (c *CSV) LoadMySQL(ctx context.Context, db *sql.DB, database string) error {
	q := func(s string) string { return dbsource.QuoteIdent(dbsource.KindMySQL, s) }
	defs := make([]string, len(c.Cols))
	for i, col := range c.Cols {
		defs[i] = q(col) + " " + c.mysqlType(i)
	}
	table := q(database) + "." + q(c.Name)
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", table, strings.Join(defs, ", "))); err != nil {
		return fmt.Errorf("create %s: %w", c.Name, err)
	}
	names := make([]string, len(c.Cols))
	for i, col := range c.Cols {
		names[i] = q(col)
	}
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?,", len(c.Cols)), ",") + ")"
	batch := max(1, 4000/len(c.Cols)) // rows per INSERT: far below the 65,535 placeholders a statement may have
	for start := 0; start < len(c.Rows); start += batch {
		end := min(start+batch, len(c.Rows))
		tuples := make([]string, 0, end-start)
		args := make([]any, 0, (end-start)*len(c.Cols))
		for _, row := range c.Rows[start:end] {
			tuples = append(tuples, tuple)
			for _, v := range row {
				if v == nil {
					args = append(args, nil)
				} else {
					args = append(args, *v)
				}
			}
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", table, strings.Join(names, ", "), strings.Join(tuples, ","))
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert into %s: %w", c.Name, err)
		}
	}
	return nil
}
