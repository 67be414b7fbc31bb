package duckdb

import (
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"datachat/internal/duckdb/wire"

	"datachat"
)

// ingestCSV writes data as a job's upload in a new directory and returns the
// job.
func ingestJob(t *testing.T, data []byte) IngestJob {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, IngestInput), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return IngestJob{Dir: dir, Input: IngestInput, Name: "upload.csv", MaxBytes: 1 << 32}
}

// uploadProcs returns the processes kept ahead for uploads.
func uploadProcs(e *Engine) []*proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.uploads.procs)
}

// TestIngestWarmWorker: an upload is converted by a process started ahead
// for uploads, which serves that one job and exits; the next upload gets
// another, started once the first was done. Queries' spares are not used.
func TestIngestWarmWorker(t *testing.T) {
	e := mustEngine(t, Options{Threads: 1, IngestWorkers: 1})
	ctx := t.Context()
	if err := e.WaitSpares(ctx); err != nil {
		t.Fatal(err)
	}
	spares := func() []int {
		e.mu.Lock()
		defer e.mu.Unlock()
		var pids []int
		for _, p := range e.spares.procs {
			pids = append(pids, p.pid())
		}
		return pids
	}
	querySpares := spares()
	seen := map[int]bool{}
	for i := range 3 {
		warm := uploadProcs(e)
		if len(warm) != 1 || !warm[0].isReady() {
			t.Fatalf("upload %d: %d processes kept for uploads, want 1 ready", i, len(warm))
		}
		w := warm[0]
		if seen[w.pid()] {
			t.Fatalf("upload %d: process %d served an upload before", i, w.pid())
		}
		seen[w.pid()] = true
		res, err := e.Ingest(ctx, ingestJob(t, smallCSV(100)))
		if err != nil || res.Tables[0].RowCount != 100 {
			t.Fatalf("upload %d: %+v, %v", i, res, err)
		}
		w.mu.Lock()
		requests := w.seq
		w.mu.Unlock()
		select {
		case <-w.exited:
		default:
			t.Fatalf("upload %d: the process that converted it (%d) is still running", i, w.pid())
		}
		if requests != 1 {
			t.Errorf("upload %d: the warm process served %d requests, want this job only", i, requests)
		}
		if err := e.WaitSpares(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := spares(); !slices.Equal(got, querySpares) {
		t.Errorf("queries' spares changed from %v to %v: uploads must use their own", querySpares, got)
	}
}

// TestIngestDoesNotWaitForQueries: with every query slot taken by queries
// that do not end, and more queries waiting, an upload is converted at once.
func TestIngestDoesNotWaitForQueries(t *testing.T) {
	e := mustEngine(t, Options{Threads: 1, Workers: 2, PerUserRunning: 1, Timeout: 5 * time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// hash() cannot be folded away: DuckDB proves "a.range * 7 = 3" empty
	// and answers at once, which let waiting queries through on a fast machine.
	const endless = "SELECT count(*) FROM range(1000000000000) a WHERE hash(a.range) = 42"
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range 4 {
		uctx := datachat.WithUserID(ctx, fmt.Sprint("user", i))
		wg.Go(func() {
			if _, err := e.Query(uctx, fmt.Sprint("conv", i), nil, endless); err != context.Canceled {
				t.Errorf("endless query %d: got %v, want it cancelled", i, err)
			}
		})
	}
	if err := e.WaitLoad(ctx, func(q, r int) bool { return q == 2 && r == 2 }); err != nil {
		t.Fatal(err)
	}
	res, err := e.Ingest(ctx, ingestJob(t, smallCSV(2000)))
	if err != nil || res.Tables[0].RowCount != 2000 {
		t.Fatalf("upload while queries hold every slot: %+v, %v", res, err)
	}
	if q, r := e.Load(); q != 2 || r != 2 {
		t.Errorf("after the upload: %d queries waiting, %d running; want the same 2 and 2 (the upload waited for none)", q, r)
	}
}

// phaseOrder is the order of the phases an upload goes through.
var phaseOrder = []string{PhaseWaiting, PhaseDecompressing, PhaseConverting, PhaseDescribing}

// TestIngestProgress: a compressed CSV's conversion tells its phases in
// order — unpacking with the bytes unpacked so far, converting with DuckDB's
// estimate of how far it has read — and each report is within its bounds.
// (The engine here reports from the start and every millisecond; by default
// only after a second, every quarter of one: TestProgressRelay.)
func TestIngestProgress(t *testing.T) {
	e := mustEngine(t, Options{Threads: 1})
	e.progressAfter, e.progressEvery = 0, time.Millisecond
	var raw strings.Builder
	raw.WriteString("id,name,amount,day\n")
	for i := range 300_000 {
		fmt.Fprintf(&raw, "%d,name-%d,%d.%02d,2024-01-%02d\n", i, i%1000, i%5000, i%100, 1+i%28)
	}
	var gz strings.Builder
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write([]byte(raw.String()))
	zw.Close()
	job := ingestJob(t, []byte(gz.String()))
	job.Name = "orders.csv.gz"
	var got []IngestProgress
	job.Progress = func(p IngestProgress) { got = append(got, p) }
	res, err := e.Ingest(t.Context(), job)
	if err != nil || res.Tables[0].RowCount != 300_000 {
		t.Fatalf("%+v, %v", res, err)
	}
	if len(got) == 0 {
		t.Fatal("no progress reported")
	}
	last, phases := -1, map[string]int{}
	var lastBytes int64
	var lastElapsed time.Duration
	for i, p := range got {
		k := slices.Index(phaseOrder, p.Phase)
		if k < last {
			t.Fatalf("report %d: phase %q after %q", i, p.Phase, phaseOrder[last])
		}
		if k > last {
			lastBytes = 0
		}
		last = k
		phases[p.Phase]++
		if p.Elapsed < lastElapsed {
			t.Errorf("report %d: elapsed %v after %v", i, p.Elapsed, lastElapsed)
		}
		lastElapsed = p.Elapsed
		if p.Phase != PhaseWaiting && p.Size != int64(gz.Len()) {
			t.Errorf("report %d: size %d, want the upload's %d", i, p.Size, gz.Len())
		}
		if p.Bytes < 0 || p.Bytes > int64(raw.Len()) {
			t.Errorf("report %d: %d bytes, beyond the %d unpacked", i, p.Bytes, raw.Len())
		}
		switch p.Phase {
		case PhaseDecompressing:
			if p.Bytes < lastBytes {
				t.Errorf("report %d: %d bytes unpacked after %d", i, p.Bytes, lastBytes)
			}
			lastBytes = p.Bytes
		case PhaseConverting:
			if p.Percent != -1 && !(p.Percent >= 0 && p.Percent <= 100) {
				t.Errorf("report %d: %v percent", i, p.Percent)
			}
		}
		if p.Phase != PhaseConverting && p.Percent != -1 {
			t.Errorf("report %d: %v percent in phase %s, want -1", i, p.Percent, p.Phase)
		}
	}
	t.Logf("%d reports by phase: %v; last: %+v", len(got), phases, got[len(got)-1])
	if !slices.ContainsFunc(got, func(p IngestProgress) bool { return p.Phase == PhaseConverting && p.Percent >= 0 && p.Bytes > 0 }) {
		t.Error("no report of how far DuckDB had read while converting")
	}
}

// TestIngestProgressWaiting: an upload waiting for its slot says so; it
// converts once the slot is free.
func TestIngestProgressWaiting(t *testing.T) {
	e := mustEngine(t, Options{Threads: 1, IngestWorkers: 1})
	e.progressAfter, e.progressEvery = 0, time.Millisecond
	e.ingest <- struct{}{} // every slot taken
	job := ingestJob(t, smallCSV(10))
	reports := make(chan IngestProgress, 1)
	job.Progress = func(p IngestProgress) {
		select {
		case reports <- p:
		default:
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Ingest(t.Context(), job)
		done <- err
	}()
	select {
	case p := <-reports:
		if p.Phase != PhaseWaiting || p.Size != 0 || p.Percent != -1 {
			t.Errorf("while every slot is taken: %+v, want phase %q", p, PhaseWaiting)
		}
	case err := <-done:
		t.Fatalf("converted while every slot was taken: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no report while waiting for a slot")
	}
	<-e.ingest
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestProgressRelay: nothing is told before the first second, then at most
// one report a quarter second (however many a worker sends); a worker's
// frames are read as untrusted.
func TestProgressRelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []IngestProgress
		r := newProgressRelay(func(p IngestProgress) { got = append(got, p) }, time.Second, 250*time.Millisecond)
		frame := func(phase byte, size, bytes int64, percent float64) []byte {
			f := wire.Progress{Phase: phase, Size: size, Bytes: bytes, Percent: percent}
			return f.Frame()[1:] // after the status byte, as the relay is given it
		}
		r.frame(frame(wire.PhaseConverting, 100, 10, 10))
		time.Sleep(999 * time.Millisecond)
		r.send(IngestProgress{Phase: PhaseWaiting})
		if len(got) != 0 {
			t.Fatalf("told within the first second: %+v", got)
		}
		time.Sleep(time.Millisecond)
		r.frame(frame(wire.PhaseConverting, 100, 10, 10))
		r.frame(frame(wire.PhaseConverting, 100, 20, 20)) // at once: not told
		time.Sleep(199 * time.Millisecond)
		r.frame(frame(wire.PhaseConverting, 100, 30, 30)) // too soon
		time.Sleep(time.Millisecond)
		r.frame(frame(wire.PhaseConverting, 100, 40, 40))
		want := []IngestProgress{
			{Phase: PhaseConverting, Elapsed: time.Second, Size: 100, Bytes: 10, Percent: 10},
			{Phase: PhaseConverting, Elapsed: 1200 * time.Millisecond, Size: 100, Bytes: 40, Percent: 40},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}

		// A worker's frames as they should not be.
		for _, c := range []struct {
			name  string
			frame []byte
			want  *IngestProgress // nil: dropped
		}{
			{"empty", nil, nil},
			{"cut short", frame(wire.PhaseConverting, 100, 10, 10)[:5], nil},
			{"no such phase", frame(9, 100, 10, 10), nil},
			{"phase 0", frame(0, 100, 10, 10), nil},
			{"NaN percent", frame(wire.PhaseConverting, 100, 10, math.NaN()), &IngestProgress{Phase: PhaseConverting, Size: 100, Bytes: 10, Percent: -1}},
			{"over 100 percent", frame(wire.PhaseConverting, 100, 10, 1e300), &IngestProgress{Phase: PhaseConverting, Size: 100, Bytes: 10, Percent: -1}},
			{"negative numbers", frame(wire.PhaseConverting, -5, -7, -3), &IngestProgress{Phase: PhaseConverting, Percent: -1}},
			{"percent while unpacking", frame(wire.PhaseDecompressing, 100, 10, 50), &IngestProgress{Phase: PhaseDecompressing, Size: 100, Bytes: 10, Percent: -1}},
		} {
			got = nil
			time.Sleep(time.Second)
			r.frame(c.frame)
			switch {
			case c.want == nil && len(got) != 0:
				t.Errorf("%s: told %+v, want it dropped", c.name, got)
			case c.want != nil && len(got) != 1:
				t.Errorf("%s: told %+v, want %+v", c.name, got, *c.want)
			case c.want != nil:
				got[0].Elapsed = 0
				if got[0] != *c.want {
					t.Errorf("%s: told %+v, want %+v", c.name, got[0], *c.want)
				}
			}
		}

		var nilRelay *progressRelay // no Progress: nothing to do, nothing fails
		nilRelay.frame(frame(wire.PhaseConverting, 1, 1, 1))
		nilRelay.send(IngestProgress{})
		if newProgressRelay(nil, 0, 0) != nil {
			t.Error("a relay for no Progress")
		}
	})
}

// TestIngestReserveAfter: an upload holds a query slot only once it has run
// for the delay, until it ends; one that ends first never holds one.
func TestIngestReserveAfter(t *testing.T) {
	e := mustEngine(t, Options{Workers: 2})
	reserved := func() int {
		e.sched.mu.Lock()
		defer e.sched.mu.Unlock()
		return e.sched.reserved
	}
	end := e.reserveAfter(time.Hour)
	end()
	if n := reserved(); n != 0 {
		t.Fatalf("an upload that ended before the delay holds %d slots", n)
	}
	end = e.reserveAfter(0)
	waitFor(t, e, "the slot held", func() bool { return reserved() == 1 })
	end()
	if n := reserved(); n != 0 {
		t.Fatalf("%d slots held after the upload ended", n)
	}
	end() // twice: nothing more given back
	if n := reserved(); n != 0 {
		t.Fatalf("%d slots held after end twice", n)
	}
}
