package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"datachat"
	"datachat/internal/duckdb"
)

// A second round of hostile uploads, beyond TestHostileCSV and
// TestHostileJSON: bytes SQL text cannot carry (NUL, lone CR, Unicode line
// separators) in a header, a comment line and skipped rows holding SQL,
// thousands of hostile columns, SQL in file names, JSON keys and Excel sheet
// names and headers. Each upload loads with its names as written, or is
// refused with a message naming the file; nothing is written or read outside
// the upload, and every table name is a plain identifier.

var plainName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// hostileSetup returns a loader holding a secret dataset, and a check that
// an upload neither wrote the canary nor read outside itself.
func hostileSetup(t *testing.T) (l *Loader, canary string, check func(t *testing.T, name string, sts []*Stored, err error)) {
	t.Helper()
	l = mustLoader(t, Options{})
	canary = filepath.Join(t.TempDir(), "pwned.txt")
	if _, err := ingestBytes(t, l, "secret.csv", []byte("secret\nthe-other-users-secret\n")); err != nil {
		t.Fatal(err)
	}
	check = func(t *testing.T, name string, sts []*Stored, err error) {
		t.Helper()
		if _, serr := os.Stat(canary); serr == nil {
			t.Fatalf("%q: the upload wrote %s", name, canary)
		}
		if err != nil {
			if datachat.ErrorCode(err) != datachat.EINVALID {
				t.Errorf("%q: %v, want the file loaded or refused with a message", name, err)
			}
			return
		}
		defer l.RemoveAll(sts)
		for _, st := range sts {
			if !plainName.MatchString(st.Name) {
				t.Errorf("%q: table name %q is not a plain identifier", name, st.Name)
			}
			for _, row := range query(t, l, st, "SELECT * FROM {t}") {
				for _, v := range row {
					s := fmt.Sprint(v)
					if strings.Contains(s, "root:") || strings.Contains(s, "the-other-users-secret") {
						t.Errorf("%q: a row holds %q, read from outside the upload", name, s)
					}
				}
			}
		}
	}
	return l, canary, check
}

