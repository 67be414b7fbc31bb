// Package duckdb is datachat's sandboxed SQL engine, seen from the server.
// Every DuckDB instance —
// a conversation's queries, and the check and conversion of an uploaded
// dataset — lives in a worker process: this same binary, re-executed, under
// OS limits it puts itself under before DuckDB starts (memory, CPU time, and
// where the kernel has Landlock, files and network). The server keeps only
// the scheduling, the deadlines and the results, which cross in a compact
// binary form; a worker that crashes, runs out of memory or outlives its
// deadline fails only its own query, and the next one gets a new worker.
//
// This package is the server's side (the engine, its scheduler and its pool
// of worker processes); package worker is what runs inside a worker, and
// package wire the protocol between them. This package imports worker, so
// every binary that links it can serve as its own worker, but never calls
// DuckDB itself.
//
// Inside a worker, a conversation's instance is read-only and locked down
// (views over exactly its Parquet files, no other file, no network, no
// settings), and every statement is checked on DuckDB's own parse tree before
// it is bound (package worker, sandbox.go).
//
// [Engine.Query] runs a query; [Engine.EstimateRows] asks DuckDB's planner how
// many rows one would return; [Engine.Ingest] converts an upload. Errors are
// *[datachat.QueryError] (the query failed: a client error), datachat.EBUSY (too many
// queries waiting) or internal.
package duckdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// Engine runs sandboxed queries in worker processes. It is safe for
// concurrent use.
type Engine struct {
	opts   Options
	sched  *scheduler
	ingest chan struct{} // a token per running ingest
	quit   chan struct{}
	wg     sync.WaitGroup

	policyOnce sync.Once
	denied     []string // what the catalog denies, read once by a worker no user touched
	limits     []string // the OS limits that worker reported
	policyErr  error

	// changed receives a value (without blocking) whenever a query waits,
	// starts or ends, or a worker starts or stops: an event tests wait on.
	changed chan struct{}

	// When an upload's progress is first told, and how often (see
	// IngestJob.Progress), and when it holds a query slot (see Ingest);
	// tests shorten them.
	progressAfter, progressEvery, ingestReserveAfter time.Duration

	mu      sync.Mutex
	closed  bool
	workers map[string]*worker // by conversation (or table list)
	spares  warmPool           // for conversations' workers
	uploads warmPool           // for uploads only: conversations' workers, started after every upload and delete, cannot use them up
	closeMu sync.Once
}

// worker is one conversation's worker process, seen from the engine.
type worker struct {
	key      string
	tables   []Table
	p        *proc
	root     string // its directory, removed when it ends
	busy     bool
	retired  bool // replaced or evicted: stopped when its query ends
	lastUsed time.Time
	private  int64 // private memory at the last measure, bytes
	// opening is closed once a worker Prepare started in the background is
	// ready (p set) or failed (openErr set); nil for one started by a query.
	opening chan struct{}
	openErr error
}

var errClosed = errors.New("sql engine closed")

