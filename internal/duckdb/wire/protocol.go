package wire

import (
	"errors"
	"fmt"
	"time"

	"datachat"
)

// A worker is the server's own binary started again with WorkerEnv set; it
// reads frames on fd 3 and answers on fd 4. Once it has readied DuckDB it
// sends an empty frame; no answer is empty. Every request frame is its op
// byte, the request's number (a uvarint: a cancel names the request it
// means), then the request's fields. The first request says what the worker
// is for:
//
//   - OpOpen ([Open]): one conversation's query engine, which then answers
//     OpQuery and OpEstimate frames ([Query]) one at a time until its input
//     closes; OpCancel interrupts the request it names.
//   - OpIngest ([Ingest]): one upload to check and convert, then exit; it
//     may send progress frames ([Progress]) before its answer.
//   - OpSave ([Save]): one spool of rows to store as Parquet, then exit.
//
// Every answer begins with a status byte: ReplyOK and the answer's fields,
// or an error ([EncodeError], [DecodeReply]).

// WorkerEnv is the environment variable that makes the binary a worker.
const WorkerEnv = "DATACHAT_DUCKDB_WORKER"

// The requests' op bytes.
const (
	OpOpen byte = iota + 1
	OpQuery
	OpEstimate
	OpCancel
	OpIngest
	OpSave
)

// Request returns a request frame: op, the request's number, then body.
func Request(op byte, seq uint64, body []byte) []byte {
	e := &Enc{b: make([]byte, 0, len(body)+10)}
	e.Byte(op)
	e.Uvarint(seq)
	e.Raw(body)
	return e.b
}

// ReadRequest splits a request frame into its op, its number, and a decoder
// of its fields.
func ReadRequest(b []byte) (op byte, seq uint64, d *Dec) {
	d = NewDec(b)
	op = d.Byte()
	seq = d.Uvarint()
	return op, seq, d
}

// Limits are the OS limits a worker puts itself under.
type Limits struct {
	Data     int64         // RLIMIT_DATA in bytes; 0: none
	CPU      time.Duration // RLIMIT_CPU over the worker's life; 0: none
	QueryCPU time.Duration // CPU time one request may use before SIGXCPU interrupts it; 0: none
	Landlock bool          // restrict files, network and signals where the kernel can
}

func (l *Limits) encode(e *Enc) {
	e.Varint(l.Data)
	e.Varint(int64(l.CPU))
	e.Varint(int64(l.QueryCPU))
	e.Bool(l.Landlock)
}

func (l *Limits) decode(d *Dec) {
	l.Data = d.Varint()
	l.CPU = time.Duration(d.Varint())
	l.QueryCPU = time.Duration(d.Varint())
	l.Landlock = d.Bool()
}

// Open is what a query worker is given: its conversation's tables and its
// limits. Its answer is [OpenAnswer].
type Open struct {
	Root         string // the worker's own directory (absolute): links to the datasets, spill files
	Tables       []Table
	MemoryLimit  int64
	Threads      int
	MaxTempBytes int64
	Timeout      time.Duration // per query, enforced inside (interrupt); the server kills past it
	Denied       []string      // the functions the catalog denies; nil: read them from the catalog, and report them
	Limits       Limits
}

// Encode returns the request's body (see [Request]).
func (o *Open) Encode() []byte {
	e := &Enc{}
	e.Str(o.Root)
	e.Uvarint(uint64(len(o.Tables)))
	for _, t := range o.Tables {
		e.Str(t.Name)
		e.Str(t.Path)
	}
	e.Varint(o.MemoryLimit)
	e.Int(o.Threads)
	e.Varint(o.MaxTempBytes)
	e.Varint(int64(o.Timeout))
	e.Bool(o.Denied != nil)
	e.Strs(o.Denied)
	o.Limits.encode(e)
	return e.b
}

// Decode reads the request's body.
func (o *Open) Decode(d *Dec) {
	o.Root = d.Str()
	n := d.Count(2)
	o.Tables = make([]Table, n)
	for i := range o.Tables {
		o.Tables[i] = Table{Name: d.Str(), Path: d.Str()}
	}
	o.MemoryLimit = d.Varint()
	o.Threads = d.Int()
	o.MaxTempBytes = d.Varint()
	o.Timeout = time.Duration(d.Varint())
	if d.Bool() {
		o.Denied = d.Strs()
		if o.Denied == nil {
			o.Denied = []string{}
		}
	} else {
		d.Strs()
	}
	o.Limits.decode(d)
}

// OpenAnswer is a query worker's answer to [Open]: the OS limits in force,
// and what the catalog denies.
type OpenAnswer struct {
	Limits []string
	Denied []string
}

// Encode writes the answer's fields.
func (a *OpenAnswer) Encode(e *Enc) {
	e.Strs(a.Limits)
	e.Strs(a.Denied)
}

// Decode reads the answer's fields.
func (a *OpenAnswer) Decode(d *Dec) {
	a.Limits = d.Strs()
	a.Denied = d.Strs()
}

