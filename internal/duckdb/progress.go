package duckdb

import (
	"time"

	"datachat/internal/duckdb/wire"
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

// phaseNames name the phases of a worker's progress frames.
var phaseNames = map[byte]string{
	wire.PhaseDecompressing: PhaseDecompressing,
	wire.PhaseConverting:    PhaseConverting,
	wire.PhaseDescribing:    PhaseDescribing,
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
	d := wire.NewDec(b)
	var f wire.Progress
	f.Decode(d)
	phase := phaseNames[f.Phase]
	p := IngestProgress{Phase: phase, Size: max(f.Size, 0), Bytes: max(f.Bytes, 0), Percent: f.Percent}
	if d.Err() != nil || phase == "" {
		return
	}
	if !(p.Percent >= 0 && p.Percent <= 100) || phase != PhaseConverting { // NaN too
		p.Percent = -1
	}
	r.send(p)
}
