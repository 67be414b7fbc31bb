package xlsx

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

func TestTitleBlockHeaderAndNotes(t *testing.T) {
	p := build(t, func(f *excelize.File) {
		setRows(t, f, "Sheet1", "B2",
			[]any{"Quarterly sales"},
			[]any{"Prepared by finance", nil, nil, "draft"},
		)
		setRows(t, f, "Sheet1", "B5",
			[]any{"Region", "Units", "Price", "Shipped"},
			[]any{"North", 10, 2.5, true},
			[]any{"South", 20, 3.25, false},
			[]any{"East", 30, 4, true},
		)
		setRows(t, f, "Sheet1", "B10",
			[]any{"Source: the regional offices' own figures, not yet audited by anyone"},
			[]any{nil, "* excluding returns"},
		)
	})
	s := sheetNamed(t, open(t, p, Limits{}), "Sheet1")
	wantColumns(t, s, []string{"Region:VARCHAR", "Units:BIGINT", "Price:DOUBLE", "Shipped:BOOLEAN"})
	wantRows(t, s, [][]string{{"North", "10", "2.5", "true"}, {"South", "20", "3.25", "false"}, {"East", "30", "4", "true"}})
	if s.Rows != 3 {
		t.Errorf("got Rows %d, want 3", s.Rows)
	}
	notes := strings.Join(s.Notes, "; ")
	for _, text := range []string{"rows 2–3 above the header", "rows 10–11 below the table"} {
		if !strings.Contains(notes, text) {
			t.Errorf("notes %q do not say %q", notes, text)
		}
	}
}

func TestMergedTwoRowHeader(t *testing.T) {
	p := build(t, func(f *excelize.File) {
		setRows(t, f, "Sheet1", "A1",
			[]any{"Region", "Total", nil, "Share"},
			[]any{nil, "Units", "Revenue", nil},
			[]any{"North", 10, 100.5, 0.25},
			[]any{"South", 20, 200, 0.75},
		)
		for _, m := range [][2]string{{"A1", "A2"}, {"B1", "C1"}, {"D1", "D2"}} {
			if err := f.MergeCell("Sheet1", m[0], m[1]); err != nil {
				t.Fatal(err)
			}
		}
	})
	s := sheetNamed(t, open(t, p, Limits{}), "Sheet1")
	wantColumns(t, s, []string{"Region:VARCHAR", "Total Units:BIGINT", "Total Revenue:DOUBLE", "Share:DOUBLE"})
	if s.Rows != 2 {
		t.Errorf("got Rows %d, want 2", s.Rows)
	}
}

func TestRepeatedHeaderAndSections(t *testing.T) {
	p := build(t, func(f *excelize.File) {
		setRows(t, f, "Sheet1", "A1",
			[]any{"Region", "Units"},
			[]any{},
			[]any{"Northeast"},
			[]any{"Maine", 1},
			[]any{"Vermont", 2},
			[]any{},
			[]any{"Midwest"},
			[]any{"Region", "Units"},
			[]any{"Ohio", 3},
			[]any{"Iowa"}, // a label-only row with no blank row before it: data
		)
	})
	s := sheetNamed(t, open(t, p, Limits{}), "Sheet1")
	wantColumns(t, s, []string{"section:VARCHAR", "Region:VARCHAR", "Units:BIGINT"})
	wantRows(t, s, [][]string{
		{"Northeast", "Maine", "1"}, {"Northeast", "Vermont", "2"},
		{"Midwest", "Ohio", "3"}, {"Midwest", "Iowa", ""},
	})
}

func TestNumbersStoredAsText(t *testing.T) {
	p := build(t, func(f *excelize.File) {
		setRows(t, f, "Sheet1", "A1",
			[]any{"amount", "code", "share", "id", "mixed", "year"},
			[]any{"1,234.5", "007", "12.5%", "12345678901234567890", "3", "2016"},
			[]any{" -3 ", "010", "7 %", "1", "n/a", 2017},
			[]any{"12", "123", "100%", "2", "4", "2018"},
		)
	})
	s := sheetNamed(t, open(t, p, Limits{}), "Sheet1")
	wantColumns(t, s, []string{"amount:DOUBLE", "code:VARCHAR", "share:DOUBLE", "id:VARCHAR", "mixed:VARCHAR", "year:BIGINT"})
	if !s.Columns[2].Percent || s.Columns[0].Percent {
		t.Errorf("got Percent %v and %v, want true only for share", s.Columns[0].Percent, s.Columns[2].Percent)
	}
	wantRows(t, s, [][]string{
		{"1234.5", "007", "0.125", "12345678901234567890", "3", "2016"},
		{"-3", "010", "0.07", "1", "n/a", "2017"},
		{"12", "123", "1", "2", "4", "2018"},
	})
}

func TestParseNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0", 0, true}, {"-0.5", -0.5, true}, {"+3", 3, true}, {"1,234", 1234, true},
		{"1,234,567.25", 1234567.25, true}, {"12.5%", 0.125, true}, {"20.5 %", 0.205, true},
		{"1e3", 1000, true}, {".5", 0.5, true}, {"1.", 1, true},
		{"007", 0, false}, {"1,23", 0, false}, {"1234,567", 0, false}, {",123", 0, false},
		{"12a", 0, false}, {"", 0, false}, {"-", 0, false}, {"%", 0, false}, {"1e", 0, false},
		{"1234567890123456", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"$5", 0, false},
	} {
		got, ok := parseNumber(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("parseNumber(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestClassifyNumFmt(t *testing.T) {
	for _, c := range []struct {
		id   int
		code string
		want fmtClass
	}{
		{0, "", fmtNumber}, {2, "", fmtNumber}, {9, "", fmtPercent}, {10, "", fmtPercent},
		{14, "", fmtDate}, {15, "", fmtDate}, {17, "", fmtDate}, {22, "", fmtDate},
		{18, "", fmtTime}, {21, "", fmtTime}, {45, "", fmtTime}, {47, "", fmtTime}, {46, "", fmtNumber},
		{0, "dd/mm/yyyy", fmtDate}, {0, "yyyy-mm-dd hh:mm:ss", fmtDate}, {0, "mmm-yy", fmtDate},
		{0, "[$-409]mmmm d, yyyy;@", fmtDate}, {0, "h:mm AM/PM", fmtTime}, {0, "hh:mm:ss.000", fmtTime},
		{0, "mm:ss", fmtTime}, {0, "[h]:mm", fmtNumber}, {0, "[mm]:ss", fmtNumber},
		{0, `0.00" m"`, fmtNumber}, {0, `\d0`, fmtNumber}, {0, "[Red]0.00", fmtNumber},
		{0, "0.00E+00", fmtNumber}, {0, "General", fmtNumber}, {0, "#,##0.00", fmtNumber},
		{0, "0.0%", fmtPercent}, {0, `"±" 0.0`, fmtNumber}, {0, "@", fmtNumber},
		{0, "d-mmm;@", fmtDate}, {0, `0;"d"0`, fmtNumber},
	} {
		if got := classifyNumFmt(c.id, c.code); got != c.want {
			t.Errorf("classifyNumFmt(%d, %q) = %d, want %d", c.id, c.code, got, c.want)
		}
	}
}

func TestSerialTime(t *testing.T) {
	for _, c := range []struct {
		serial float64
		sys    dateSystem
		want   string // "" for no date
	}{
		{1, date1900, "1900-01-01 00:00:00"},
		{1.3333333333333333, date1900, "1900-01-01 08:00:00"},
		{59, date1900, "1900-02-28 00:00:00"},
		{60, date1900, ""},
		{60.5, date1900, ""},
		{61, date1900, "1900-03-01 00:00:00"},
		{45000.75, date1900, "2023-03-15 18:00:00"},
		{2958465, date1900, "9999-12-31 00:00:00"},
		{2958466, date1900, ""},
		{-1, date1900, ""},
		{0, date1904, "1904-01-01 00:00:00"},
		{1462, date1904, "1908-01-02 00:00:00"},
		{0.5000000001, date1900, "1899-12-31 12:00:00"},
	} {
		got, ok := serialTime(c.serial, c.sys)
		s := ""
		if ok {
			s = got.Format("2006-01-02 15:04:05")
		}
		if s != c.want {
			t.Errorf("serialTime(%v, %d) = %q, want %q", c.serial, c.sys, s, c.want)
		}
	}
}

func TestDatesAndTimes(t *testing.T) {
	p := rawWorkbook(t, []rawSheet{{name: "d", rows: `
<row r="1"><c r="A1" t="inlineStr"><is><t>day</t></is></c><c r="B1" t="inlineStr"><is><t>stamp</t></is></c><c r="C1" t="inlineStr"><is><t>clock</t></is></c><c r="D1" t="inlineStr"><is><t>elapsed</t></is></c><c r="E1" t="inlineStr"><is><t>iso</t></is></c><c r="F1" t="inlineStr"><is><t>text</t></is></c></row>
<row r="2"><c r="A2" s="1"><v>45000</v></c><c r="B2" s="2"><v>45000.5</v></c><c r="C2" s="3"><v>0.75</v></c><c r="D2" s="4"><v>1.5</v></c><c r="E2" t="d"><v>2024-02-29T10:30:00</v></c><c r="F2" t="inlineStr"><is><t>2024-01-31</t></is></c></row>
<row r="3"><c r="A3" s="1"><v>45001</v></c><c r="B3" s="2"><v>45001</v></c><c r="C3" s="3"><v>0.0001</v></c><c r="D3" s="4"><v>0.25</v></c><c r="E3" t="d"><v>2024-03-01</v></c><c r="F3" t="inlineStr"><is><t>2024-02-01 08:00</t></is></c></row>`}},
		nil, []string{"dd/mm/yyyy", "yyyy-mm-dd hh:mm", "h:mm:ss AM/PM", "[h]:mm"}, false)
	s := sheetNamed(t, open(t, p, Limits{}), "d")
	wantColumns(t, s, []string{"day:DATE", "stamp:TIMESTAMP", "clock:TIME", "elapsed:DOUBLE", "iso:TIMESTAMP", "text:TIMESTAMP"})
	wantRows(t, s, [][]string{
		{"2023-03-15", "2023-03-15 12:00:00", "18:00:00", "1.5", "2024-02-29 10:30:00", "2024-01-31 00:00:00"},
		{"2023-03-16", "2023-03-16 00:00:00", "00:00:08.640", "0.25", "2024-03-01 00:00:00", "2024-02-01 08:00:00"},
	})
}

func TestDate1904(t *testing.T) {
	p := rawWorkbook(t, []rawSheet{{name: "d", rows: `
<row r="1"><c r="A1" t="inlineStr"><is><t>when</t></is></c></row>
<row r="2"><c r="A2" s="1"><v>0</v></c></row>
<row r="3"><c r="A3" s="1"><v>60</v></c></row>`}}, nil, []string{"14"}, true)
	s := sheetNamed(t, open(t, p, Limits{}), "d")
	wantRows(t, s, [][]string{{"1904-01-01"}, {"1904-03-01"}})
}

func TestCachedValues(t *testing.T) {
	sst := []string{
		`<si><t>name</t></si>`,
		`<si><r><t>Zsa </t></r><r><rPr><b/></rPr><t>Zsa</t></r><rPh sb="0" eb="1"><t>ざ</t></rPh></si>`,
		`<si><t xml:space="preserve">  padded  </t></si>`,
		`<si><t>line_x000D_break</t></si>`,
	}
	p := rawWorkbook(t, []rawSheet{{name: "f", rows: `
<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="inlineStr"><is><t>ratio</t></is></c><c r="C1" t="inlineStr"><is><t>label</t></is></c><c r="D1" t="inlineStr"><is><t>ok</t></is></c></row>
<row r="2"><c r="A2" t="s"><v>1</v></c><c r="B2"><f>1/4</f><v>0.25</v></c><c r="C2" t="str"><f>"a"&amp;"b"</f><v>ab</v></c><c r="D2" t="b"><f>TRUE()</f><v>1</v></c></row>
<row r="3"><c r="A3" t="s"><v>2</v></c><c r="B3" t="e"><f>1/0</f><v>#DIV/0!</v></c><c r="C3" t="e"><f>NA()</f><v>#N/A</v></c><c r="D3" t="b"><v>0</v></c></row>
<row r="4"><c r="A4" t="s"><v>3</v></c><c r="B4"><f>2/4</f></c><c r="C4" t="inlineStr"><is><t>#REF!</t></is></c><c r="D4" t="b"><v>1</v></c></row>`}},
		sst, nil, false)
	s := sheetNamed(t, open(t, p, Limits{}), "f")
	wantColumns(t, s, []string{"name:VARCHAR", "ratio:DOUBLE", "label:VARCHAR", "ok:BOOLEAN"})
	wantRows(t, s, [][]string{{"Zsa Zsa", "0.25", "ab", "true"}, {"padded", "", "", "false"}, {"line\rbreak", "", "", "true"}})
	if notes := strings.Join(s.Notes, "; "); !strings.Contains(notes, "3 cells held an Excel error") {
		t.Errorf("notes %q do not count the 3 errors", notes)
	}
}

func TestSheetsHiddenAndEmpty(t *testing.T) {
	p := build(t, func(f *excelize.File) {
		setRows(t, f, "Sheet1", "A1", []any{"a"}, []any{1})
		for _, name := range []string{"Empty", "Hidden", "VeryHidden", "Blank"} {
			if _, err := f.NewSheet(name); err != nil {
				t.Fatal(err)
			}
		}
		setRows(t, f, "Hidden", "A1", []any{"b"}, []any{2})
		setRows(t, f, "VeryHidden", "A1", []any{"c"}, []any{3})
		setRows(t, f, "Blank", "A1", []any{"  ", ""})
		f.SetSheetVisible("Hidden", false)
		f.SetSheetVisible("VeryHidden", false, true)
	})
	wb := open(t, p, Limits{})
	var names []string
	for _, s := range wb.Sheets {
		names = append(names, s.Name)
	}
	if want := []string{"Sheet1", "Hidden"}; !reflect.DeepEqual(names, want) {
		t.Errorf("got sheets %q, want %q", names, want)
	}
	if !sheetNamed(t, wb, "Hidden").Hidden || sheetNamed(t, wb, "Sheet1").Hidden {
		t.Error("Hidden is not the hidden sheet's alone")
	}
	skipped := strings.Join(wb.Skipped, "; ")
	for _, text := range []string{`"Empty" holds no values`, `"VeryHidden" is very hidden`, `"Blank" holds no values`} {
		if !strings.Contains(skipped, text) {
			t.Errorf("Skipped %q does not say %q", skipped, text)
		}
	}
}

func TestHeaderOnlyAndDuplicateNames(t *testing.T) {
	p := build(t, func(f *excelize.File) {
		setRows(t, f, "Sheet1", "A1", []any{"x", "x", nil, "X", "column3"}, []any{1, 2, 3, 4, 5})
		f.NewSheet("Header")
		setRows(t, f, "Header", "A1", []any{"only", "a header"})
	})
	wb := open(t, p, Limits{})
	wantColumns(t, sheetNamed(t, wb, "Sheet1"), []string{"x:BIGINT", "x_2:BIGINT", "column3_2:BIGINT", "X_3:BIGINT", "column3:BIGINT"})
	h := sheetNamed(t, wb, "Header")
	if got, want := columns(h), []string{"only:VARCHAR", "a header:VARCHAR"}; !reflect.DeepEqual(got, want) || h.Rows != 0 {
		t.Errorf("got columns %q and %d rows, want %q and none", got, h.Rows, want)
	}
}

func TestWriteCSV(t *testing.T) {
	p := rawWorkbook(t, []rawSheet{{name: "s", rows: `
<row r="1"><c r="A1" t="inlineStr"><is><t>text</t></is></c><c r="B1" t="inlineStr"><is><t>n</t></is></c><c r="C1" t="inlineStr"><is><t>when</t></is></c><c r="D1" t="inlineStr"><is><t>f</t></is></c></row>
<row r="2"><c r="A2" t="inlineStr"><is><t>say "hi", then
leave</t></is></c><c r="B2"><v>1</v></c><c r="C2" s="1"><v>45000.25</v></c><c r="D2"><v>1e21</v></c></row>
<row r="3"><c r="A3" t="inlineStr"><is><t>,</t></is></c><c r="C3" s="1"><v>45000.0000123</v></c><c r="D3"><v>0.1</v></c></row>`}},
		nil, []string{"22"}, false)
	s := sheetNamed(t, open(t, p, Limits{}), "s")
	var b bytes.Buffer
	info, err := s.WriteCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := "text,n,when,f\n\"say \"\"hi\"\", then\nleave\",1,2023-03-15 06:00:00,1e+21\n\",\",,2023-03-15 00:00:01.063,0.1\n"
	if b.String() != want {
		t.Errorf("got CSV\n%s\nwant\n%s", b.String(), want)
	}
	if info.Rows != 2 || info.MaxLineSize != len("\"say \"\"hi\"\", then\nleave\",1,2023-03-15 06:00:00,1e+21\n") {
		t.Errorf("got %+v", info)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Errorf("the CSV reads back as %d records, %v", len(recs), err)
	}
	var got []any
	s.Each(func(row []any) error { got = append(got, row...); return nil })
	if want := []any{"say \"hi\", then\nleave", int64(1), time.Date(2023, 3, 15, 6, 0, 0, 0, time.UTC), 1e21, ",", nil, time.Date(2023, 3, 15, 0, 0, 1, 63e6, time.UTC), 0.1}; !reflect.DeepEqual(got, want) {
		t.Errorf("Each gave %#v, want %#v", got, want)
	}
}

func TestRefused(t *testing.T) {
	valid := build(t, func(f *excelize.File) { setRows(t, f, "Sheet1", "A1", []any{"a"}, []any{1}) })
	validBytes, _ := os.ReadFile(valid)
	zipOf := func(files map[string]string) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for name, body := range files {
			w, _ := zw.Create(name)
			w.Write([]byte(body))
		}
		zw.Close()
		return writeFile(t, "x.xlsx", buf.Bytes())
	}
	for _, c := range []struct {
		name  string
		path  string
		lim   Limits
		cause error
		says  []string
	}{
		{"xls", writeFile(t, "old.xls", cfb(t, "Workbook", "\x05SummaryInformation")), Limits{}, ErrXLS, []string{"old.xls is an old binary Excel 97–2003 .xls workbook", "save it as .xlsx or CSV"}},
		{"encrypted", writeFile(t, "secret.xlsx", cfb(t, "EncryptionInfo", "EncryptedPackage")), Limits{}, ErrEncrypted, []string{"secret.xlsx is password-protected", "remove the password"}},
		{"other OLE2", writeFile(t, "x.doc", cfb(t, "WordDocument")), Limits{}, ErrDamaged, []string{"not an Excel workbook"}},
		{"empty", writeFile(t, "e.xlsx", nil), Limits{}, ErrDamaged, []string{"e.xlsx is empty"}},
		{"text", writeFile(t, "t.xlsx", []byte("a,b\n1,2\n")), Limits{}, ErrDamaged, []string{"not an Excel workbook (.xlsx)", "not one"}},
		{"truncated", writeFile(t, "cut.xlsx", validBytes[:len(validBytes)/2]), Limits{}, ErrDamaged, []string{"cut.xlsx is damaged"}},
		{"empty zip", zipOf(nil), Limits{}, ErrDamaged, []string{"empty zip"}},
		{"not a workbook", zipOf(map[string]string{"word/document.xml": "<w/>"}), Limits{}, ErrDamaged, []string{"has no workbook part"}},
		{"ods", zipOf(map[string]string{"mimetype": "application/vnd.oasis.opendocument.spreadsheet"}), Limits{}, ErrDamaged, []string{"OpenDocument spreadsheet (.ods)"}},
		{"xlsb", zipOf(map[string]string{"xl/workbook.bin": "x"}), Limits{}, ErrDamaged, []string{"binary .xlsb"}},
		{"zip bomb", valid, Limits{MaxUnzipBytes: 1000}, ErrTooLarge, []string{"expands to", "over the limit of 1000 bytes"}},
		{"other parts", valid, Limits{MaxOtherBytes: 100}, ErrTooLarge, []string{"besides its sheets"}},
		{"no data", build(t, func(f *excelize.File) {}), Limits{}, ErrNoData, []string{"has no sheet with data"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := c.lim
			lim.TempDir = t.TempDir()
			wb, err := Open(c.path, baseName(c.path), lim)
			if wb != nil {
				wb.Close()
			}
			wantError(t, err, c.cause, c.says...)
			if left, _ := os.ReadDir(lim.TempDir); len(left) != 0 {
				t.Errorf("left %d files in the temporary directory", len(left))
			}
		})
	}
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func TestLimits(t *testing.T) {
	wide := build(t, func(f *excelize.File) {
		row := make([]any, 12)
		for i := range row {
			row[i] = fmt.Sprint("c", i)
		}
		setRows(t, f, "Sheet1", "A1", row, row)
		f.NewSheet("Two")
		setRows(t, f, "Two", "A1", []any{"a"}, []any{strings.Repeat("x", 300)})
	})
	for _, c := range []struct {
		name string
		lim  Limits
		says string
	}{
		{"columns", Limits{MaxColumns: 10}, "a table of 12 columns, over the limit of 10"},
		{"rows", Limits{MaxRows: 1}, "more than 1 rows"},
		{"sheets", Limits{MaxSheets: 1}, "more than 1 sheets"},
		{"cell", Limits{MaxCellBytes: 100}, "more than 100 bytes of text"},
		{"shared strings", Limits{MaxSharedStrings: 50}, "distinct texts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.lim.TempDir = t.TempDir()
			_, err := Open(wide, "wide.xlsx", c.lim)
			wantError(t, err, ErrTooLarge, "wide.xlsx", c.says)
		})
	}
}

func TestSpoolRemoved(t *testing.T) {
	p := build(t, func(f *excelize.File) { setRows(t, f, "Sheet1", "A1", []any{"a"}, []any{1}) })
	dir := t.TempDir()
	wb := open(t, p, Limits{TempDir: dir})
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("got %d entries in the temporary directory while open, want 1", len(left))
	}
	if err := wb.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("Close left %d entries", len(left))
	}
}
