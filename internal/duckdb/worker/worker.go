package duckdb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"datachat"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// A worker is this same binary, started by the server with workerEnv set. It
// becomes a worker before main runs (the init below), so every binary that
// links this package — datachat itself, and each test binary — can serve as
// its own worker without a second program to ship.
//
// A worker reads frames on fd 3 and answers on fd 4. Its first frame says what
// it is for:
//
//   - opOpen: one conversation's query engine. It limits itself (memory, CPU
//     time, files and network: see limits_linux.go), builds the conversation's
//     sandboxed DuckDB instance, then answers opQuery and opEstimate
//     frames one at a time until its input closes. opCancel interrupts the
//     running request.
//   - opIngest: one dataset upload to check and convert to Parquet, then exit.
//   - opSave: one spool of a query's rows to store as Parquet (save.go),
//     then exit.
//
// Nothing a worker does can reach the server's memory; the server kills a
// worker that outlives its deadline, and one that crashes fails only its own
// request.
const workerEnv = "DATACHAT_DUCKDB_WORKER"

const (
	opOpen byte = iota + 1
	opQuery
	opEstimate
	opCancel
	opIngest
	opSave
)

func init() {
	if os.Getenv(workerEnv) == "" {
		return
	}
	os.Exit(workerMain())
}

func workerMain() int {
	in := os.NewFile(3, "from-server")
	out := os.NewFile(4, "to-server")
	if in == nil || out == nil {
		fmt.Fprintln(os.Stderr, "datachat sql worker: started without its pipes; it is started by the server, not by hand")
		return 2
	}
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	prewarm()
	if writeFrame(w, nil) != nil { // ready: an empty frame
		return 0 // the server went away
	}
	first, err := readFrame(r)
	if err != nil || len(first) == 0 {
		return 0 // the server went away before giving work
	}
	d := &dec{b: first[1:]}
	d.uvarint() // the request's number (see proc.call)
	switch first[0] {
	case opOpen:
		return serveQueries(r, w, d)
	case opIngest:
		return serveIngest(w, d)
	case opSave:
		return serveSave(w, d)
	}
	fmt.Fprintf(os.Stderr, "datachat sql worker: unknown first frame %d\n", first[0])
	return 2
}

// prewarm readies DuckDB in this process while it waits for work (workers
// are started ahead, as spares): the first database a process opens pays
// for loading DuckDB's code and building its static state, and the first
// statement checked for its parse tree for the JSON serialiser; a throwaway
// in-memory database does both, so a new conversation's open does not. It
// touches no file and ends before the worker takes its limits and its work.
func prewarm() {
	db, err := openDatabase("", [][2]string{{"threads", "1"}})
	if err != nil {
		return // the real open reports what is wrong
	}
	defer mapping.Close(&db)
	withConn(context.Background(), db, func(conn mapping.Connection) error {
		_, err := scalarString(conn, "SELECT json_serialize_sql('SELECT count(*) FROM range(3) t(x) WHERE x > 1')::VARCHAR")
		return err
	})
}

// reply writes one answer frame: the payload written by fn, or err.
func reply(w *bufio.Writer, err error, fn func(*enc) error) error {
	if err == nil {
		wroteNoSpace.Store(false) // a full disk the request got past
	}
	e := &enc{}
	if err == nil {
		e.byte(replyOK)
		if fn != nil {
			if ferr := fn(e); ferr != nil {
				e = &enc{}
				err = ferr
			}
		}
	}
	if err != nil {
		encodeError(e, err)
	}
	return writeFrame(w, e.b)
}

// openRequest is what a query worker is given: its conversation's tables and
// its limits.
type openRequest struct {
	Root         string // the worker's own directory (absolute): links to the datasets, spill files
	Tables       []Table
	MemoryLimit  int64
	Threads      int
	MaxTempBytes int64
	Timeout      time.Duration // per query, enforced inside (interrupt); the server kills past it
	Denied       []string      // the functions the catalog denies; nil: read them from the catalog, and report them
	limits       workerLimits
}

