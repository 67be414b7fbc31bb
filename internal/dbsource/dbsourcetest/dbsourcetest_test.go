package dbsourcetest

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRead reads every CSV of ../shared/data/csv with the shape its README
// gives, as UTF-8.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		file, table, enc string
		rows, cols       int
	}{
		{"avengers", "avengers", "UTF-8, 1 byte(s) as Windows-1252", 173, 21},
		{"cabinet-turnover", "cabinet_turnover", "UTF-8 with a BOM", 379, 10},
		{"diamonds", "diamonds", "UTF-8", 53940, 10},
		{"flights", "flights", "UTF-8", 144, 3},
		{"penguins", "penguins", "UTF-8", 344, 7},
		{"test_mskanji", "test_mskanji", "Shift_JIS (CP932)", 3, 3},
		{"tips", "tips", "UTF-8", 244, 7},
		{"titanic", "titanic", "UTF-8", 891, 15},
	} {
		c := Read(t, tc.file)
		if c.Name != tc.table || c.Encoding != tc.enc || len(c.Rows) != tc.rows || len(c.Cols) != tc.cols {
			t.Errorf("%s: table %s, %s, %d rows x %d columns; want %s, %s, %d x %d", tc.file, c.Name, c.Encoding, len(c.Rows), len(c.Cols), tc.table, tc.enc, tc.rows, tc.cols)
		}
		for _, row := range c.Rows {
			for _, v := range row {
				if v != nil && !utf8.ValidString(*v) {
					t.Errorf("%s: %q is not UTF-8", tc.file, *v)
				}
			}
		}
	}

	cab := Read(t, "cabinet-turnover")
	if want := []string{"president", "position", "appointee", "start_date", "end_date", "length", "departure_day", "gender", "column8", "column9"}; !slices.Equal(cab.Cols, want) {
		t.Errorf("cabinet-turnover columns %q, want %q (no BOM, empty names as DuckDB names them)", cab.Cols, want)
	}
	if cab.Kinds[8] != "text" || cab.Kinds[9] != "text" {
		t.Errorf("cabinet-turnover's empty columns: kinds %q, want text", cab.Kinds[8:])
	}
	kanji := Read(t, "test_mskanji")
	if got := strings.Join(kanji.Cols, ","); got != "名前,年齢,住所" || *kanji.Rows[2][0] != "髙橋淳" || kanji.Kinds[1] != "int" {
		t.Errorf("test_mskanji: columns %s, last name %q, kinds %q", got, *kanji.Rows[2][0], kanji.Kinds)
	}
	av := Read(t, "avengers")
	notes := av.Col(t, "Notes")
	found := 0
	for _, row := range av.Rows {
		if row[notes] != nil && strings.Contains(*row[notes], "theæM'Kraan") {
			found++
		}
	}
	if found != 1 || av.Cols[1] != "Name/Alias" || av.mysqlType(notes) != "TEXT" || av.mysqlType(1) != "VARCHAR(255)" {
		t.Errorf("avengers: æ in %d notes, column %q, MySQL types %s (longest note %d characters) and %s; want 1, Name/Alias, TEXT and VARCHAR(255)",
			found, av.Cols[1], av.mysqlType(notes), av.MaxLen[notes], av.mysqlType(1))
	}
	if d := Read(t, "diamonds"); d.Cols[5] != "table" || d.Kinds[5] != "float" || d.Kinds[d.Col(t, "price")] != "int" {
		t.Errorf("diamonds: column %q of kind %s", d.Cols[5], d.Kinds[5])
	}
}

func TestColumnNames(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"a", "", ""}, []string{"a", "column1", "column2"}},
		{make([]string, 11), []string{"column00", "column01", "column02", "column03", "column04", "column05", "column06", "column07", "column08", "column09", "column10"}},
		{[]string{""}, []string{"column0"}},
	} {
		if got := ColumnNames(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("ColumnNames(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
