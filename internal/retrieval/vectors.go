package retrieval

import (
	"container/heap"
	"encoding/binary"
	"math"
	"runtime"
	"sync"
)

// hit is a ranked chunk: its number in the conversation index and its score.
type hit struct {
	idx   int
	score float64
}

// better orders hits: higher score first, then lower number (older chunk).
func (a hit) better(b hit) bool {
	return a.score > b.score || a.score == b.score && a.idx < b.idx
}

// minHeap keeps the worst hit on top.
type minHeap []hit

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[j].better(h[i]) }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(hit)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// offer adds x if the heap has fewer than n hits or x beats the worst.
func (h *minHeap) offer(x hit, n int) {
	if h.Len() < n {
		heap.Push(h, x)
	} else if x.better((*h)[0]) {
		(*h)[0] = x
		heap.Fix(h, 0)
	}
}

// sorted empties the heap into a slice, best first.
func (h *minHeap) sorted() []hit {
	out := make([]hit, h.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(hit)
	}
	return out
}

// vectorIndex holds a conversation's chunk vectors, normalised, in one flat
// slice for a cache-friendly brute-force scan. slot[c] is chunk c's place,
// -1 when it has no vector (indexed without an embedder, or by a model of
// another dimension).
type vectorIndex struct {
	dim  int
	slot []int32
	data []float32
}

// add records chunk c's vector (nil for none).
func (vi *vectorIndex) add(v []float32) {
	if len(v) == 0 || vi.dim != 0 && len(v) != vi.dim {
		vi.slot = append(vi.slot, -1)
		return
	}
	vi.dim = len(v)
	vi.slot = append(vi.slot, int32(len(vi.data)/vi.dim))
	vi.data = append(vi.data, v...)
}

func (vi *vectorIndex) bytes() int64 { return int64(len(vi.data))*4 + int64(len(vi.slot))*4 }

// parallelScan is the number of vectors from which a search is split across
// goroutines (up to GOMAXPROCS, at most 4).
const parallelScan = 16384

// search returns the n chunks most similar to q (normalised) among those keep
// accepts, best first, scored by cosine similarity.
func (vi *vectorIndex) search(q []float32, n int, keep func(c int) bool) []hit {
	if vi.dim == 0 || len(q) != vi.dim || n <= 0 {
		return nil
	}
	parts := min(runtime.GOMAXPROCS(0), 4, len(vi.slot)/parallelScan)
	if parts <= 1 {
		return vi.scan(q, n, keep, 0, len(vi.slot)).sorted()
	}
	heaps := make([]*minHeap, parts)
	var wg sync.WaitGroup
	step := (len(vi.slot) + parts - 1) / parts
	for p := range parts {
		wg.Go(func() {
			heaps[p] = vi.scan(q, n, keep, p*step, min((p+1)*step, len(vi.slot)))
		})
	}
	wg.Wait()
	h := heaps[0]
	for _, o := range heaps[1:] {
		for _, x := range *o {
			h.offer(x, n)
		}
	}
	return h.sorted()
}

// scan scores chunks [from, to) into a heap of the best n.
func (vi *vectorIndex) scan(q []float32, n int, keep func(c int) bool, from, to int) *minHeap {
	h := &minHeap{}
	for c := from; c < to; c++ {
		s := vi.slot[c]
		if s < 0 || keep != nil && !keep(c) {
			continue
		}
		h.offer(hit{idx: c, score: dot(q, vi.data[int(s)*vi.dim:(int(s)+1)*vi.dim])}, n)
	}
	return h
}

// distance returns the cosine distance between q and chunk c's vector.
func (vi *vectorIndex) distance(c int, q []float32) (float64, bool) {
	if c >= len(vi.slot) || vi.slot[c] < 0 || len(q) != vi.dim {
		return 0, false
	}
	s := int(vi.slot[c])
	return 1 - dot(q, vi.data[s*vi.dim:(s+1)*vi.dim]), true
}

func dot(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return float64((s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7))
}

// normalize returns v scaled to unit length (a copy).
func normalize(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if s == 0 {
		return out
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
