package worker

import (
	"bufio"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat/internal/duckdb/wire"
)

// An upload's progress, inside its worker: what phase the job is in and how
// far it has come, sent to the server as progress frames (wire.Progress).

// ingestProgress is how far a job has come, inside its worker: set by
// ingest as it goes, read by the goroutine that reports it (report).
type ingestProgress struct {
	dir   string // the job's directory
	input string // the upload's name in it

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
		if fi, err := os.Stat(filepath.Join(p.dir, p.input)); err == nil {
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
	p.set(wire.PhaseConverting)
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
	case p.phase == wire.PhaseDecompressing:
		if fi, err := os.Stat(filepath.Join(p.dir, fileDecompressed)); err == nil {
			bytes = fi.Size()
		}
	case p.phase == wire.PhaseConverting && p.conn.Ptr != nil:
		qp := mapping.QueryProgress(p.conn)
		if pct, _, _ := mapping.QueryProgressTypeMembers(&qp); pct >= 0 && pct <= 100 {
			percent, bytes = pct, int64(pct/100*float64(p.unpack))
		}
	}
	f := wire.Progress{Phase: p.phase, Size: p.size, Bytes: bytes, Percent: percent}
	return f.Frame()
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
				if started && wire.WriteFrame(w, p.frame()) != nil {
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
