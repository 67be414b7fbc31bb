package xlsx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/unicode"
)

// xmlScanner reads the XML of a sheet or of the shared strings as a stream
// of start tags, end tags and text, ten times faster than encoding/xml's
// RawToken and without an allocation per token: a million-row sheet is
// hundreds of megabytes of XML. It reads what Excel and other writers
// produce: elements with or without a namespace prefix (reported by local
// name), attributes in either quote, the five predefined entities and
// character references, CDATA sections, comments and processing
// instructions. A DOCTYPE is refused (no writer of workbooks uses one, and
// it could define entities).
type xmlScanner struct {
	r *bufio.Reader
	// wantText asks next to keep the text up to the next tag; otherwise it
	// is skipped.
	wantText bool
	maxText  int

	kind     tokenKind
	name     []byte // the local name of a start or end tag
	attrs    []xmlAttr
	text     []byte
	closing  bool // the start tag closed itself: an end tag follows
	cr       bool // the text so far ends in a \r, read as a line break
	buf      []byte
	longAttr []byte // scratch: an attribute value longer than the reader's buffer, joined; CDATA with its line breaks read
	breaks   []byte // scratch: an attribute value with its line breaks read
	err      error
}

type tokenKind uint8

const (
	tokStart tokenKind = iota + 1
	tokEnd
	tokText
)

// xmlAttr is one attribute: its local name and value, valid until the next
// token.
type xmlAttr struct {
	name, value []byte
}

const (
	maxXMLName  = 256
	maxXMLAttrs = 64
	maxXMLAttr  = 64 << 10
)

var errDoctype = errors.New("XML with a DOCTYPE")

// newXMLScanner reads r, transcoding it to UTF-8 when it declares another
// encoding or starts with a UTF-16 byte order mark.
func newXMLScanner(r io.Reader, maxText int) (*xmlScanner, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	head, _ := br.Peek(256)
	var in io.Reader
	switch {
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}), bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		in = unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewDecoder().Reader(br)
	default:
		if enc := declaredEncoding(head); enc != "" {
			tr, err := charset.NewReaderLabel(enc, br)
			if err != nil {
				return nil, fmt.Errorf("XML in encoding %q: %w", enc, err)
			}
			in = tr
		}
	}
	if in != nil {
		br = bufio.NewReaderSize(in, 256<<10)
	}
	return &xmlScanner{r: br, maxText: maxText}, nil
}

// declaredEncoding is the encoding an XML declaration names, "" for UTF-8 or
// none.
func declaredEncoding(head []byte) string {
	if !bytes.HasPrefix(bytes.TrimPrefix(head, []byte("\xEF\xBB\xBF")), []byte("<?xml")) {
		return ""
	}
	end := bytes.Index(head, []byte("?>"))
	if end < 0 {
		return ""
	}
	decl := head[:end]
	i := bytes.Index(decl, []byte("encoding"))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(decl[i+len("encoding"):], " \t\r\n=")
	if len(rest) == 0 || (rest[0] != '"' && rest[0] != '\'') {
		return ""
	}
	j := bytes.IndexByte(rest[1:], rest[0])
	if j < 0 {
		return ""
	}
	enc := string(bytes.ToLower(rest[1 : 1+j]))
	if enc == "utf-8" || enc == "utf8" {
		return ""
	}
	return enc
}

