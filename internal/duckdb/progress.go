package duckdb

import (
	"bufio"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// IngestProgress is how far an upload's conversion has come (see
// IngestJob.Progress).
type IngestProgress struct {
	Phase   string        // PhaseWaiting, PhaseDecompressing, PhaseConverting or PhaseDescribing
	Elapsed time.Duration // since Ingest was called
	Size    int64         // the upload's size in bytes, as it came (compressed, if it was); 0 while waiting
	Bytes   int64         // decompressing: bytes unpacked so far; converting: how far DuckDB has read into the (unpacked) file, from Percent
	Percent float64       // converting: how much of the file DuckDB has read, 0–100 (its own estimate); else -1
}

// DuckDB's progress has no row count to give while it converts (its
// rows_processed counts a CSV's buffers): the rows come with the result.

// The phases of an upload's conversion, in order.
const (
	PhaseWaiting       = "waiting"       // for an upload slot: as many uploads as IngestWorkers convert at once
	PhaseDecompressing = "decompressing" // a gzip, zstd or bzip2 file unpacked
	PhaseConverting    = "converting"    // read by DuckDB (sniffed, checked) and written as Parquet
	PhaseDescribing    = "describing"    // the stored file read back: columns, row count, samples
)

// Phases as a worker's progress frames carry them.
const (
	phaseDecompressing byte = iota + 1
	phaseConverting
	phaseDescribing
)

var phaseNames = map[byte]string{
	phaseDecompressing: PhaseDecompressing,
	phaseConverting:    PhaseConverting,
	phaseDescribing:    PhaseDescribing,
}

// progressRelay hands a job's progress to its caller: nothing before after
// (a second: a small upload is done before anyone would look), then at most
// one report per every (what the worker is asked for; a worker that sends
// more is not heard more). A nil relay (no Progress) drops everything.
type progressRelay struct {
	fn           func(IngestProgress)
	after, every time.Duration
	begin, last  time.Time
}

func newProgressRelay(fn func(IngestProgress), after, every time.Duration) *progressRelay {
	if fn == nil {
		return nil
	}
	return &progressRelay{fn: fn, after: after, every: every, begin: time.Now()}
}

func (r *progressRelay) send(p IngestProgress) {
	if r == nil {
		return
	}
	now := time.Now()
	if now.Sub(r.begin) < r.after || !r.last.IsZero() && now.Sub(r.last) < r.every*4/5 {
		return
	}
	r.last = now
	p.Elapsed = now.Sub(r.begin)
	r.fn(p)
}

// frame reads a worker's progress frame (after its status byte). The
// worker is not trusted: a frame that does not decode, or names no phase,
// is dropped, and the numbers are brought within their ranges.
func (r *progressRelay) frame(b []byte) {
	if r == nil {
		return
	}
	d := &dec{b: b}
	phase := phaseNames[d.byte()]
	p := IngestProgress{Phase: phase, Size: max(d.varint(), 0), Bytes: max(d.varint(), 0), Percent: d.float()}
	if d.err != nil || phase == "" {
		return
	}
	if !(p.Percent >= 0 && p.Percent <= 100) || phase != PhaseConverting { // NaN too
		p.Percent = -1
	}
	r.send(p)
}

// ingestProgress is how far a job has come, inside its worker: set by
// ingest as it goes, read by the goroutine that reports it (report).
type ingestProgress struct {
	dir string // the job's directory

	mu     sync.Mutex
	phase  byte
	size   int64
	unpack int64              // the size of the file DuckDB converts (the upload, or what it unpacked to)
	conn   mapping.Connection // while DuckDB converts: the job's connection, whose queries' progress DuckDB tells
}

// set enters a phase.
func (p *ingestProgress) set(phase byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = phase
	if p.size == 0 {
		if fi, err := os.Stat(filepath.Join(p.dir, IngestInput)); err == nil {
			p.size = fi.Size()
		}
	}
}

// reading notes the file DuckDB will convert, whose size Percent is of.
func (p *ingestProgress) reading(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fi, err := os.Stat(filepath.Join(p.dir, path)); err == nil {
		p.unpack = fi.Size()
	}
}

// converting enters the converting phase on conn, whose queries' progress
// DuckDB then tells, until closing (which must come before conn is closed).
func (p *ingestProgress) converting(conn mapping.Connection) {
	p.set(phaseConverting)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conn = conn
}

// closing forgets the connection converting gave.
func (p *ingestProgress) closing() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conn = mapping.Connection{}
}

// frame is the progress frame of now.
func (p *ingestProgress) frame() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	var bytes int64
	percent := -1.0
	switch {
	case p.phase == phaseDecompressing:
		if fi, err := os.Stat(filepath.Join(p.dir, fileDecompressed)); err == nil {
			bytes = fi.Size()
		}
	case p.phase == phaseConverting && p.conn.Ptr != nil:
		qp := mapping.QueryProgress(p.conn)
		if pct, _, _ := mapping.QueryProgressTypeMembers(&qp); pct >= 0 && pct <= 100 {
			percent, bytes = pct, int64(pct/100*float64(p.unpack))
		}
	}
	e := &enc{}
	e.byte(replyProgress)
	e.byte(p.phase)
	e.varint(p.size)
	e.varint(bytes)
	e.float(percent)
	return e.b
}

// report writes a progress frame every interval until stop is called; stop
// returns once it has written its last, so that the reply that follows is
// the only writer.
func (p *ingestProgress) report(w *bufio.Writer, every time.Duration) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.mu.Lock()
				started := p.phase != 0
				p.mu.Unlock()
				if started && writeFrame(w, p.frame()) != nil {
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
