package extract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sync/semaphore"

	"datachat"
)

// freeMemory returns to the system the heap memory no longer used:
// compiling PDFium leaves hundreds of MB of garbage that an idle server
// would otherwise hold until a later collection and the scavenger's pace.
var freeMemory = debug.FreeOSMemory

// pdfReader reads PDF files with PDFium compiled to WebAssembly and run by
// wazero, inside the process. Each document is read by one WebAssembly
// instance whose memory is capped; instances are reused while they stay
// small and thrown away after anything unusual.
type pdfReader struct {
	opts    PDFOptions
	slots   chan struct{} // one per document being read
	waiting atomic.Int64

	mu        sync.Mutex
	rt        *pdfRuntime // PDFium started or starting; nil before the first PDF and once let go
	idleSeq   uint64      // counts the uses of rt, so that an idle timer knows it is stale
	stats     PDFStats
	instances map[any]bool // the implementation of every live instance
	closed    bool

	// The memory budget (PDFOptions.MemoryBudget): a document holds
	// MemoryLimit of it while it is read, an instance kept idle its memory.
	budget     *semaphore.Weighted
	idle       map[any]int64 // an idle instance's implementation → what it holds; under mu
	memWaiting int           // documents waiting on the budget; under mu

	// Test hooks: waitHook runs when a document starts waiting for its
	// turn, pageHook before each page is read (with the document's context),
	// releaseHook once PDFium has been let go.
	waitHook    func()
	pageHook    func(ctx context.Context, page int)
	releaseHook func()
}

// pdfRuntime is PDFium started once: compiled (or read from the cache) and
// its pool of instances set up.
type pdfRuntime struct {
	ready chan struct{} // closed once pool or err is set
	pool  pdfium.Pool
	err   error
	cache *wasmCache // released with the pool
	users int        // documents (and Warm) using it; under pdfReader.mu
}

// shutdown closes the pool and releases the cache.
func (rt *pdfRuntime) shutdown() error {
	if rt.pool == nil {
		return nil
	}
	err := rt.pool.Close()
	rt.cache.release()
	return err
}

func newPDFReader(opts PDFOptions) *pdfReader {
	opts = opts.withDefaults()
	return &pdfReader{
		opts:      opts,
		slots:     make(chan struct{}, opts.MaxConcurrent),
		instances: map[any]bool{},
		budget:    semaphore.NewWeighted(opts.MemoryBudget),
		idle:      map[any]int64{},
	}
}

// reserved counts n bytes taken from the memory budget (returned, n < 0)
// in the statistics.
func (r *pdfReader) reserved(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Reserved += n
	r.stats.PeakReserved = max(r.stats.PeakReserved, r.stats.Reserved)
}

// reserveMemory takes MemoryLimit of the budget for one document, waiting
// as long as ctx allows. When the budget is short and an instance is kept
// idle, it takes that instance (the pool hands out its idle instances
// first), counting what the instance holds towards the reservation, and
// returns it for the document; if that is still short, it throws the
// instance away and tries again. While it waits, no document finishing
// keeps its instance.
func (r *pdfReader) reserveMemory(ctx context.Context, pool pdfium.Pool) (pdfium.Pdfium, error) {
	n := r.opts.MemoryLimit
	r.mu.Lock()
	r.memWaiting++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.memWaiting--
		r.mu.Unlock()
	}()
	for {
		if r.budget.TryAcquire(n) {
			r.reserved(n)
			return nil, nil
		}
		r.mu.Lock()
		idle := len(r.idle)
		r.mu.Unlock()
		if idle == 0 {
			if err := r.budget.Acquire(ctx, n); err != nil {
				return nil, err
			}
			r.reserved(n)
			return nil, nil
		}
		inst, err := pool.GetInstanceWithContext(ctx)
		if err != nil {
			return nil, err
		}
		impl := inst.GetImplementation()
		r.mu.Lock()
		held := r.idle[impl] // 0 for a new instance, which holds nothing yet
		delete(r.idle, impl)
		r.mu.Unlock()
		if r.budget.TryAcquire(n - held) {
			r.reserved(n - held)
			return inst, nil
		}
		inst.Kill()
		r.mu.Lock()
		if r.instances[impl] {
			delete(r.instances, impl)
			r.stats.Discarded++
		}
		r.mu.Unlock()
		r.reserved(-held)
		r.budget.Release(held)
	}
}

