package xlsx

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	kflate "github.com/klauspost/compress/flate"
	"github.com/richardlehane/mscfb"
	"github.com/xuri/excelize/v2"
)

var (
	oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
	zipMagic = []byte("PK\x03\x04")
	// an empty zip: only its end-of-directory record
	emptyZipMagic = []byte("PK\x05\x06")
)

// Open reads the workbook at path (name is the file's name as the user knows
// it, for messages) and finds the table on each sheet. The caller closes the
// returned Workbook, which removes the spooled sheets.
//
// Errors: a *datachat.Error (EINVALID) whose cause is ErrXLS, ErrEncrypted,
// ErrDamaged, ErrTooLarge or ErrNoData; or an I/O error of the file system.
func Open(path, name string, lim Limits) (*Workbook, error) {
	lim = lim.withDefaults()
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size == 0 {
		return nil, userError(ErrDamaged, "%s is empty", name)
	}
	head := make([]byte, 8)
	n, _ := f.ReadAt(head, 0)
	head = head[:n]
	switch {
	case bytes.Equal(head, oleMagic):
		return nil, oleError(f, name)
	case bytes.HasPrefix(head, emptyZipMagic):
		return nil, userError(ErrDamaged, "%s is not an Excel workbook: it is an empty zip file", name)
	case !bytes.HasPrefix(head, zipMagic):
		return nil, userError(ErrDamaged, "%s is not an Excel workbook (.xlsx): an .xlsx file is a zip package, and this file is not one", name)
	}
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, userError(errors.Join(ErrDamaged, err), "%s is damaged: its zip directory cannot be read (%v); open it in Excel and save it again", name, err)
	}
	zr.RegisterDecompressor(zip.Deflate, func(r io.Reader) io.ReadCloser { return kflate.NewReader(r) })
	pkg, err := readPackage(zr, name, lim)
	if err != nil {
		return nil, err
	}

	base := lim.TempDir
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "xlsx-")
	if err != nil {
		return nil, fmt.Errorf("xlsx: temporary directory: %w", err)
	}
	wb := &Workbook{dir: dir}
	ok := false
	defer func() {
		if !ok {
			wb.Close()
		}
	}()
	model, err := openModel(path, name, dir, lim)
	if err != nil {
		return nil, err
	}
	var sst *sharedStrings
	if pkg.sharedStrings != nil {
		if sst, err = readSharedStrings(pkg.sharedStrings, name, lim); err != nil {
			return nil, err
		}
	}
	rd := &reader{name: name, lim: lim, sst: sst, styles: model.styles, dir: dir}
	for i, sh := range model.sheets {
		rel, found := pkg.rels[sh.rid]
		switch {
		case sh.state == "veryHidden":
			wb.Skipped = append(wb.Skipped, fmt.Sprintf("sheet %q is very hidden (macro or add-in machinery): skipped", sh.name))
			continue
		case !found || rel.file == nil:
			wb.Skipped = append(wb.Skipped, fmt.Sprintf("sheet %q has no content in the file: skipped", sh.name))
			continue
		case rel.kind != "worksheet":
			wb.Skipped = append(wb.Skipped, fmt.Sprintf("sheet %q is a %s, not a worksheet: skipped", sh.name, rel.kind))
			continue
		}
		if len(wb.Sheets) == lim.MaxSheets {
			return nil, userError(ErrTooLarge, "%s has more than %d sheets with data; split it into smaller workbooks", name, lim.MaxSheets)
		}
		s, err := rd.readSheet(rel.file, sh.name, i, model.dates)
		if err != nil {
			return nil, err
		}
		if s == nil {
			wb.Skipped = append(wb.Skipped, fmt.Sprintf("sheet %q holds no values: skipped", sh.name))
			continue
		}
		if sh.state == "hidden" {
			s.Hidden = true
			s.Notes = append([]string{"the sheet is hidden in Excel"}, s.Notes...)
		}
		wb.Sheets = append(wb.Sheets, s)
	}
	if len(wb.Sheets) == 0 {
		return nil, userError(ErrNoData, "%s has no sheet with data", name)
	}
	ok = true
	return wb, nil
}