func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestHostileCSV2: header cells holding bytes SQL text cannot carry, SQL in
// comment lines and in the rows the sniffer skips, 1,000 hostile columns,
// and SQL in the file's name.
func TestHostileCSV2(t *testing.T) {
	l, canary, check := hostileSetup(t)
	copyOut := "COPY (SELECT 1) TO " + lit(canary)
	cases := map[string]string{
		"nul.csv":           "\"x\x00'); " + copyOut + "; --\",b\n1,2\n3,4\n",
		"cr.csv":            "\"x\r'); " + copyOut + "; --\",b\n1,2\n3,4\n",
		"linesep.csv":       "\"x\u2028'); " + copyOut + "; --\",b\n1,2\n3,4\n",
		"bom-mid.csv":       "a,\"\ufeffx'); " + copyOut + "; --\"\n1,2\n3,4\n",
		"zero-width.csv":    "\"x\u200b'}); " + copyOut + "; --\",b\n1,2\n3,4\n",
		"format-verbs.csv":  "\"%s%d%!x'); " + copyOut + "; --\",b\n1,2\n3,4\n",
		"hash-comment.csv":  "# x'); " + copyOut + "; --\na,b\n1,2\n3,4\n",
		"semi-comment.csv":  "; x'); " + copyOut + "; --\na;b\n1;2\n3;4\n",
		"skipped-rows.csv":  "x'); " + copyOut + "; --\nnote: " + copyOut + "\n\na,b,c\n1,2,3\n4,5,6\n7,8,9\n",
		"star-names.csv":    "*,filename,rowid,\"\",\"\"\n1,2,3,4,5\n6,7,8,9,10\n",
		"same-payload.csv":  "\"x'); " + copyOut + "; --\",\"x'); " + copyOut + "; --\"\n1,2\n3,4\n",
		"long-header.csv":   "\"" + strings.Repeat("x'); "+copyOut+"; --", 2000) + "\",b\n1,2\n3,4\n",
		"timestamp-fmt.csv": "ts,\"v'); " + copyOut + "; --\"\n2024-01-02 03:04:05,1\n2024-02-03 04:05:06,2\n",
		"date-dmy.csv":      "d;\"v'}); " + copyOut + "; --\"\n13.02.2024;1\n14.02.2024;2\n",
		"quote-escape.csv":  "a,b\n'x\\'); " + copyOut + "; --',1\n'y',2\n",
	}
	// The header as written, where it must survive character for character.
	payload := "'); " + copyOut + "; --"
	wantCols := map[string][]string{
		"linesep.csv":       {"x\u2028" + payload, "b"},
		"zero-width.csv":    {"x\u200b'}); " + copyOut + "; --", "b"},
		"format-verbs.csv":  {"%s%d%!x" + payload, "b"},
		"long-header.csv":   {strings.Repeat("x"+payload, 2000), "b"},
		"timestamp-fmt.csv": {"ts", "v" + payload},
		"date-dmy.csv":      {"d", "v'}); " + copyOut + "; --"},
	}
	var wide bytes.Buffer
	for i := range 1000 {
		if i > 0 {
			wide.WriteByte(',')
		}
		wide.WriteString(csvField(fmt.Sprintf("c%d'); %s; --", i, copyOut)))
	}
	wide.WriteString("\n" + strings.Repeat("1,", 999) + "1\n" + strings.Repeat("2,", 999) + "2\n")
	cases["wide.csv"] = wide.String()
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			sts, err := l.Ingest(context.Background(), strings.NewReader(data), name)
			if err != nil {
				t.Logf("%s: refused: %.200s", name, datachat.ErrorMessage(err))
			} else if want, ok := wantCols[name]; ok {
				var got []string
				for _, c := range sts[0].Columns {
					got = append(got, c.Name)
				}
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
					t.Errorf("%s: columns %.300q, want the header as written %.300q", name, got, want)
				}
			}
			check(t, name, sts, err)
		})
	}
	// SQL in the file's name: it names the dataset in messages and becomes a
	// plain table name.
	for _, name := range []string{
		"x'); " + copyOut + "; --.csv",
		`x"); ` + copyOut + `; --.csv`,
		"%s%n%!.csv",
		"multi\nline'); " + copyOut + ".csv",
		"../../../etc/passwd",
		"..",
		"'.csv",
		"日本語'); DROP TABLE x; --.csv",
		strings.Repeat("x'); "+copyOut+"; --", 50) + ".csv",
	} {
		sts, err := l.Ingest(context.Background(), strings.NewReader("a,b\n1,2\n"), name)
		check(t, name, sts, err)
		if err == nil && sts[0].RowCount != 1 {
			t.Errorf("%q: %d rows, want 1", name, sts[0].RowCount)
		}
	}
	mustBeClean(t, l)
}

// TestHostileJSONKeys: JSON keys holding SQL, NUL, quotes and look-alike
// duplicates, as record fields, nested fields, and as the keys of a top-level
// object whose arrays become tables of their own.
func TestHostileJSONKeys(t *testing.T) {
	l, canary, check := hostileSetup(t)
	copyOut := "COPY (SELECT 1) TO " + lit(canary)
	key := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	payloads := []string{
		"x'); " + copyOut + "; --",
		`x"); ` + copyOut + `; --`,
		"x\x00'); " + copyOut + "; --",
		"x'}) UNION ALL SELECT content, filename FROM read_text('/etc/passwd') --",
		"*",
		"",
		strings.Repeat("k'", 20000),
	}
	for i, p := range payloads {
		for j, doc := range []string{
			"[{" + key(p) + ": 1, \"b\": 2}, {" + key(p) + ": 3, \"b\": 4}]",
			"[{\"s\": {" + key(p) + ": 1}}, {\"s\": {" + key(p) + ": 2}}]",
			"{" + key(p) + ": [{\"a\": 1}, {\"a\": 2}], \"other\": [{\"b\": 1}]}",
			"{\"items\": [{" + key(p) + ": 1}]}",
			"{" + key(p) + ": 1, " + key(strings.ToUpper(p)+" ") + ": 2}",
		} {
			name := fmt.Sprintf("k%d-%d.json", i, j)
			t.Run(name, func(t *testing.T) {
				sts, err := l.Ingest(context.Background(), strings.NewReader(doc), name)
				if err != nil {
					t.Logf("%s: refused: %.200s", name, datachat.ErrorMessage(err))
				}
				check(t, name, sts, err)
			})
		}
	}
	mustBeClean(t, l)
}