// use returns PDFium started, or starting, counted as in use until done: it
// starts it when it is not (the first PDF, or the first after it was let go).
func (r *pdfReader) use() (*pdfRuntime, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errReaderClosed
	}
	if r.rt == nil {
		r.rt = &pdfRuntime{ready: make(chan struct{})}
		go r.start(r.rt)
	}
	r.rt.users++
	r.idleSeq++
	return r.rt, nil
}

// done ends a use of rt. When nothing uses it any more and PDFium can be
// read back from the cache on disk, it is let go: at once when now is set
// (Warm, whose point was to fill the cache), else after IdleRelease.
func (r *pdfReader) done(rt *pdfRuntime, now bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt.users--
	select {
	case <-rt.ready:
		r.idleLocked(rt, now)
	default: // a caller that gave up waiting: start calls idleLocked
	}
}

// idleLocked schedules the release of rt, started, if nothing uses it and
// it can be read back from the cache on disk; it reports whether it did.
func (r *pdfReader) idleLocked(rt *pdfRuntime, now bool) bool {
	if rt.users > 0 || rt != r.rt || r.closed || r.opts.IdleRelease < 0 || rt.err != nil || rt.cache.dir == "" {
		return false
	}
	seq := r.idleSeq
	if now {
		go r.release(rt, seq)
	} else {
		time.AfterFunc(r.opts.IdleRelease, func() { r.release(rt, seq) })
	}
	return true
}

// release lets rt go if it is still the reader's, unused since seq: its
// pool (the instances kept idle with it, and what they held of the memory
// budget) and its use of the cache.
func (r *pdfReader) release(rt *pdfRuntime, seq uint64) {
	r.mu.Lock()
	if r.rt != rt || rt.users > 0 || r.idleSeq != seq || r.closed || len(r.slots) > 0 || r.waiting.Load() > 0 {
		// In use, or about to be: the document's done schedules the next try.
		r.mu.Unlock()
		return
	}
	r.rt = nil
	var held int64
	for impl, m := range r.idle {
		held += m
		delete(r.idle, impl)
	}
	clear(r.instances)
	r.stats.Releases++
	r.stats.Reserved -= held
	r.mu.Unlock()
	r.budget.Release(held)
	rt.shutdown()
	freeMemory()
	if r.releaseHook != nil {
		r.releaseHook()
	}
}

// start compiles PDFium (from the cache after the first time) and sets up
// the pool of instances, in its own goroutine, so that a caller waiting for
// it can give up when its context ends.
func (r *pdfReader) start(rt *pdfRuntime) {
	begin := time.Now()
	cache := acquireCache(r.opts.CacheDir)
	pool, err := r.initPool(cache.c)
	if err != nil && cache.dir != "" {
		// The cache on disk could not be read or written: start without it.
		cache.drop()
		cache = acquireCache("")
		pool, err = r.initPool(cache.c)
	}
	if err != nil {
		cache.release()
		cache = nil
	}
	// Compiling (or reading the cache) left its garbage: give it back now,
	// not at the next collection, which an idle server may not have for
	// minutes.
	freeMemory()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Start = time.Since(begin)
	r.stats.Starts++
	rt.pool, rt.err, rt.cache = pool, err, cache
	close(rt.ready)
	r.idleLocked(rt, false)
}

// initPool compiles PDFium, or reads it from cache, and sets up the pool of
// instances.
func (r *pdfReader) initPool(cache wazero.CompilationCache) (pdfium.Pool, error) {
	cfg := wazero.NewRuntimeConfig().
		// PDFium's setjmp/longjmp is compiled to WebAssembly exceptions.
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithMemoryLimitPages(uint32(r.opts.MemoryLimit >> 16)).
		// Killing an instance (on a timeout) stops the call it is running.
		// The check this compiles into every loop about doubles the time
		// PDFium takes; without it a timeout could only act between calls,
		// and one call (a page) can run for seconds.
		WithCloseOnContextDone(true).
		WithCompilationCache(cache)
	return webassembly.Init(webassembly.Config{
		Context:      experimental.WithMemoryAllocator(context.Background(), mmapAllocator),
		MaxTotal:     r.opts.MaxConcurrent,
		MaxIdle:      r.opts.MaxConcurrent,
		ReuseWorkers: true,
		// No host directory is mounted: documents are passed as readers.
		FSConfig:      wazero.NewFSConfig(),
		Stdout:        io.Discard,
		Stderr:        io.Discard,
		RuntimeConfig: cfg,
	})
}

