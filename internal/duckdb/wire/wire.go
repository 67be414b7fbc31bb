package duckdb

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

// The server and its worker processes talk over two pipes in frames: a
// 4-byte big-endian length, then that many bytes. A frame's content is
// written with [enc] and read with [dec]: unsigned varints, length-prefixed
// strings, and result values as a tag byte and their payload. The parent
// reads what a worker sends as untrusted: every length is checked against the
// frame, and a frame past maxFrame ends the worker.

const maxFrame = 256 << 20 // a result is at most MaxResultMB (64 MiB) of values

var errFrameTooLarge = errors.New("frame too large")

func writeFrame(w *bufio.Writer, b []byte) error {
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

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, errFrameTooLarge
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

// enc appends values to a frame.
type enc struct{ b []byte }

func (e *enc) byte(c byte)      { e.b = append(e.b, c) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) int(v int)        { e.varint(int64(v)) }
func (e *enc) float(v float64)  { e.b = binary.BigEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *enc) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}
func (e *enc) bool(v bool) { e.byte(boolByte(v)) }
func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// dec reads values from a frame. The first malformed value sets err, and
// every later read returns zero values.
type dec struct {
	b   []byte
	err error
}

var errMalformed = errors.New("malformed frame")

func (d *dec) fail() {
	if d.err == nil {
		d.err = errMalformed
	}
	d.b = nil
}

func (d *dec) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) uvarint() uint64 { return decVarint(d, binary.Uvarint) }

func (d *dec) varint() int64 { return decVarint(d, binary.Varint) }

// decVarint reads one varint with read (binary.Uvarint or binary.Varint),
// failing d if there is none.
func decVarint[T uint64 | int64](d *dec, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int { return int(d.varint()) }

func (d *dec) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *dec) bool() bool { return d.byte() != 0 }

func (d *dec) str() string {
	n := d.uvarint()
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
func (d *dec) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/max(min, 1)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

// Value tags: the JSON-ready values of a result row (see [decoder]).
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

func (e *enc) value(v any) error {
	switch x := v.(type) {
	case nil:
		e.byte(tagNull)
	case bool:
		e.byte(tagFalse + boolByte(x))
	case int64:
		e.byte(tagInt)
		e.varint(x)
	case json.Number:
		e.byte(tagNumber)
		e.str(string(x))
	case string:
		e.byte(tagString)
		e.str(x)
	case []any:
		e.byte(tagList)
		e.uvarint(uint64(len(x)))
		for _, c := range x {
			if err := e.value(c); err != nil {
				return err
			}
		}
	case Object:
		e.byte(tagObject)
		e.uvarint(uint64(len(x)))
		for _, f := range x {
			e.str(f.Key)
			if err := e.value(f.Value); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("cannot encode a %T result value", v)
	}
	return nil
}

func (d *dec) value(depth int) any {
	if depth > maxValueDepth {
		d.fail()
		return nil
	}
	switch d.byte() {
	case tagNull:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt:
		return d.varint()
	case tagNumber:
		return json.Number(d.str())
	case tagString:
		return d.str()
	case tagList:
		n := d.count(1)
		out := make([]any, n)
		for i := range out {
			out[i] = d.value(depth + 1)
		}
		return out
	case tagObject:
		n := d.count(2)
		out := make(Object, n)
		for i := range out {
			out[i].Key = d.str()
			out[i].Value = d.value(depth + 1)
		}
		return out
	}
	d.fail()
	return nil
}

func (e *enc) columns(cols []datachat.Column) {
	e.uvarint(uint64(len(cols)))
	for _, c := range cols {
		e.str(c.Name)
		e.str(c.SQLType)
		e.strs(c.Samples)
	}
}

func (d *dec) columns() []datachat.Column {
	n := d.count(3)
	cols := make([]datachat.Column, n)
	for i := range cols {
		cols[i].Name = d.str()
		cols[i].SQLType = d.str()
		cols[i].Type = FriendlyType(cols[i].SQLType)
		cols[i].Samples = d.strs()
	}
	return cols
}

func (e *enc) result(r *Result) error {
	e.columns(r.Columns)
	e.uvarint(uint64(len(r.Rows)))
	for _, row := range r.Rows {
		if len(row) != len(r.Columns) {
			return errors.New("a result row does not match its columns")
		}
		for _, v := range row {
			if err := e.value(v); err != nil {
				return err
			}
		}
	}
	e.bool(r.Truncated)
	e.float(r.ElapsedMS)
	return nil
}

func (d *dec) result() *Result {
	r := &Result{Columns: d.columns()}
	n := d.count(max(len(r.Columns), 1))
	r.Rows = make([][]any, n)
	for i := range r.Rows {
		row := make([]any, len(r.Columns))
		for j := range row {
			row[j] = d.value(0)
		}
		r.Rows[i] = row
	}
	r.RowCount = len(r.Rows)
	r.Truncated = d.bool()
	r.ElapsedMS = d.float()
	return r
}

// Reply status bytes: how a worker's answer to a request begins.
const (
	replyOK       byte = iota // the request's payload follows
	replyQuery                // a *datachat.QueryError: kind, message
	replyCoded                // a *datachat.Error: code, message
	replyInternal             // any other error: message (logged, never shown)
	replyNoSpace              // a write failed on a full disk: no payload
	replyProgress             // not an answer: an ingest worker's progress (see ingestProgress), before its answer
)

// encodeError writes err as a reply.
func encodeError(e *enc, err error) {
	var qe *datachat.QueryError
	var de *datachat.Error
	switch {
	case wroteNoSpace.Swap(false) || datachat.IsNoSpace(err):
		// Whatever the error says (DuckDB's message, wrapped in one naming
		// the user's file), the disk was full: the server's condition.
		e.byte(replyNoSpace)
	case errors.As(err, &qe):
		e.byte(replyQuery)
		e.str(qe.Kind)
		e.str(qe.Message)
	case errors.As(err, &de) && de.Code != datachat.EINTERNAL:
		e.byte(replyCoded)
		e.str(de.Code)
		e.str(de.Message)
	default:
		e.byte(replyInternal)
		e.str(err.Error())
	}
}

// decodeReply reads a reply's status; for an error it returns the error,
// else the decoder positioned at the payload.
func decodeReply(b []byte) (*dec, error) {
	d := &dec{b: b}
	switch status := d.byte(); status {
	case replyOK:
		return d, d.err
	case replyQuery:
		qe := &datachat.QueryError{Kind: d.str(), Message: d.str()}
		if d.err != nil {
			return nil, d.err
		}
		return nil, qe
	case replyCoded:
		code, msg := d.str(), d.str()
		if d.err != nil {
			return nil, d.err
		}
		if code != datachat.EINVALID {
			// A worker names only what the user can fix; anything else it
			// claims is the server's own failure.
			return nil, fmt.Errorf("sql worker: %s: %s", code, msg)
		}
		return nil, &datachat.Error{Code: code, Message: msg}
	case replyInternal:
		msg := d.str()
		if d.err != nil {
			return nil, d.err
		}
		return nil, fmt.Errorf("sql worker: %s", msg)
	case replyNoSpace:
		// The one condition of the server a worker reports: its message
		// is ours, nothing of the worker's. A worker that lies only gets
		// its own request a 503.
		return nil, datachat.NoSpace(errWorkerNoSpace)
	}
	return nil, errMalformed
}
