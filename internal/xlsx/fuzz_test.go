package xlsx

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/xuri/excelize/v2"

	"datachat"
	"datachat/internal/sharedtest"
)

// FuzzRead feeds Open arbitrary files: it must not panic, must refuse with a
// user error or an I/O error, and what it opens must write as CSV.
func FuzzRead(f *testing.F) {
	f.Add(readBytes(f, build(f, func(x *excelize.File) {
		setRows(f, x, "Sheet1", "B2", []any{"Title"})
		setRows(f, x, "Sheet1", "A4", []any{"a", "b", "c"}, []any{1, "2,000", true}, []any{"x", 2.5, false})
		x.MergeCell("Sheet1", "A4", "B4")
	})))
	f.Add(readBytes(f, rawWorkbook(f, []rawSheet{{name: "s", rows: `<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="e"><v>#N/A</v></c></row><row r="2"><c r="A2" s="1"><v>60</v></c><c r="B2" t="d"><v>2024-01-01</v></c></row>`, extra: `<mergeCells><mergeCell ref="A1:B1"/></mergeCells>`}},
		[]string{`<si><t>x</t></si>`}, []string{"14"}, true)))
	f.Add(cfb(f, "EncryptionInfo"))
	for _, name := range []string{"deaths.xlsx", "pivots.xlsx", "dates-leap-year-1900-xlsx.xlsx", "encryptSHA1.xlsx"} {
		if b := sharedtest.Seed(f, "data/xlsx/"+name); b != nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := writeFile(t, "f.xlsx", data)
		lim := Limits{TempDir: t.TempDir(), MaxUnzipBytes: 32 << 20, MaxOtherBytes: 8 << 20, MaxSharedStrings: 8 << 20, MaxRows: 20000, MaxCellBytes: 64 << 10}
		wb, err := Open(p, "f.xlsx", lim)
		if err != nil {
			var de *datachat.Error
			if !errors.As(err, &de) {
				t.Fatalf("not a user error: %v", err)
			}
			return
		}
		defer wb.Close()
		for _, s := range wb.Sheets {
			info, err := s.WriteCSV(io.Discard)
			if err != nil {
				t.Fatalf("sheet %q: %v", s.Name, err)
			}
			if info.Rows != s.Rows {
				t.Fatalf("sheet %q: wrote %d rows, Rows says %d", s.Name, info.Rows, s.Rows)
			}
		}
	})
}

func readBytes(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