func (o *openRequest) encode(e *enc) {
	e.byte(opOpen)
	e.str(o.Root)
	e.uvarint(uint64(len(o.Tables)))
	for _, t := range o.Tables {
		e.str(t.Name)
		e.str(t.Path)
	}
	e.varint(o.MemoryLimit)
	e.int(o.Threads)
	e.varint(o.MaxTempBytes)
	e.varint(int64(o.Timeout))
	e.bool(o.Denied != nil)
	e.strs(o.Denied)
	o.limits.encode(e)
}

func (o *openRequest) decode(d *dec) {
	o.Root = d.str()
	n := d.count(2)
	o.Tables = make([]Table, n)
	for i := range o.Tables {
		o.Tables[i] = Table{Name: d.str(), Path: d.str()}
	}
	o.MemoryLimit = d.varint()
	o.Threads = d.int()
	o.MaxTempBytes = d.varint()
	o.Timeout = time.Duration(d.varint())
	if d.bool() {
		o.Denied = d.strs()
		if o.Denied == nil {
			o.Denied = []string{}
		}
	} else {
		d.strs()
	}
	o.limits.decode(d)
}

// workerLimits are the OS limits a worker puts itself under (see
// applyLimits).
type workerLimits struct {
	Data     int64         // RLIMIT_DATA in bytes; 0: none
	CPU      time.Duration // RLIMIT_CPU over the worker's life; 0: none
	QueryCPU time.Duration // CPU time one request may use before SIGXCPU interrupts it; 0: none
	Landlock bool          // restrict files, network and signals where the kernel can
}

func (l *workerLimits) encode(e *enc) {
	e.varint(l.Data)
	e.varint(int64(l.CPU))
	e.varint(int64(l.QueryCPU))
	e.bool(l.Landlock)
}

func (l *workerLimits) decode(d *dec) {
	l.Data = d.varint()
	l.CPU = time.Duration(d.varint())
	l.QueryCPU = time.Duration(d.varint())
	l.Landlock = d.bool()
}

// queryRequest is one query for a query worker.
type queryRequest struct {
	SQL    string
	Limits resultLimits
}

func (q *queryRequest) encode(e *enc, op byte) {
	e.byte(op)
	e.str(q.SQL)
	e.int(q.Limits.maxRows)
	e.int(q.Limits.maxCell)
	e.int(q.Limits.maxBytes)
}

func (q *queryRequest) decode(d *dec) {
	q.SQL = d.str()
	q.Limits.maxRows = d.int()
	q.Limits.maxCell = d.int()
	q.Limits.maxBytes = d.int()
}

