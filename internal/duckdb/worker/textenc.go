package worker

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	xunicode "golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
	"golang.org/x/text/transform"

	"datachat"
)

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:m], nil
}

// decompress returns path itself when it is not compressed, or a decompressed
// copy in work (gzip, including concatenated members, zstd, bzip2), stopping
// past limit bytes, or at a line longer than maxLine in a text file.
func decompress(ctx context.Context, path, work, name string, limit int64, maxLine int) (string, error) {
	head, err := readHead(path, 6)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	var open func(f io.Reader) (io.Reader, error)
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		open = func(f io.Reader) (io.Reader, error) { return gzip.NewReader(f) }
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		open = func(f io.Reader) (io.Reader, error) {
			d, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		}
	case bytes.HasPrefix(head, []byte("BZh")) && len(head) > 3 && head[3] >= '1' && head[3] <= '9':
		open = func(f io.Reader) (io.Reader, error) { return bzip2.NewReader(f), nil }
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "", datachat.Errorf(datachat.EINVALID, "%s is xz-compressed, which is not supported: use gzip, zstd or bzip2, or none", name)
	case bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, oleMagic):
		// A workbook (OOXML is a zip; an old .xls or an encrypted
		// workbook is an OLE2 file): not compressed data, sniffKind
		// sorts it out.
		return path, nil
	default:
		return path, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	r, err := open(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return "", datachat.Errorf(datachat.EINVALID, "%s cannot be decompressed: %v", name, err)
	}
	if c, ok := r.(io.Closer); ok {
		defer c.Close()
	}
	outPath := filepath.Join(work, fileDecompressed)
	out, err := os.Create(outPath)
	if err != nil {
		return "", noteWriteErr(err)
	}
	n, err := io.Copy(LimitLines(out, maxLine, name), io.LimitReader(ctxReader{ctx, r}, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	noteWriteErr(err)
	var de *datachat.Error
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.As(err, &de):
		return "", err
	case err != nil:
		return "", datachat.Errorf(datachat.EINVALID, "%s cannot be decompressed: %v", name, err)
	case n > limit:
		return "", datachat.Errorf(datachat.EINVALID, "%s decompresses to more than %s, the limit", name, SizeText(limit))
	}
	return outPath, nil
}

// oleMagic starts an OLE2 compound file: an old binary .xls, or an
// encrypted .xlsx (Office wraps those in one).
var oleMagic = []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}

// sniffKind tells Parquet, JSON, Excel and CSV apart by content (a zip is
// taken for a workbook unless it is named .zip).
func sniffKind(path, name string) (string, error) {
	head, err := readHead(path, 4096)
	if err != nil {
		return "", err
	}
	switch {
	case bytes.HasPrefix(head, oleMagic):
		return "xlsx", nil // xlsx.Open says which it is: an old .xls, or encrypted
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		if strings.HasSuffix(strings.ToLower(name), ".zip") {
			return "", datachat.Errorf(datachat.EINVALID, "%s is a ZIP archive, not a data file: extract the CSV, Parquet, JSON or Excel file from it first", name)
		}
		return "xlsx", nil
	}
	if text := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n"); len(text) > 0 && (text[0] == '{' || text[0] == '[') {
		return "json", nil
	}
	if len(head) > 4 {
		head = head[:4]
	}
	switch string(head) {
	case "PAR1":
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return "", err
		}
		tail := make([]byte, 4)
		if fi.Size() < 12 {
			return "", datachat.Errorf(datachat.EINVALID, "%s is a truncated Parquet file", name)
		}
		if _, err := f.ReadAt(tail, fi.Size()-4); err != nil {
			return "", err
		}
		if string(tail) == "PARE" {
			return "", datachat.Errorf(datachat.EINVALID, "%s is an encrypted Parquet file, which cannot be read", name)
		}
		if string(tail) != "PAR1" {
			return "", datachat.Errorf(datachat.EINVALID, "%s is a truncated Parquet file: its footer is missing", name)
		}
		return "parquet", nil
	case "PARE":
		return "", datachat.Errorf(datachat.EINVALID, "%s is an encrypted Parquet file, which cannot be read", name)
	}
	return "csv", nil
}

// textEncoding is how a CSV's bytes are to be read.
type textEncoding struct {
	name string            // as people know it; "" for UTF-8
	enc  encoding.Encoding // nil for UTF-8
}

