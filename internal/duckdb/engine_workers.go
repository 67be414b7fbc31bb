package duckdb

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// The engine's worker processes: the warm pools of spares started ahead, a
// conversation's worker started or taken from them, handed back after each
// query, and stopped to stay within MaxProcesses and IdleMemory or once idle
// for IdleTimeout.

// warmPool holds worker processes started ahead (spares), so that a new
// conversation or an upload need not wait for exec and for DuckDB to load:
// each has readied DuckDB (see package worker) and waits for its first frame, which says
// what it is for; it takes no limits and reads no file before that frame,
// and serves one conversation or one upload for the rest of its life.
type warmPool struct {
	size    int
	procs   []*proc // under Engine.mu
	filling int     // being started; under Engine.mu
}

// start starts a conversation's worker and builds its instance.
func (e *Engine) start(ctx context.Context, key string, tables []Table) (*worker, error) {
	if err := e.readPolicy(ctx); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(e.opts.TempDir, "sql-")
	if err != nil {
		return nil, fmt.Errorf("create sql worker directory: %w", err)
	}
	p, err := e.takeSpare()
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	w := &worker{key: key, tables: tables, p: p, root: root}
	req := &wire.Open{
		Root: root, Tables: tables, MemoryLimit: e.opts.MemoryLimit, Threads: e.threadsFor(tables),
		MaxTempBytes: e.opts.MaxTempBytes, Timeout: e.opts.Timeout, Denied: e.denied, Limits: e.opts.limits(),
	}
	b, err := p.call(ctx, wire.OpOpen, req.Encode(), e.opts.Timeout+e.opts.KillGrace, e.opts.KillGrace, wire.TimeoutError(e.opts.Timeout))
	if err == nil {
		err = wire.DecodeReplyWith(b, (&wire.OpenAnswer{}).Decode)
	}
	if err != nil {
		e.stopWorker(w)
		e.refillSpare()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if datachat.ErrorCode(err) == datachat.EINVALID {
			return nil, err
		}
		return nil, fmt.Errorf("start sql worker: %w", err)
	}
	return w, nil
}

// takeSpare returns a spare process for a conversation's worker, or a new
// one. It does not start the next spare: that waits until the
// conversation's open and query are done (done, Prepare), so that a new
// process's start-up does not take the CPU they need.
func (e *Engine) takeSpare() (*proc, error) { return e.take(&e.spares) }

// refillSpare starts spare processes for conversations until Spares are
// ready or starting.
func (e *Engine) refillSpare() { e.refill(&e.spares) }

// take returns a process of the pool, or a new one when it has none.
func (e *Engine) take(pool *warmPool) (*proc, error) {
	for {
		e.mu.Lock()
		var p *proc
		if len(pool.procs) > 0 {
			// One that has readied DuckDB (see package worker), else the oldest: the
			// likeliest to be ready soonest.
			i := max(0, slices.IndexFunc(pool.procs, (*proc).isReady))
			p = pool.procs[i]
			pool.procs = slices.Delete(pool.procs, i, i+1)
		}
		e.mu.Unlock()
		if p == nil {
			return startProc(&e.opts)
		}
		if p.alive() {
			return p, nil
		}
		p.shutdown(0)
	}
}

// readyLocked reports whether the pool is full of processes that have
// readied DuckDB.
func (pool *warmPool) readyLocked() bool {
	return len(pool.procs) >= pool.size && !slices.ContainsFunc(pool.procs, func(p *proc) bool { return !p.isReady() })
}

// refill starts processes until the pool's are ready or starting.
func (e *Engine) refill(pool *warmPool) {
	e.mu.Lock()
	need := pool.size - len(pool.procs) - pool.filling
	if e.closed || need <= 0 {
		e.mu.Unlock()
		return
	}
	pool.filling += need
	e.mu.Unlock()
	for range need {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			p, err := startProc(&e.opts)
			added := p
			e.mu.Lock()
			pool.filling--
			if err == nil && !e.closed && len(pool.procs) < pool.size {
				pool.procs, p = append(pool.procs, p), nil
			}
			e.mu.Unlock()
			e.poke()
			if err != nil {
				e.opts.Logger.Warn("start spare sql worker", slog.String("error", err.Error()))
				return
			}
			if p != nil { // not needed after all
				p.shutdown(time.Second)
				return
			}
			// Kept as a spare: tell WaitSpares when it is ready.
			select {
			case <-added.ready:
				e.poke()
			case <-added.exited:
			case <-e.quit:
			}
		}()
	}
}

// done hands a worker back after a query: it stays for the conversation's
// next query unless it died, was retired, or used most of its CPU budget.
func (e *Engine) done(w *worker, failed bool) {
	private, cpu := procUsage(w.p.pid())
	e.mu.Lock()
	w.busy = false
	w.lastUsed = time.Now()
	w.private = private
	stop := failed || w.retired || !w.p.alive() || cpu > e.opts.limits().CPU/2
	if stop && e.workers[w.key] == w {
		delete(e.workers, w.key)
	}
	toStop := e.trimLocked()
	e.mu.Unlock()
	if stop {
		go e.stopWorker(w)
	}
	for _, old := range toStop {
		go e.stopWorker(old)
	}
	e.refillSpare()
}

// makeRoomLocked picks idle workers to stop so one more process fits within
// MaxProcesses, least recently used first.
func (e *Engine) makeRoomLocked() []*worker {
	var out []*worker
	for len(e.workers)+1 > e.opts.MaxProcesses {
		w := e.oldestIdleLocked()
		if w == nil {
			break
		}
		delete(e.workers, w.key)
		out = append(out, w)
	}
	return out
}

// trimLocked picks idle workers to stop while idle workers together hold more
// private memory than IdleMemory, least recently used first.
func (e *Engine) trimLocked() []*worker {
	var total int64
	for _, w := range e.workers {
		if !w.busy && w.p != nil {
			total += w.private
		}
	}
	var out []*worker
	for total > e.opts.IdleMemory {
		w := e.oldestIdleLocked()
		if w == nil {
			break
		}
		delete(e.workers, w.key)
		total -= w.private
		out = append(out, w)
	}
	return out
}

func (e *Engine) oldestIdleLocked() *worker {
	var oldest *worker
	for _, w := range e.workers {
		if !w.busy && w.p != nil && (oldest == nil || w.lastUsed.Before(oldest.lastUsed)) {
			oldest = w
		}
	}
	return oldest
}

// stopWorker ends a worker's process and removes its directory.
func (e *Engine) stopWorker(w *worker) {
	w.p.shutdown(2 * time.Second)
	os.RemoveAll(w.root)
	e.poke()
}

// janitor stops workers left idle for IdleTimeout.
func (e *Engine) janitor() {
	defer e.wg.Done()
	t := time.NewTicker(max(min(e.opts.IdleTimeout/2, 30*time.Second), 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			return
		case now := <-t.C:
			e.closeIdle(now)
		}
	}
}

// closeIdle stops the workers idle since before now - IdleTimeout.
func (e *Engine) closeIdle(now time.Time) {
	var toStop []*worker
	e.mu.Lock()
	for k, w := range e.workers {
		if !w.busy && w.p != nil && now.Sub(w.lastUsed) > e.opts.IdleTimeout {
			delete(e.workers, k)
			toStop = append(toStop, w)
		}
	}
	e.mu.Unlock()
	for _, w := range toStop {
		e.stopWorker(w)
	}
}