// TestHostileWorkbook: a workbook whose sheet names and header cells hold
// SQL: every sheet loads with its header as written, under a plain table
// name, and nothing runs.
func TestHostileWorkbook(t *testing.T) {
	l, canary, check := hostileSetup(t)
	copyOut := "COPY (SELECT 1) TO " + lit(canary)
	sheets := []string{"x'); COPY --", `a"b"); --`, "DROP;TABLE t;--", "日本語');--", "Sheet $$); --$$", "x'}) UNION ALL --"}
	headers := []string{"x'); " + copyOut + "; --", `x"); ` + copyOut + `; --`, "x': 'VARCHAR'}) UNION ALL SELECT * FROM read_text('/etc/passwd') --", "$$); " + copyOut + "; --$$"}
	f := excelize.NewFile()
	defer f.Close()
	for i, sh := range sheets {
		if i == 0 {
			if err := f.SetSheetName("Sheet1", sh); err != nil {
				t.Fatalf("sheet %q: %v", sh, err)
			}
		} else if _, err := f.NewSheet(sh); err != nil {
			t.Fatalf("sheet %q: %v", sh, err)
		}
		rows := [][]any{{headers[0], headers[1], headers[2], headers[3]}, {1, "a", headers[0], 2.5}, {2, "b", headers[1], 3.5}}
		for r, row := range rows {
			cell, _ := excelize.CoordinatesToCellName(1, r+1)
			if err := f.SetSheetRow(sh, cell, &row); err != nil {
				t.Fatal(err)
			}
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	name := "book'); " + copyOut + "; --.xlsx"
	sts, err := l.Ingest(context.Background(), &buf, name)
	if err != nil {
		t.Fatalf("the workbook was refused: %v", err)
	}
	if len(sts) != len(sheets) {
		t.Errorf("%d tables, want one per sheet (%d)", len(sts), len(sheets))
	}
	for _, st := range sts {
		var got []string
		for _, c := range st.Columns {
			got = append(got, c.Name)
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", headers) {
			t.Errorf("sheet %q: columns %q, want the header as written %q", st.Part, got, headers)
		}
		if st.RowCount != 2 {
			t.Errorf("sheet %q: %d rows, want 2", st.Part, st.RowCount)
		}
	}
	check(t, name, sts, nil)
	mustBeClean(t, l)
}

// TestUploadNamedAsCatalogView: an upload whose name makes its table share a
// name with one of DuckDB's views the sandbox denies (pg_settings.csv gives
// the table pg_settings) must not open that view to its conversation's
// queries. End to end: upload, then query through the engine as the server
// does.
func TestUploadNamedAsCatalogView(t *testing.T) {
	l := mustLoader(t, Options{})
	st, err := ingestBytes(t, l, "pg_settings.csv", []byte("a,b\n1,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "pg_settings" {
		t.Skipf("the table is named %q, not pg_settings", st.Name)
	}
	tables := []duckdb.Table{{Name: st.Name, Path: filepath.Join(l.Dir(), st.Path)}}
	res, err := l.opts.Engine.Query(context.Background(), "conv", tables, "SELECT name, setting FROM pg_catalog.pg_settings WHERE name IN ('allowed_paths', 'allowed_directories')")
	if err == nil {
		b, _ := json.Marshal(res.Rows)
		t.Errorf("the catalog's pg_settings answered: %s", b)
		if strings.Contains(string(b), l.Dir()) {
			t.Errorf("it shows the data directory %s", l.Dir())
		}
	}
}