// detectEncoding looks at the start of a text file: byte-order marks, UTF-16
// without one (NUL bytes in every other position), UTF-8, else a legacy
// encoding (Shift_JIS/CP932 when the bytes pair up as Japanese text, else
// Windows-1252, a superset of Latin-1). It refuses binary files, HTML, XML and
// JSON with a message saying so.
func detectEncoding(head []byte, name string) (textEncoding, error) {
	switch {
	case bytes.HasPrefix(head, []byte{0xff, 0xfe, 0, 0}):
		return textEncoding{"UTF-32LE", utf32.UTF32(utf32.LittleEndian, utf32.ExpectBOM)}, nil
	case bytes.HasPrefix(head, []byte{0, 0, 0xfe, 0xff}):
		return textEncoding{"UTF-32BE", utf32.UTF32(utf32.BigEndian, utf32.ExpectBOM)}, nil
	case bytes.HasPrefix(head, []byte{0xff, 0xfe}):
		return textEncoding{"UTF-16LE", xunicode.UTF16(xunicode.LittleEndian, xunicode.ExpectBOM)}, nil
	case bytes.HasPrefix(head, []byte{0xfe, 0xff}):
		return textEncoding{"UTF-16BE", xunicode.UTF16(xunicode.BigEndian, xunicode.ExpectBOM)}, nil
	}
	sample := head[:min(len(head), 4096)]
	var even, odd int
	for i, c := range sample {
		if c == 0 {
			if i%2 == 0 {
				even++
			} else {
				odd++
			}
		}
	}
	half := max(len(sample)/2, 1)
	switch {
	case odd*10 > half*3 && even*20 < half:
		return textEncoding{"UTF-16LE", xunicode.UTF16(xunicode.LittleEndian, xunicode.IgnoreBOM)}, nil
	case even*10 > half*3 && odd*20 < half:
		return textEncoding{"UTF-16BE", xunicode.UTF16(xunicode.BigEndian, xunicode.IgnoreBOM)}, nil
	case even+odd > 0:
		return textEncoding{}, datachat.Errorf(datachat.EINVALID, "%s holds binary data, not text a CSV is made of: a dataset is a %s file.", name, datachat.DatasetFormatNames())
	}
	text := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(text) > 0 {
		switch text[0] {
		case '<':
			return textEncoding{}, datachat.Errorf(datachat.EINVALID, "%s looks like an HTML or XML page, not CSV: a link must lead to the data file itself (a %s file).", name, datachat.DatasetFormatNames())
		case '{', '[':
			return textEncoding{}, datachat.Errorf(datachat.EINVALID, "%s looks like JSON, not CSV: name it .json (or .ndjson for one record a line) to load it as JSON.", name)
		}
	}
	if validUTF8Prefix(head) {
		return textEncoding{}, nil
	}
	return legacyEncoding(head), nil
}

// validUTF8Prefix reports whether b is UTF-8, allowing a character cut at the end.
func validUTF8Prefix(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return utf8.Valid(b)
}

// legacyEncoding picks Shift_JIS (CP932) when b decodes cleanly as Japanese
// text, else Windows-1252.
func legacyEncoding(b []byte) textEncoding {
	sjis := textEncoding{"Shift_JIS (CP932)", japanese.ShiftJIS}
	win := textEncoding{"Windows-1252", charmap.Windows1252}
	if bytes.Contains(b, []byte("\xef\xbf\xbd")) {
		return win
	}
	// A cut character at the end of the sample is not an error.
	if len(b) > 1 && b[len(b)-1] >= 0x81 {
		b = b[:len(b)-1]
	}
	s, _, err := transform.Bytes(japanese.ShiftJIS.NewDecoder(), b)
	if err != nil || bytes.ContainsRune(s, utf8.RuneError) {
		return win
	}
	var japaneseRunes, other int
	for _, r := range string(s) {
		switch {
		case r < 0x80:
		case unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Han) || r >= 0xff00 && r <= 0xffef || r >= 0x3000 && r <= 0x303f:
			japaneseRunes++
		default:
			other++
		}
	}
	if japaneseRunes >= 2 && japaneseRunes > other {
		return sjis
	}
	return win
}