// serveQueries is a query worker's life.
func serveQueries(r *bufio.Reader, w *bufio.Writer, d *dec) int {
	var req openRequest
	req.decode(d)
	if d.err != nil {
		reply(w, d.err, nil)
		return 2
	}
	for _, t := range req.Tables {
		if _, err := os.Stat(t.Path); err != nil {
			reply(w, datachat.Errorf(datachat.EINVALID, "dataset %q cannot be read: its file is missing", t.Name), nil)
			return 1
		}
	}
	limits, err := applyLimits(req.limits, req.Root, realPaths(req.Tables))
	if err != nil {
		reply(w, err, nil)
		return 1
	}
	in, err := openInstance(req.Root, req.Tables, req.MemoryLimit, req.Threads, req.MaxTempBytes, req.Denied)
	if err != nil {
		reply(w, hideErrorPaths(err, req.Root, req.Tables), nil)
		return 1
	}
	defer in.close()
	// The answer: the OS limits in force, and what the catalog denies.
	if err := reply(w, nil, func(e *enc) error { e.strs(limits); e.strs(in.denied); return nil }); err != nil {
		return 0
	}

	// The running request's cancel, for opCancel and SIGXCPU. A cancel
	// names its request: one that comes before the request starts (the
	// frames cross) cancels it as it starts, and one for a request already
	// answered cancels nothing.
	var mu sync.Mutex
	var cancel context.CancelCauseFunc
	var current, cancelled uint64
	interrupt := func(cause error) {
		mu.Lock()
		if cancel != nil {
			cancel(cause)
		}
		mu.Unlock()
	}
	xcpu := make(chan os.Signal, 1)
	notifyCPULimit(xcpu)
	go func() {
		for range xcpu {
			interrupt(errCPULimit)
		}
	}()
	frames := make(chan []byte, 1)
	go func() {
		defer close(frames)
		for {
			b, err := readFrame(r)
			if err != nil || len(b) == 0 {
				return
			}
			if b[0] == opCancel {
				seq := (&dec{b: b[1:]}).uvarint()
				mu.Lock()
				cancelled = max(cancelled, seq)
				if seq == current && cancel != nil {
					cancel(context.Canceled)
				}
				mu.Unlock()
				continue
			}
			frames <- b
		}
	}()
	for b := range frames {
		var q queryRequest
		qd := &dec{b: b[1:]}
		seq := qd.uvarint()
		q.decode(qd)
		if qd.err != nil {
			reply(w, qd.err, nil)
			return 2
		}
		ctx, c := context.WithCancelCause(context.Background())
		ctx, stop := context.WithTimeout(ctx, req.Timeout)
		mu.Lock()
		cancel, current = c, seq
		if cancelled >= seq {
			c(context.Canceled)
		}
		mu.Unlock()
		startQueryCPU(req.limits)
		var res *Result
		var n int64
		switch b[0] {
		case opQuery:
			res, err = in.query(ctx, q.SQL, q.Limits)
		case opEstimate:
			n, err = in.estimate(ctx, q.SQL)
		default:
			err = fmt.Errorf("unknown request %d", b[0])
		}
		err = stopReason(ctx, err, req.Timeout)
		err = hideErrorPaths(err, req.Root, req.Tables)
		mu.Lock()
		cancel = nil
		mu.Unlock()
		stop()
		c(nil)
		if werr := reply(w, err, func(e *enc) error {
			if res != nil {
				return e.result(res)
			}
			e.varint(n)
			return nil
		}); werr != nil {
			return 0
		}
	}
	signal.Stop(xcpu)
	return 0
}

var errCPULimit = errors.New("cpu time limit")

// stopReason turns an interrupted query's error into what stopped it.
func stopReason(ctx context.Context, err error, timeout time.Duration) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	switch context.Cause(ctx) {
	case errCPULimit:
		return &datachat.QueryError{Kind: datachat.KindTimeout, Message: "the query used more CPU time than allowed and was stopped; make it cheaper (filter, aggregate, LIMIT, fewer joins)"}
	case context.DeadlineExceeded:
		return timeoutError(timeout)
	}
	return err
}

func timeoutError(timeout time.Duration) *datachat.QueryError {
	return &datachat.QueryError{Kind: datachat.KindTimeout, Message: fmt.Sprintf("the query did not finish within %s and was stopped; make it cheaper (filter, aggregate, LIMIT, fewer joins)", timeout)}
}

// realPaths are the files the tables' links point to, which the worker may
// read.
func realPaths(tables []Table) []string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = t.Path
	}
	return out
}

// hideErrorPaths applies hidePaths to the message of an error a user sees.
func hideErrorPaths(err error, root string, tables []Table) error {
	var qe *datachat.QueryError
	var de *datachat.Error
	switch {
	case errors.As(err, &qe):
		return &datachat.QueryError{Kind: qe.Kind, Message: hidePaths(qe.Message, root, tables)}
	case errors.As(err, &de):
		return &datachat.Error{Code: de.Code, Message: hidePaths(de.Message, root, tables)}
	}
	return err
}

// hidePaths takes the worker's own directory and the datasets' real paths
// out of a message a user will see: the files are named as the catalog names
// them, by table.
func hidePaths(msg, root string, tables []Table) string {
	for i, t := range tables {
		link := linkName(i, t)
		if real, err := filepath.EvalSymlinks(t.Path); err == nil && real != t.Path {
			msg = strings.ReplaceAll(msg, real, link)
		}
		msg = strings.ReplaceAll(msg, t.Path, link)
	}
	if real, err := filepath.EvalSymlinks(root); err == nil && real != root {
		msg = hidePaths(msg, real, nil)
	}
	if root != "" {
		msg = strings.ReplaceAll(msg, root+string(filepath.Separator), "")
		msg = strings.ReplaceAll(msg, root, ".")
	}
	return msg
}
