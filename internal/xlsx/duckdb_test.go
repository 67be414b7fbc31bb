package xlsx

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // a scratch DuckDB reads the CSV as the ingest worker will

	"datachat/internal/sharedtest"
)

// readCSV is the read_csv call the ingest worker makes for a sheet written by
// WriteCSV: the dialect fixed, the columns and their types from the Sheet.
func readCSV(path string, s *Sheet, info CSVInfo) string {
	cols := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		cols[i] = quoteLiteral(c.Name) + ": " + quoteLiteral(c.Type)
	}
	return fmt.Sprintf(`read_csv(%s, auto_detect = false, header = true, delim = ',', quote = '"', escape = '"', new_line = '\n', columns = {%s}, max_line_size = %d)`,
		quoteLiteral(path), strings.Join(cols, ", "), max(info.MaxLineSize+1, 2<<20))
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// loadSheets writes every sheet of a workbook as CSV and loads it into a
// scratch DuckDB as a table named after the sheet, checking that DuckDB
// reads back the columns' types and the row counts.
func loadSheets(t *testing.T, wb *Workbook) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	dir := t.TempDir()
	for i, s := range wb.Sheets {
		p := filepath.Join(dir, fmt.Sprintf("sheet%d.csv", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.WriteCSV(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		table := `"` + strings.ReplaceAll(s.Name, `"`, `""`) + `"`
		if _, err := db.Exec("CREATE TABLE " + table + " AS FROM " + readCSV(p, s, info)); err != nil {
			t.Fatalf("sheet %q: %v", s.Name, err)
		}
		rows, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE " + table + ")")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var name, typ string
			rows.Scan(&name, &typ)
			got = append(got, name+":"+typ)
		}
		rows.Close()
		if want := columns(s); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("sheet %q: DuckDB reads columns %q, want %q", s.Name, got, want)
		}
		var n int64
		if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil || n != s.Rows {
			t.Errorf("sheet %q: DuckDB reads %d rows (%v), want %d", s.Name, n, err, s.Rows)
		}
	}
	return db
}

// queryOne runs a query returning one value, as text.
func queryOne(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	var v sql.NullString
	if err := db.QueryRow(q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if !v.Valid {
		return "NULL"
	}
	return v.String
}

// TestDuckDBReadsSharedWorkbooks loads every workbook of ../shared/data/xlsx
// into DuckDB through WriteCSV and read_csv, and asks it what a spreadsheet
// shows.
func TestDuckDBReadsSharedWorkbooks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(sharedtest.Dir(t), "data", "xlsx", "*.xlsx"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workbooks in ../shared/data/xlsx (%v)", err)
	}
	queries := map[string][][2]string{
		"deaths.xlsx": {
			{`SELECT "Date of death" FROM arts WHERE Name = 'David Bowie'`, "2016-01-10T00:00:00Z"},
			{`SELECT avg(Age) FROM other WHERE "Has kids"`, "76.875"},
		},
		"dates-leap-year-1900-xlsx.xlsx": {
			{`SELECT count(*) FROM for_testing WHERE strftime(dttm, '%Y-%m-%d %H:%M:%S') = dttm_string`, "6"},
			{`SELECT dttm_string FROM for_testing WHERE dttm IS NULL`, "1900-02-29 08:00:00"},
		},
		"datasets.xlsx": {
			{`SELECT round(avg(mpg), 4) FROM mtcars`, "20.0906"},
			{`SELECT count(*) FROM quakes WHERE mag >= 5`, "198"},
		},
		"gapminder_life_expectancy_at_birth.xlsx": {
			{`SELECT "2016" FROM Data WHERE "Life expectancy" = 'Japan'`, "83.3"},
		},
		"pivots.xlsx": {
			{`SELECT count(*) FROM DataSheet WHERE "Value / Size" IS NULL`, "1"},
			{`SELECT sum(Size) FILTER (WHERE Category = 'yellow') FROM DataSheet`, "7.29762"},
		},
		"EvaluacionCensal_Secundaria_SEGUNDO_14112018_160622.xlsx": {
			{`SELECT "Medida promedio" FROM NACIONAL WHERE section = 'Lectura' AND Resultados = 'NACIONAL'`, "567"},
		},
		"newresconst.xlsx": {
			{`SELECT "United States Total" FROM "Table 3 - Starts" WHERE section = '2019' AND Period LIKE 'January%' LIMIT 1`, "1298"},
		},
	}
	for _, p := range files {
		name := filepath.Base(p)
		if name == "encryptSHA1.xlsx" {
			continue // refused: TestSharedEncrypted
		}
		t.Run(name, func(t *testing.T) {
			db := loadSheets(t, open(t, p, Limits{}))
			for _, q := range queries[name] {
				if got := queryOne(t, db, q[0]); got != q[1] {
					t.Errorf("%s = %s, want %s", q[0], got, q[1])
				}
			}
		})
	}
}

// TestDuckDBReadsBuiltWorkbook loads the typed cells of a built workbook.
func TestDuckDBReadsBuiltWorkbook(t *testing.T) {
	p := rawWorkbook(t, []rawSheet{{name: "it's", rows: `
<row r="1"><c r="A1" t="inlineStr"><is><t>na"me</t></is></c><c r="B1" t="inlineStr"><is><t>n</t></is></c><c r="C1" t="inlineStr"><is><t>when</t></is></c><c r="D1" t="inlineStr"><is><t>at</t></is></c><c r="E1" t="inlineStr"><is><t>ok</t></is></c><c r="F1" t="inlineStr"><is><t>x</t></is></c></row>
<row r="2"><c r="A2" t="inlineStr"><is><t>a, "b"
c</t></is></c><c r="B2"><v>9007199254740992</v></c><c r="C2" s="1"><v>45000</v></c><c r="D2" s="2"><v>0.5</v></c><c r="E2" t="b"><v>1</v></c><c r="F2"><v>1.5</v></c></row>
<row r="3"><c r="B3"><v>-1</v></c><c r="C3" s="1"><v>60</v></c><c r="D3" s="2"><v>0.999999</v></c><c r="F3" t="e"><v>#N/A</v></c></row>`}},
		nil, []string{"14", "21"}, false)
	db := loadSheets(t, open(t, p, Limits{}))
	for _, c := range []struct{ query, want string }{
		{`SELECT "na""me" FROM "it's" WHERE n = -1 OR n > 0 ORDER BY n DESC LIMIT 1`, "a, \"b\"\nc"},
		{`SELECT max(n) FROM "it's"`, "9007199254740992"},
		{`SELECT count(*) FROM "it's" WHERE "when" IS NULL`, "1"},
		{`SELECT max("at") FROM "it's"`, "0001-01-01T23:59:59.914Z"},
		{`SELECT sum(x) FROM "it's"`, "1.5"},
	} {
		if got := queryOne(t, db, c.query); got != c.want {
			t.Errorf("%s = %q, want %q", c.query, got, c.want)
		}
	}
}