// next reads the next token. It returns false at the end of the input or on
// an error (then err is set).
func (s *xmlScanner) next() bool {
	if s.err != nil {
		return false
	}
	if s.closing {
		s.closing = false
		s.kind = tokEnd
		return true
	}
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			if err != io.EOF {
				s.err = err
			}
			return false
		}
		if c != '<' {
			s.r.UnreadByte()
			if s.wantText {
				s.kind = tokText
				s.err = s.readText()
				return s.err == nil
			}
			if s.err = s.skipText(); s.err != nil {
				return false
			}
			continue
		}
		c, err = s.r.ReadByte()
		if err != nil {
			s.err = io.ErrUnexpectedEOF
			return false
		}
		switch c {
		case '/':
			if s.name, s.err = s.readName(s.name[:0]); s.err != nil {
				return false
			}
			s.skipSpace()
			if b, err := s.r.ReadByte(); err != nil || b != '>' {
				s.err = errors.New("XML end tag not closed")
				return false
			}
			s.kind = tokEnd
			return true
		case '?':
			if s.err = s.skipPast("?>"); s.err != nil {
				return false
			}
		case '!':
			ok, err := s.special()
			if err != nil {
				s.err = err
				return false
			}
			if ok {
				return true
			}
		default:
			s.r.UnreadByte()
			s.err = s.readStart()
			return s.err == nil
		}
	}
}

// special reads what follows "<!": a comment (skipped), CDATA (text, when
// text is wanted) or a DOCTYPE (refused). It returns true for a token.
func (s *xmlScanner) special() (bool, error) {
	p, err := s.r.Peek(2)
	if err == nil && string(p) == "--" {
		s.r.Discard(2)
		return false, s.skipPast("-->")
	}
	p, err = s.r.Peek(7)
	if err != nil || string(p) != "[CDATA[" {
		return false, errDoctype
	}
	s.r.Discard(7)
	s.text = s.text[:0]
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return false, io.ErrUnexpectedEOF
		}
		s.text = append(s.text, c)
		if c == '>' && bytes.HasSuffix(s.text, []byte("]]>")) {
			s.text = s.text[:len(s.text)-3]
			break
		}
		if len(s.text) > s.maxText {
			return false, errTextTooLong
		}
	}
	if bytes.IndexByte(s.text, '\r') >= 0 {
		// Line breaks in CDATA are read as everywhere else: \r\n or \r alone is
		// \n (a \r just outside the section is not joined with a \n in it).
		s.cr = false
		s.longAttr = s.appendLiteral(s.longAttr[:0], s.text)
		s.text = append(s.text[:0], s.longAttr...)
	}
	s.cr = false
	if !s.wantText {
		return false, nil
	}
	s.kind = tokText
	return true, nil
}

var errTextTooLong = errors.New("XML text too long")

// skipPast discards input up to and including end.
func (s *xmlScanner) skipPast(end string) error {
	matched := 0
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return io.ErrUnexpectedEOF
		}
		switch {
		case c == end[matched]:
			matched++
			if matched == len(end) {
				return nil
			}
		case c == end[0]:
			matched = 1
		default:
			matched = 0
		}
	}
}

func (s *xmlScanner) skipSpace() {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			s.r.UnreadByte()
			return
		}
	}
}

// skipText discards text up to the next '<'.
func (s *xmlScanner) skipText() error {
	for {
		_, err := s.r.ReadSlice('<')
		switch err {
		case nil:
			return s.r.UnreadByte()
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return nil
		}
		return err
	}
}

// readText reads text up to the next '<', decoding references.
func (s *xmlScanner) readText() error {
	s.text = s.text[:0]
	s.cr = false
	for {
		b, err := s.r.ReadSlice('<')
		switch err {
		case nil:
			s.r.UnreadByte() // b stays valid: nothing is read before it is used
			s.text, err = s.appendDecoded(s.text, b[:len(b)-1])
		case bufio.ErrBufferFull, io.EOF:
			end := err == io.EOF
			if s.text, err = s.appendDecoded(s.text, b); err == nil && !end {
				if len(s.text) > s.maxText {
					return errTextTooLong
				}
				continue
			}
		}
		if err == nil && len(s.text) > s.maxText {
			err = errTextTooLong
		}
		return err
	}
}

