// Package xlsx reads Excel workbooks (.xlsx) as tables: one table per sheet
// that holds data, with typed columns, stored by the caller like a CSV upload.
//
// [Open] checks the file and reads every sheet once, in a bounded amount of
// memory: each sheet's cells are spooled to a temporary file while a few
// rows at its top and bottom are kept for finding the table, and
// [Sheet.WriteCSV] then writes the table as a clean CSV (ISO dates, plain
// numbers) whose column types are in [Sheet.Columns]. The ingest worker turns
// that CSV into Parquet with read_csv and those types.
//
// # The workbook
//
// github.com/xuri/excelize/v2 opens the package (with its unzip limits) and
// gives the sheets, their visibility, the date system and every cell
// style's number format. Cells are read by this package's own streaming
// reader of each sheet's XML part: excelize's Rows iterator returns each
// cell as a string, formatted or raw, without its type or style, so it
// cannot tell a date from a number, a boolean from the text TRUE, or an
// error from text; and it is slow (about 100 s for a million rows of ten
// cells here, encoding/xml's tokenizer alone 37 s).
//
// Refused, with a message naming the file: old binary .xls workbooks and
// other OLE2 files, password-protected (encrypted) workbooks, .xlsb and
// OpenDocument spreadsheets, files that are not zip packages or whose
// workbook parts are damaged, packages that expand beyond
// [Limits.MaxUnzipBytes], and workbooks with no sheet holding data. Errors
// are *datachat.Error with code EINVALID whose cause is one of [ErrXLS],
// [ErrEncrypted], [ErrDamaged], [ErrTooLarge] or [ErrNoData].
//
// Sheets: worksheets are read, visible and hidden ones alike (a hidden sheet
// is often the data behind a dashboard; its Notes say it was hidden);
// "very hidden" sheets (macro machinery, never shown in Excel),
// chart sheets, dialog and macro sheets are skipped. A sheet without a
// single value is skipped.
//
// # Finding the table on a sheet
//
// Rows and columns with no values are ignored: padding around the table, a
// thousand empty formatted rows below it. A cell holding only spaces (or an
// empty string) counts as empty. Then:
//
//   - The table's width W is the number of columns holding values in at least
//     two rows (a title alone in a column does not widen the table).
//   - The header is one of the first 64 non-empty rows: one with values in at
//     least half of the W columns (and at least two), at least one of them
//     text. Each such row is scored by the ten non-empty rows below it: the
//     text cells they hold in numeric, date or boolean columns (a column is
//     one when 60 % of its values over the whole sheet are), not counting
//     rows made only of texts of the candidate and the rows just above it
//     (a repeated header). The first candidate stands unless a later one
//     scores clearly better (by one if all its values are text, as a
//     header's are, else by two, or by a fifth). So a title block or notes
//     above the header are skipped even when a line of them is wide, and a
//     header of numbers (years 1800…2016 over a column of country names)
//     is still a header.
//   - Rows directly above the header row join it when they hold at least two
//     values and every one of them is a merged cell spanning several columns
//     or reaching down into the row below ("United States" over "Total",
//     "1 unit"…); a lone merged cell over the table is its title. A column's
//     name is its header texts from top to bottom joined with a space
//     ("Total Units"); a cell merged across columns gives its text to each
//     column it covers. Whitespace runs in names become one space; an empty
//     name becomes column1, column2… (by position); a repeated name gets _2,
//     _3… (ignoring case, as DuckDB compares names; a name from the header
//     keeps it over a made-up one).
//   - Rows above the header are a title or notes: skipped, and said so.
//   - Notes below the table are the longest run of trailing rows that are
//     all sparse (values in at most a third of the columns) and all text, if
//     one of them is clearly a note: text in a numeric, date or boolean
//     column, a value outside the first column alone on its row, a text longer
//     than 50 characters, or a blank row between it and the rows above. For
//     tables of one or two columns only such rows after a blank row count.
//     The run never takes the whole body.
//   - Inside the table: blank rows are dropped; a row made of the header's
//     texts, each in its own column (at least two), repeats the header and is
//     dropped; a row with a single value in the first column that follows a
//     blank row and is followed by a row of data (or a repeated header) is a
//     section label ("2018", "Table 1b — Not seasonally adjusted"): not a row
//     of the table but the value of a first column "section" for the rows
//     under it, until the next label. A label alone in the first column
//     just above the header names the first section. A label-only row with
//     no blank row before it is data (a country with no values yet), kept
//     with NULLs. The column exists only when the sheet has section labels.
//   - Columns with no values below the header are dropped, unless they have
//     a header of their own that is not a merged cell whose values sit in
//     another of its columns.
//
// # Values and types
//
// Formulas are never evaluated: the value Excel cached when it last saved the
// file is read. A cached error (#DIV/0!, #N/A, #NAME?, #REF!…) is NULL, and
// so is text equal to an error's name; a sheet's Notes count them.
// Text is trimmed of surrounding whitespace. A column's type comes from all
// of its values below the header:
//
//   - BOOLEAN: only booleans.
//   - DATE, TIMESTAMP, TIME: only numbers with a date or time number format
//     (built-in formats 14–22, 27–36, 45–47, 50–58, and custom formats with
//     d, m, y, h or s outside quotes and brackets), cells stored as ISO dates,
//     and text in ISO form (2024-01-31, 2024-01-31 08:00:00). TIMESTAMP when
//     any value has a time of day, TIME when every format is time-only and
//     every value is under a day, DATE otherwise. Serial numbers follow the
//     workbook's date system: in the 1900 system serial 60 is 29 February
//     1900, a day that never was (Excel shows it, following Lotus 1-2-3):
//     it is NULL, and serials below it are one day later than a plain count
//     from 1899-12-30 would give, as Excel shows them. Times are rounded to
//     the millisecond. Elapsed-time formats ([h]:mm) are numbers (days).
//   - BIGINT or DOUBLE: numbers, and text that reads as a number: an optional
//     sign, digits with optional thousands commas in groups of three, a
//     decimal point, an exponent, and an optional trailing % (the number is
//     then divided by 100, as Excel's VALUE does: "12.5%" is 0.125, the way
//     a number formatted as a percent is stored). Text with a leading zero
//     (a code such as 007) or more than 15 significant digits (an
//     identifier) is not read as a number. BIGINT when every value is a
//     whole number within ±2^53, DOUBLE otherwise.
//   - VARCHAR: anything else, including any mix of the above; numbers then
//     read as their shortest decimal form, dates in ISO form and booleans
//     as TRUE and FALSE.
package xlsx

