package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"datachat/internal/duckdb"
	"datachat/internal/sharedtest"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // a scratch DuckDB reads stored files back

	"github.com/klauspost/compress/zstd"
	"golang.org/x/text/encoding/charmap"
	xunicode "golang.org/x/text/encoding/unicode"

	"datachat"
)

func TestTableName(t *testing.T) {
	for _, c := range []struct {
		in    string
		taken []string
		want  string
	}{
		{"alltypes_plain.snappy.parquet", nil, "alltypes_plain_snappy"},
		{"StarWars.csv", nil, "starwars"},
		{"data.csv.gz", nil, "data"},
		{"data.tsv.zst", nil, "data"},
		{"Sales 2024 (final).CSV", nil, "sales_2024_final"},
		{"2024-sales.parquet", nil, "t_2024_sales"},
		{"--.csv", nil, "dataset"},
		{".csv", nil, "dataset"},
		{"", nil, "dataset"},
		{"select.csv", nil, "select_data"},
		{"Table.parquet", nil, "table_data"},
		{"join.csv", nil, "join_data"},
		{"tips.csv", []string{"tips"}, "tips_2"},
		{"tips.csv", []string{"TIPS", "tips_2"}, "tips_3"},
		{"https://example.com/files/Penguins.csv?raw=1", nil, "penguins"},
		{"/tmp/up/cabinet-turnover.csv", nil, "cabinet_turnover"},
		{"données_été.csv", nil, "donn_es__t"},
		{"名前.csv", nil, "dataset"},
		{"archive.zip", nil, "archive_zip"},
		{strings.Repeat("long name ", 2000) + ".csv", nil, strings.TrimRight(strings.Repeat("long_name_", 6), "_")},
		{strings.Repeat("x", 59) + "__y.csv", nil, strings.Repeat("x", 59)},
		{strings.Repeat("9", 100) + ".csv", nil, "t_" + strings.Repeat("9", 60)},
	} {
		if got := datachat.TableName(c.in, c.taken); got != c.want {
			t.Errorf("datachat.TableName(%q, %q) = %q, want %q", c.in, c.taken, got, c.want)
		}
	}
}

// TestReservedWords regenerates the reserved word list from DuckDB: every
// keyword that cannot be an unquoted table name.
func TestReservedWords(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.Query("SELECT keyword_name, keyword_category FROM duckdb_keywords()")
	if err != nil {
		t.Fatal(err)
	}
	type kw struct{ name, cat string }
	var kws []kw
	for rows.Next() {
		var k kw
		if err := rows.Scan(&k.name, &k.cat); err != nil {
			t.Fatal(err)
		}
		kws = append(kws, k)
	}
	rows.Close()
	var got []string
	for _, k := range kws {
		bad := k.cat == "reserved"
		if _, err := db.Exec("CREATE VIEW " + k.name + " AS SELECT 1 AS x"); err != nil {
			bad = true
		} else {
			if _, err := db.Exec("SELECT " + k.name + ".x FROM " + k.name + " JOIN " + k.name + " AS b USING (x) WHERE x = 1"); err != nil {
				bad = true
			}
			db.Exec("DROP VIEW " + k.name)
		}
		if bad {
			got = append(got, k.name)
		}
	}
	var want []string
	want = append(want, datachat.ReservedWords()...)
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("reserved words differ from DuckDB's:\nDuckDB: %s\nours:   %s", strings.Join(got, " "), strings.Join(want, " "))
	}
}

// ingestBytes ingests b as an upload named name, which must give one table.
func ingestBytes(t *testing.T, l *Loader, name string, b []byte) (*Stored, error) {
	t.Helper()
	sts, err := l.Ingest(context.Background(), bytes.NewReader(b), name)
	if err != nil {
		return nil, err
	}
	if len(sts) != 1 {
		t.Fatalf("%s gave %d tables, want 1", name, len(sts))
	}
	return sts[0], nil
}

