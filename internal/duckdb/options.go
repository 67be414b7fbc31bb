package duckdb

import (
	"log/slog"
	"os"
	"runtime"
	"time"

	"datachat/internal/duckdb/wire"
)

// The engine's options and their defaults, and the OS limits a worker puts
// itself under.

// Options configure an [Engine]. Zero values take the defaults shown.
type Options struct {
	Timeout     time.Duration // per query, from when it starts running; 30s
	KillGrace   time.Duration // how long past Timeout a query's worker is killed if it has not stopped; 2s
	MemoryLimit int64         // DuckDB's memory_limit per worker; 1 GiB. The worker's RLIMIT_DATA is 1.5 × this + 512 MiB
	Threads     int           // DuckDB threads per worker; the number of cores
	MaxRows     int           // rows returned at most; 1000; negative: no cap (the command line's sql over the user's own files)

	Workers        int // queries running at once, each in its conversation's worker process; the number of cores
	PerUserRunning int // queries one user may run at once; half of Workers, at least 1
	PerUserQueued  int // queries one user may have waiting; beyond it Query answers EBUSY; 16
	QueueSize      int // queries waiting in all; beyond it Query answers EBUSY; 512

	IdleTimeout  time.Duration // a worker unused this long is stopped; 5m
	IdleMemory   int64         // private memory idle workers may keep together; beyond it the least recently used stop; 1/8 of the machine's memory
	MaxProcesses int           // worker processes at most, busy or idle; 256

	TempDir      string // where workers have their directories (links to the datasets, spill files); os.TempDir()
	MaxTempBytes int64  // spill space per worker; 4 × MemoryLimit
	MaxCellBytes int    // a text or blob value longer than this is cut (and the result marked truncated); 1 MiB
	MaxResultMB  int    // decoded result size (MiB) beyond which rows stop (truncated); 64

	// MaxLine is the longest CSV line an upload may have (bytes); 2 MiB.
	// DuckDB's CSV reader would refuse a longer one only after spending
	// time on it, more than linearly in its length, so it is refused where
	// bytes enter: as the upload spools ([Engine.LimitLines]), and in its
	// worker as it is decompressed or transcoded; the worker's DuckDB is
	// given it as max_line_size.
	MaxLine int

	IngestWorkers int           // dataset conversions running at once, in slots of their own; one that runs past half a second makes queries run one fewer at once (never fewer than one: see Ingest); half the cores, at least 2
	Spares        int           // worker processes kept started ahead, for new conversations; 2 (and IngestWorkers more, for uploads only)
	IngestTimeout time.Duration // one dataset conversion; 10m

	NoLandlock bool     // do not restrict workers with Landlock (they still get the rlimits)
	Command    []string // how to start a worker; this executable
	Logger     *slog.Logger
}

func (o Options) withDefaults() Options {
	cores := runtime.NumCPU()
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.KillGrace <= 0 {
		o.KillGrace = 2 * time.Second
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = 1 << 30
	}
	if o.Threads <= 0 {
		o.Threads = cores
	}
	if o.MaxRows == 0 {
		o.MaxRows = 1000
	} else if o.MaxRows < 0 {
		o.MaxRows = -1
	}
	if o.Workers <= 0 {
		o.Workers = cores
	}
	if o.PerUserRunning <= 0 {
		o.PerUserRunning = max(1, (o.Workers+1)/2)
	}
	if o.PerUserQueued <= 0 {
		o.PerUserQueued = 16
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 512
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 5 * time.Minute
	}
	if o.IdleMemory <= 0 {
		o.IdleMemory = max(totalMemory()/8, 512<<20)
	}
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = 256
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
	if o.MaxLine <= 0 {
		o.MaxLine = 2 << 20
	}
	if o.IngestWorkers <= 0 {
		o.IngestWorkers = max(2, cores/2)
	}
	if o.Spares <= 0 {
		o.Spares = 2
	}
	if o.IngestTimeout <= 0 {
		o.IngestTimeout = 10 * time.Minute
	}
	if len(o.Command) == 0 {
		o.Command = []string{selfPath()}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// selfPath is this executable, to start workers from.
func selfPath() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

// limits are the OS limits a query worker puts itself under.
func (o *Options) limits() wire.Limits {
	return wire.Limits{
		Data:     o.MemoryLimit*3/2 + 512<<20,
		CPU:      max(time.Hour, 100*o.Timeout*time.Duration(o.Threads)),
		QueryCPU: o.Timeout*time.Duration(o.Threads) + o.KillGrace,
		Landlock: !o.NoLandlock,
	}
}

// jobLimits are the OS limits an upload's or a save's worker puts itself
// under: a query worker's, with CPU time for one job of IngestTimeout.
func (o *Options) jobLimits() wire.Limits {
	l := o.limits()
	l.CPU = o.IngestTimeout*time.Duration(o.Threads) + o.KillGrace
	l.QueryCPU = 0
	return l
}