// appendDecoded appends chunk with its references decoded. A reference cut
// by the end of the chunk is completed from the reader (the chunk is not
// used after that read, which may overwrite it).
func (s *xmlScanner) appendDecoded(dst, chunk []byte) ([]byte, error) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '&')
		if i < 0 {
			dst = s.appendLiteral(dst, chunk)
			break
		}
		dst = s.appendLiteral(dst, chunk[:i])
		s.cr = false
		chunk = chunk[i+1:]
		j := bytes.IndexByte(chunk, ';')
		if j < 0 {
			// The reference continues past this chunk.
			ref := append([]byte(nil), chunk...)
			for len(ref) < 16 {
				c, err := s.r.ReadByte()
				if err != nil || c == '<' {
					return dst, errors.New("XML reference not closed")
				}
				if c == ';' {
					break
				}
				ref = append(ref, c)
			}
			var err error
			if dst, err = appendRef(dst, ref); err != nil {
				return dst, err
			}
			break
		}
		var err error
		if dst, err = appendRef(dst, chunk[:j]); err != nil {
			return dst, err
		}
		chunk = chunk[j+1:]
	}
	return dst, nil
}

// appendLiteral appends text as XML reads it: each line break (\r\n, or \r
// alone) is \n. cr remembers a \r that ended the text appended last.
func (s *xmlScanner) appendLiteral(dst, text []byte) []byte {
	if bytes.IndexByte(text, '\r') < 0 {
		if len(text) > 0 && s.cr && text[0] == '\n' {
			text = text[1:]
		}
		if len(text) > 0 {
			s.cr = false
		}
		return append(dst, text...)
	}
	for _, c := range text {
		switch {
		case c == '\r':
			dst = append(dst, '\n')
			s.cr = true
			continue
		case c == '\n' && s.cr:
		default:
			dst = append(dst, c)
		}
		s.cr = false
	}
	return dst
}

// appendRef appends the character a reference (without & and ;) stands for.
func appendRef(dst, ref []byte) ([]byte, error) {
	switch string(ref) {
	case "amp":
		return append(dst, '&'), nil
	case "lt":
		return append(dst, '<'), nil
	case "gt":
		return append(dst, '>'), nil
	case "quot":
		return append(dst, '"'), nil
	case "apos":
		return append(dst, '\''), nil
	}
	if len(ref) > 1 && ref[0] == '#' {
		var n uint64
		var err error
		if ref[1] == 'x' {
			n, err = strconv.ParseUint(string(ref[2:]), 16, 32)
		} else {
			n, err = strconv.ParseUint(string(ref[1:]), 10, 32)
		}
		if err == nil && n <= utf8.MaxRune && utf8.ValidRune(rune(n)) && (n >= 0x20 || n == '\t' || n == '\n' || n == '\r') {
			return utf8.AppendRune(dst, rune(n)), nil
		}
	}
	return dst, fmt.Errorf("XML reference &%s; unknown", ref)
}

// readName appends a tag's or attribute's name to dst, its local part only.
func (s *xmlScanner) readName(dst []byte) ([]byte, error) {
	start := len(dst)
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return dst, io.ErrUnexpectedEOF
		}
		switch c {
		case ' ', '\t', '\r', '\n', '>', '/', '=':
			s.r.UnreadByte()
			if len(dst) == start {
				return dst, errors.New("XML tag without a name")
			}
			return dst, nil
		case ':':
			dst = dst[:start]
			continue
		case '<', '"', '\'', '&':
			return dst, errors.New("XML tag name malformed")
		}
		dst = append(dst, c)
		if len(dst)-start > maxXMLName {
			return dst, errors.New("XML name too long")
		}
	}
}