// New starts an engine: its janitor, and a spare worker process.
func New(opts Options) (*Engine, error) {
	o := opts.withDefaults()
	if err := os.MkdirAll(o.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	dir, err := filepath.Abs(o.TempDir)
	if err != nil {
		return nil, err
	}
	o.TempDir = dir
	e := &Engine{
		opts:    o,
		sched:   newScheduler(o.Workers, o.PerUserRunning, o.PerUserQueued, o.QueueSize),
		ingest:  make(chan struct{}, o.IngestWorkers),
		quit:    make(chan struct{}),
		workers: map[string]*worker{},
		changed: make(chan struct{}, 1),
		spares:  warmPool{size: o.Spares},
		uploads: warmPool{size: o.IngestWorkers},

		progressAfter:      time.Second,
		progressEvery:      250 * time.Millisecond,
		ingestReserveAfter: 500 * time.Millisecond,
	}
	e.sched.changed = e.poke
	e.wg.Add(1)
	go e.janitor()
	e.refillSpare()
	e.refill(&e.uploads)
	return e, nil
}

func (e *Engine) poke() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Load reports how many queries wait for their turn and how many run, for
// metrics.
func (e *Engine) Load() (queued, running int) { return e.sched.load() }

// WaitLoad returns once cond holds for the engine's load, checking it again
// whenever a query waits, starts or ends; or with ctx's error when ctx ends
// first. It is for tests, one waiter at a time.
func (e *Engine) WaitLoad(ctx context.Context, cond func(queued, running int) bool) error {
	for !cond(e.Load()) {
		select {
		case <-e.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// WaitSpares returns once the spare processes (for new conversations and for
// uploads) are all started and have readied DuckDB, so that the next new
// conversation or upload need not wait for one; or with ctx's error when ctx
// ends first. It is for benchmarks and tests, one waiter at a time, and shares
// WaitLoad's signal.
func (e *Engine) WaitSpares(ctx context.Context) error {
	for {
		e.mu.Lock()
		ready := e.spares.readyLocked() && e.uploads.readyLocked() || e.closed
		e.mu.Unlock()
		if ready {
			return nil
		}
		e.refillSpare()
		e.refill(&e.uploads)
		select {
		case <-e.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Processes reports how many worker processes are up (idle ones included).
func (e *Engine) Processes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.workers)
}

// Close stops the engine: new queries fail, every worker is stopped (running
// queries fail), and their files are removed.
func (e *Engine) Close() error {
	e.closeMu.Do(func() {
		e.mu.Lock()
		e.closed = true
		ws := make([]*worker, 0, len(e.workers))
		for k, w := range e.workers {
			delete(e.workers, k)
			ws = append(ws, w)
		}
		spares := append(e.spares.procs, e.uploads.procs...)
		e.spares.procs, e.uploads.procs = nil, nil
		e.mu.Unlock()
		close(e.quit)
		e.wg.Wait()
		var wg sync.WaitGroup
		for _, w := range ws {
			if w.p == nil {
				continue // still opening: its goroutine stops it (e.closed)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.stopWorker(w)
			}()
		}
		for _, p := range spares {
			p.shutdown(time.Second)
		}
		wg.Wait()
	})
	return nil
}

// Query runs one SQL statement over the given tables, the datasets of one
// conversation, and returns at most MaxRows rows. conversationID picks the
// conversation's worker (a different table list replaces it); "" keys the
// worker by the tables themselves. The user a query counts against, for
// fairness, is datachat.UserIDFrom(ctx) (else the conversation).
//
// Errors: *datachat.QueryError (EINVALID) when the query fails or is refused;
// datachat.EBUSY when the user or the engine has too many queries waiting;
// ctx's error when ctx ends first.
func (e *Engine) Query(ctx context.Context, conversationID string, tables []Table, sql string) (*Result, error) {
	var res *Result
	err := e.do(ctx, conversationID, tables, wire.OpQuery, sql, func(d *wire.Dec) {
		res = d.Result()
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// EstimateRows returns DuckDB's planner estimate of how many rows a SELECT over
// the tables would return, from EXPLAIN, without running it. The sandbox
// applies as for [Engine.Query].
func (e *Engine) EstimateRows(ctx context.Context, conversationID string, tables []Table, sql string) (int64, error) {
	var n int64
	err := e.do(ctx, conversationID, tables, wire.OpEstimate, sql, func(d *wire.Dec) {
		n = d.Varint()
	})
	return n, err
}

// Evict stops a conversation's worker (once its running query ends), for when
// its datasets change or it is deleted. Query would notice changed tables by
// itself; Evict frees the worker at once.
func (e *Engine) Evict(conversationID string) {
	e.mu.Lock()
	w := e.workers[conversationID]
	if w == nil {
		e.mu.Unlock()
		return
	}
	delete(e.workers, conversationID)
	w.retired = true
	busy := w.busy || w.p == nil // one still opening is stopped when it is ready
	e.mu.Unlock()
	if !busy {
		go e.stopWorker(w)
	}
}

func (e *Engine) do(ctx context.Context, conv string, tables []Table, op byte, sql string, read func(*wire.Dec)) error {
	tables, err := checkTables(tables)
	if err != nil {
		return err
	}
	key := conv
	if key == "" {
		key = tablesKey(tables)
	}
	user := datachat.UserIDFrom(ctx)
	if user == "" {
		user = "conversation:" + key
	}
	release, err := e.sched.acquire(ctx, user, key)
	if err != nil {
		return err
	}
	defer release()

	w, err := e.acquire(ctx, key, tables)
	if err != nil {
		return err
	}
	req := &wire.Query{SQL: sql, Limits: wire.ResultLimits{MaxRows: e.opts.MaxRows, MaxCell: e.opts.MaxCellBytes, MaxBytes: e.opts.MaxResultMB << 20}}
	b, err := w.p.call(ctx, op, req.Encode(), e.opts.Timeout+e.opts.KillGrace, e.opts.KillGrace, wire.TimeoutError(e.opts.Timeout))
	if err != nil {
		// A worker that answered the cancel stays; a dead or killed one goes.
		e.done(w, false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		head, _, _ := strings.Cut(strings.TrimSpace(w.p.stderr.Head()), "\n")
		e.opts.Logger.Warn("sql worker ended during a query", slog.String("error", err.Error()),
			slog.String("stderr_first", head), slog.String("stderr_last", lastLine(w.p.stderr.String())))
		return err
	}
	err = wire.DecodeReplyWith(b, read)
	// A worker whose answer does not decode is not trusted with another
	// query; one whose query ran out of memory is replaced too, so the next
	// query starts with all of its memory rather than with what DuckDB's
	// allocator kept after the failure (a follow-up to such a query died of
	// bad_alloc in CI).
	e.done(w, errors.Is(err, wire.ErrMalformed) || outOfMemory(err))
	return err
}

// outOfMemory reports whether err is the worker's report that a query ran
// out of its memory.
func outOfMemory(err error) bool {
	var qe *datachat.QueryError
	return errors.As(err, &qe) && qe.Kind == datachat.KindMemory
}

// checkTables validates and sorts a table list.
func checkTables(tables []Table) ([]Table, error) {
	out := slices.Clone(tables)
	seen := map[string]bool{}
	for i, t := range out {
		if t.Name == "" {
			return nil, datachat.Errorf(datachat.EINVALID, "table %d has no name", i+1)
		}
		p, err := filepath.Abs(t.Path)
		if err != nil {
			return nil, fmt.Errorf("table %q: %w", t.Name, err)
		}
		out[i].Path = p
		k := strings.ToLower(t.Name)
		if seen[k] {
			return nil, datachat.Errorf(datachat.EINVALID, "two tables are named %q", t.Name)
		}
		seen[k] = true
	}
	slices.SortFunc(out, func(a, b Table) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func tablesKey(tables []Table) string {
	var b strings.Builder
	b.WriteString("tables:")
	for _, t := range tables {
		b.WriteString(t.Name)
		b.WriteByte(0)
		b.WriteString(t.Path)
		b.WriteByte(0)
	}
	return b.String()
}

// acquire returns the conversation's worker for these tables, starting one
// if needed. The scheduler gives one query per conversation at a time, so
// nothing else uses the worker until done.
func (e *Engine) acquire(ctx context.Context, key string, tables []Table) (*worker, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errClosed
	}
	w := e.workers[key]
	if w != nil && w.opening != nil && slices.Equal(w.tables, tables) {
		// Being prepared in the background: wait for it, not for a new one.
		opening := w.opening
		e.mu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		e.mu.Lock()
		if e.workers[key] != w || w.openErr != nil {
			e.mu.Unlock()
			if w.openErr != nil && datachat.ErrorCode(w.openErr) == datachat.EINVALID {
				return nil, w.openErr
			}
			return e.acquire(ctx, key, tables)
		}
	}
	if w != nil && (!slices.Equal(w.tables, tables) || w.opening != nil && w.p == nil || w.p != nil && !w.p.alive()) {
		delete(e.workers, key)
		if w.p != nil {
			go e.stopWorker(w)
		}
		w = nil
	}
	if w != nil {
		w.busy = true
		e.mu.Unlock()
		return w, nil
	}
	toStop := e.makeRoomLocked()
	e.mu.Unlock()
	for _, old := range toStop {
		go e.stopWorker(old)
	}

	w, err := e.start(ctx, key, tables)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		go e.stopWorker(w)
		return nil, errClosed
	}
	w.busy = true
	e.workers[key] = w
	e.poke()
	return w, nil
}

// Prepare starts a conversation's worker for these tables in the
// background, outside the query slots — after an upload or a delete changed
// them — so that its next query finds it ready instead of starting it while
// other users' queries wait for the slot. A worker for other tables is
// stopped (once its query, if any, ends).
func (e *Engine) Prepare(conversationID string, tables []Table) {
	tables, err := checkTables(tables)
	if err != nil || conversationID == "" {
		return
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	if w := e.workers[conversationID]; w != nil {
		if slices.Equal(w.tables, tables) {
			e.mu.Unlock()
			return
		}
		delete(e.workers, conversationID)
		w.retired = true
		if !w.busy && w.p != nil {
			go e.stopWorker(w)
		}
	}
	w := &worker{key: conversationID, tables: tables, opening: make(chan struct{}), lastUsed: time.Now()}
	e.workers[conversationID] = w
	toStop := e.makeRoomLocked()
	e.mu.Unlock()
	for _, old := range toStop {
		go e.stopWorker(old)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), e.opts.Timeout+e.opts.KillGrace)
		defer cancel()
		started, err := e.start(ctx, conversationID, tables)
		e.mu.Lock()
		if err != nil {
			w.openErr = err
			if e.workers[conversationID] == w {
				delete(e.workers, conversationID)
			}
		} else {
			w.p, w.root = started.p, started.root
		}
		stale := e.workers[conversationID] != w || e.closed
		if stale && err == nil {
			delete(e.workers, conversationID)
		}
		close(w.opening)
		e.mu.Unlock()
		if stale && err == nil {
			e.stopWorker(w)
		}
		e.poke()
		e.refillSpare()
	}()
}

// threadsFor is how many DuckDB threads a worker over these tables gets:
// one for small data, where a second thread only adds the cost of waking it
// (a query over a few MB runs in one row group), else Threads.
func (e *Engine) threadsFor(tables []Table) int {
	var size int64
	for _, t := range tables {
		if fi, err := os.Stat(t.Path); err == nil {
			size += fi.Size()
		}
	}
	if size < 32<<20 {
		return 1
	}
	return e.opts.Threads
}

// Limits returns the OS limits a worker reports being under, for the
// server's start-up log (see readPolicy).
func (e *Engine) Limits(ctx context.Context) ([]string, error) {
	if err := e.readPolicy(ctx); err != nil {
		return nil, err
	}
	return e.limits, nil
}

// readPolicy starts, once, a worker with no tables that runs only our own SQL
// and reads from its catalog what the sandbox denies; every conversation's
// worker is given that list instead of reading it again (it takes longer
// than the rest of opening an instance). It proves too that workers start.
func (e *Engine) readPolicy(ctx context.Context) error {
	e.policyOnce.Do(func() {
		e.denied, e.limits, e.policyErr = e.catalogPolicy(ctx)
	})
	return e.policyErr
}

func (e *Engine) catalogPolicy(ctx context.Context) (denied, limits []string, err error) {
	// Not the caller's context: the answer serves every later caller.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	root, err := os.MkdirTemp(e.opts.TempDir, "sql-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(root)
	p, err := startProc(&e.opts)
	if err != nil {
		return nil, nil, err
	}
	defer p.shutdown(time.Second)
	req := &wire.Open{Root: root, MemoryLimit: e.opts.MemoryLimit, Threads: 1, MaxTempBytes: e.opts.MaxTempBytes,
		Timeout: e.opts.Timeout, Limits: e.opts.limits()}
	b, err := p.call(ctx, wire.OpOpen, req.Encode(), time.Minute, time.Second, errors.New("the sql worker did not start within a minute"))
	if err != nil {
		return nil, nil, fmt.Errorf("start sql worker: %w", err)
	}
	d, err := wire.DecodeReply(b)
	if err != nil {
		return nil, nil, fmt.Errorf("start sql worker: %w", err)
	}
	var answer wire.OpenAnswer
	answer.Decode(d)
	if d.Err() != nil {
		return nil, nil, d.Err()
	}
	limits, denied = answer.Limits, answer.Denied
	if len(denied) == 0 {
		return nil, nil, errors.New("start sql worker: it denied no function")
	}
	return denied, limits, nil
}
