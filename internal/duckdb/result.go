package duckdb

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"strings"

	"github.com/mattn/go-runewidth"

	"datachat/internal/duckdb/wire"
)

// Result is the shape of a query result (datachat.QueryResult), shared by
// POST …/sql, `sql --format json` and tool_call_result. Rows hold JSON-ready
// values: nil, bool, int64, json.Number, string, []any and [Object].
type Result = wire.Result

// Object is a JSON object that keeps its keys in order: a STRUCT's fields, a
// MAP's entries (keys written as text), a UNION's active member.
type Object = wire.Object

// Field is one key of an [Object].
type Field = wire.Field

// truncationNote says why a result stopped short.
func truncationNote(r *Result) string {
	return fmt.Sprintf("(truncated: only the first %d rows are shown; more rows exist, or a value was cut short. Aggregate, filter or add LIMIT to see the rest.)", r.RowCount)
}

// WriteTable writes the result as a text table: a header, a dashed rule and
// space-padded columns, NULL for nulls (the `sql --format table` output).
func WriteTable(w io.Writer, r *Result) error {
	n := len(r.Columns)
	grid := make([][]string, 0, len(r.Rows)+1)
	head := make([]string, n)
	for i, c := range r.Columns {
		head[i] = c.Name
	}
	grid = append(grid, head)
	for _, row := range r.Rows {
		line := make([]string, n)
		for i, v := range row {
			if v == nil {
				line[i] = "NULL"
				continue
			}
			s := strings.ReplaceAll(wire.CellText(v), "\r", `\r`)
			line[i] = strings.ReplaceAll(s, "\n", `\n`)
		}
		grid = append(grid, line)
	}
	width := make([]int, n)
	for _, line := range grid {
		for i, s := range line {
			width[i] = max(width[i], runewidth.StringWidth(s))
		}
	}
	var b bytes.Buffer
	writeLine := func(line []string) {
		for i, s := range line {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(s)
			if i < n-1 {
				b.WriteString(strings.Repeat(" ", width[i]-runewidth.StringWidth(s)))
			}
		}
		b.WriteByte('\n')
	}
	writeLine(grid[0])
	rule := make([]string, n)
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	writeLine(rule)
	for _, line := range grid[1:] {
		writeLine(line)
	}
	if r.Truncated {
		b.WriteString(truncationNote(r))
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteCSV writes the result as CSV: a header row, then the rows, with empty
// fields for nulls and lists/objects as JSON (the `sql --format csv` output).
func WriteCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	rec := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		rec[i] = c.Name
	}
	if err := cw.Write(rec); err != nil {
		return err
	}
	for _, row := range r.Rows {
		for i, v := range row {
			rec[i] = wire.CellText(v)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
