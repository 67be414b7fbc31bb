package duckdb

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat"
)

// spoolJob writes rows to a spool in a new job directory and returns the
// job.
func spoolJob(t *testing.T, cols []datachat.Column, rows [][]any, maxBytes int64) (SaveJob, error) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "dc-spool"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sp := NewSpool(f, maxBytes)
	if err := sp.Columns(cols); err != nil {
		return SaveJob{}, err
	}
	for _, r := range rows {
		if err := sp.Row(r); err != nil {
			return SaveJob{}, err
		}
	}
	if err := sp.Flush(); err != nil {
		t.Fatal(err)
	}
	return SaveJob{Dir: dir, Spool: "dc-spool", Name: "saved", Columns: sp.SaveColumns()}, nil
}

// readBack reads a stored Parquet file with a scratch DuckDB: its columns'
// names and types, and its rows as text.
func readBack(t *testing.T, path string) (names, types []string, rows [][]string) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(" + datachat.QuoteLiteral(path) + "))")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var n, ty string
		rs.Scan(&n, &ty)
		names, types = append(names, n), append(types, ty)
	}
	rs.Close()
	exprs := make([]string, len(names))
	for i, n := range names {
		exprs[i] = "coalesce(" + datachat.QuoteIdent(n) + "::VARCHAR, 'NULL')"
	}
	rs, err = db.Query("SELECT " + strings.Join(exprs, ", ") + " FROM read_parquet(" + datachat.QuoteLiteral(path) + ")")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		vals := make([]string, len(names))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, vals)
	}
	return names, types, rows
}

