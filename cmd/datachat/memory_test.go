package main

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
)

func released() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink [][]byte

// TestMemoryTrimmer: after a burst that held 256 MiB and let it go, the
// first look while the burst still allocates leaves the heap alone; the
// next, quiet, returns the memory to the system, though the last collection
// ran while the burst's memory was live; the next quiet looks after the
// burst collect too, and then, at rest, nothing more.
func TestMemoryTrimmer(t *testing.T) {
	tr := newMemoryTrimmer()
	frees := 0
	free := tr.free
	tr.free = func() { frees++; free() }
	for range 256 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		sink = append(sink, b)
	}
	runtime.GC() // while the burst's memory is live, as a busy server's last collection
	if tr.check() {
		t.Fatal("trimmed while the burst allocated")
	}
	sink = nil
	before := released()
	if !tr.check() {
		t.Fatal("not trimmed once quiet, with the burst's memory free")
	}
	if got := released() - before; got < 200<<20 {
		t.Errorf("%d MiB returned to the system, want the burst's (256 MiB)", got>>20)
	}
	for i := 1; i < tr.afterBurst; i++ {
		if !tr.check() {
			t.Fatalf("quiet look %d after the burst did not trim, want %d that do", i+1, tr.afterBurst)
		}
	}
	if tr.check() || tr.check() {
		t.Error("trimmed again at rest")
	}
	if frees != tr.afterBurst {
		t.Errorf("%d collections forced, want %d", frees, tr.afterBurst)
	}
}

// TestMemoryTrimmerLateFrees: what a burst lets go after the first quiet
// look (the model server's connections, closed after 30 s idle) is returned
// at a later look, though the heap then holds no more than at the last trim.
func TestMemoryTrimmerLateFrees(t *testing.T) {
	tr := newMemoryTrimmer()
	for range 64 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		sink = append(sink, b)
	}
	if tr.check() {
		t.Fatal("trimmed while the burst allocated")
	}
	if !tr.check() {
		t.Fatal("not trimmed at the first quiet look after the burst")
	}
	sink = nil // let go after the trim, as idle connections closing
	before := released()
	if !tr.check() {
		t.Fatal("not trimmed at the second quiet look after the burst")
	}
	if got := released() - before; got < 48<<20 {
		t.Errorf("%d MiB returned to the system, want what was let go late (64 MiB)", got>>20)
	}
}

var pooled sync.Pool

// putBurstBuffer puts a 256 MiB buffer in pooled, as encoding/json puts back
// the buffer it grew to encode a large response.
func putBurstBuffer() {
	b := make([]byte, 256<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	pooled.Put(b)
}

// TestMemoryTrimmerEmptiesPools: a buffer a sync.Pool was given after the
// last collection survives the next one as the pool's victim; the trim
// returns it too, though the idle server collects no more after it.
func TestMemoryTrimmerEmptiesPools(t *testing.T) {
	tr := newMemoryTrimmer()
	putBurstBuffer()
	if tr.check() {
		t.Fatal("trimmed while the burst allocated")
	}
	before := released()
	if !tr.check() {
		t.Fatal("not trimmed once quiet, with the pool's buffer unused")
	}
	if got := released() - before; got < 200<<20 {
		t.Errorf("%d MiB returned to the system, want the pool's buffer (256 MiB)", got>>20)
	}
}
