// Package wirejson decodes the JSON chunks of a streamed LLM answer without
// reflection: a [Reader] that validates as it reads, and readers of the few
// kinds of Go values chunks are made of (strings, integers, booleans, raw
// values, structs, slices and pointers), each storing what encoding/json's
// Unmarshal would store in a value of that kind.
//
// A provider package writes, for each of its chunk types, a function reading
// it with a Reader: [Reader.Object] with a [Field] per field of the struct,
// named as its JSON tag names it. [Decode] runs it, and hands the chunk to
// encoding/json instead whenever the reader gives up. It gives up on anything
// but the common case: a syntax error, a value of another type than its
// field's, a key that is not a field's exact name but matches one the way
// encoding/json matches keys (case-insensitively), a duplicate key, nesting
// deeper than [MaxDepth], and fields the provider leaves to encoding/json
// ([Unsupported]). So the result, errors included, is always
// encoding/json's, and FuzzReader in package llmtest checks a provider's
// functions against it.
package wirejson

import (
	"bytes"
	"encoding/json"
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
	if cap(r.buf) > maxKeptBuf {
		r.buf = nil // a stream's one long string is not kept for its whole answer
	}
}

// maxKeptBuf is the largest buffer of unescaped strings a Reset keeps.
const maxKeptBuf = 64 << 10

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

// Null reads a null if one is next, reporting whether it did.
func (r *Reader) Null() bool {
	if r.peek() != 'n' {
		return false
	}
	r.literal("null")
	return true
}

// Object reads an object into a struct whose fields (at most 64) are fields:
// each member whose key is a field's name is read into that field, other
// members are skipped. A null leaves the struct as it is, as encoding/json
// does.
func (r *Reader) Object(fields ...Field) {
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
		switch i := match(key, fields); {
		case i >= 0 && seen&(1<<i) == 0:
			seen |= 1 << i
			fields[i].read(r)
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

// match returns the index of the field key names, -1 when it names none, and
// -2 when it names none but encoding/json would take it for one's name.
func match(key []byte, fields []Field) int {
	for i, f := range fields {
		if string(key) == f.name {
			return i
		}
	}
	for _, f := range fields {
		if bytes.EqualFold(key, []byte(f.name)) {
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

// ReadSlice reads an array into *p, each element with read, as encoding/json
// does: null sets *p to nil, [] to an empty slice.
func ReadSlice[T any](r *Reader, p *[]T, read func(*Reader, *T)) {
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

// ReadPtr reads a value into **p with read, as encoding/json does: null sets
// *p to nil, another value is read into *p, allocated if nil.
func ReadPtr[T any](r *Reader, p **T, read func(*Reader, *T)) {
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
