// Package wirejson decodes the JSON chunks of a streamed LLM answer without
// reflection: a [Reader] that validates as it reads, and readers of the few
// kinds of Go values chunks are made of (strings, integers, booleans, raw
// values, structs, slices and pointers), each storing what encoding/json's
// Unmarshal would store in a value of that kind.
//
// A provider package writes, for each of its chunk types, a function reading
// it with a Reader ([Reader.Object] with the struct's JSON field names, and a
// read call per field); [Decode] runs it, and hands the chunk to
// encoding/json instead whenever the reader gives up. It gives up on anything
// but the common case: a syntax error, a value of another type than its
// field's, a key that is not a field's exact name but matches one the way
// encoding/json matches keys (case-insensitively), a duplicate key, nesting
// deeper than [MaxDepth], and shapes the provider's function leaves to
// encoding/json ([Reader.GiveUp]). So the result, errors included, is always
// encoding/json's, and FuzzReader in package llmtest checks a provider's
// functions against it.
package wirejson

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays a Reader reads;
// encoding/json, which takes what is deeper, allows 10000.
const MaxDepth = 1000

// Reader reads one JSON text. Its zero value reads an empty text; it can be
// reused with [Reader.Reset]. Once it gave up, every read returns a zero value
// at once.
type Reader struct {
	data  []byte
	pos   int
	depth int
	bad   bool
	buf   []byte // unescaped strings
}

// Decode decodes the JSON text data into *v, which must be the zero value:
// with read, a function reading a T with r, or with encoding/json when read
// gives up.
func Decode[T any](r *Reader, data []byte, v *T, read func(*Reader, *T)) error {
	if Read(r, data, v, read) {
		return nil
	}
	var zero T
	*v = zero
	return json.Unmarshal(data, v)
}

// Read reads the JSON text data into *v with read, and reports whether read
// read it all: false when r gave up, *v then holding part of what it read.
func Read[T any](r *Reader, data []byte, v *T, read func(*Reader, *T)) bool {
	r.Reset(data)
	read(r, v)
	return r.end()
}

// Reset makes r read data.
func (r *Reader) Reset(data []byte) {
	r.data, r.pos, r.depth, r.bad = data, 0, 0, false
}

// GiveUp makes r give up: for a value whose reading is left to encoding/json.
func (r *Reader) GiveUp() {
	r.bad = true
	r.pos = len(r.data)
}

// end reports whether the text was read to its end without giving up.
func (r *Reader) end() bool {
	r.peek()
	return !r.bad && r.pos == len(r.data)
}

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

// Null reads a null if one is next, reporting whether it did.
func (r *Reader) Null() bool {
	if r.peek() != 'n' {
		return false
	}
	r.literal("null")
	return true
}

// NullOnly reads a null and gives up on any other value: for a field whose
// other values are left to encoding/json.
func (r *Reader) NullOnly() {
	if !r.Null() {
		r.GiveUp()
	}
}

// Object reads an object into a struct whose JSON field names are names (at
// most 64): for each member whose key is one of them, field is called with
// that name, and must read the value into the field; other members are
// skipped. A null leaves the struct as it is, as encoding/json does.
func (r *Reader) Object(names []string, field func(name string)) {
	switch r.peek() {
	case 'n':
		r.literal("null")
		return
	case '{':
	default:
		r.GiveUp()
		return
	}
	if !r.enter() {
		return
	}
	if r.peek() == '}' {
		r.leave()
		return
	}
	var seen uint64
	for !r.bad {
		key := r.str()
		if r.peek() != ':' {
			r.GiveUp()
			return
		}
		r.pos++
		switch i := match(key, names); {
		case i >= 0 && seen&(1<<i) == 0:
			seen |= 1 << i
			start := r.pos
			field(names[i])
			if r.pos == start {
				r.GiveUp() // field read nothing: a name it does not know
			}
		case i == -1:
			r.Skip()
		default:
			r.GiveUp() // a duplicate, or a key encoding/json folds to a name
		}
		if !r.next('}') {
			return
		}
	}
}

// match returns the index of the name key is, -1 when it is no name, and -2
// when it is not a name but encoding/json would take it for one.
func match(key []byte, names []string) int {
	for i, name := range names {
		if string(key) == name {
			return i
		}
	}
	for _, name := range names {
		if bytes.EqualFold(key, []byte(name)) {
			return -2
		}
	}
	return -1
}