// TestSaveTypedRows: rows as a database source's results come (integers
// beyond ±2^53 as text, decimals as text, dates and timestamps as ISO
// text, blobs in base64, lists) are stored with the type each column's
// values hold, every value the same back; hostile column names (quotes,
// SQL, a NUL, names equal but for case, none) become columns of those
// names, and hostile values stay values.
func TestSaveTypedRows(t *testing.T) {
	e := mustEngine(t, Options{})
	cols := []datachat.Column{
		{Name: "id", Type: datachat.TypeInteger},
		{Name: "big", Type: datachat.TypeInteger},
		{Name: "amount", Type: datachat.TypeDecimal},
		{Name: "ratio", Type: datachat.TypeFloat},
		{Name: "day", Type: datachat.TypeDate},
		{Name: "at", Type: datachat.TypeTimestamp},
		{Name: "at_utc", Type: datachat.TypeTimestamp},
		{Name: "ok", Type: datachat.TypeBoolean},
		{Name: "blob", Type: datachat.TypeBlob},
		{Name: "tags", Type: datachat.TypeList},
		{Name: `x"); DROP TABLE dc_saved; --`, Type: datachat.TypeText},
		{Name: "Name", Type: datachat.TypeText},
		{Name: "name", Type: datachat.TypeText},
		{Name: "", Type: datachat.TypeText},
		{Name: "nul\x00name\n", Type: datachat.TypeText},
		{Name: "when", Type: datachat.TypeTime},
		{Name: "mixed", Type: datachat.TypeDate}, // one value is not a date: kept as text
	}
	rows := [][]any{
		{int64(1), "9007199254740993", "12345.678", json.Number("0.5"), "2024-02-29", "2024-02-29T13:14:15.123456", "2024-02-29T13:14:15Z",
			true, "AAEC/w==", []any{"a", json.Number("2")}, "'); DROP TABLE dc_saved; --", "Ada", "ada", "", "x", "13:14:15.5", "2024-01-01"},
		{int64(-2), "-9007199254740993", "-0.001", "NaN", "1969-12-31", "1900-01-01T00:00:00", "1999-12-31T23:59:59.999999Z",
			false, "", []any{}, "line\nbreak \"quoted\" \\ back", nil, nil, nil, nil, "00:00:00", "infinity"},
		{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
	job, err := spoolJob(t, cols, rows, 0)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := e.Save(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	if tb.RowCount != 3 {
		t.Errorf("row count %d, want 3", tb.RowCount)
	}
	names, types, got := readBack(t, filepath.Join(job.Dir, tb.Output))
	wantNames := []string{"id", "big", "amount", "ratio", "day", "at", "at_utc", "ok", "blob", "tags",
		`x"); DROP TABLE dc_saved; --`, "Name", "name_2", "column_14", "nulname", "when", "mixed"}
	wantTypes := []string{"BIGINT", "BIGINT", "DECIMAL(8,3)", "DOUBLE", "DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE",
		"BOOLEAN", "BLOB", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "TIME", "VARCHAR"}
	if strings.Join(names, "|") != strings.Join(wantNames, "|") {
		t.Errorf("names\n%q\nwant\n%q", names, wantNames)
	}
	if strings.Join(types, "|") != strings.Join(wantTypes, "|") {
		t.Errorf("types\n%q\nwant\n%q", types, wantTypes)
	}
	if len(got) != 3 {
		t.Fatalf("%d rows back, want 3", len(got))
	}
	want := [][]string{
		{"1", "9007199254740993", "12345.678", "0.5", "2024-02-29", "2024-02-29 13:14:15.123456", "2024-02-29 13:14:15+00", "true",
			`\x00\x01\x02\xFF`, `["a",2]`, "'); DROP TABLE dc_saved; --", "Ada", "ada", "", "x", "13:14:15.5", "2024-01-01"},
		{"-2", "-9007199254740993", "-0.001", "nan", "1969-12-31", "1900-01-01 00:00:00", "1999-12-31 23:59:59.999999+00", "false",
			"", "[]", "line\nbreak \"quoted\" \\ back", "NULL", "NULL", "NULL", "NULL", "00:00:00", "infinity"},
	}
	for i, w := range want {
		if strings.Join(got[i], "|") != strings.Join(w, "|") {
			t.Errorf("row %d\n%q\nwant\n%q", i+1, got[i], w)
		}
	}
	for _, c := range got[2] {
		if c != "NULL" {
			t.Errorf("row 3 %q, want every value NULL", got[2])
			break
		}
	}
	if _, err := os.Stat(filepath.Join(job.Dir, job.Spool)); !os.IsNotExist(err) {
		t.Errorf("the spool is still there (%v): its space is the Parquet file's", err)
	}
}

// TestSaveTypeFallbacks: a column whose values do not all fit its type is
// kept as text, or in a wider type: integers beyond int64, decimals wider
// than DECIMAL(38) (Parquet has no 128-bit integer), a float that is not
// one.
func TestSaveTypeFallbacks(t *testing.T) {
	cols := []datachat.Column{
		{Name: "u", Type: datachat.TypeInteger},
		{Name: "h", Type: datachat.TypeInteger},
		{Name: "h2", Type: datachat.TypeInteger},
		{Name: "wide", Type: datachat.TypeDecimal},
		{Name: "ts", Type: datachat.TypeTimestamp},
		{Name: "f", Type: datachat.TypeFloat},
	}
	rows := [][]any{
		{"18446744073709551615", "-123456789012345678901234567890", "-170141183460469231731687303715884105727", "1" + strings.Repeat("0", 40) + ".5", "2024-01-01T00:00:00", "oops"},
	}
	job, err := spoolJob(t, cols, rows, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, c := range job.Columns {
		types = append(types, c.Type)
	}
	if want := "UBIGINT DECIMAL(30,0) VARCHAR DOUBLE TIMESTAMP VARCHAR"; strings.Join(types, " ") != want {
		t.Errorf("types %q, want %q", types, want)
	}
	e := mustEngine(t, Options{})
	tb, err := e.Save(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	_, _, got := readBack(t, filepath.Join(job.Dir, tb.Output))
	if len(got) != 1 || got[0][0] != "18446744073709551615" || got[0][1] != "-123456789012345678901234567890" || got[0][2] != "-170141183460469231731687303715884105727" || got[0][5] != "oops" {
		t.Errorf("rows %q", got)
	}
}

// TestSpoolCap: a spool past its byte cap stops with a message naming the
// limit and what to do.
func TestSpoolCap(t *testing.T) {
	cols := []datachat.Column{{Name: "s", Type: datachat.TypeText}}
	var rows [][]any
	for range 100 {
		rows = append(rows, []any{strings.Repeat("x", 100)})
	}
	_, err := spoolJob(t, cols, rows, 5000)
	if err == nil || datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(err.Error(), "DATACHAT_MAX_DATASET_BYTES") {
		t.Fatalf("err %v, want EINVALID naming DATACHAT_MAX_DATASET_BYTES", err)
	}
}

// TestSaveRefusesWhatNoSpoolWrites: a job whose types or names a spool never
// makes (a type that is SQL, a NUL in a name, names equal but for case) is
// refused by the worker, whatever sent it.
func TestSaveRefusesWhatNoSpoolWrites(t *testing.T) {
	e := mustEngine(t, Options{})
	for _, cols := range [][]SaveColumn{
		{{Name: "a", Type: "INTEGER); COPY (SELECT 1) TO '/tmp/x' --"}},
		{{Name: "a\x00b", Type: "VARCHAR"}},
		{{Name: "a", Type: "VARCHAR"}, {Name: "A", Type: "VARCHAR"}},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "dc-spool"), nil, 0o600)
		_, err := e.Save(t.Context(), SaveJob{Dir: dir, Spool: "dc-spool", Name: "saved", Columns: cols})
		if err == nil {
			t.Errorf("columns %q: saved, want refused", cols)
		}
	}
}
