// Package worker is what runs inside a datachat SQL worker process: the
// server's own binary, started again with [wire.WorkerEnv] set, which
// becomes a worker before main runs (the init below). So every binary that
// links this package — datachat itself, and each test binary — can serve as
// its own worker without a second program to ship; package duckdb, the
// server's side, imports it for that.
//
// A worker reads frames on fd 3 and answers on fd 4 (package wire). Its
// first frame says what it is for:
//
//   - wire.OpOpen: one conversation's query engine. It limits itself
//     (memory, CPU time, files and network: see limits_linux.go), builds the
//     conversation's sandboxed DuckDB instance (instance.go, sandbox.go),
//     then answers wire.OpQuery and wire.OpEstimate frames one at a time
//     until its input closes. wire.OpCancel interrupts the running request.
//   - wire.OpIngest: one dataset upload to check and convert to Parquet
//     (ingest.go), then exit.
//   - wire.OpSave: one spool of a query's rows to store as Parquet
//     (save.go), then exit.
//
// Nothing a worker does can reach the server's memory; the server kills a
// worker that outlives its deadline, and one that crashes fails only its own
// request. This package is the only one of datachat's that links DuckDB's
// library ([Version]).
package worker

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

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
	"datachat/internal/duckdb/wire"
)

func init() {
	if os.Getenv(wire.WorkerEnv) == "" {
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
	if wire.WriteFrame(w, nil) != nil { // ready: an empty frame
		return 0 // the server went away
	}
	first, err := wire.ReadFrame(r)
	if err != nil || len(first) == 0 {
		return 0 // the server went away before giving work
	}
	op, _, d := wire.ReadRequest(first)
	switch op {
	case wire.OpOpen:
		return serveQueries(r, w, d)
	case wire.OpIngest:
		return serveIngest(w, d)
	case wire.OpSave:
		return serveSave(w, d)
	}
	fmt.Fprintf(os.Stderr, "datachat sql worker: unknown first frame %d\n", op)
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
func reply(w *bufio.Writer, err error, fn func(*wire.Enc) error) error {
	noSpace := wroteNoSpace.Swap(false) // this request's full disk, or one it got past
	e := &wire.Enc{}
	if err == nil {
		e.Byte(wire.ReplyOK)
		if fn != nil {
			if ferr := fn(e); ferr != nil {
				e = &wire.Enc{}
				err = ferr
			}
		}
	}
	if err != nil {
		wire.EncodeError(e, err, noSpace)
	}
	return wire.WriteFrame(w, e.Bytes())
}

// serveQueries is a query worker's life.
func serveQueries(r *bufio.Reader, w *bufio.Writer, d *wire.Dec) int {
	var req wire.Open
	req.Decode(d)
	if d.Err() != nil {
		reply(w, d.Err(), nil)
		return 2
	}
	for _, t := range req.Tables {
		if _, err := os.Stat(t.Path); err != nil {
			reply(w, datachat.Errorf(datachat.EINVALID, "dataset %q cannot be read: its file is missing", t.Name), nil)
			return 1
		}
	}
	limits, err := applyLimits(req.Limits, req.Root, realPaths(req.Tables))
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
	answer := wire.OpenAnswer{Limits: limits, Denied: in.denied}
	if err := reply(w, nil, func(e *wire.Enc) error { answer.Encode(e); return nil }); err != nil {
		return 0
	}

	// The running request's cancel, for wire.OpCancel and SIGXCPU. A cancel
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
			b, err := wire.ReadFrame(r)
			if err != nil || len(b) == 0 {
				return
			}
			if op, seq, _ := wire.ReadRequest(b); op == wire.OpCancel {
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
		var q wire.Query
		op, seq, qd := wire.ReadRequest(b)
		q.Decode(qd)
		if qd.Err() != nil {
			reply(w, qd.Err(), nil)
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
		startQueryCPU(req.Limits)
		var res *wire.Result
		var n int64
		switch op {
		case wire.OpQuery:
			res, err = in.query(ctx, q.SQL, q.Limits)
		case wire.OpEstimate:
			n, err = in.estimate(ctx, q.SQL)
		default:
			err = fmt.Errorf("unknown request %d", op)
		}
		err = stopReason(ctx, err, req.Timeout)
		err = hideErrorPaths(err, req.Root, req.Tables)
		mu.Lock()
		cancel = nil
		mu.Unlock()
		stop()
		c(nil)
		if werr := reply(w, err, func(e *wire.Enc) error {
			if res != nil {
				return e.Result(res)
			}
			e.Varint(n)
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
		return wire.CPULimitError()
	case context.DeadlineExceeded:
		return wire.TimeoutError(timeout)
	}
	return err
}

// realPaths are the files the tables' links point to, which the worker may
// read.
func realPaths(tables []wire.Table) []string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = t.Path
	}
	return out
}

// hideErrorPaths applies hidePaths to the message of an error a user sees.
func hideErrorPaths(err error, root string, tables []wire.Table) error {
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
func hidePaths(msg, root string, tables []wire.Table) string {
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