// ResultLimits bound one query's result in the worker's memory.
type ResultLimits struct {
	MaxRows  int // rows at most; negative: no cap
	MaxCell  int // a text or blob value longer than this is cut; 0: no cap
	MaxBytes int // decoded result size beyond which rows stop; 0: no cap
}

// Query is one query for a query worker (OpQuery or OpEstimate). OpQuery
// is answered with a result ([Enc.Result]), OpEstimate with a varint.
type Query struct {
	SQL    string
	Limits ResultLimits
}

// Encode returns the request's body.
func (q *Query) Encode() []byte {
	e := &Enc{}
	e.Str(q.SQL)
	e.Int(q.Limits.MaxRows)
	e.Int(q.Limits.MaxCell)
	e.Int(q.Limits.MaxBytes)
	return e.b
}

// Decode reads the request's body.
func (q *Query) Decode(d *Dec) {
	q.SQL = d.Str()
	q.Limits.MaxRows = d.Int()
	q.Limits.MaxCell = d.Int()
	q.Limits.MaxBytes = d.Int()
}

// Cancel is the frame that asks a query worker to stop request seq.
func Cancel(seq uint64) []byte {
	e := &Enc{}
	e.Byte(OpCancel)
	e.Uvarint(seq)
	return e.b
}

// Ingest is one upload for an ingest worker. Its answer is an
// [IngestResult].
type Ingest struct {
	Dir         string // the job's directory (absolute): holds Input, receives the output
	Input       string // the uploaded file's name in Dir
	Name        string // the file's name as the user knows it, for messages
	MaxBytes    int64  // the largest decompressed size accepted (bytes)
	MaxLine     int    // the longest CSV line accepted (bytes)
	MemoryLimit int64
	Threads     int // DuckDB threads at most (a small file gets one)
	Limits      Limits
	Every       time.Duration // how often to send progress frames
}

// Encode returns the request's body.
func (r *Ingest) Encode() []byte {
	e := &Enc{}
	e.Str(r.Dir)
	e.Str(r.Input)
	e.Str(r.Name)
	e.Varint(r.MaxBytes)
	e.Int(r.MaxLine)
	e.Varint(r.MemoryLimit)
	e.Int(r.Threads)
	r.Limits.encode(e)
	e.Varint(int64(r.Every))
	return e.b
}

// Decode reads the request's body.
func (r *Ingest) Decode(d *Dec) {
	r.Dir, r.Input, r.Name = d.Str(), d.Str(), d.Str()
	r.MaxBytes, r.MaxLine = d.Varint(), d.Int()
	r.MemoryLimit, r.Threads = d.Varint(), d.Int()
	r.Limits.decode(d)
	r.Every = time.Duration(d.Varint())
}

// Encode writes the result's fields.
func (r *IngestResult) Encode(e *Enc) {
	e.Str(r.SourceFormat)
	e.Str(r.Encoding)
	e.Uvarint(uint64(len(r.Tables)))
	for _, t := range r.Tables {
		e.Str(t.Suffix)
		e.Str(t.Output)
		e.Columns(t.Columns)
		e.Varint(t.RowCount)
		e.Strs(t.Notes)
	}
}

// Decode reads the result's fields.
func (r *IngestResult) Decode(d *Dec) {
	r.SourceFormat, r.Encoding = d.Str(), d.Str()
	r.Tables = make([]IngestTable, d.Count(5))
	for i := range r.Tables {
		r.Tables[i] = IngestTable{Suffix: d.Str(), Output: d.Str(), Columns: d.Columns(), RowCount: d.Varint(), Notes: d.Strs()}
	}
}

// Save is one spool of rows for a save worker. Its answer is an
// [IngestTable] ([IngestTable.EncodeSaved]).
type Save struct {
	Job         SaveJob
	MemoryLimit int64
	Threads     int
	Limits      Limits
}

// Encode returns the request's body.
func (r *Save) Encode() []byte {
	e := &Enc{}
	e.Str(r.Job.Dir)
	e.Str(r.Job.Spool)
	e.Str(r.Job.Name)
	e.Uvarint(uint64(len(r.Job.Columns)))
	for _, c := range r.Job.Columns {
		e.Str(c.Name)
		e.Str(c.Type)
	}
	e.Varint(r.MemoryLimit)
	e.Int(r.Threads)
	r.Limits.encode(e)
	return e.b
}

// Decode reads the request's body.
func (r *Save) Decode(d *Dec) {
	r.Job = SaveJob{Dir: d.Str(), Spool: d.Str(), Name: d.Str()}
	r.Job.Columns = make([]SaveColumn, d.Count(2))
	for i := range r.Job.Columns {
		r.Job.Columns[i] = SaveColumn{Name: d.Str(), Type: d.Str()}
	}
	r.MemoryLimit, r.Threads = d.Varint(), d.Int()
	r.Limits.decode(d)
}