// oleError says what an OLE2 compound file is: an encrypted .xlsx (Excel
// wraps those in OLE2), a binary .xls, or something else.
func oleError(f io.ReaderAt, name string) error {
	doc, err := mscfb.New(f)
	if err != nil {
		return userError(errors.Join(ErrDamaged, err), "%s is not an .xlsx workbook: it looks like an old Microsoft Office file but cannot be read (%v)", name, err)
	}
	var encrypted, workbook bool
	for entry, err := doc.Next(); err == nil; entry, err = doc.Next() {
		switch entry.Name {
		case "EncryptionInfo", "EncryptedPackage":
			encrypted = true
		case "Workbook", "Book":
			workbook = true
		}
	}
	switch {
	case encrypted:
		return userError(ErrEncrypted, "%s is password-protected: remove the password in Excel (File › Info › Protect Workbook › Encrypt with Password, then clear it) and upload it again", name)
	case workbook:
		return userError(ErrXLS, "%s is an old binary Excel 97–2003 .xls workbook: save it as .xlsx or CSV and upload that", name)
	}
	return userError(ErrDamaged, "%s is not an Excel workbook: it is an old Microsoft Office (OLE2) file of another kind", name)
}

// pkgPart is a sheet's relationship from the workbook part.
type pkgPart struct {
	kind string // worksheet, chart sheet, dialog sheet, macro sheet
	file *zip.File
}

// pkg is what the zip package holds that this package reads itself.
type pkg struct {
	rels          map[string]pkgPart // by relationship id
	sharedStrings *zip.File
}

