package testfiles

import (
	"bytes"
	"compress/zlib"
	"crypto/md5"
	"crypto/rc4"
	"fmt"
	"io"
	"strings"
	"sync"
)

// PDF describes a PDF to write: pages of content streams in Helvetica
// (/F1), optionally Flate-compressed and encrypted with the standard
// security handler (revision 2, 40-bit RC4).
type PDF struct {
	Pages [][]byte // content stream of each page; nil: an empty page
	Flate bool
	// Encrypt encrypts the file; UserPassword is then the password needed
	// to open it ("" opens it) and Permissions the permission flags (P), 0
	// meaning all.
	Encrypt      bool
	UserPassword string
	Permissions  int32
	// Image adds a 2×2 grey image /Im1 to every page's resources.
	Image bool
	// Raw, if set, is written as the first page's content stream as it is,
	// with RawFilter as its /Filter (it must already be encoded).
	Raw       []byte
	RawFilter string
}

// TextPage returns a content stream that draws paragraphs of lines from the
// top of a Letter page: 12 pt Helvetica, 14 pt between lines and one empty
// line between paragraphs. The text must be ASCII.
func TextPage(paragraphs ...[]string) []byte {
	var b bytes.Buffer
	b.WriteString("BT /F1 12 Tf 14 TL 72 720 Td\n")
	for i, para := range paragraphs {
		if i > 0 {
			b.WriteString("T*\n")
		}
		for _, line := range para {
			fmt.Fprintf(&b, "(%s) Tj T*\n", pdfString(line))
		}
	}
	b.WriteString("ET\n")
	return b.Bytes()
}

// pdfString escapes s for a PDF literal string.
func pdfString(s string) string {
	return strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(s)
}

// pdfPadding pads passwords (PDF 1.7, 7.6.3.3).
var pdfPadding = []byte("\x28\xBF\x4E\x5E\x4E\x75\x8A\x41\x64\x00\x4E\x56\xFF\xFA\x01\x08\x2E\x2E\x00\xB6\xD0\x68\x3E\x80\x2F\x0C\xA9\xFE\x64\x53\x69\x7A")

func padPassword(p string) []byte {
	return append([]byte(p), pdfPadding...)[:32]
}

func rc4Crypt(key, data []byte) []byte {
	c, err := rc4.NewCipher(key)
	if err != nil {
		panic(err)
	}
	out := make([]byte, len(data))
	c.XORKeyStream(out, data)
	return out
}

// Bytes returns the PDF file.
func (p PDF) Bytes() []byte {
	var b bytes.Buffer
	var offsets []int
	id := []byte("datachat-test-id")
	perms := p.Permissions
	if perms == 0 {
		perms = -4 // every permission (bits 3 and up set)
	}
	var key []byte // the file key when encrypting
	var o, u []byte
	if p.Encrypt {
		// Algorithms 3, 2 and 4 of PDF 1.7, 7.6.3.4, for revision 2; the
		// owner password is "owner".
		h := md5.Sum(padPassword("owner"))
		o = rc4Crypt(h[:5], padPassword(p.UserPassword))
		m := md5.New()
		m.Write(padPassword(p.UserPassword))
		m.Write(o)
		m.Write([]byte{byte(perms), byte(perms >> 8), byte(perms >> 16), byte(perms >> 24)})
		m.Write(id)
		key = m.Sum(nil)[:5]
		u = rc4Crypt(key, pdfPadding)
	}
	// stream returns an object body holding data as a stream, encoded as
	// asked and encrypted for object number num.
	stream := func(num int, dict string, data []byte, filter string) string {
		if filter == "" && p.Flate {
			var z bytes.Buffer
			zw := zlib.NewWriter(&z)
			zw.Write(data)
			zw.Close()
			data, filter = z.Bytes(), "/FlateDecode"
		}
		if filter != "" {
			dict += " /Filter " + filter
		}
		if key != nil {
			k := append(append([]byte{}, key...), byte(num), byte(num>>8), byte(num>>16), 0, 0)
			h := md5.Sum(k)
			data = rc4Crypt(h[:min(len(key)+5, 16)], data)
		}
		return fmt.Sprintf("<< %s /Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
	}
	obj := func(body string) {
		offsets = append(offsets, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offsets), body)
	}

	contents := p.Pages
	if p.Raw != nil && len(contents) == 0 {
		contents = [][]byte{nil}
	}
	n := len(contents)
	// Objects: 1 catalog, 2 pages, 3 font, 4 image, then a page and its
	// contents for each page, then the encryption dictionary.
	pageNum := func(i int) int { return 5 + 2*i }
	b.WriteString("%PDF-1.4\n%\xE2\xE3\xCF\xD3\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	var kids []string
	for i := range n {
		kids = append(kids, fmt.Sprintf("%d 0 R", pageNum(i)))
	}
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	obj(stream(4, "/Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8", []byte{0, 255, 255, 0}, ""))
	for i, c := range contents {
		res := "/Font << /F1 3 0 R >>"
		if p.Image {
			res += " /XObject << /Im1 4 0 R >>"
		}
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << %s >> /Contents %d 0 R >>", res, pageNum(i)+1))
		if i == 0 && p.Raw != nil {
			obj(stream(pageNum(i)+1, "", p.Raw, p.RawFilter))
		} else {
			obj(stream(pageNum(i)+1, "", c, ""))
		}
	}
	trailer := fmt.Sprintf("/Size %d /Root 1 0 R /ID [<%x> <%x>]", len(offsets)+1, id, id)
	if p.Encrypt {
		obj(fmt.Sprintf("<< /Filter /Standard /V 1 /R 2 /O <%x> /U <%x> /P %d >>", o, u, perms))
		trailer = fmt.Sprintf("/Size %d /Root 1 0 R /Encrypt %d 0 R /ID [<%x> <%x>]", len(offsets)+1, len(offsets), id, id)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n", trailer, xref)
	return b.Bytes()
}

// FlateBombSize is how far the content stream of [FlateBomb] unpacks.
const FlateBombSize = 200 << 20

// FlateBomb returns a one-page PDF whose content stream is a line of text
// followed by 200 MiB of zeros (white space to a PDF parser), Flate-compressed
// to about 200 KiB.
func FlateBomb() []byte { return flateBomb() }

var flateBomb = sync.OnceValue(func() []byte {
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		panic(err)
	}
	io.WriteString(zw, "BT /F1 12 Tf 72 720 Td (Hello from the bomb) Tj ET\n")
	zeros := make([]byte, 1<<20)
	for range FlateBombSize >> 20 {
		zw.Write(zeros)
	}
	zw.Close()
	return PDF{Raw: z.Bytes(), RawFilter: "/FlateDecode"}.Bytes()
})

// ProsePage returns a [TextPage] of paragraphs, each wrapped into lines of
// at most 80 characters.
func ProsePage(paragraphs ...string) []byte {
	lines := make([][]string, len(paragraphs))
	for i, p := range paragraphs {
		lines[i] = wrap(p, 80)
	}
	return TextPage(lines...)
}

// wrap breaks s into lines of at most width bytes at spaces (a longer word
// has a line of its own).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