import (
	"errors"
	"fmt"
	"io"
	"os"

	"datachat"
)

// DuckDB types of a [Column].
const (
	TypeBigint    = "BIGINT"
	TypeDouble    = "DOUBLE"
	TypeVarchar   = "VARCHAR"
	TypeBoolean   = "BOOLEAN"
	TypeDate      = "DATE"
	TypeTimestamp = "TIMESTAMP"
	TypeTime      = "TIME"
)

// The causes of the errors [Open] returns, for errors.Is; the error itself
// is a *datachat.Error (EINVALID) whose Message is for the user.
var (
	ErrXLS       = errors.New("xlsx: binary Excel 97-2003 workbook")
	ErrEncrypted = errors.New("xlsx: encrypted workbook")
	ErrDamaged   = errors.New("xlsx: not a readable workbook")
	ErrTooLarge  = errors.New("xlsx: workbook over a limit")
	ErrNoData    = errors.New("xlsx: no sheet with data")
)

// Limits bound what one workbook may make [Open] do. Zero fields take the
// defaults of [DefaultLimits].
type Limits struct {
	MaxSheets        int    // sheets with data read; more is an error
	MaxColumns       int    // columns of one table; more is an error
	MaxRows          int    // rows with values on one sheet (Excel's own limit is 1,048,576); more is an error
	MaxCellBytes     int    // the longest text of one cell (Excel's own limit is 32,767 characters)
	MaxUnzipBytes    int64  // the package's total size unzipped, as its directory declares it
	MaxOtherBytes    int64  // parts other than sheets and shared strings (held in memory by excelize): styles, pictures…
	MaxSharedStrings int64  // bytes of the shared-string table, held in memory
	TempDir          string // where sheets are spooled; os.TempDir() when empty
}