var errReaderClosed = errors.New("pdf reader closed")

// getPool starts PDFium if it is not and waits for it as long as ctx
// allows. The caller calls done(rt) when it no longer uses the pool.
func (r *pdfReader) getPool(ctx context.Context, name string) (*pdfRuntime, error) {
	rt, err := r.use()
	if err != nil {
		return nil, fmt.Errorf("extract %q: %w", name, err)
	}
	select {
	case <-rt.ready:
	case <-ctx.Done():
		r.done(rt, false)
		return nil, ctx.Err()
	}
	if rt.err != nil {
		r.done(rt, false)
		return nil, unavailable(name, rt.err)
	}
	return rt, nil
}

// warm starts PDFium in the background; once started, it is let go at once
// if it can be read back from the cache on disk.
func (r *pdfReader) warm() {
	rt, err := r.use()
	if err != nil {
		return
	}
	go func() {
		<-rt.ready
		r.done(rt, true)
	}()
}

// unavailable is the error when the PDF reader cannot start: not the
// file's fault, and not mended by trying again, so it says what happened
// and what to do instead of "Internal error.".
func unavailable(name string, err error) error {
	return datachat.WrapError(datachat.EBUSY, fmt.Sprintf(
		"cannot read document %q: the built-in PDF reader could not start (%s); "+
			"upload the text as DOCX, Markdown, HTML or plain text, or report this to the server's administrator",
		name, firstLine(err.Error())), err)
}

// acquire waits for a turn to read a document. At most MaxQueued callers
// wait; one more is refused at once.
func (r *pdfReader) acquire(ctx context.Context, name string) (release func(), err error) {
	release = func() { <-r.slots }
	select {
	case r.slots <- struct{}{}:
		return release, nil
	default:
	}
	if n := r.waiting.Add(1); n > int64(r.opts.MaxQueued) {
		r.waiting.Add(-1)
		return nil, datachat.WrapError(datachat.EBUSY, fmt.Sprintf(
			"cannot read document %q now: %d PDF files are being read and %d are waiting; try again in a moment",
			name, r.opts.MaxConcurrent, n-1), errBusy{})
	}
	defer r.waiting.Add(-1)
	if r.waitHook != nil {
		r.waitHook()
	}
	select {
	case r.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// errBusy is the cause of the EBUSY error of a full queue; the server turns
// its RetryAfter into a Retry-After header.
type errBusy struct{}

func (errBusy) Error() string             { return ErrBusy.Error() }
func (errBusy) Is(target error) bool      { return target == ErrBusy }
func (errBusy) RetryAfter() time.Duration { return 5 * time.Second }

// extract reads the PDF file f of size bytes.
func (r *pdfReader) extract(ctx context.Context, f io.ReaderAt, size int64, name string) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	release, err := r.acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	rt, err := r.getPool(ctx, name)
	if err != nil {
		release()
		return nil, err
	}
	// The turn first, then PDFium: a release (done) never finds this
	// document still holding a turn.
	defer r.done(rt, false)
	defer release()
	pool := rt.pool
	inst, err := r.reserveMemory(ctx, pool)
	if err != nil {
		return nil, err
	}
	limit := r.opts.MemoryLimit
	held := limit // of the budget, returned when the document is done
	defer func() {
		r.reserved(-held)
		r.budget.Release(held)
	}()

	docCtx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	timeoutErr := func() error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return badFile(ErrDamaged, "reading the PDF took longer than %s; the file may be damaged or too complex", r.opts.Timeout)
	}
	if inst == nil {
		inst, err = pool.GetInstanceWithContext(docCtx)
		if err != nil {
			if docCtx.Err() != nil {
				return nil, timeoutErr()
			}
			return nil, unavailable(name, err)
		}
	}
	impl := r.begin(inst)
	r.mu.Lock()
	if m, ok := r.idle[impl]; ok {
		// A kept instance: what it held idle is now within our reservation.
		delete(r.idle, impl)
		r.mu.Unlock()
		r.reserved(-m)
		r.budget.Release(m)
	} else {
		r.mu.Unlock()
	}

	// Its memory stays mapped until the read has returned, whatever
	// closes the instance meanwhile (wasmmem_unix.go).
	memDone := memBusy(wasmMemoryBase(inst))
	defer memDone()

	// On a timeout (or when ctx ends) kill the instance: that stops the
	// WebAssembly call it is running, and the read below returns.
	done := make(chan struct{})
	stop := context.AfterFunc(docCtx, func() {
		inst.Kill()
		close(done)
	})
	pages, err := r.read(docCtx, inst, f, size)
	mem := wasmMemory(inst)
	killed := !stop()
	if killed {
		<-done
	}
	timedOut := killed || docCtx.Err() != nil
	keep := !timedOut && (err == nil || isFileError(err)) && mem >= 0 && mem <= keepPDFMemory
	r.mu.Lock()
	if keep && r.memWaiting > 0 {
		keep = false // its memory goes to a document waiting for the budget
	}
	if keep {
		// Kept, it holds its memory of the budget until the next
		// document takes it (or it is thrown away for one).
		r.idle[impl] = mem
		held = limit - mem
	}
	r.mu.Unlock()
	switch {
	case killed:
	case keep:
		inst.Close() // back to the pool
	default:
		inst.Kill()
	}
	r.end(impl, mem, keep)

	switch {
	case timedOut:
		return nil, timeoutErr()
	case err == nil:
		return parsePDFPages(pages), nil
	case isFileError(err):
		return nil, err
	case mem < 0 || mem < r.opts.MemoryLimit/2:
		return nil, badFile(ErrDamaged, "the PDF could not be read (damaged or not a PDF): the PDF reader failed on it (%s)", firstLine(err.Error()))
	default:
		// PDFium aborts when it cannot allocate: a trap near the cap is
		// the cap.
		return nil, badFile(ErrTooLarge, "reading the PDF needs more than the memory limit of %d MiB (a page too large, or compressed data that unpacks to too much)", r.opts.MemoryLimit>>20)
	}
}

