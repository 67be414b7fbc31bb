package extract

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// decodeText decodes data to UTF-8 and names the encoding it found: a BOM
// (UTF-8, UTF-16 LE/BE) decides; else UTF-16 without a BOM is recognised by
// its NUL bytes (ASCII-range text in UTF-16 has a NUL in every other byte);
// else valid UTF-8 is UTF-8; anything else is read as windows-1252, which maps
// every byte. Line ends become \n, and double-encoded UTF-8 is repaired (see
// [repairMojibake]).
func decodeText(data []byte) (string, string) {
	var text, enc string
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		text, enc = string(data[3:]), "utf-8"
		if !utf8.ValidString(text) {
			text = strings.ToValidUTF8(text, "\uFFFD")
		}
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		text, enc = decodeUTF16(data[2:], unicode.LittleEndian), "utf-16le"
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		text, enc = decodeUTF16(data[2:], unicode.BigEndian), "utf-16be"
	default:
		if order, ok := sniffUTF16(data); ok {
			if order == unicode.LittleEndian {
				text, enc = decodeUTF16(data, order), "utf-16le"
			} else {
				text, enc = decodeUTF16(data, order), "utf-16be"
			}
		} else if utf8.Valid(data) {
			text, enc = string(data), "utf-8"
		} else {
			b, err := charmap.Windows1252.NewDecoder().Bytes(data)
			if err != nil { // cannot happen: windows-1252 maps every byte
				b = bytes.ToValidUTF8(data, []byte("\uFFFD"))
			}
			text, enc = string(b), "windows-1252"
		}
	}
	text = normalizeNewlines(text)
	if enc != "windows-1252" {
		text, _ = repairMojibake(text)
	}
	return text, enc
}

func decodeUTF16(data []byte, order unicode.Endianness) string {
	if len(data)%2 == 1 {
		data = data[:len(data)-1]
	}
	b, err := unicode.UTF16(order, unicode.IgnoreBOM).NewDecoder().Bytes(data)
	if err != nil {
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	return string(b)
}

// sniffUTF16 recognises UTF-16 without a BOM by where the NUL bytes are in the
// first KiB: text of Latin script has a NUL as the high byte of most code
// units, so NULs cluster on odd offsets (LE) or even offsets (BE).
func sniffUTF16(data []byte) (unicode.Endianness, bool) {
	n := min(len(data), 1024) &^ 1
	if n < 4 {
		return unicode.LittleEndian, false
	}
	var even, odd int
	for i := 0; i < n; i += 2 {
		if data[i] == 0 {
			even++
		}
		if data[i+1] == 0 {
			odd++
		}
	}
	pairs := n / 2
	switch {
	case odd*10 >= pairs*4 && even*20 <= pairs:
		return unicode.LittleEndian, true
	case even*10 >= pairs*4 && odd*20 <= pairs:
		return unicode.BigEndian, true
	}
	return unicode.LittleEndian, false
}

// normalizeNewlines turns \r\n and \r into \n and drops NUL and other C0
// control characters except tab, newline and form feed.
func normalizeNewlines(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' && c != '\f' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r':
			sb.WriteByte('\n')
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		case c < 0x20 && c != '\n' && c != '\t' && c != '\f':
			// dropped
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// cp1252High maps the characters windows-1252 puts at 0x80–0x9F back to
// their byte.
var cp1252High = func() map[rune]byte {
	m := make(map[rune]byte, 32)
	for b := 0x80; b <= 0x9F; b++ {
		r := charmap.Windows1252.DecodeByte(byte(b))
		if r != utf8.RuneError {
			m[r] = byte(b)
		}
	}
	return m
}()

// mojibakeByte returns the byte that r stood for if r came from reading a
// UTF-8 continuation byte (0x80–0xBF) as Latin-1 or windows-1252.
func mojibakeByte(r rune) (byte, bool) {
	if r >= 0x80 && r <= 0xBF {
		return byte(r), true
	}
	b, ok := cp1252High[r]
	return b, ok
}

// repairMojibake undoes UTF-8 that was decoded as Latin-1/windows-1252 and
// encoded again ("â€“" or "â\u0080\u0093" for "–"). It only rewrites a run
// that reads back as exactly one valid multi-byte UTF-8 sequence: a lead
// character in U+00C2–U+00F4 followed by the right number of characters that
// stand for continuation bytes. Legitimate text almost never has such runs
// (the continuation characters are C1 controls or symbols such as "€" and
// "©" right after an accented capital), so other text is left untouched. It
// returns the text and the number of repairs.
func repairMojibake(s string) (string, int) {
	if !hasMojibakeLead(s) {
		return s, 0
	}
	var sb strings.Builder
	fixed := 0
	last := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r < 0xC2 || r > 0xF4 {
			i += size
			continue
		}
		need := 1
		switch {
		case r >= 0xF0:
			need = 3
		case r >= 0xE0:
			need = 2
		}
		buf := [4]byte{byte(r)}
		j := i + size
		ok := true
		for k := 1; k <= need; k++ {
			if j >= len(s) {
				ok = false
				break
			}
			cr, csize := utf8.DecodeRuneInString(s[j:])
			b, isCont := mojibakeByte(cr)
			if !isCont {
				ok = false
				break
			}
			buf[k] = b
			j += csize
		}
		if ok {
			dr, dsize := utf8.DecodeRune(buf[:need+1])
			if dr != utf8.RuneError && dsize == need+1 {
				if fixed == 0 {
					sb.Grow(len(s))
				}
				sb.WriteString(s[last:i])
				sb.WriteRune(dr)
				fixed++
				last = j
				i = j
				continue
			}
		}
		i += size
	}
	if fixed == 0 {
		return s, 0
	}
	sb.WriteString(s[last:])
	return sb.String(), fixed
}

// hasMojibakeLead is a fast check for a character in U+00C2–U+00F4 (encoded
// as C3 82–C3 B4 or C2 ..): only then can repairMojibake change anything.
func hasMojibakeLead(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == 0xC3 && s[i+1] >= 0x82 && s[i+1] <= 0xB4 {
			return true
		}
	}
	return false
}

// parsePlain splits plain text into paragraphs at blank lines and form feeds.
func parsePlain(text string) *Document {
	doc := &Document{}
	for _, para := range splitParagraphs(text) {
		doc.Blocks = append(doc.Blocks, Block{Kind: Paragraph, Text: para})
	}
	return doc
}

// splitParagraphs splits text at blank lines (and form feeds), trimming
// trailing space from every line and dropping empty paragraphs.
func splitParagraphs(text string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			p := strings.TrimSpace(strings.Join(cur, "\n"))
			if p != "" {
				out = append(out, p)
			}
			cur = cur[:0]
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if strings.ContainsRune(line, '\f') {
			parts := strings.Split(line, "\f")
			for k, part := range parts {
				if k > 0 {
					flush()
				}
				if p := strings.TrimRightFunc(part, isSpace); strings.TrimSpace(p) != "" {
					cur = append(cur, p)
				}
			}
			continue
		}
		line = strings.TrimRightFunc(line, isSpace)
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' || r == 0xA0 || r == 0x85 ||
		r == 0x2028 || r == 0x2029 || r == 0x3000 || (r >= 0x2000 && r <= 0x200A)
}
