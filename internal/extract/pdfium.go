package extract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"datachat"
)

// Defaults of [PDFOptions].
const (
	// DefaultPDFMemoryLimit caps the memory of the PDF reader for one
	// document. PDFium starts with 18 MiB, and reading the text of the
	// shared test PDFs or of a generated 2,000-page file does not grow it.
	DefaultPDFMemoryLimit = 256 << 20
	// minPDFMemoryLimit is the least memory PDFium can start in.
	minPDFMemoryLimit = 32 << 20
	// keepPDFMemory is the most memory an instance may have grown to and still
	// be kept for the next document: WebAssembly memory never shrinks.
	keepPDFMemory = 64 << 20
)

// PDFOptions bound the reading of PDF files by an [Extractor]. A zero field
// takes its default.
type PDFOptions struct {
	// MemoryLimit caps the WebAssembly memory of the PDF reader while it
	// reads one document, in bytes (whole 64 KiB pages; at least 32 MiB).
	// A file that needs more fails with [ErrTooLarge]. Default
	// [DefaultPDFMemoryLimit].
	MemoryLimit int64
	// Timeout bounds the reading of one document once its turn has come.
	// Default [PDFTimeout].
	Timeout time.Duration
	// MaxConcurrent is how many documents are read at once. Default: the
	// number of CPUs (GOMAXPROCS), at most 4.
	MaxConcurrent int
	// MaxQueued is how many more may wait for their turn, each as long as its
	// context allows; one more fails at once with [ErrBusy]. Default 8 per
	// concurrent read.
	MaxQueued int
	// CacheDir keeps PDFium compiled to machine code on disk, so that the
	// next process reads it back instead of compiling it again (seconds of
	// CPU, at every start). Empty: compiled once per process, kept in memory.
	// A cache that cannot be used (a damaged file, a full disk) is emptied,
	// and the reader starts without it.
	CacheDir string
}

func (o PDFOptions) withDefaults() PDFOptions {
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = DefaultPDFMemoryLimit
	}
	o.MemoryLimit = max(o.MemoryLimit, minPDFMemoryLimit) &^ (1<<16 - 1)
	if o.Timeout <= 0 {
		o.Timeout = PDFTimeout
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = min(runtime.GOMAXPROCS(0), 4)
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 8 * o.MaxConcurrent
	}
	return o
}

// PDFStats describe the PDF reader of an [Extractor], for benchmarks and
// metrics.
type PDFStats struct {
	Start      time.Duration // compiling PDFium and starting its runtime, once
	Documents  int           // documents read (or tried)
	Instances  int           // WebAssembly instances of PDFium started
	Discarded  int           // instances thrown away after a failure, a timeout or a large document
	LastMemory int64         // WebAssembly memory of the instance that read the last document, after it
	MaxMemory  int64         // the largest LastMemory so far
	Running    int           // documents being read now
	Waiting    int           // documents waiting for their turn
}

// wasmCaches hold PDFium compiled to machine code, for the life of the
// process, by [PDFOptions.CacheDir] ("": in memory only): every Extractor has
// its own runtime (the memory limit is the runtime's) but compiles from its
// cache in milliseconds instead of seconds.
var (
	wasmCachesMu sync.Mutex
	wasmCaches   = map[string]wazero.CompilationCache{}
)

// wasmCache returns the cache kept in dir, the memory-only one when dir is
// empty or cannot hold a cache.
func wasmCache(dir string) wazero.CompilationCache {
	wasmCachesMu.Lock()
	defer wasmCachesMu.Unlock()
	if c := wasmCaches[dir]; c != nil {
		return c
	}
	c := wazero.NewCompilationCache()
	if dir != "" {
		if dc, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
			c = dc
		}
	}
	wasmCaches[dir] = c
	return c
}