// mustIngestShared ingests the shared data file rel (as ingestBytes, under
// its base name), which must load.
func mustIngestShared(t *testing.T, l *Loader, rel string) *Stored {
	t.Helper()
	b, err := readShared(t, rel)
	if err != nil {
		t.Fatal(err)
	}
	st, err := ingestBytes(t, l, path.Base(rel), b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// query reads back a stored dataset with a scratch DuckDB.
func query(t *testing.T, l *Loader, st *Stored, q string) [][]any {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := filepath.Join(l.Dir(), st.Path)
	q = strings.ReplaceAll(q, "{t}", "read_parquet("+datachat.QuoteLiteral(p)+")")
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	return out
}

func columnNames(st *Stored) string {
	var names []string
	for _, c := range st.Columns {
		names = append(names, c.Name+":"+c.Type)
	}
	return strings.Join(names, ",")
}

// TestSharedFiles loads every real file of ../shared/data/{csv,parquet,json}:
// each loads with its tables, schema and row counts, or fails with a clear
// error naming it.
func TestSharedFiles(t *testing.T) {
	root := sharedtest.Path(t, "data")
	l := mustLoader(t, Options{})
	type table struct {
		name string
		rows int64
		cols int
	}
	want := map[string]struct {
		rows   int64
		cols   int
		enc    string
		err    string  // substring of the error, for files that must fail
		tables []table // for a file that gives several tables
		note   string  // substring of a note of the (one) table
	}{
		"csv/tips.csv":                                 {rows: 244, cols: 7},
		"csv/titanic.csv":                              {rows: 891, cols: 15},
		"csv/penguins.csv":                             {rows: 344, cols: 7},
		"csv/flights.csv":                              {rows: 144, cols: 3},
		"csv/diamonds.csv":                             {rows: 53940, cols: 10},
		"csv/avengers.csv":                             {rows: 173, cols: 21, enc: "Windows-1252"},
		"csv/cabinet-turnover.csv":                     {rows: 379, cols: 10},
		"csv/test_mskanji.csv":                         {rows: 3, cols: 3, enc: "Shift_JIS (CP932)"},
		"parquet/alltypes_plain.parquet":               {rows: 8, cols: 11},
		"parquet/alltypes_dictionary.parquet":          {rows: 2, cols: 11},
		"parquet/alltypes_plain.snappy.parquet":        {rows: 2, cols: 11},
		"parquet/nested_structs.rust.parquet":          {rows: 1},
		"parquet/nested_maps.snappy.parquet":           {rows: 6, cols: 3},
		"parquet/nested_lists.snappy.parquet":          {rows: 3, cols: 2},
		"parquet/nulls.snappy.parquet":                 {rows: 8, cols: 1},
		"parquet/int96_from_spark.parquet":             {rows: 6, cols: 1, note: `1 value of the INT96 timestamp column "a" lay outside the range DuckDB converts`},
		"parquet/fixed_length_decimal.parquet":         {rows: 24, cols: 1},
		"parquet/byte_array_decimal.parquet":           {rows: 24, cols: 1},
		"parquet/binary.parquet":                       {rows: 12, cols: 1},
		"parquet/byte_stream_split.zstd.parquet":       {rows: 300, cols: 2},
		"parquet/concatenated_gzip_members.parquet":    {rows: 513, cols: 1},
		"parquet/delta_length_byte_array.parquet":      {rows: 1000, cols: 1},
		"parquet/datapage_v2.snappy.parquet":           {rows: 5, cols: 5},
		"parquet/large_string_map.brotli.parquet":      {rows: 2, cols: 1},
		"parquet/userdata1.parquet":                    {rows: 1000, cols: 13},
		"parquet/hadoop_lz4_compressed.parquet":        {err: `Unsupported compression codec "LZ4"`},
		"parquet/PARQUET-1481.parquet":                 {err: "not a readable Parquet file"},
		"parquet/datapage_v1-corrupt-checksum.parquet": {err: "fails its checksum"},
		"json/penguins.json":                           {rows: 344, cols: 7},
		"json/gharchive_log.jsonl":                     {rows: 50, cols: 8},
		// One object: a table for each of its arrays of records.
		"json/miserables.json": {tables: []table{{"miserables_nodes", 77, 3}, {"miserables_links", 254, 3}}},
		"json/twitter.json":    {tables: []table{{"twitter_statuses", 100, 0}}},
		// Excel: a table per sheet with data.
		"xlsx/datasets.xlsx":                  {tables: []table{{"datasets_mtcars", 32, 11}, {"datasets_chickwts", 71, 2}, {"datasets_quakes", 1000, 5}}},
		"xlsx/deaths.xlsx":                    {tables: []table{{"deaths_arts", 10, 6}, {"deaths_other", 10, 6}}},
		"xlsx/encryptSHA1.xlsx":               {err: "password"},
		"xlsx/dates-leap-year-1900-xlsx.xlsx": {tables: []table{{"dates_leap_year_1900_xlsx_for_testing", 7, 3}, {"dates_leap_year_1900_xlsx_for_human_eyes", 10, 3}}},
		"xlsx/pivots.xlsx":                    {tables: []table{{"pivots_pivotsheet1", 2, 6}, {"pivots_pivotsheet2", 7, 4}, {"pivots_pivotsheet3", 4, 3}, {"pivots_pivotsheet4", 6, 2}, {"pivots_datasheet", 10, 0}, {"pivots_datasheet2", 10, 0}}},
		"xlsx/EvaluacionCensal_Secundaria_SEGUNDO_14112018_160622.xlsx": {tables: []table{
			{"evaluacioncensal_secundaria_segundo_14112018_160622_nacional", 741, 9},
			{"evaluacioncensal_secundaria_segundo_14112018_160622_cobertur", 248, 9}}},
		"xlsx/enron-nested.xlsx": {tables: []table{{"enron_nested_preschedule", 167, 27}, {"enron_nested_deals", 92, 73},
			{"enron_nested_fuel", 17, 9}, {"enron_nested_comp", 5, 24}, {"enron_nested_economics", 43, 9},
			{"enron_nested_spin_reserve_log_sheet", 26, 4}, {"enron_nested_balancing", 27, 17}, {"enron_nested_unit_summary", 19, 7},
			{"enron_nested_heatrate", 215, 13}, {"enron_nested_top", 1, 2}, {"enron_nested_epedata", 59, 1}}},
		"xlsx/gapminder_life_expectancy_at_birth.xlsx": {tables: []table{{"gapminder_life_expectancy_at_birth_data", 260, 218},
			{"gapminder_life_expectancy_at_birth_about", 30, 3}, {"gapminder_life_expectancy_at_birth_footnotes", 1, 3},
			{"gapminder_life_expectancy_at_birth_settings", 2, 3}, {"gapminder_life_expectancy_at_birth_download", 4, 3},
			{"gapminder_life_expectancy_at_birth_v", 0, 2}}},
		"xlsx/newresconst.xlsx": {tables: []table{{"newresconst_table_1_permits", 40, 14}, {"newresconst_table_2_auth_not_started", 40, 14},
			{"newresconst_table_3_starts", 40, 14}, {"newresconst_table_4_under_construction", 40, 14}, {"newresconst_table_5_completions", 40, 14}}},
	}
	seen := 0
	for _, sub := range []string{"csv", "parquet", "json", "xlsx"} {
		files, err := os.ReadDir(filepath.Join(root, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".md") {
				continue
			}
			key := sub + "/" + f.Name()
			t.Run(key, func(t *testing.T) {
				w, ok := want[key]
				if !ok {
					t.Logf("no expectation for %s: it must load or fail clearly", key)
				}
				seen++
				fh, err := os.Open(filepath.Join(root, key))
				if err != nil {
					t.Fatal(err)
				}
				defer fh.Close()
				sts, err := l.Ingest(context.Background(), fh, f.Name())
				if w.err != "" || (!ok && err != nil) {
					if err == nil {
						t.Fatalf("loaded %d tables, want an error containing %q", len(sts), w.err)
					}
					msg := datachat.ErrorMessage(err)
					if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(msg, w.err) || !strings.Contains(msg, f.Name()) {
						t.Errorf("got %v, want EINVALID naming the file and containing %q", err, w.err)
					}
					if strings.Contains(msg, l.tmpDir) {
						t.Errorf("the message shows a temp path: %s", msg)
					}
					t.Logf("%s", msg)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					for _, st := range sts {
						t.Logf("loaded %s: %d rows, %d columns", st.Name, st.RowCount, len(st.Columns))
					}
					return
				}
				if w.tables != nil {
					if len(sts) != len(w.tables) {
						t.Fatalf("got %d tables, want %d", len(sts), len(w.tables))
					}
					for i, wt := range w.tables {
						st := sts[i]
						if st.Name != wt.name || st.RowCount != wt.rows || wt.cols > 0 && len(st.Columns) != wt.cols {
							t.Errorf("table %d: got %s, %d rows, %d columns; want %s, %d, %d", i, st.Name, st.RowCount, len(st.Columns), wt.name, wt.rows, wt.cols)
						}
					}
					return
				}
				if len(sts) != 1 {
					t.Fatalf("got %d tables, want 1", len(sts))
				}
				st := sts[0]
				if ok && (st.RowCount != w.rows || w.cols > 0 && len(st.Columns) != w.cols || st.Encoding != w.enc) {
					t.Errorf("got %d rows, %d columns, encoding %q; want %d, %d, %q", st.RowCount, len(st.Columns), st.Encoding, w.rows, w.cols, w.enc)
				}
				if st.Bytes <= 0 || st.SourceFormat == "" || st.Name == "" {
					t.Errorf("incomplete: %+v", st)
				}
				if notes := strings.Join(st.Notes, "\n"); w.note != "" && !strings.Contains(notes, w.note) || w.note == "" && notes != "" {
					t.Errorf("notes %q, want %q", notes, w.note)
				}
			})
		}
	}
	if seen < len(want) {
		t.Errorf("saw %d files, want at least %d", seen, len(want))
	}
	mustBeClean(t, l)
}

func TestCSVText(t *testing.T) {
	l := mustLoader(t, Options{})
	st := mustIngestShared(t, l, "csv/test_mskanji.csv")
	if got := columnNames(st); got != "名前:text,年齢:integer,住所:text" {
		t.Errorf("columns: %s", got)
	}
	rows := query(t, l, st, `SELECT "名前", "住所" FROM {t} ORDER BY "年齢"`)
	if len(rows) != 3 || rows[0][0] != "三木英子" || rows[1][1] != "東京" || rows[2][0] != "髙橋淳" {
		t.Errorf("rows: %v", rows)
	}

	// cabinet-turnover.csv: BOM, CRLF, all-text columns with two empty names:
	// DuckDB's sniffer alone would take the header for data.
	st = mustIngestShared(t, l, "csv/cabinet-turnover.csv")
	if st.RowCount != 379 || st.Columns[0].Name != "president" || st.Columns[7].Name != "gender" {
		t.Errorf("cabinet: %d rows, columns %s", st.RowCount, columnNames(st))
	}

	// avengers.csv: one Windows-1252 byte in otherwise ASCII text.
	st = mustIngestShared(t, l, "csv/avengers.csv")
	rows = query(t, l, st, `SELECT count(*) FROM {t} WHERE "Notes" LIKE '%theæM''Kra%'`)
	if st.RowCount != 173 || rows[0][0] != int64(1) {
		t.Errorf("avengers: %d rows, æ found %v times", st.RowCount, rows[0][0])
	}

	// Derived variants of tips.csv: other encodings, BOMs, compression, TSV.
	tips, err := readShared(t, "csv/tips.csv")
	if err != nil {
		t.Fatal(err)
	}
	latin := []byte("name,city,n\nJosé,Zürich,1\nFrançoise,Besançon,2\nÅsa,Malmö,3\n")
	latin1, _ := charmap.ISO8859_1.NewEncoder().Bytes(latin)
	utf16le, _ := xunicode.UTF16(xunicode.LittleEndian, xunicode.UseBOM).NewEncoder().Bytes(latin)
	utf16beNoBOM, _ := xunicode.UTF16(xunicode.BigEndian, xunicode.IgnoreBOM).NewEncoder().Bytes(latin)
	utf16leNoBOM, _ := xunicode.UTF16(xunicode.LittleEndian, xunicode.IgnoreBOM).NewEncoder().Bytes(latin)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tips)
	zw.Close()
	zs, _ := zstd.NewWriter(nil)
	zst := zs.EncodeAll(tips, nil)
	tsv := bytes.ReplaceAll(bytes.ReplaceAll(tips, []byte(","), []byte("\t")), []byte(`"`), nil)
	for _, c := range []struct {
		name, enc, format string
		data              []byte
		rows              int64
	}{
		{"latin1.csv", "Windows-1252", "csv", latin1, 3},
		{"utf16le.csv", "UTF-16LE", "csv", utf16le, 3},
		{"utf16be-nobom.csv", "UTF-16BE", "csv", utf16beNoBOM, 3},
		{"utf16le-nobom.csv", "UTF-16LE", "csv", utf16leNoBOM, 3},
		{"bom.csv", "", "csv", append([]byte("\xef\xbb\xbf"), latin...), 3},
		{"tips.csv.gz", "", "csv", gz.Bytes(), 244},
		{"tips.csv.zst", "", "csv", zst, 244},
		{"tips.tsv", "", "tsv", tsv, 244},
		{"tips.parquet", "", "csv", tips, 244}, // content, not extension
	} {
		st, err := ingestBytes(t, l, c.name, c.data)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if st.Encoding != c.enc || st.SourceFormat != c.format || st.RowCount != c.rows {
			t.Errorf("%s: encoding %q format %q rows %d; want %q %q %d", c.name, st.Encoding, st.SourceFormat, st.RowCount, c.enc, c.format, c.rows)
		}
		if c.rows == 3 {
			if got := columnNames(st); got != "name:text,city:text,n:integer" {
				t.Errorf("%s: columns %s", c.name, got)
			}
			rows := query(t, l, st, "SELECT string_agg(name || '/' || city, ' ' ORDER BY n) FROM {t}")
			if rows[0][0] != "José/Zürich Françoise/Besançon Åsa/Malmö" {
				t.Errorf("%s: text %q", c.name, rows[0][0])
			}
		}
	}
	mustBeClean(t, l)
}

func TestParquetIngest(t *testing.T) {
	l := mustLoader(t, Options{})
	// Un-annotated BINARY holding text is stored as VARCHAR.
	b, _ := readShared(t, "parquet/alltypes_plain.parquet")
	st, err := ingestBytes(t, l, "alltypes_plain.parquet", b)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, c := range st.Columns {
		types[c.Name] = c.SQLType
	}
	if types["string_col"] != "VARCHAR" || types["timestamp_col"] != "TIMESTAMP" || st.RowCount != 8 {
		t.Errorf("alltypes_plain: %v, %d rows", types, st.RowCount)
	}
	// The decompression bomb loads (its metadata is sound); queries over it
	// meet the engine's memory limit.
	b, _ = readShared(t, "parquet/large_string_map.brotli.parquet")
	st, err = ingestBytes(t, l, "large_string_map.brotli.parquet", b)
	if err != nil || st.RowCount != 2 {
		t.Fatalf("bomb: %v %v", st, err)
	}
	// Page checksums are verified.
	b, _ = readShared(t, "parquet/datapage_v1-corrupt-checksum.parquet")
	if _, err = ingestBytes(t, l, "datapage_v1-corrupt-checksum.parquet", b); !strings.Contains(datachat.ErrorMessage(err), "checksum") {
		t.Errorf("corrupt checksum: got %v", err)
	}
	// Truncated file.
	b, _ = readShared(t, "parquet/alltypes_plain.parquet")
	if _, err = ingestBytes(t, l, "cut.parquet", b[:len(b)/2]); datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), "cut.parquet") {
		t.Errorf("truncated: got %v", err)
	}
	mustBeClean(t, l)
	entries, _ := os.ReadDir(l.Dir())
	if len(entries) != 3 { // .tmp and two datasets
		t.Errorf("dataset directory holds %d entries, want 3", len(entries))
	}
}