// enter reads the '{' or '[' of an object or array.
func (r *Reader) enter() bool {
	r.pos++
	r.depth++
	if r.depth > MaxDepth {
		r.GiveUp()
		return false
	}
	return true
}

// leave reads the '}' or ']' of an object or array.
func (r *Reader) leave() {
	r.pos++
	r.depth--
}

// next reads what follows a member or an element: a comma, reporting that
// another follows, or the closing byte.
func (r *Reader) next(closing byte) bool {
	switch r.peek() {
	case ',':
		r.pos++
		return true
	case closing:
		r.leave()
	default:
		r.GiveUp()
	}
	return false
}

// Slice reads an array into *p, each element with read, as encoding/json
// does: null sets *p to nil, [] to an empty slice.
func Slice[T any](r *Reader, p *[]T, read func(*Reader, *T)) {
	switch r.peek() {
	case 'n':
		r.literal("null")
		*p = nil
		return
	case '[':
	default:
		r.GiveUp()
		return
	}
	if !r.enter() {
		return
	}
	s := (*p)[:0]
	if s == nil {
		s = []T{}
	}
	if r.peek() == ']' {
		r.leave()
		*p = s
		return
	}
	for !r.bad {
		var zero T
		s = append(s, zero)
		read(r, &s[len(s)-1])
		if !r.next(']') {
			break
		}
	}
	*p = s
}

// Ptr reads a value into **p with read, as encoding/json does: null sets *p
// to nil, another value is read into *p, allocated if nil.
func Ptr[T any](r *Reader, p **T, read func(*Reader, *T)) {
	if r.Null() {
		*p = nil
		return
	}
	if *p == nil {
		*p = new(T)
	}
	read(r, *p)
}

// ReadString reads a string into *p; null leaves it as it is.
func (r *Reader) ReadString(p *string) {
	if !r.Null() {
		*p = string(r.str())
	}
}

// ReadStringPtr reads a string into a new string *p points to; null sets *p
// to nil.
func (r *Reader) ReadStringPtr(p **string) {
	if r.Null() {
		*p = nil
		return
	}
	s := string(r.str())
	*p = &s
}

// ReadBool reads true or false into *p; null leaves it as it is.
func (r *Reader) ReadBool(p *bool) {
	switch r.peek() {
	case 'n':
		r.literal("null")
	case 't':
		r.literal("true")
		*p = true
	case 'f':
		r.literal("false")
		*p = false
	default:
		r.GiveUp()
	}
}

// ReadInt64 reads an integer into *p; null leaves it as it is. A number with
// a fraction or an exponent, or out of range, makes r give up (encoding/json
// fails on it).
func (r *Reader) ReadInt64(p *int64) {
	if !r.Null() {
		*p = r.integer()
	}
}

// ReadInt reads an integer into *p, as ReadInt64.
func (r *Reader) ReadInt(p *int) {
	if r.Null() {
		return
	}
	n := r.integer()
	if int64(int(n)) != n {
		r.GiveUp()
		return
	}
	*p = int(n)
}

// ReadIntPtr reads an integer into a new int *p points to; null sets *p to
// nil.
func (r *Reader) ReadIntPtr(p **int) {
	if r.Null() {
		*p = nil
		return
	}
	n := new(int)
	r.ReadInt(n)
	*p = n
}

// ReadRaw reads any value into *p, a copy of its text; null too, as "null".
func (r *Reader) ReadRaw(p *json.RawMessage) {
	r.peek()
	start := r.pos
	r.Skip()
	if !r.bad {
		*p = append(json.RawMessage(nil), r.data[start:r.pos]...)
	}
}

// integer reads a number that must be an integer in int64's range.
func (r *Reader) integer() int64 {
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		r.GiveUp()
		return 0
	}
	text := r.number()
	neg := len(text) > 0 && text[0] == '-'
	if neg {
		text = text[1:]
	}
	var u uint64
	for _, c := range text {
		if c < '0' || c > '9' || u > (1<<63)/10 {
			r.GiveUp()
			return 0
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u)
	case !neg && u < 1<<63:
		return int64(u)
	}
	r.GiveUp()
	return 0
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
