package wirejson

import (
	"bytes"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The tokenizer: white space, literals, numbers and strings, each validated
// as encoding/json's scanner does, strings unescaped as its unquote does.

// peek skips white space and returns the next byte, 0 at the end.
func (r *Reader) peek() byte {
	for r.pos < len(r.data) {
		switch c := r.data[r.pos]; c {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return c
		}
	}
	return 0
}

// literal reads the literal s (true, false or null).
func (r *Reader) literal(s string) {
	if !bytes.HasPrefix(r.data[r.pos:], []byte(s)) {
		r.GiveUp()
		return
	}
	r.pos += len(s)
}

// number reads a number and returns its text.
func (r *Reader) number() []byte {
	d, start := r.data, r.pos
	i := start
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		r.GiveUp()
		return nil
	}
	if i < len(d) && d[i] == '.' {
		if i = digits(d, i+1); d[i-1] == '.' {
			r.GiveUp()
			return nil
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if j := digits(d, i); j > i {
			i = j
		} else {
			r.GiveUp()
			return nil
		}
	}
	r.pos = i
	return d[start:i]
}

// digits returns the index after the digits from i.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// Skip reads any value and drops it.
func (r *Reader) Skip() {
	switch c := r.peek(); {
	case c == '"':
		r.skipString()
	case c == '{':
		if !r.enter() {
			return
		}
		if r.peek() == '}' {
			r.leave()
			return
		}
		for !r.bad {
			if r.peek() != '"' {
				r.GiveUp()
				return
			}
			r.skipString()
			if r.peek() != ':' {
				r.GiveUp()
				return
			}
			r.pos++
			r.Skip()
			if !r.next('}') {
				return
			}
		}
	case c == '[':
		if !r.enter() {
			return
		}
		if r.peek() == ']' {
			r.leave()
			return
		}
		for !r.bad {
			r.Skip()
			if !r.next(']') {
				return
			}
		}
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		r.number()
	default:
		r.GiveUp()
	}
}

// skipString reads a string without unescaping it.
func (r *Reader) skipString() {
	d := r.data
	for i := r.pos + 1; i < len(d); {
		switch c := d[i]; {
		case c == '"':
			r.pos = i + 1
			return
		case c < ' ':
			r.GiveUp()
			return
		case c == '\\':
			n := escapeLen(d, i)
			if n == 0 {
				r.GiveUp()
				return
			}
			i += n
		default:
			i++
		}
	}
	r.GiveUp()
}

// escapeLen returns the length of the escape sequence at d[i], 0 for an
// invalid one.
func escapeLen(d []byte, i int) int {
	if i+1 >= len(d) {
		return 0
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if hex4(d, i+2) >= 0 {
			return 6
		}
	}
	return 0
}

// hex4 returns the value of the 4 hex digits at d[i], -1 if there are none.
func hex4(d []byte, i int) rune {
	if i+4 > len(d) {
		return -1
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// str reads a string and returns it unescaped, valid until the next read.
func (r *Reader) str() []byte {
	if r.peek() != '"' {
		r.GiveUp()
		return nil
	}
	d := r.data
	start := r.pos + 1
	for i := start; i < len(d); i++ {
		switch c := d[i]; {
		case c == '"':
			r.pos = i + 1
			return d[start:i]
		case c == '\\' || c < ' ' || c >= utf8.RuneSelf:
			return r.unescape(start, i)
		}
	}
	r.GiveUp()
	return nil
}

// unescape reads the rest of a string from d[i] into r.buf, as encoding/json
// unquotes it: escapes decoded, an invalid surrogate escape and each byte of
// invalid UTF-8 replaced by U+FFFD.
func (r *Reader) unescape(start, i int) []byte {
	d := r.data
	b := append(r.buf[:0], d[start:i]...)
	for i < len(d) {
		switch c := d[i]; {
		case c == '"':
			r.pos = i + 1
			r.buf = b
			return b
		case c < ' ':
			r.GiveUp()
			return nil
		case c == '\\':
			if escapeLen(d, i) == 0 {
				r.GiveUp()
				return nil
			}
			if d[i+1] != 'u' {
				b = append(b, unescapes[d[i+1]])
				i += 2
				continue
			}
			rr := hex4(d, i+2)
			i += 6
			if utf16.IsSurrogate(rr) {
				rr1 := rune(-1)
				if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					rr1 = hex4(d, i+2)
				}
				if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
					rr = dec
					i += 6
				} else {
					rr = unicode.ReplacementChar
				}
			}
			b = utf8.AppendRune(b, rr)
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			rr, size := utf8.DecodeRune(d[i:])
			b = utf8.AppendRune(b, rr)
			i += size
		}
	}
	r.GiveUp()
	return nil
}

// unescapes maps the byte after a backslash to what it stands for.
var unescapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
