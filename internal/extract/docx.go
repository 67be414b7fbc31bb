package extract

import (
	"archive/zip"
	"encoding/xml"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Limits on the DOCX zip container, against zip bombs: the archive may list at
// most maxZipEntries files whose declared sizes add up to at most
// maxZipDeclared, and no part is read past maxPartBytes, whatever it declares.
// They are variables so that tests can lower them.
var (
	maxZipEntries        = 10_000
	maxZipDeclared int64 = 1 << 30
	maxPartBytes   int64 = 256 << 20
)

const docxMainPart = "word/document.xml"

// isDOCX reports whether the zip file holds a Word document.
func isDOCX(ra io.ReaderAt, size int64) bool {
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return false
	}
	if len(zr.File) > maxZipEntries {
		return true // let extractDOCX say why it refuses
	}
	for _, f := range zr.File {
		if f.Name == docxMainPart {
			return true
		}
	}
	// The main part may have another name; spreadsheets and presentations
	// keep theirs under xl/ and ppt/.
	return strings.HasPrefix(mainPartName(zr), "word/")
}

// extractDOCX reads paragraphs, headings (from paragraph styles) and tables
// from a Word document. Footnotes, headers, footers, comments and deleted text
// are left out.
func extractDOCX(ra io.ReaderAt, size int64) (*Document, error) {
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, badFile(ErrDamaged, "not a valid DOCX file (zip: %v)", err)
	}
	if len(zr.File) > maxZipEntries {
		return nil, badFile(ErrTooLarge, "the DOCX archive has more than %d entries", maxZipEntries)
	}
	var declared uint64
	for _, f := range zr.File {
		declared += f.UncompressedSize64
		if declared > uint64(maxZipDeclared) {
			return nil, badFile(ErrTooLarge, "the DOCX archive unpacks to more than %d bytes", maxZipDeclared)
		}
	}
	main := mainPartName(zr)
	if main == "" {
		main = docxMainPart
	}
	files := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		files[f.Name] = f
	}
	mf := files[main]
	if mf == nil {
		return nil, badFile(ErrDamaged, "not a Word document: %s is missing", main)
	}
	var styles map[string]docxStyle
	if sf := files[path.Join(path.Dir(main), "styles.xml")]; sf != nil {
		styles, err = parseDOCXStyles(sf)
		if err != nil {
			return nil, err
		}
	}
	doc := &Document{}
	if cf := files["docProps/core.xml"]; cf != nil {
		doc.Title = parseDOCXTitle(cf)
	}
	rc, err := openPart(mf)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	blocks, err := parseDOCXBody(rc, styles)
	if err != nil {
		return nil, err
	}
	doc.Blocks = blocks
	if doc.Title == "" {
		for _, b := range blocks {
			if b.Kind == Heading {
				doc.Title = b.Text
				break
			}
		}
	}
	return doc, nil
}

// mainPartName finds the main document part from the package relationships.
func mainPartName(zr *zip.Reader) string {
	for _, f := range zr.File {
		if f.Name != "_rels/.rels" {
			continue
		}
		rc, err := openPart(f)
		if err != nil {
			return ""
		}
		defer rc.Close()
		var rels struct {
			Rel []struct {
				Type   string `xml:"Type,attr"`
				Target string `xml:"Target,attr"`
			} `xml:"Relationship"`
		}
		if xml.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&rels) != nil {
			return ""
		}
		for _, r := range rels.Rel {
			if strings.HasSuffix(r.Type, "/officeDocument") {
				return strings.TrimPrefix(path.Clean("/"+r.Target), "/")
			}
		}
	}
	return ""
}

// openPart opens a zip entry for reading at most maxPartBytes.
func openPart(f *zip.File) (io.ReadCloser, error) {
	if f.UncompressedSize64 > uint64(maxPartBytes) {
		return nil, badFile(ErrTooLarge, "%s unpacks to more than %d bytes", f.Name, maxPartBytes)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, badFile(ErrDamaged, "cannot open %s in the DOCX archive: %v", f.Name, err)
	}
	return &limitedPart{rc: rc, r: io.LimitReader(rc, maxPartBytes+1), name: f.Name}, nil
}

type limitedPart struct {
	rc   io.ReadCloser
	r    io.Reader
	n    int64
	name string
}