// readPackage checks the zip package's directory and finds the workbook's
// parts through its relationships.
func readPackage(zr *zip.Reader, name string, lim Limits) (*pkg, error) {
	files := make(map[string]*zip.File, len(zr.File))
	var total, other uint64
	for _, zf := range zr.File {
		n := strings.ToLower(strings.TrimPrefix(strings.ReplaceAll(zf.Name, `\`, "/"), "/"))
		files[n] = zf
		total += zf.UncompressedSize64
		if !strings.HasPrefix(n, "xl/worksheets/") && !strings.HasSuffix(n, "sharedstrings.xml") {
			other += zf.UncompressedSize64
		}
	}
	if total > uint64(lim.MaxUnzipBytes) {
		return nil, userError(ErrTooLarge, "%s expands to %s when unzipped, over the limit of %s", name, byteSize(total), byteSize(uint64(lim.MaxUnzipBytes)))
	}
	if other > uint64(lim.MaxOtherBytes) {
		return nil, userError(ErrTooLarge, "%s holds %s of pictures, styles and other parts besides its sheets, over the limit of %s; remove the pictures and upload it again", name, byteSize(other), byteSize(uint64(lim.MaxOtherBytes)))
	}
	if mt := files["mimetype"]; mt != nil {
		if b, err := readSmall(mt, 200); err == nil && strings.Contains(string(b), "opendocument.spreadsheet") {
			return nil, userError(ErrDamaged, "%s is an OpenDocument spreadsheet (.ods), not an .xlsx workbook: save it as .xlsx or CSV and upload that", name)
		}
	}
	wbPath := "xl/workbook.xml"
	if rels := files["_rels/.rels"]; rels != nil {
		rs, err := readRels(rels)
		if err != nil {
			return nil, damaged(name, "its package relationships cannot be read", err)
		}
		for _, r := range rs {
			if strings.HasSuffix(r.Type, "/officeDocument") {
				wbPath = resolvePart("", r.Target)
				break
			}
		}
	}
	if strings.HasSuffix(wbPath, ".bin") || files["xl/workbook.bin"] != nil {
		return nil, userError(ErrDamaged, "%s is a binary .xlsb workbook: save it as .xlsx or CSV and upload that", name)
	}
	if files[wbPath] == nil {
		return nil, userError(ErrDamaged, "%s is not an Excel workbook: the zip package has no workbook part (%s)", name, wbPath)
	}
	p := &pkg{rels: map[string]pkgPart{}}
	dir, file := path.Split(wbPath)
	if rels := files[dir+"_rels/"+file+".rels"]; rels != nil {
		rs, err := readRels(rels)
		if err != nil {
			return nil, damaged(name, "its workbook relationships cannot be read", err)
		}
		for _, r := range rs {
			target := files[resolvePart(dir, r.Target)]
			kind := r.Type[strings.LastIndexByte(r.Type, '/')+1:]
			switch kind {
			case "worksheet":
			case "chartsheet":
				kind = "chart sheet"
			case "dialogsheet":
				kind = "dialog sheet"
			case "xlMacrosheet", "xlIntlMacrosheet":
				kind = "macro sheet"
			case "sharedStrings":
				p.sharedStrings = target
				continue
			default:
				continue
			}
			p.rels[r.ID] = pkgPart{kind: kind, file: target}
		}
	}
	if p.sharedStrings == nil {
		p.sharedStrings = files[dir+"sharedstrings.xml"]
	}
	return p, nil
}

// resolvePart resolves a relationship target against the source part's
// directory, as a lower-case zip entry name.
func resolvePart(dir, target string) string {
	target = strings.ReplaceAll(target, `\`, "/")
	var p string
	if strings.HasPrefix(target, "/") {
		p = path.Clean(target)
	} else {
		p = path.Clean("/" + dir + target)
	}
	return strings.ToLower(strings.TrimPrefix(p, "/"))
}

type relationship struct {
	ID     string `xml:"Id,attr"`
	Type   string `xml:"Type,attr"`
	Target string `xml:"Target,attr"`
}

func readRels(zf *zip.File) ([]relationship, error) {
	b, err := readSmall(zf, 16<<20)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Rels []relationship `xml:"Relationship"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	return doc.Rels, nil
}

// readSmall reads a small part whole, refusing one over max bytes.
func readSmall(zf *zip.File, max int64) ([]byte, error) {
	if zf.UncompressedSize64 > uint64(max) {
		return nil, fmt.Errorf("%s is %d bytes, over %d", zf.Name, zf.UncompressedSize64, max)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, max+1))
}

func damaged(name, what string, err error) error {
	return userError(errors.Join(ErrDamaged, err), "%s is damaged: %s (%v); open it in Excel and save it again", name, what, err)
}

// model is what excelize tells of the workbook.
type model struct {
	sheets []modelSheet
	dates  dateSystem
	styles []fmtClass // by cell style (xf) index
}

type modelSheet struct {
	name, rid, state string
}

// openModel opens the workbook with excelize for its sheets, date system
// and styles. excelize unzips every part as it opens (a sheet over its XML
// limit to a temporary file in dir, removed when it closes).
func openModel(path, name, dir string, lim Limits) (*model, error) {
	xmlLimit := min(int64(16<<20), lim.MaxUnzipBytes)
	f, err := excelize.OpenFile(path, excelize.Options{
		UnzipSizeLimit:    lim.MaxUnzipBytes,
		UnzipXMLSizeLimit: xmlLimit,
		TmpDir:            dir,
	})
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, damaged(name, "Excel's workbook structure cannot be read", err)
	}
	defer f.Close()
	m := &model{}
	if f.WorkBook != nil {
		for _, s := range f.WorkBook.Sheets.Sheet {
			m.sheets = append(m.sheets, modelSheet{name: s.Name, rid: s.ID, state: s.State})
		}
	}
	props, err := f.GetWorkbookProps()
	if err != nil {
		return nil, damaged(name, "its workbook properties cannot be read", err)
	}
	if props.Date1904 != nil && *props.Date1904 {
		m.dates = date1904
	}
	if f.Styles != nil && f.Styles.CellXfs != nil {
		n := min(len(f.Styles.CellXfs.Xf), 1<<16)
		m.styles = make([]fmtClass, n)
		for i := range n {
			st, err := f.GetStyle(i)
			if err != nil || st == nil {
				continue
			}
			code := ""
			if st.CustomNumFmt != nil {
				code = *st.CustomNumFmt
			}
			m.styles[i] = classifyNumFmt(st.NumFmt, code)
		}
	}
	return m, nil
}

func byteSize(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
