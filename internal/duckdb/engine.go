// Package duckdb is datachat's sandboxed SQL engine: DuckDB (through duckdb-go's
// bindings) behind a bounded worker pool, one read-only, locked-down DuckDB
// instance per conversation with views over exactly that conversation's
// Parquet datasets, per-query timeout, memory and thread limits, a row cap, and
// results in the shape of DESIGN.md §3.
//
// [Engine.Query] runs a query; [Engine.EstimateRows] asks DuckDB's planner how
// many rows one would return. Errors are *[QueryError] (the query failed: a
// client error), datachat.EBUSY (the queue is full) or internal.
package duckdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat"
)

// Options configure an [Engine]. Zero values take the defaults shown.
type Options struct {
	Timeout      time.Duration // per query, from when it starts running; 30s
	MemoryLimit  int64         // bytes, DuckDB's memory_limit per conversation instance; 1 GiB
	Threads      int           // DuckDB threads per instance; the number of cores
	MaxRows      int           // rows returned at most; 1000
	Workers      int           // queries running at once; the number of cores
	QueueSize    int           // queries waiting for a worker; beyond it Query answers EBUSY; 32
	IdleTimeout  time.Duration // an instance unused this long is closed; 5m
	MaxInstances int           // instances kept open at most (least recently used closed first); 32
	TempDir      string        // where instances keep their catalog and spill files; os.TempDir()
	MaxTempBytes int64         // spill space per instance; 4 × MemoryLimit
	MaxCellBytes int           // a text or blob value longer than this is cut (and the result marked truncated); 1 MiB
	MaxResultMB  int           // decoded result size (MiB) beyond which rows stop (truncated); 64
	// ProcessMemoryLimit stops every running query when the process's resident
	// memory exceeds it: a backstop for the allocations DuckDB's memory_limit
	// does not track (huge strings and lists built by expressions). Default 75 %
	// of the machine's memory; negative turns it off.
	ProcessMemoryLimit int64
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = 1 << 30
	}
	if o.Threads <= 0 {
		o.Threads = runtime.NumCPU()
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 1000
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 32
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = 32
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.MaxTempBytes <= 0 {
		o.MaxTempBytes = 4 * o.MemoryLimit
	}
	if o.MaxCellBytes <= 0 {
		o.MaxCellBytes = 1 << 20
	}
	if o.MaxResultMB <= 0 {
		o.MaxResultMB = 64
	}
	if o.ProcessMemoryLimit == 0 {
		o.ProcessMemoryLimit = totalMemory() / 4 * 3
	}
	return o
}

// Engine runs sandboxed queries. It is safe for concurrent use.
type Engine struct {
	opts Options
	jobs chan *job
	quit chan struct{}
	wg   sync.WaitGroup

	mu        sync.RWMutex // guards closed and the send on jobs
	closed    bool
	cacheMu   sync.Mutex
	instances map[string]*entry
	running   map[*job]context.CancelCauseFunc
	closeOnce sync.Once
}

// entry is a cached instance (or one being opened).
type entry struct {
	key      string
	tables   []Table
	ready    chan struct{} // closed once inst or err is set
	inst     *instance
	err      error
	refs     int // guarded by Engine.cacheMu
	lastUsed time.Time
	retired  bool
}

type job struct {
	ctx  context.Context
	run  func(ctx context.Context) (any, error)
	done chan jobResult
}

type jobResult struct {
	v   any
	err error
}

var (
	errProcessMemory = errors.New("process memory limit")
	errClosed        = errors.New("sql engine closed")
)

// New starts an engine: its workers, the janitor closing idle instances and the
// memory watchdog. Close stops them.
func New(opts Options) (*Engine, error) {
	o := opts.withDefaults()
	if err := os.MkdirAll(o.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	e := &Engine{
		opts:      o,
		jobs:      make(chan *job, o.QueueSize),
		quit:      make(chan struct{}),
		instances: map[string]*entry{},
		running:   map[*job]context.CancelCauseFunc{},
	}
	for range o.Workers {
		e.wg.Add(1)
		go e.worker()
	}
	e.wg.Add(1)
	go e.janitor()
	if o.ProcessMemoryLimit > 0 {
		e.wg.Add(1)
		go e.watchdog()
	}
	return e, nil
}

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Load reports how many queries wait in the queue for a worker and how many
// are running, for metrics.
func (e *Engine) Load() (queued, running int) {
	e.cacheMu.Lock()
	running = len(e.running)
	e.cacheMu.Unlock()
	return len(e.jobs), running
}

// Close stops the engine: queued queries fail, running ones finish, then
// every instance is closed.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		close(e.jobs)
		e.mu.Unlock()
		close(e.quit)
		e.wg.Wait()
		e.cacheMu.Lock()
		var toClose []*instance
		for k, ent := range e.instances {
			delete(e.instances, k)
			if ent.inst != nil {
				toClose = append(toClose, ent.inst)
			}
		}
		e.cacheMu.Unlock()
		for _, in := range toClose {
			in.close()
		}
	})
	return nil
}