func (p *limitedPart) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.n > maxPartBytes {
		return n, badFile(ErrTooLarge, "%s unpacks to more than %d bytes", p.name, maxPartBytes)
	}
	if err != nil && err != io.EOF {
		err = badFile(ErrDamaged, "cannot read %s in the DOCX archive: %v", p.name, err)
	}
	return n, err
}

func (p *limitedPart) Close() error { return p.rc.Close() }

// docxStyle is what a paragraph style says about structure.
type docxStyle struct {
	name    string
	basedOn string
	outline int // outline level 0–8 from the style, -1 if none
	level   int // resolved heading level, 0 for body text
	list    bool
}

var headingName = regexp.MustCompile(`^heading\s*([1-9])$`)

func parseDOCXStyles(f *zip.File) (map[string]docxStyle, error) {
	rc, err := openPart(f)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var doc struct {
		Styles []struct {
			Type    string `xml:"type,attr"`
			ID      string `xml:"styleId,attr"`
			Name    xmlVal `xml:"name"`
			BasedOn xmlVal `xml:"basedOn"`
			PPr     struct {
				Outline *xmlVal   `xml:"outlineLvl"`
				NumPr   *struct{} `xml:"numPr"`
			} `xml:"pPr"`
		} `xml:"style"`
	}
	d := xml.NewDecoder(rc)
	d.Strict = false
	if err := d.Decode(&doc); err != nil {
		if isFileError(err) {
			return nil, err
		}
		return nil, badFile(ErrDamaged, "damaged styles in the DOCX file: %v", err)
	}
	styles := make(map[string]docxStyle, len(doc.Styles))
	for _, s := range doc.Styles {
		if s.Type != "" && s.Type != "paragraph" {
			continue
		}
		st := docxStyle{name: strings.ToLower(strings.TrimSpace(s.Name.Val)), basedOn: s.BasedOn.Val, outline: -1}
		if s.PPr.Outline != nil {
			if n, err := strconv.Atoi(s.PPr.Outline.Val); err == nil {
				st.outline = n
			}
		}
		st.list = s.PPr.NumPr != nil || strings.Contains(st.name, "list")
		styles[s.ID] = st
	}
	for id, st := range styles {
		st.level = styleLevel(styles, id, 0)
		styles[id] = st
	}
	return styles, nil
}

// styleLevel resolves the heading level of a style: its name ("heading 2",
// "Title"), else its outline level, else its base style's.
func styleLevel(styles map[string]docxStyle, id string, depth int) int {
	st, ok := styles[id]
	if !ok || depth > 16 {
		return 0
	}
	if m := headingName.FindStringSubmatch(st.name); m != nil {
		return int(m[1][0] - '0')
	}
	if st.name == "title" {
		return 1
	}
	if strings.HasPrefix(st.name, "toc") || st.name == "subtitle" {
		return 0
	}
	if st.outline >= 0 {
		if st.outline <= 8 {
			return st.outline + 1
		}
		return 0
	}
	if st.basedOn != "" && st.basedOn != id {
		return styleLevel(styles, st.basedOn, depth+1)
	}
	return 0
}

type xmlVal struct {
	Val string `xml:"val,attr"`
}

func parseDOCXTitle(f *zip.File) string {
	rc, err := openPart(f)
	if err != nil {
		return ""
	}
	defer rc.Close()
	var core struct {
		Title string `xml:"title"`
	}
	if xml.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&core) != nil {
		return ""
	}
	return strings.TrimSpace(core.Title)
}

// maxHeadingChars: a "heading" longer than this is body text in a heading style.
const maxHeadingChars = 300

