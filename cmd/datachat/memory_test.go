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
// ran while the burst's memory was live; then, at rest, nothing more.
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
	if tr.check() || tr.check() {
		t.Error("trimmed again at rest")
	}
	if frees != 1 {
		t.Errorf("%d collections forced, want 1", frees)
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