func (e *Engine) worker() {
	defer e.wg.Done()
	for j := range e.jobs {
		if err := j.ctx.Err(); err != nil {
			j.done <- jobResult{err: err}
			continue
		}
		e.mu.RLock()
		closed := e.closed
		e.mu.RUnlock()
		if closed {
			j.done <- jobResult{err: errClosed}
			continue
		}
		v, err := j.run(j.ctx)
		j.done <- jobResult{v: v, err: err}
	}
}

// submit queues fn for a worker, or answers EBUSY when the queue is full.
func (e *Engine) submit(ctx context.Context, fn func(ctx context.Context) (any, error)) (any, error) {
	j := &job{ctx: ctx, run: fn, done: make(chan jobResult, 1)}
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, errClosed
	}
	select {
	case e.jobs <- j:
		e.mu.RUnlock()
	default:
		e.mu.RUnlock()
		return nil, datachat.Errorf(datachat.EBUSY, "The SQL engine is busy (%d queries running, %d waiting). Try again in a moment.", e.opts.Workers, e.opts.QueueSize)
	}
	select {
	case r := <-j.done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Query runs one SQL statement over the given tables, the datasets of one
// conversation, and returns at most MaxRows rows. conversationID picks the
// cached instance (a different table list replaces it); "" keys the instance by
// the tables themselves.
//
// Errors: *QueryError (EINVALID) when the query fails or is refused;
// datachat.EBUSY when the queue is full; ctx's error when ctx ends first.
func (e *Engine) Query(ctx context.Context, conversationID string, tables []Table, sql string) (*Result, error) {
	v, err := e.do(ctx, conversationID, tables, func(ctx context.Context, in *instance) (any, error) {
		return in.query(ctx, sql, resultLimits{maxRows: e.opts.MaxRows, maxCell: e.opts.MaxCellBytes, maxBytes: e.opts.MaxResultMB << 20})
	})
	if err != nil {
		return nil, err
	}
	return v.(*Result), nil
}

// EstimateRows returns DuckDB's planner estimate of how many rows a SELECT over
// the tables would return, from EXPLAIN, without running it. The sandbox
// applies as for [Engine.Query].
func (e *Engine) EstimateRows(ctx context.Context, conversationID string, tables []Table, sql string) (int64, error) {
	v, err := e.do(ctx, conversationID, tables, func(ctx context.Context, in *instance) (any, error) {
		return in.estimate(ctx, sql)
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// Evict closes a conversation's instance (once its running queries end), for
// when its datasets change or it is deleted. Query would notice changed tables
// by itself; Evict frees the instance at once.
func (e *Engine) Evict(conversationID string) {
	e.cacheMu.Lock()
	ent := e.instances[conversationID]
	var in *instance
	if ent != nil {
		in = e.retireLocked(ent)
	}
	e.cacheMu.Unlock()
	if in != nil {
		in.close()
	}
}

func (e *Engine) do(ctx context.Context, conv string, tables []Table, fn func(context.Context, *instance) (any, error)) (any, error) {
	tables, err := checkTables(tables)
	if err != nil {
		return nil, err
	}
	return e.submit(ctx, func(ctx context.Context) (any, error) {
		ctx, cancelCause := context.WithCancelCause(ctx)
		defer cancelCause(nil)
		qctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
		defer cancel()
		ent, err := e.acquire(qctx, conv, tables)
		if err != nil {
			return nil, err
		}
		defer e.release(ent)
		j := &job{}
		e.cacheMu.Lock()
		e.running[j] = cancelCause
		e.cacheMu.Unlock()
		defer func() {
			e.cacheMu.Lock()
			delete(e.running, j)
			e.cacheMu.Unlock()
		}()
		v, err := fn(qctx, ent.inst)
		if err != nil {
			var qe *QueryError
			interrupted := errors.As(err, &qe) && qe.Kind == KindTimeout
			switch {
			case context.Cause(ctx) == errProcessMemory:
				return nil, &QueryError{Kind: KindMemory, Message: "the server ran short of memory and stopped the query; make it lighter (aggregate, filter, fewer or smaller columns)"}
			case ctx.Err() != nil && (interrupted || qctx.Err() != nil):
				return nil, ctx.Err() // the caller cancelled
			case qctx.Err() != nil:
				return nil, &QueryError{Kind: KindTimeout, Message: fmt.Sprintf("the query did not finish within %s and was stopped; make it cheaper (filter, aggregate, LIMIT, fewer joins)", e.opts.Timeout)}
			}
		}
		return v, err
	})
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

// acquire returns the ready instance for conv and tables, opening it if needed.
func (e *Engine) acquire(ctx context.Context, conv string, tables []Table) (*entry, error) {
	key := conv
	if key == "" {
		key = tablesKey(tables)
	}
	var toClose []*instance
	e.cacheMu.Lock()
	ent := e.instances[key]
	if ent != nil && !slices.Equal(ent.tables, tables) {
		if in := e.retireLocked(ent); in != nil {
			toClose = append(toClose, in)
		}
		ent = nil
	}
	opener := ent == nil
	if opener {
		ent = &entry{key: key, tables: tables, ready: make(chan struct{})}
		e.instances[key] = ent
		toClose = append(toClose, e.evictLocked()...)
	}
	ent.refs++
	e.cacheMu.Unlock()
	for _, in := range toClose {
		in.close()
	}

	if opener {
		in, err := openInstance(tables, &e.opts)
		e.cacheMu.Lock()
		ent.inst, ent.err = in, err
		if err != nil && e.instances[key] == ent {
			delete(e.instances, key)
		}
		e.cacheMu.Unlock()
		close(ent.ready)
	} else {
		select {
		case <-ent.ready:
		case <-ctx.Done():
			e.release(ent)
			return nil, ctx.Err()
		}
	}
	if ent.err != nil {
		e.release(ent)
		if datachat.ErrorCode(ent.err) == datachat.EINVALID {
			return nil, ent.err
		}
		return nil, fmt.Errorf("open sql instance: %w", ent.err)
	}
	return ent, nil
}

func (e *Engine) release(ent *entry) {
	e.cacheMu.Lock()
	ent.refs--
	ent.lastUsed = time.Now()
	var in *instance
	if ent.refs == 0 && ent.retired {
		in, ent.inst = ent.inst, nil
	}
	e.cacheMu.Unlock()
	if in != nil {
		in.close()
	}
}

// retireLocked removes ent from the cache; it returns the instance to close now
// if nothing uses it (else the last release closes it).
func (e *Engine) retireLocked(ent *entry) *instance {
	if e.instances[ent.key] == ent {
		delete(e.instances, ent.key)
	}
	ent.retired = true
	if ent.refs == 0 && ent.inst != nil {
		in := ent.inst
		ent.inst = nil
		return in
	}
	return nil
}

// evictLocked retires the least recently used idle instances beyond MaxInstances.
func (e *Engine) evictLocked() []*instance {
	var out []*instance
	for len(e.instances) > e.opts.MaxInstances {
		var oldest *entry
		for _, ent := range e.instances {
			if ent.refs == 0 && ent.inst != nil && (oldest == nil || ent.lastUsed.Before(oldest.lastUsed)) {
				oldest = ent
			}
		}
		if oldest == nil {
			break
		}
		if in := e.retireLocked(oldest); in != nil {
			out = append(out, in)
		}
	}
	return out
}

// janitor closes instances left idle for IdleTimeout.
func (e *Engine) janitor() {
	defer e.wg.Done()
	t := time.NewTicker(max(min(e.opts.IdleTimeout/2, 30*time.Second), 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
		}
		var toClose []*instance
		e.cacheMu.Lock()
		for _, ent := range e.instances {
			if ent.refs == 0 && ent.inst != nil && time.Since(ent.lastUsed) > e.opts.IdleTimeout {
				if in := e.retireLocked(ent); in != nil {
					toClose = append(toClose, in)
				}
			}
		}
		e.cacheMu.Unlock()
		for _, in := range toClose {
			in.close()
		}
	}
}

// watchdog stops running queries when the process's resident memory exceeds
// ProcessMemoryLimit.
func (e *Engine) watchdog() {
	defer e.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case <-t.C:
		}
		e.cacheMu.Lock()
		n := len(e.running)
		e.cacheMu.Unlock()
		if n == 0 {
			continue
		}
		if rss := residentMemory(); rss > e.opts.ProcessMemoryLimit {
			e.cacheMu.Lock()
			for _, cancel := range e.running {
				cancel(errProcessMemory)
			}
			e.cacheMu.Unlock()
		}
	}
}