func TestIngestRefusals(t *testing.T) {
	l := mustLoader(t, Options{MaxBytes: 1000})
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty.csv", nil, "empty"},
		{"page.csv", []byte("<!DOCTYPE html><html><body>Not found</body></html>"), "link must lead to the data file"},
		{"data.csv", []byte(`{"a": 1`), "JSON"},
		{"deep.json", []byte(strings.Repeat("[", 999)), "JSON"},
		{"lines.json", []byte("[1, 2]\n{\"a\":"), "JSON"},
		{"bin.csv", []byte("a,b\n\x00\x01\x02\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xfe\x01"), "binary data, not text a CSV is made of: a dataset is a CSV, TSV, Parquet, Excel, JSON or NDJSON file"},
		{"book.xlsx", []byte("PK\x03\x04rest of a zip"), "damaged"},
		{"archive.zip", []byte("PK\x03\x04rest of a zip"), "ZIP archive"},
		{"old.xls", append([]byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}, make([]byte, 600)...), "xls"},
		{"big.csv", bytes.Repeat([]byte("a,b\n"), 300), "larger than"},
		{"bad.csv.gz", []byte{0x1f, 0x8b, 8, 0, 1, 2, 3}, "decompressed"},
	} {
		_, err := ingestBytes(t, l, c.name, c.data)
		msg := datachat.ErrorMessage(err)
		if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(msg, c.want) || !strings.Contains(msg, c.name) {
			t.Errorf("%s: got %v, want EINVALID naming the file and %q", c.name, err, c.want)
		}
	}
	// A gzip bomb stops at the decompressed limit.
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(bytes.Repeat([]byte("a,b\n"), 10000))
	zw.Close()
	if _, err := ingestBytes(t, l, "bomb.csv.gz", gz.Bytes()); !strings.Contains(datachat.ErrorMessage(err), "decompresses to more than") {
		t.Errorf("gzip bomb: got %v", err)
	}
	mustBeClean(t, l)
	entries, _ := os.ReadDir(l.Dir())
	if len(entries) != 1 {
		t.Errorf("dataset directory holds %d entries after refusals, want only .tmp", len(entries))
	}
}

