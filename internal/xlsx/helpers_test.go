package xlsx

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/xuri/excelize/v2"

	"datachat"
)

// build makes a workbook with excelize: fill gets a new file whose first
// sheet is "Sheet1". It returns the saved file's path.
func build(t testing.TB, fill func(f *excelize.File)) string {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	fill(f)
	p := filepath.Join(t.TempDir(), "book.xlsx")
	if err := f.SaveAs(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// setRows writes rows of values from cell A1 of a sheet, or from the cell
// named in start.
func setRows(t testing.TB, f *excelize.File, sheet, start string, rows ...[]any) {
	t.Helper()
	col, row, err := excelize.CellNameToCoordinates(start)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(col, row+i)
		if err := f.SetSheetRow(sheet, cell, &r); err != nil {
			t.Fatal(err)
		}
	}
}

// rawSheet is one sheet of a workbook written by rawWorkbook: the XML of
// its sheetData's rows, and the workbook's sheet state.
type rawSheet struct {
	name, rows, state, extra string
}

// rawWorkbook writes a workbook's XML parts by hand, for cells excelize does
// not write (cached formula values and errors, t="d", rich text). styles
// are the number format codes of cell styles 1, 2…, each a built-in id
// ("14") or a custom code.
func rawWorkbook(t testing.TB, sheets []rawSheet, sst []string, styles []string, date1904 bool) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name, body string) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	const ns = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	ct := `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>`
	var wbSheets, rels strings.Builder
	for i, s := range sheets {
		state := ""
		if s.state != "" {
			state = fmt.Sprintf(` state="%s"`, s.state)
		}
		fmt.Fprintf(&wbSheets, `<sheet name="%s" sheetId="%d"%s r:id="rId%d"/>`, s.name, i+1, state, i+1)
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet%d.xml"/>`, i+1, i+1)
		ct += fmt.Sprintf(`<Override PartName="/xl/worksheets/sheet%d.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>`, i+1)
		put(fmt.Sprintf("xl/worksheets/sheet%d.xml", i+1), fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet %s><sheetData>%s</sheetData>%s</worksheet>`, ns, s.rows, s.extra))
	}
	fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>`, len(sheets)+1)
	if sst != nil {
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>`, len(sheets)+2)
		ct += `<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>`
		put("xl/sharedStrings.xml", fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><sst %s count="%d" uniqueCount="%d">%s</sst>`, ns, len(sst), len(sst), strings.Join(sst, "")))
	}
	put("[Content_Types].xml", ct+`</Types>`)
	put("_rels/.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`)
	pr := ""
	if date1904 {
		pr = `<workbookPr date1904="1"/>`
	}
	put("xl/workbook.xml", fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><workbook %s>%s<sheets>%s</sheets></workbook>`, ns, pr, wbSheets.String()))
	put("xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`+rels.String()+`</Relationships>`)
	var numFmts, xfs strings.Builder
	xfs.WriteString(`<xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>`)
	custom := 0
	for i, code := range styles {
		id := 0
		if _, err := fmt.Sscanf(code, "%d", &id); err != nil || fmt.Sprint(id) != code {
			id = 164 + i
			custom++
			fmt.Fprintf(&numFmts, `<numFmt numFmtId="%d" formatCode="%s"/>`, id, xmlEscape(code))
		}
		fmt.Fprintf(&xfs, `<xf numFmtId="%d" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/>`, id)
	}
	put("xl/styles.xml", fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><styleSheet %s><numFmts count="%d">%s</numFmts><fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts><fills count="1"><fill><patternFill patternType="none"/></fill></fills><borders count="1"><border/></borders><cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs><cellXfs count="%d">%s</cellXfs></styleSheet>`, ns, custom, numFmts.String(), len(styles)+1, xfs.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "raw.xlsx", buf.Bytes())
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString("&quot;")
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cfb writes a minimal OLE2 compound file holding one stream of 4 KiB under
// each of the given names, as Excel 97–2003 and encrypted workbooks are.
func cfb(t testing.TB, names ...string) []byte {
	t.Helper()
	const sector = 512
	const streamSectors = 8 // 4096 bytes: a regular stream, not in the mini stream
	n := len(names)
	dirSectors := (n + 1 + 3) / 4 // 4 entries of 128 bytes per sector
	total := 1 + dirSectors + n*streamSectors
	fat := make([]uint32, sector/4)
	for i := range fat {
		fat[i] = 0xFFFFFFFF // free
	}
	fat[0] = 0xFFFFFFFD // the FAT sector itself
	next := uint32(1)
	chain := func(count int) uint32 {
		start := next
		for i := 0; i < count; i++ {
			if i == count-1 {
				fat[next] = 0xFFFFFFFE
			} else {
				fat[next] = next + 1
			}
			next++
		}
		return start
	}
	dirStart := chain(dirSectors)
	starts := make([]uint32, n)
	for i := range names {
		starts[i] = chain(streamSectors)
	}
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.Write(oleMagic)
	b.Write(make([]byte, 16)) // CLSID
	le(uint16(0x3E))          // minor version
	le(uint16(3))             // major version 3: 512-byte sectors
	le(uint16(0xFFFE))        // byte order
	le(uint16(9))             // sector shift
	le(uint16(6))             // mini sector shift
	b.Write(make([]byte, 6))  // reserved
	le(uint32(0))             // directory sectors (0 for v3)
	le(uint32(1))             // FAT sectors
	le(dirStart)              // first directory sector
	le(uint32(0))             // transaction
	le(uint32(4096))          // mini stream cutoff
	le(uint32(0xFFFFFFFE))    // first mini FAT sector
	le(uint32(0))             // mini FAT sectors
	le(uint32(0xFFFFFFFE))    // first DIFAT sector
	le(uint32(0))             // DIFAT sectors
	le(uint32(0))             // DIFAT[0]: the FAT at sector 0
	for i := 1; i < 109; i++ {
		le(uint32(0xFFFFFFFF))
	}
	for _, v := range fat {
		le(v)
	}
	entry := func(name string, typ byte, child, right uint32, start uint32, size uint64) {
		u := utf16.Encode([]rune(name))
		nameBuf := make([]byte, 64)
		for i, c := range u {
			binary.LittleEndian.PutUint16(nameBuf[i*2:], c)
		}
		b.Write(nameBuf)
		le(uint16((len(u) + 1) * 2))
		b.WriteByte(typ)
		b.WriteByte(1)            // black
		le(uint32(0xFFFFFFFF))    // left sibling
		le(right)                 // right sibling
		le(child)                 // child
		b.Write(make([]byte, 16)) // CLSID
		le(uint32(0))             // state
		b.Write(make([]byte, 16)) // times
		le(start)
		le(size)
	}
	entry("Root Entry", 5, 1, 0xFFFFFFFF, 0xFFFFFFFE, 0)
	for i, name := range names {
		right := uint32(0xFFFFFFFF)
		if i+1 < n {
			right = uint32(i + 2)
		}
		entry(name, 2, 0xFFFFFFFF, right, starts[i], 4096)
	}
	for b.Len() < sector*(1+1+dirSectors) {
		b.Write(make([]byte, 128)) // empty directory entries
	}
	b.Write(bytes.Repeat([]byte{0x42}, n*streamSectors*sector))
	if b.Len() != sector*(1+total) {
		t.Fatalf("cfb: %d bytes, want %d", b.Len(), sector*(1+total))
	}
	return b.Bytes()
}

// open opens a workbook, failing the test on an error.
func open(t testing.TB, path string, lim Limits) *Workbook {
	t.Helper()
	if lim.TempDir == "" {
		lim.TempDir = t.TempDir()
	}
	wb, err := Open(path, filepath.Base(path), lim)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { wb.Close() })
	return wb
}

// sheetNamed returns the workbook's sheet of that name.
func sheetNamed(t testing.TB, wb *Workbook, name string) *Sheet {
	t.Helper()
	for _, s := range wb.Sheets {
		if s.Name == name {
			return s
		}
	}
	var names []string
	for _, s := range wb.Sheets {
		names = append(names, s.Name)
	}
	t.Fatalf("no sheet %q; sheets %q", name, names)
	return nil
}

// columns spells a sheet's columns as "name:TYPE".
func columns(s *Sheet) []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = c.Name + ":" + c.Type
	}
	return out
}

// rows returns a sheet's rows with each value spelled as its CSV field
// ("" for NULL), so tests compare text.
func rows(t testing.TB, s *Sheet) [][]string {
	t.Helper()
	var out [][]string
	err := s.emit(func(vals []value) error {
		r := make([]string, len(vals))
		for i, v := range vals {
			r[i] = v.csv(s.Columns[i].Type)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantError checks that err is a user error with cause and a message
// containing each of the given texts.
func wantError(t testing.TB, err error, cause error, texts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", cause)
	}
	if !errors.Is(err, cause) {
		t.Errorf("got error %v, want cause %v", err, cause)
	}
	if got := datachat.ErrorCode(err); got != datachat.EINVALID {
		t.Errorf("got code %q, want %q", got, datachat.EINVALID)
	}
	msg := datachat.ErrorMessage(err)
	for _, text := range texts {
		if !strings.Contains(msg, text) {
			t.Errorf("message %q does not say %q", msg, text)
		}
	}
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
