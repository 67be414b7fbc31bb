package extract

import (
	"runtime"
	"time"
)

// The PDF reader's options, their defaults, and the statistics it reports.

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
	// DefaultPDFMemoryBudget caps the memory of the PDF reader for all the
	// documents read at once and the instances kept for the next: two
	// documents at the default per-document limit.
	DefaultPDFMemoryBudget = 512 << 20
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
	// MemoryBudget caps the WebAssembly memory of all the documents read at
	// once and of the instances kept for the next document: each document
	// reserves MemoryLimit from it before it starts (waiting, as long as its
	// context allows, while the budget is taken), and an instance kept idle
	// holds its memory until the next document takes it, or is thrown away
	// for a document waiting on the budget. Default
	// [DefaultPDFMemoryBudget]; at least MemoryLimit.
	MemoryBudget int64
	// MaxConcurrent is how many documents are read at once, within
	// MemoryBudget. Default: the number of CPUs (GOMAXPROCS), at most 4.
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
	// IdleRelease is how long PDFium stays started with no document to read
	// before the reader lets it go — its machine code (tens of MB) and the
	// instances kept for the next document (up to 64 MiB each) — when it can
	// read it back from CacheDir, in milliseconds, for the next PDF. Without
	// CacheDir PDFium is kept (compiling it again takes seconds of CPU).
	// Default [DefaultPDFIdleRelease]; negative: never.
	IdleRelease time.Duration
}

// DefaultPDFIdleRelease is how long PDFium stays started with no document
// to read, by default (see [PDFOptions.IdleRelease]).
const DefaultPDFIdleRelease = 30 * time.Second

func (o PDFOptions) withDefaults() PDFOptions {
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = DefaultPDFMemoryLimit
	}
	o.MemoryLimit = max(o.MemoryLimit, minPDFMemoryLimit) &^ (1<<16 - 1)
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = DefaultPDFMemoryBudget
	}
	o.MemoryBudget = max(o.MemoryBudget, o.MemoryLimit)
	if o.Timeout <= 0 {
		o.Timeout = PDFTimeout
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = min(runtime.GOMAXPROCS(0), 4)
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 8 * o.MaxConcurrent
	}
	if o.IdleRelease == 0 {
		o.IdleRelease = DefaultPDFIdleRelease
	}
	return o
}

// PDFStats describe the PDF reader of an [Extractor], for benchmarks and
// metrics.
type PDFStats struct {
	Start      time.Duration // compiling PDFium (or reading it from the cache) and starting its runtime, the last time
	Starts     int           // times PDFium was started
	Releases   int           // times it was let go, idle (PDFOptions.IdleRelease)
	Documents  int           // documents read (or tried)
	Instances  int           // WebAssembly instances of PDFium started
	Discarded  int           // instances thrown away after a failure, a timeout or a large document
	LastMemory int64         // WebAssembly memory of the instance that read the last document, after it
	MaxMemory  int64         // the largest LastMemory so far
	Running    int           // documents being read now
	Waiting    int           // documents waiting for their turn

	// The memory budget's accounting: reserved now (by documents being
	// read and instances kept idle), and the most reserved at once.
	Reserved, PeakReserved int64
}