// readStart reads a start tag after its '<'.
func (s *xmlScanner) readStart() error {
	var err error
	if s.name, err = s.readName(s.name[:0]); err != nil {
		return err
	}
	s.kind = tokStart
	s.attrs = s.attrs[:0]
	s.buf = s.buf[:0]
	// Attribute names and values go end to end in buf; attrs index it once
	// the tag is read, as buf may grow.
	type span struct{ n0, n1, v0, v1 int }
	var spans [maxXMLAttrs]span
	n := 0
	for {
		s.skipSpace()
		c, err := s.r.ReadByte()
		if err != nil {
			return io.ErrUnexpectedEOF
		}
		if s.closing && c != '>' {
			return errors.New("XML tag malformed")
		}
		switch c {
		case '>':
			for _, sp := range spans[:n] {
				s.attrs = append(s.attrs, xmlAttr{name: s.buf[sp.n0:sp.n1], value: s.buf[sp.v0:sp.v1]})
			}
			return nil
		case '/':
			if c, err := s.r.ReadByte(); err != nil || c != '>' {
				return errors.New("XML tag malformed")
			}
			s.closing = true
			s.r.UnreadByte()
			continue
		}
		s.r.UnreadByte()
		if n == maxXMLAttrs {
			return errors.New("XML tag with too many attributes")
		}
		var sp span
		sp.n0 = len(s.buf)
		if s.buf, err = s.readName(s.buf); err != nil {
			return err
		}
		sp.n1 = len(s.buf)
		s.skipSpace()
		if c, err := s.r.ReadByte(); err != nil || c != '=' {
			return errors.New("XML attribute without a value")
		}
		s.skipSpace()
		q, err := s.r.ReadByte()
		if err != nil || (q != '"' && q != '\'') {
			return errors.New("XML attribute value not quoted")
		}
		raw, err := s.readQuoted(q)
		if err != nil {
			return err
		}
		if len(raw) > maxXMLAttr || bytes.IndexByte(raw, '<') >= 0 {
			return errors.New("XML attribute value malformed")
		}
		value := raw[:len(raw)-1]
		if bytes.IndexByte(value, '\r') >= 0 {
			// Line breaks in a value are read as in text (\r\n or \r alone
			// is \n), before references: &#13; stays a \r.
			s.breaks = appendBreaks(s.breaks[:0], value)
			value = s.breaks
		}
		sp.v0 = len(s.buf)
		if s.buf, err = appendRefsOnly(s.buf, value); err != nil {
			return err
		}
		sp.v1 = len(s.buf)
		spans[n] = sp
		n++
	}
}

// appendBreaks appends text with each line break (\r\n, or \r alone) read
// as \n.
func appendBreaks(dst, text []byte) []byte {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\r' {
			c = '\n'
			if i+1 < len(text) && text[i+1] == '\n' {
				i++
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// readQuoted reads an attribute value up to and including its closing
// quote q, however the reader's buffer splits it (a value longer than the
// buffer comes in pieces), and refuses one longer than maxXMLAttr.
func (s *xmlScanner) readQuoted(q byte) ([]byte, error) {
	raw, err := s.r.ReadSlice(q)
	if err == nil {
		return raw, nil
	}
	s.longAttr = append(s.longAttr[:0], raw...)
	for err == bufio.ErrBufferFull {
		if len(s.longAttr) > maxXMLAttr {
			return nil, errors.New("XML attribute value malformed")
		}
		raw, err = s.r.ReadSlice(q)
		s.longAttr = append(s.longAttr, raw...)
	}
	if err != nil {
		return nil, errors.New("XML attribute value not closed")
	}
	return s.longAttr, nil
}

// appendRefsOnly appends a complete attribute value with its references
// decoded.
func appendRefsOnly(dst, v []byte) ([]byte, error) {
	for len(v) > 0 {
		i := bytes.IndexByte(v, '&')
		if i < 0 {
			return append(dst, v...), nil
		}
		dst = append(dst, v[:i]...)
		v = v[i+1:]
		j := bytes.IndexByte(v, ';')
		if j < 0 {
			return dst, errors.New("XML reference not closed")
		}
		var err error
		if dst, err = appendRef(dst, v[:j]); err != nil {
			return dst, err
		}
		v = v[j+1:]
	}
	return dst, nil
}

// attr returns the value of the current start tag's attribute.
func (s *xmlScanner) attr(name string) []byte {
	for _, a := range s.attrs {
		if string(a.name) == name {
			return a.value
		}
	}
	return nil
}
