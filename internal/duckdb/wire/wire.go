// Package wire is the protocol between datachat's server and its DuckDB
// worker processes (package worker): the one place both sides read, so
// neither holds a copy of the other's encoding.
//
// They talk over two pipes in frames: a 4-byte big-endian length, then that
// many bytes. A frame's content is written with [Enc] and read with [Dec]:
// unsigned varints, length-prefixed strings, and result values as a tag byte
// and their payload. The server reads what a worker sends as untrusted:
// every length is checked against the frame, and a frame past MaxFrame ends
// the worker. protocol.go says what the frames are.
package wire

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"datachat"
)

// MaxFrame is the largest frame read: a result is at most MaxResultMB
// (64 MiB) of values.
const MaxFrame = 256 << 20

// ErrFrameTooLarge is what ReadFrame answers for a frame past MaxFrame.
var ErrFrameTooLarge = errors.New("frame too large")

// WriteFrame writes b as one frame and flushes w.
func WriteFrame(w *bufio.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > MaxFrame {
		return nil, ErrFrameTooLarge
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// Enc appends values to a frame.
type Enc struct{ b []byte }

// Bytes returns what was written.
func (e *Enc) Bytes() []byte { return e.b }

// Reset empties e, keeping its memory.
func (e *Enc) Reset() { e.b = e.b[:0] }

// Raw appends b as it is.
func (e *Enc) Raw(b []byte) { e.b = append(e.b, b...) }

func (e *Enc) Byte(c byte)      { e.b = append(e.b, c) }
func (e *Enc) Uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *Enc) Varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *Enc) Int(v int)        { e.Varint(int64(v)) }
func (e *Enc) Float(v float64)  { e.b = binary.BigEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *Enc) Str(s string)     { e.Uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *Enc) Strs(ss []string) {
	e.Uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.Str(s)
	}
}
func (e *Enc) Bool(v bool) { e.Byte(boolByte(v)) }
func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Dec reads values from a frame. The first malformed value sets err, and
// every later read returns zero values.
type Dec struct {
	b   []byte
	err error
}

// NewDec returns a decoder of b.
func NewDec(b []byte) *Dec { return &Dec{b: b} }

// Err is the first malformed value's error ([ErrMalformed]), or nil.
func (d *Dec) Err() error { return d.err }

// ErrMalformed is what a [Dec] reports for a frame that does not decode.
var ErrMalformed = errors.New("malformed frame")

func (d *Dec) fail() {
	if d.err == nil {
		d.err = ErrMalformed
	}
	d.b = nil
}

func (d *Dec) Byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *Dec) Uvarint() uint64 { return decVarint(d, binary.Uvarint) }

func (d *Dec) Varint() int64 { return decVarint(d, binary.Varint) }

// decVarint reads one varint with read (binary.Uvarint or binary.Varint),
// failing d if there is none.
func decVarint[T uint64 | int64](d *Dec, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Dec) Int() int { return int(d.Varint()) }

func (d *Dec) Float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *Dec) Bool() bool { return d.Byte() != 0 }

func (d *Dec) Str() string {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads a length of a list whose elements take at least min bytes
// each, refusing one the frame cannot hold.
func (d *Dec) Count(min int) int {
	n := d.Uvarint()
	if n > uint64(len(d.b)/max(min, 1)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *Dec) Strs() []string {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.Str()
	}
	return out
}

// Value tags: the JSON-ready values of a result row (as the worker's
// decoder of DuckDB's vectors makes them).
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt
	tagNumber
	tagString
	tagList
	tagObject
)

// maxValueDepth bounds the nesting of a value read from a worker.
const maxValueDepth = 64

func (e *Enc) Value(v any) error {
	switch x := v.(type) {
	case nil:
		e.Byte(tagNull)
	case bool:
		e.Byte(tagFalse + boolByte(x))
	case int64:
		e.Byte(tagInt)
		e.Varint(x)
	case json.Number:
		e.Byte(tagNumber)
		e.Str(string(x))
	case string:
		e.Byte(tagString)
		e.Str(x)
	case []any:
		e.Byte(tagList)
		e.Uvarint(uint64(len(x)))
		for _, c := range x {
			if err := e.Value(c); err != nil {
				return err
			}
		}
	case Object:
		e.Byte(tagObject)
		e.Uvarint(uint64(len(x)))
		for _, f := range x {
			e.Str(f.Key)
			if err := e.Value(f.Value); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("cannot encode a %T result value", v)
	}
	return nil
}

func (d *Dec) Value(depth int) any {
	if depth > maxValueDepth {
		d.fail()
		return nil
	}
	switch d.Byte() {
	case tagNull:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt:
		return d.Varint()
	case tagNumber:
		return json.Number(d.Str())
	case tagString:
		return d.Str()
	case tagList:
		n := d.Count(1)
		out := make([]any, n)
		for i := range out {
			out[i] = d.Value(depth + 1)
		}
		return out
	case tagObject:
		n := d.Count(2)
		out := make(Object, n)
		for i := range out {
			out[i].Key = d.Str()
			out[i].Value = d.Value(depth + 1)
		}
		return out
	}
	d.fail()
	return nil
}

func (e *Enc) Columns(cols []datachat.Column) {
	e.Uvarint(uint64(len(cols)))
	for _, c := range cols {
		e.Str(c.Name)
		e.Str(c.SQLType)
		e.Strs(c.Samples)
	}
}

func (d *Dec) Columns() []datachat.Column {
	n := d.Count(3)
	cols := make([]datachat.Column, n)
	for i := range cols {
		cols[i].Name = d.Str()
		cols[i].SQLType = d.Str()
		cols[i].Type = FriendlyType(cols[i].SQLType)
		cols[i].Samples = d.Strs()
	}
	return cols
}

func (e *Enc) Result(r *Result) error {
	e.Columns(r.Columns)
	e.Uvarint(uint64(len(r.Rows)))
	for _, row := range r.Rows {
		if len(row) != len(r.Columns) {
			return errors.New("a result row does not match its columns")
		}
		for _, v := range row {
			if err := e.Value(v); err != nil {
				return err
			}
		}
	}
	e.Bool(r.Truncated)
	e.Float(r.ElapsedMS)
	return nil
}

func (d *Dec) Result() *Result {
	r := &Result{Columns: d.Columns()}
	n := d.Count(max(len(r.Columns), 1))
	r.Rows = make([][]any, n)
	for i := range r.Rows {
		row := make([]any, len(r.Columns))
		for j := range row {
			row[j] = d.Value(0)
		}
		r.Rows[i] = row
	}
	r.RowCount = len(r.Rows)
	r.Truncated = d.Bool()
	r.ElapsedMS = d.Float()
	return r
}