func TestRemove(t *testing.T) {
	l := mustLoader(t, Options{})
	st, err := ingestBytes(t, l, "a.csv", []byte("x,y\n1,2\n3,4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Remove("../../etc/passwd"); err == nil {
		if _, serr := os.Stat("/etc/passwd"); serr != nil {
			t.Fatal("Remove escaped the dataset directory")
		}
	}
	if err := l.Remove(st.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), st.Path)); !os.IsNotExist(err) {
		t.Errorf("still there: %v", err)
	}
}

// TestHostileJSON: JSON built to hurt the reader (deep nesting, one huge
// value, a minified array on one long line) loads or fails with a clear
// message, within the worker's limits, and leaves nothing behind.
func TestHostileJSON(t *testing.T) {
	l := mustLoader(t, Options{MaxBytes: 64 << 20})
	long := `[{"a": "` + strings.Repeat("x", 20<<20) + `"}]`
	var minified strings.Builder
	minified.WriteString("[")
	for i := range 200000 {
		if i > 0 {
			minified.WriteString(",")
		}
		fmt.Fprintf(&minified, `{"id":%d,"v":"r%d"}`, i, i)
	}
	minified.WriteString("]")
	for _, c := range []struct {
		name string
		data string
		rows int64 // 0: must fail naming the file
	}{
		{"deep.json", strings.Repeat(`{"a":`, 200000) + "1" + strings.Repeat("}", 200000), 0},
		{"deeplist.json", strings.Repeat("[", 500000) + strings.Repeat("]", 500000), 0},
		{"long.json", long, 1},
		{"minified.json", minified.String(), 200000},
		{"mixed.ndjson", "{\"a\": 1}\n{\"a\": \"x\"}\n{\"b\": [1, 2]}\n", 3},
		{"nulls.json", `[null, null]`, 0},
		{"scalars.json", `[1, 2, 3]`, 3},
	} {
		start := time.Now()
		sts, err := l.Ingest(context.Background(), strings.NewReader(c.data), c.name)
		t.Logf("%s: %v", c.name, time.Since(start))
		if c.rows == 0 {
			if err == nil {
				t.Logf("%s: loaded %d tables (a clear result is fine too)", c.name, len(sts))
				l.RemoveAll(sts)
				continue
			}
			if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(datachat.ErrorMessage(err), c.name) {
				t.Errorf("%s: got %v, want EINVALID naming the file", c.name, err)
			}
			t.Logf("%s: %s", c.name, firstLineOf(datachat.ErrorMessage(err)))
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if sts[0].RowCount != c.rows {
			t.Errorf("%s: %d rows, want %d", c.name, sts[0].RowCount, c.rows)
		}
		l.RemoveAll(sts)
	}
	mustBeClean(t, l)
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// TestWorkbookValues: queries over a stored workbook give the values the
// spreadsheet shows: numbers, dates, booleans, the 1900 leap-year serials.
func TestWorkbookValues(t *testing.T) {
	l := mustLoader(t, Options{})
	load := func(file string) map[string]*Stored {
		f, err := os.Open(sharedtest.Path(t, "data/xlsx/"+file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sts, err := l.Ingest(context.Background(), f, file)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*Stored{}
		for _, st := range sts {
			out[st.Name] = st
		}
		return out
	}
	ds := load("datasets.xlsx")
	if rows := query(t, l, ds["datasets_mtcars"], `SELECT mpg, cyl FROM {t} LIMIT 1`); fmt.Sprint(rows[0]) != "[21 6]" {
		t.Errorf("mtcars first row: %v, want the sheet's 21, 6", rows[0])
	}
	deaths := load("deaths.xlsx")
	if rows := query(t, l, deaths["deaths_arts"], `SELECT count(*) FILTER (WHERE "Has kids"), min("Date of birth")::VARCHAR FROM {t}`); fmt.Sprint(rows[0]) != "[7 1917-02-06]" { // Zsa Zsa Gábor, the oldest, born 1917-02-06
		t.Errorf("deaths_arts: %v", rows[0])
	}
}

// TestInt96Overflow uploads Spark's INT96 file: the five timestamps DuckDB
// converts come back as written, the one it would turn into a date before
// year 1 is NULL, and a note says so.
func TestInt96Overflow(t *testing.T) {
	f, err := os.Open(sharedtest.Path(t, "data/parquet/int96_from_spark.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := mustLoader(t, Options{})
	sts, err := l.Ingest(context.Background(), f, "int96_from_spark.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 || len(sts[0].Notes) != 1 || !strings.Contains(sts[0].Notes[0], "(BC)") {
		t.Fatalf("notes: %+v", sts)
	}
	res, err := l.opts.Engine.Query(context.Background(), "", []duckdb.Table{{Name: "t", Path: filepath.Join(l.Dir(), sts[0].Path)}}, "SELECT a::VARCHAR FROM t")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"2024-01-01 20:34:56.123456", "2024-01-01 01:00:00", "9999-12-31 03:00:00", "2024-12-30 23:00:00", nil, nil}
	for i, w := range want {
		if res.Rows[i][0] != w {
			t.Errorf("row %d: got %v, want %v", i+1, res.Rows[i][0], w)
		}
	}
}