// parseDOCXBody streams the main part, collecting paragraphs and tables.
func parseDOCXBody(r io.Reader, styles map[string]docxStyle) ([]Block, error) {
	d := xml.NewDecoder(r)
	d.Strict = false
	var (
		blocks    []Block
		textBytes int
		para      strings.Builder
		paraDepth int
		pStyle    string
		pOutline  = -1
		pList     bool
		inText    bool
		inPPr     int
		tblDepth  int
		rows      []string
		cells     []string
		cell      strings.Builder
	)
	emit := func(b Block) error {
		textBytes += len(b.Text)
		if textBytes > MaxTextBytes {
			return badFile(ErrTooLarge, "extracted text is larger than %d bytes", MaxTextBytes)
		}
		blocks = append(blocks, b)
		return nil
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			if isFileError(err) {
				return nil, err
			}
			return nil, badFile(ErrDamaged, "damaged DOCX document: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "p":
				paraDepth++
				if paraDepth == 1 {
					para.Reset()
					pStyle, pOutline, pList = "", -1, false
				}
			case "pPr":
				inPPr++
			case "pStyle":
				if inPPr > 0 && paraDepth == 1 {
					pStyle = attr(t, "val")
				}
			case "outlineLvl":
				if inPPr > 0 && paraDepth == 1 {
					if n, err := strconv.Atoi(attr(t, "val")); err == nil {
						pOutline = n
					}
				}
			case "numPr":
				if inPPr > 0 && paraDepth == 1 {
					pList = true
				}
			case "t":
				inText = paraDepth > 0
			case "tab", "ptab":
				if paraDepth > 0 && inPPr == 0 {
					para.WriteByte('\t')
				}
			case "br", "cr":
				if paraDepth > 0 {
					para.WriteByte('\n')
				}
			case "noBreakHyphen":
				para.WriteByte('-')
			case "instrText", "delText", "Fallback", "rPr", "sectPr", "footnoteReference", "endnoteReference":
				if err := d.Skip(); err != nil {
					return nil, badFile(ErrDamaged, "damaged DOCX document: %v", err)
				}
			case "tbl":
				tblDepth++
				if tblDepth == 1 {
					rows = rows[:0]
				}
			case "tr":
				if tblDepth == 1 {
					cells = cells[:0]
				}
			case "tc":
				if tblDepth == 1 {
					cell.Reset()
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inText = false
			case "pPr":
				if inPPr > 0 {
					inPPr--
				}
			case "p":
				if paraDepth == 0 {
					continue
				}
				paraDepth--
				if paraDepth > 0 {
					para.WriteByte('\n')
					continue
				}
				text := cleanSpace(para.String())
				if text == "" {
					continue
				}
				if tblDepth > 0 {
					if cell.Len() > 0 {
						cell.WriteByte(' ')
					}
					cell.WriteString(text)
					continue
				}
				st := styles[pStyle]
				level := st.level
				if pOutline >= 0 && pOutline <= 8 {
					level = pOutline + 1
				}
				if level > 0 && len(text) <= maxHeadingChars {
					if level > 6 {
						level = 6
					}
					if err := emit(Block{Kind: Heading, Level: level, Text: oneLine(text)}); err != nil {
						return nil, err
					}
					continue
				}
				if pList || st.list {
					text = "- " + text
				}
				if err := emit(Block{Kind: Paragraph, Text: text}); err != nil {
					return nil, err
				}
			case "tc":
				if tblDepth == 1 {
					cells = append(cells, oneLine(cell.String()))
				}
			case "tr":
				if tblDepth == 1 {
					row := strings.TrimSpace(strings.Join(cells, " | "))
					if strings.Trim(row, "| ") != "" {
						rows = append(rows, row)
					}
				}
			case "tbl":
				if tblDepth == 0 {
					continue
				}
				tblDepth--
				if tblDepth == 0 && len(rows) > 0 {
					if err := emit(Block{Kind: Table, Text: strings.Join(rows, "\n")}); err != nil {
						return nil, err
					}
				}
			}
		case xml.CharData:
			if inText {
				para.Write(t)
			}
		}
	}
	if paraDepth != 0 || tblDepth != 0 {
		if len(blocks) == 0 {
			return nil, badFile(ErrDamaged, "damaged DOCX document: unexpected end")
		}
	}
	return blocks, nil
}

func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// cleanSpace trims a paragraph and collapses runs of spaces inside lines,
// keeping line breaks.
func cleanSpace(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	var sb strings.Builder
	sb.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r == '\n':
			sb.WriteByte('\n')
			space = false
		case isSpace(r):
			space = true
		default:
			if space && sb.Len() > 0 && !strings.HasSuffix(sb.String(), "\n") {
				sb.WriteByte(' ')
			}
			space = false
			sb.WriteRune(r)
		}
	}
	return strings.TrimSpace(sb.String())
}

// oneLine collapses all white space of s to single spaces.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, isSpace), " ")
}
