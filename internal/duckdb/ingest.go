package duckdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"datachat"
	"datachat/internal/duckdb/wire"
	sqlworker "datachat/internal/duckdb/worker"
)

// An upload is checked and converted to Parquet in a worker of its own
// (package worker), started ahead (Engine.uploads) and ended after it:
// hostile bytes meet DuckDB and the Go decoders there, under the worker's
// memory and CPU limits, with file access to the job's directory only, and
// a deadline after which the server kills it.

// IngestResult describes what an upload became: one table, or several (a
// JSON object's arrays of records).
type IngestResult = wire.IngestResult

// IngestTable is one stored Parquet file of an upload.
type IngestTable = wire.IngestTable

// IngestInput is the name a caller gives the uploaded file in the job's
// directory: distinctive, so that a DuckDB message naming it can be given
// the user's file name.
const IngestInput = "dc-input"

// IngestJob is one uploaded file to check and store as Parquet.
type IngestJob struct {
	Dir      string // the job's directory (absolute): holds Input, receives the output; nothing else is reachable
	Input    string // the uploaded file's name in Dir; not empty (the loader refuses an empty upload as it spools)
	Name     string // the file's name as the user knows it, for messages
	MaxBytes int64  // the largest decompressed size accepted (bytes)

	// Progress, if set, is called with how the job goes, from one
	// goroutine at a time, every quarter of a second or so once the job has
	// taken a second (waiting for its turn included): a small upload hears
	// nothing. It must not block.
	Progress func(IngestProgress)
}

// Ingest checks and converts an uploaded file in a worker of its own, at most
// IngestWorkers at once (a job waits its turn, while ctx lasts), and kills it
// past IngestTimeout.
//
// The worker is started ahead, from a pool kept for uploads alone, and
// serves this one job: it takes its limits and Landlock to the job's
// directory only when the job comes, and exits after it, so no upload's
// worker ever sees another's files. Uploads do not queue behind queries:
// their slots are their own; and once one has converted for reserveAfter,
// queries run one fewer at once until it is done (see scheduler.reserve),
// so that it gets a core however many queries there are. A small upload,
// done before that, costs queries nothing.
//
// job.Progress, if set, hears how the job goes once it has taken a second.
//
// Errors: EINVALID naming the file and what is wrong with it; ctx's error.
func (e *Engine) Ingest(ctx context.Context, job IngestJob) (*IngestResult, error) {
	relay := newProgressRelay(job.Progress, e.progressAfter, e.progressEvery)
	if err := e.waitIngestSlot(ctx, relay); err != nil {
		return nil, err
	}
	defer func() { <-e.ingest }()
	defer e.reserveAfter(e.ingestReserveAfter)()
	p, err := e.take(&e.uploads)
	if err != nil {
		return nil, err
	}
	defer e.refill(&e.uploads) // once this job is done, not to take its CPU
	defer p.shutdown(time.Second)
	req := &wire.Ingest{
		Dir: job.Dir, Input: job.Input, Name: job.Name, MaxBytes: job.MaxBytes, MaxLine: e.opts.MaxLine,
		MemoryLimit: e.opts.MemoryLimit, Threads: e.opts.Threads, Limits: e.opts.jobLimits(), Every: e.progressEvery,
	}
	onHard := datachat.Errorf(datachat.EINVALID, "%s took longer than %s to load and was stopped; load a smaller file, or convert it to Parquet first", job.Name, e.opts.IngestTimeout)
	b, err := p.callWith(ctx, wire.OpIngest, req.Encode(), e.opts.IngestTimeout, e.opts.KillGrace, onHard, relay.frame)
	if err != nil {
		return nil, jobFailed(ctx, err, job.Name, "loaded")
	}
	r := &IngestResult{}
	if err := wire.DecodeReplyWith(b, r.Decode); err != nil {
		return nil, err
	}
	if len(r.Tables) == 0 {
		return nil, errors.New("sql worker stored no table")
	}
	for _, t := range r.Tables {
		if err := checkOutput(t.Output); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// jobFailed is the error of an ingest or save job that did not answer:
// ctx's error once the caller gave up; EINVALID naming the file when the
// worker died of what the file made it do (it could not be loaded, or
// saved: verb); else err.
func jobFailed(ctx context.Context, err error, name, verb string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var qe *datachat.QueryError
	if errors.As(err, &qe) {
		return datachat.Errorf(datachat.EINVALID, "%s cannot be %s: %s", name, verb, qe.Message)
	}
	return err
}

// checkOutput refuses an output file a worker named that is not a plain
// name in its job directory.
func checkOutput(name string) error {
	if filepath.Base(name) != name || name == "" || name == "." || name == ".." {
		return fmt.Errorf("sql worker named an output outside its directory: %q", name)
	}
	return nil
}

// reserveAfter holds a query slot for an upload once d has passed, until
// the returned end is called.
func (e *Engine) reserveAfter(d time.Duration) (end func()) {
	var mu sync.Mutex
	held, ended := false, false
	t := time.AfterFunc(d, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			e.sched.reserve(1)
			held = true
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		ended = true
		if held {
			e.sched.reserve(-1)
			held = false
		}
	}
}

// waitIngestSlot takes an upload slot, waiting as long as ctx allows, and
// says so to relay while it waits.
func (e *Engine) waitIngestSlot(ctx context.Context, relay *progressRelay) error {
	select {
	case e.ingest <- struct{}{}:
		return nil
	default:
	}
	var tick <-chan time.Time
	if relay != nil {
		t := time.NewTicker(e.progressEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case e.ingest <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-e.quit:
			return errClosed
		case <-tick:
			relay.send(IngestProgress{Phase: PhaseWaiting, Percent: -1})
		}
	}
}

// LimitLines returns a writer to w that fails, with an EINVALID error naming
// the file, at the first line longer than Options.MaxLine: an upload's bytes
// are written through it where they enter, as they spool. (Its worker
// checks the bytes it makes in the same way: decompressed, or transcoded to
// UTF-8.)
func (e *Engine) LimitLines(w io.Writer, name string) io.Writer {
	return sqlworker.LimitLines(w, e.opts.MaxLine, name)
}