// DefaultLimits returns the limits used for zero fields of a [Limits].
func DefaultLimits() Limits {
	return Limits{
		MaxSheets:        100,
		MaxColumns:       1000,
		MaxRows:          1 << 20,
		MaxCellBytes:     128 << 10,
		MaxUnzipBytes:    4 << 30,
		MaxOtherBytes:    256 << 20,
		MaxSharedStrings: 256 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.MaxSheets, d.MaxSheets)
	orDefault(&l.MaxColumns, d.MaxColumns)
	orDefault(&l.MaxRows, d.MaxRows)
	orDefault(&l.MaxCellBytes, d.MaxCellBytes)
	orDefault(&l.MaxUnzipBytes, d.MaxUnzipBytes)
	orDefault(&l.MaxOtherBytes, d.MaxOtherBytes)
	orDefault(&l.MaxSharedStrings, d.MaxSharedStrings)
	return l
}

// orDefault sets a limit that is zero or negative to its default.
func orDefault[T int | int64](limit *T, def T) {
	if *limit <= 0 {
		*limit = def
	}
}

// Workbook is an opened workbook's tables. Close removes its spooled sheets.
type Workbook struct {
	Sheets []*Sheet
	// Skipped says which sheets hold no table and why, for the user.
	Skipped []string
	dir     string
}

// Close removes the workbook's temporary files.
func (w *Workbook) Close() error {
	if w == nil || w.dir == "" {
		return nil
	}
	err := os.RemoveAll(w.dir)
	w.dir = ""
	return err
}

// Sheet is the table found on one sheet.
type Sheet struct {
	Name    string // the sheet's name in the workbook; its table is datachat.TableName(file+"_"+Name)
	Hidden  bool
	Columns []Column
	Rows    int64    // rows of the table
	Notes   []string // what was skipped or changed, for the user

	spool   string // the spooled cells
	layout  *layout
	dates   dateSystem
	keep    []int    // per column: its index among the layout's candidate columns; -1 for the section column
	types   []string // per column
	percent []bool   // per column
}

// Column is one column of a [Sheet]'s table.
type Column struct {
	Name string
	Type string // a DuckDB type: BIGINT, DOUBLE, VARCHAR, BOOLEAN, DATE, TIMESTAMP or TIME
	// Percent says that the column's numbers were shown as percentages
	// (a percent format, or text such as "12.5 %") and are fractions: 0.125
	// is 12.5 %.
	Percent bool
}

// Each calls fn with every row of the table, in order: one value per column,
// typed by the column's Type as int64, float64, string, bool or time.Time
// (DATE, TIMESTAMP and TIME alike; a TIME on 0000-01-01), or nil. fn must not
// keep row.
func (s *Sheet) Each(fn func(row []any) error) error {
	row := make([]any, len(s.Columns))
	return s.emit(func(vals []value) error {
		for i, v := range vals {
			row[i] = v.goValue()
		}
		return fn(row)
	})
}

// CSVInfo describes a CSV written by [Sheet.WriteCSV].
type CSVInfo struct {
	Rows        int64 // data rows, after the header line
	MaxLineSize int   // the longest line in bytes, for read_csv's max_line_size
}

// WriteCSV writes the table as CSV: a header line of the column names, then
// one line per row. Fields are quoted only when they must be ('"' quotes,
// '"' escapes, ',' delimits, lines end in \n); an empty field is NULL and no
// value is an empty string. Values are written for the column's Type:
// BIGINT and DOUBLE as plain decimal numbers (1e+21 for large ones), BOOLEAN
// as true or false, DATE as 2006-01-02, TIMESTAMP as 2006-01-02 15:04:05 or
// 2006-01-02 15:04:05.000, TIME as 15:04:05 or 15:04:05.000 — the forms
// DuckDB reads without a date or timestamp format.
func (s *Sheet) WriteCSV(w io.Writer) (CSVInfo, error) {
	return s.writeCSV(w)
}

// userError is the error shown to the user, with its cause.
func userError(cause error, format string, args ...any) error {
	return &datachat.Error{Code: datachat.EINVALID, Message: fmt.Sprintf(format, args...), Err: cause}
}

// goValue is a value as the Go type [Sheet.Each] gives.
func (v value) goValue() any {
	switch v.kind {
	case vNull:
		return nil
	case vInt:
		return v.i
	case vFloat:
		return v.f
	case vBool:
		return v.b
	case vTime:
		return v.t
	case vText:
		return v.s
	}
	return nil
}