// EncodeSaved writes a save worker's answer: the table's output, columns
// and row count.
func (t *IngestTable) EncodeSaved(e *Enc) {
	e.Str(t.Output)
	e.Columns(t.Columns)
	e.Varint(t.RowCount)
}

// DecodeSaved reads a save worker's answer.
func (t *IngestTable) DecodeSaved(d *Dec) {
	t.Output, t.Columns, t.RowCount = d.Str(), d.Columns(), d.Varint()
}

// The phases of an upload's conversion as progress frames carry them.
const (
	PhaseDecompressing byte = iota + 1
	PhaseConverting
	PhaseDescribing
)

// Progress is an ingest worker's report of how far its job has come, sent
// as a frame of its own before the answer.
type Progress struct {
	Phase   byte
	Size    int64   // the upload's size, as it came
	Bytes   int64   // decompressing: bytes unpacked; converting: how far into the file
	Percent float64 // converting: DuckDB's estimate, 0–100; else -1
}

// Frame returns the progress frame.
func (p *Progress) Frame() []byte {
	e := &Enc{}
	e.Byte(ReplyProgress)
	e.Byte(p.Phase)
	e.Varint(p.Size)
	e.Varint(p.Bytes)
	e.Float(p.Percent)
	return e.b
}

// Decode reads a progress frame's content after its status byte.
func (p *Progress) Decode(d *Dec) {
	p.Phase, p.Size, p.Bytes, p.Percent = d.Byte(), d.Varint(), d.Varint(), d.Float()
}

// TimeoutError is a query stopped for running past timeout, whichever side
// stopped it.
func TimeoutError(timeout time.Duration) *datachat.QueryError {
	return &datachat.QueryError{Kind: datachat.KindTimeout, Message: fmt.Sprintf("the query did not finish within %s and was stopped; make it cheaper (filter, aggregate, LIMIT, fewer joins)", timeout)}
}

// CPULimitError is a query stopped for using more than its CPU time,
// whichever side noticed.
func CPULimitError() *datachat.QueryError {
	return &datachat.QueryError{Kind: datachat.KindTimeout, Message: "the query used more CPU time than allowed and was stopped; make it cheaper (filter, aggregate, LIMIT, fewer joins)"}
}

// ErrWorkerNoSpace is the cause of the full-disk error of a worker's reply.
var ErrWorkerNoSpace = errors.New("sql worker: a write failed: no space left on device")

// Reply status bytes: how a worker's answer to a request begins.
const (
	ReplyOK       byte = iota // the request's payload follows
	replyQuery                // a *datachat.QueryError: kind, message
	replyCoded                // a *datachat.Error: code, message
	replyInternal             // any other error: message (logged, never shown)
	replyNoSpace              // a write failed on a full disk: no payload
	ReplyProgress             // not an answer: an ingest worker's progress (see [Progress]), before its answer
)

// EncodeError writes err as a reply; noSpace says a write failed on a full
// disk during the request, whatever err says.
func EncodeError(e *Enc, err error, noSpace bool) {
	var qe *datachat.QueryError
	var de *datachat.Error
	switch {
	case noSpace || datachat.IsNoSpace(err):
		// Whatever the error says (DuckDB's message, wrapped in one naming
		// the user's file), the disk was full: the server's condition.
		e.Byte(replyNoSpace)
	case errors.As(err, &qe):
		e.Byte(replyQuery)
		e.Str(qe.Kind)
		e.Str(qe.Message)
	case errors.As(err, &de) && de.Code != datachat.EINTERNAL:
		e.Byte(replyCoded)
		e.Str(de.Code)
		e.Str(de.Message)
	default:
		e.Byte(replyInternal)
		e.Str(err.Error())
	}
}

// DecodeReplyWith reads a reply (see [DecodeReply]) and, for a success, its
// payload with decode; it returns the error of either.
func DecodeReplyWith(b []byte, decode func(*Dec)) error {
	d, err := DecodeReply(b)
	if err != nil {
		return err
	}
	decode(d)
	return d.Err()
}

// DecodeReply reads a reply's status; for an error it returns the error,
// else the decoder positioned at the payload.
func DecodeReply(b []byte) (*Dec, error) {
	d := &Dec{b: b}
	switch status := d.Byte(); status {
	case ReplyOK:
		return d, d.err
	case replyQuery:
		qe := &datachat.QueryError{Kind: d.Str(), Message: d.Str()}
		if d.err != nil {
			return nil, d.err
		}
		return nil, qe
	case replyCoded:
		code, msg := d.Str(), d.Str()
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
		msg := d.Str()
		if d.err != nil {
			return nil, d.err
		}
		return nil, fmt.Errorf("sql worker: %s", msg)
	case replyNoSpace:
		// The one condition of the server a worker reports: its message
		// is ours, nothing of the worker's. A worker that lies only gets
		// its own request a 503.
		return nil, datachat.NoSpace(ErrWorkerNoSpace)
	}
	return nil, ErrMalformed
}