// dropWasmCache forgets the cache kept in dir and empties dir, so that the
// next process writes it anew.
func dropWasmCache(dir string) {
	wasmCachesMu.Lock()
	defer wasmCachesMu.Unlock()
	delete(wasmCaches, dir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// pdfReader reads PDF files with PDFium compiled to WebAssembly and run by
// wazero, inside the process. Each document is read by one WebAssembly
// instance whose memory is capped; instances are reused while they stay
// small and thrown away after anything unusual.
type pdfReader struct {
	opts    PDFOptions
	slots   chan struct{} // one per document being read
	waiting atomic.Int64

	startOnce sync.Once
	ready     chan struct{} // closed once pool or startErr is set
	pool      pdfium.Pool
	startErr  error

	mu        sync.Mutex
	stats     PDFStats
	instances map[any]bool // the implementation of every live instance
	closed    bool

	// Test hooks: waitHook runs when a document starts waiting for its
	// turn, pageHook before each page is read (with the document's context).
	waitHook func()
	pageHook func(ctx context.Context, page int)
}

func newPDFReader(opts PDFOptions) *pdfReader {
	opts = opts.withDefaults()
	return &pdfReader{
		opts:      opts,
		slots:     make(chan struct{}, opts.MaxConcurrent),
		ready:     make(chan struct{}),
		instances: map[any]bool{},
	}
}

// start compiles PDFium (from the cache after the first time) and sets up
// the pool of instances. It runs once, in its own goroutine, so that a caller
// waiting for it can give up when its context ends.
func (r *pdfReader) start() {
	defer close(r.ready)
	begin := time.Now()
	pool, err := r.initPool(wasmCache(r.opts.CacheDir))
	if err != nil && r.opts.CacheDir != "" {
		// The cache on disk could not be read or written: start without it.
		dropWasmCache(r.opts.CacheDir)
		pool, err = r.initPool(wasmCache(""))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Start = time.Since(begin)
	if err != nil {
		r.startErr = err
		return
	}
	if r.closed {
		pool.Close()
		r.startErr = errReaderClosed
		return
	}
	r.pool = pool
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

// getPool starts the reader on first use and waits for it as long as ctx
// allows.
func (r *pdfReader) getPool(ctx context.Context, name string) (pdfium.Pool, error) {
	r.startOnce.Do(func() { go r.start() })
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	switch {
	case errors.Is(r.startErr, errReaderClosed):
		return nil, fmt.Errorf("extract %q: %w", name, r.startErr)
	case r.startErr != nil:
		return nil, unavailable(name, r.startErr)
	}
	return r.pool, nil
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
	defer release()
	pool, err := r.getPool(ctx, name)
	if err != nil {
		return nil, err
	}

	docCtx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	timeoutErr := func() error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return badFile(ErrDamaged, "reading the PDF took longer than %s; the file may be damaged or too complex", r.opts.Timeout)
	}
	inst, err := pool.GetInstanceWithContext(docCtx)
	if err != nil {
		if docCtx.Err() != nil {
			return nil, timeoutErr()
		}
		return nil, unavailable(name, err)
	}
	impl := r.begin(inst)

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
	r.mu.Unlock()
	started := true
	r.startOnce.Do(func() {
		started = false
		r.startErr = errReaderClosed
		close(r.ready)
	})
	if !started {
		return nil
	}
	<-r.ready
	if r.pool == nil {
		return nil
	}
	return r.pool.Close()
}

// wasmMemory returns the size in bytes of the WebAssembly memory of inst, or
// -1 when it cannot be found. go-pdfium does not expose it: its instance
// implementation holds the module in the exported field Module, whose Memory
// method returns the wazero memory. A test checks that this still works.
func wasmMemory(inst pdfium.Pdfium) (n int64) {
	defer func() {
		if recover() != nil {
			n = -1
		}
	}()
	impl := reflect.ValueOf(inst.GetImplementation())
	if impl.Kind() == reflect.Pointer {
		impl = impl.Elem()
	}
	mod := impl.FieldByName("Module")
	if !mod.IsValid() || mod.IsNil() {
		return -1
	}
	out := mod.MethodByName("Memory").Call(nil)
	mem, ok := out[0].Interface().(api.Memory)
	if !ok || mem == nil {
		return -1
	}
	return int64(mem.Size())
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