// read reads every page of the document with inst. Errors are file errors
// (badFile) or anything else, after which the instance must not be reused:
// a WebAssembly trap, a panic, a killed instance.
func (r *pdfReader) read(ctx context.Context, inst pdfium.Pdfium, f io.ReaderAt, size int64) (pages []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pdf reader panic: %v", p)
		}
	}()
	doc, err := openPDF(inst, f, size)
	if err != nil {
		return nil, err
	}
	defer doc.close()
	n, err := doc.pageCount()
	if err != nil {
		return nil, err
	}
	var total int
	pages = make([]string, 0, min(n, 1<<16))
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if r.pageHook != nil {
			r.pageHook(ctx, i)
		}
		text, err := doc.pageText(i)
		if err != nil {
			return nil, err
		}
		if total += len(text); total > MaxTextBytes {
			return nil, badFile(ErrTooLarge, "extracted text is larger than %d bytes", MaxTextBytes)
		}
		pages = append(pages, text)
	}
	return pages, nil
}

// begin and end keep the statistics; begin returns the instance's
// implementation, which identifies it.
func (r *pdfReader) begin(inst pdfium.Pdfium) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Documents++
	impl := inst.GetImplementation()
	if !r.instances[impl] {
		r.instances[impl] = true
		r.stats.Instances++
	}
	return impl
}

func (r *pdfReader) end(impl any, mem int64, kept bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.LastMemory = mem
	r.stats.MaxMemory = max(r.stats.MaxMemory, mem)
	if !kept {
		delete(r.instances, impl)
		r.stats.Discarded++
	}
}

func (r *pdfReader) Stats() PDFStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Running = len(r.slots)
	s.Waiting = int(r.waiting.Load())
	return s
}

// close closes the pool; it must not run while documents are read.
func (r *pdfReader) close() error {
	r.mu.Lock()
	r.closed = true
	rt := r.rt
	r.rt = nil
	r.mu.Unlock()
	if rt == nil {
		return nil
	}
	<-rt.ready
	return rt.shutdown()
}

// firstLine returns the first line of s, at most 200 bytes of it.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "")
}
