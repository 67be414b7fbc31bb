package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryTrimInterval is how often serve looks at its heap (trimMemory).
const memoryTrimInterval = 10 * time.Second

// memoryTrimmer gives the heap's free memory back to the system once serve
// has gone quiet. After a burst (uploads, a crowd of clients that stalled,
// then left) the Go runtime keeps the heap it grew to until its next
// collection, which an idle server may not have for two minutes, and then
// returns it at the scavenger's pace: the process stayed at 622 MiB with
// 27 MB live. So at each look, when the heap allocated less than quietAlloc
// since the last (the server is quiet) and holds more than slack beyond what
// it held at rest (after the last trim, or at the start), it collects and
// returns what is free (debug.FreeOSMemory: a few milliseconds at a quiet
// server's heap), and what it then holds is the new rest. What the last
// collection found live says nothing here: it ran while the burst's memory
// was in use. A busy server is left to its collector. The slack is 8 MiB:
// a minute after a burst the process should be back within 1.2× its rest
// (about 80 MiB), and with 32 MiB the heap's leftovers alone kept it at
// 1.55× after 200 stalled clients left (BENCHMARKS, "Stalled clients").
//
// A burst's memory is not all let go when it ends: the connections it
// opened to the model's server close after 30 s idle (llm.NewHTTPClient),
// the database pools' idle connections later still, and what they free is
// invisible until a collection runs. So after a burst (a look that was not
// quiet, or one that found the heap grown beyond the slack), the next
// afterBurst quiet looks trim whatever the heap holds: a minute of
// collections at most, one each memoryTrimInterval. Without them, after 200
// stalled clients left, the heap held 15 MiB with 5 MiB live until the
// runtime's own collection two minutes later.
type memoryTrimmer struct {
	quietAlloc uint64
	slack      uint64
	afterBurst int    // quiet looks after a burst that trim in any case
	free       func() // freeMemory

	samples   []metrics.Sample
	lastAlloc uint64
	rest      uint64 // what the heap held after the last trim
	left      int    // quiet looks left that trim in any case
}

func newMemoryTrimmer() *memoryTrimmer {
	t := &memoryTrimmer{quietAlloc: 64 << 20, slack: 8 << 20, afterBurst: 6, free: freeMemory}
	for _, name := range []string{
		"/gc/heap/allocs:bytes",              // 0: allocated since the start
		"/memory/classes/heap/objects:bytes", // 1: objects, dead ones not yet swept included
		"/memory/classes/heap/unused:bytes",  // 2: held for objects, unused
		"/memory/classes/heap/free:bytes",    // 3: free, not yet returned
	} {
		t.samples = append(t.samples, metrics.Sample{Name: name})
	}
	t.read()
	t.lastAlloc, t.rest = t.value(0), t.held()
	return t
}

// held is what the heap holds of the system's memory, stacks aside.
func (t *memoryTrimmer) held() uint64 { return t.value(1) + t.value(2) + t.value(3) }

func (t *memoryTrimmer) read() { metrics.Read(t.samples) }

func (t *memoryTrimmer) value(i int) uint64 {
	if t.samples[i].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return t.samples[i].Value.Uint64()
}

// check looks once and reports whether it returned memory.
func (t *memoryTrimmer) check() bool {
	t.read()
	alloc := t.value(0)
	quiet := alloc-t.lastAlloc < t.quietAlloc
	t.lastAlloc = alloc
	switch {
	case !quiet:
		t.left = t.afterBurst
		return false
	case t.held() > t.rest+t.slack:
		t.left = t.afterBurst
	case t.left == 0:
		return false
	}
	t.left--
	t.free()
	t.read()
	t.lastAlloc, t.rest = t.value(0), t.held()
	return true
}

// freeMemory collects, then collects again and returns what is free to the
// system. What a sync.Pool holds survives one collection, as the pool's
// victims, and goes with the next: encoding/json keeps the buffer it grew to
// encode the last large response (16 MiB after a conversation of 8 MiB
// answers was read), and an idle server has no next collection for two
// minutes.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// trimMemory looks at serve's heap every memoryTrimInterval until the
// returned stop is called.
func trimMemory() (stop func() error) {
	t := newMemoryTrimmer()
	return every(memoryTrimInterval, func(context.Context) { t.check() })
}