// legacyEncodingOfFile scans a whole file for its non-ASCII lines and picks a
// legacy encoding from them (for a file whose start was plain ASCII).
func legacyEncodingOfFile(path string) (textEncoding, error) {
	f, err := os.Open(path)
	if err != nil {
		return textEncoding{}, err
	}
	defer f.Close()
	var sample []byte
	r := bufio.NewReaderSize(f, 1<<20)
	for len(sample) < 64<<10 {
		line, err := r.ReadSlice('\n')
		if hasHighByte(line) {
			sample = append(sample, line...)
		}
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return textEncoding{}, err
		}
	}
	return legacyEncoding(sample), nil
}

func hasHighByte(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// transcode writes in, decoded from enc, as UTF-8 to out, stopping at a line
// longer than maxLine.
func transcode(ctx context.Context, in, out string, enc encoding.Encoding, maxLine int, name string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := os.Create(out)
	if err != nil {
		return noteWriteErr(err)
	}
	bw := bufio.NewWriterSize(LimitLines(w, maxLine, name), 1<<20)
	_, err = io.Copy(bw, transform.NewReader(ctxReader{ctx, bufio.NewReaderSize(f, 1<<20)}, enc.NewDecoder()))
	if err == nil {
		err = bw.Flush()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return noteWriteErr(err)
}

// ContextReader returns a reader of r that stops reading, with ctx's error,
// once ctx ends: an upload's bytes are copied through it wherever they enter
// (the spool, decompression, transcoding).
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// LimitLines returns a writer to w that fails, with an EINVALID error naming
// the file, at the first line longer than max bytes (0: no limit): DuckDB's
// CSV reader would refuse such a line only after spending time on it, more
// than linearly in its length. A stream that starts as a Parquet file, a
// compressed one, or UTF-16/32 text is not checked (its text is, once
// decompressed or transcoded); nor is JSON, whose records need no line
// breaks.
func LimitLines(w io.Writer, max int, name string) io.Writer {
	if max <= 0 {
		return w
	}
	return &lineLimiter{w: w, max: max, name: name}
}

type lineLimiter struct {
	w       io.Writer
	max     int
	name    string
	head    []byte // the first bytes, until we know what the stream is
	off     bool   // not text: not checked
	line    int    // bytes of the current line so far
	lines   int
	decided bool
}

func (l *lineLimiter) Write(p []byte) (int, error) {
	if !l.decided {
		l.head = append(l.head, p[:min(len(p), headBytes-len(l.head))]...)
		if len(l.head) >= headBytes || len(p) == 0 {
			l.decided = true
			l.off = !looksLikeText(l.head)
		}
	}
	if !l.off {
		rest := p
		for len(rest) > 0 {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				l.line += len(rest)
				break
			}
			l.line += i
			if l.line > l.max {
				break
			}
			l.lines++
			l.line = 0
			rest = rest[i+1:]
		}
		if l.line > l.max {
			return 0, datachat.Errorf(datachat.EINVALID, "%s has a line longer than %s (line %d), the most a CSV line may hold here: is it really a CSV file, with line breaks?", l.name, SizeText(int64(l.max)), l.lines+1)
		}
	}
	return l.w.Write(p)
}

// headBytes is how much of a stream LimitLines reads before it decides what
// the stream is.
const headBytes = 64

// looksLikeText tells a stream's kind from its first bytes: CSV-like text,
// not Parquet, compressed, UTF-16/32 or JSON.
func looksLikeText(head []byte) bool {
	if t := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return false
	}
	for _, magic := range [][]byte{[]byte("PAR1"), []byte("PARE"), {0x1f, 0x8b}, {0x28, 0xb5, 0x2f, 0xfd}, []byte("BZh"), {0xfd, '7', 'z'}, []byte("PK\x03\x04"), {0xff, 0xfe}, {0xfe, 0xff}, {0, 0}} {
		if bytes.HasPrefix(head, magic) {
			return false
		}
	}
	return len(head) < 2 || head[0] != 0 && head[1] != 0 // UTF-16 without a BOM
}

// SizeText writes a byte count for people: 512 MiB, 1.5 GiB.
func SizeText(n int64) string {
	for _, u := range []struct {
		unit  string
		bytes int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.bytes {
			if n%u.bytes == 0 {
				return fmt.Sprintf("%d %s", n/u.bytes, u.unit)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.bytes), u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
