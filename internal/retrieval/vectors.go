package retrieval

import (
	"container/heap"
	"encoding/binary"
	"math"
	"runtime"
	"sync"

	"datachat/internal/vector"
)

// hit is a ranked candidate: its number, its score, and what orders it
// among equal scores (lower first: in an index, its number, the older chunk).
type hit struct {
	idx   int
	tie   int64
	score float64
}

// better orders hits: higher score first, then lower tie.
func (a hit) better(b hit) bool {
	return a.score > b.score || a.score == b.score && a.tie < b.tie
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
	if vi.dim == 0 || len(q) != vi.dim {
		return nil
	}
	idx := NearestVectors(q, len(vi.slot), n, vi.vector, nil, keep)
	out := make([]hit, len(idx))
	for i, c := range idx {
		out[i] = hit{idx: c, tie: int64(c)}
	}
	return out
}

// vector is chunk c's vector, nil when it has none.
func (vi *vectorIndex) vector(c int) []float32 {
	s := int(vi.slot[c])
	if s < 0 {
		return nil
	}
	return vi.data[s*vi.dim : (s+1)*vi.dim]
}

// NearestVectors is an exact (brute-force) vector search: it returns, best
// first, the n candidates 0…count−1 whose vectors have the greatest dot
// product with q, among those keep accepts (nil: all). vectorOf(i) is
// candidate i's vector, of len(q) floats, or nil when it has none; equal
// scores go to the lower tie(i) (nil: the lower i). Over [parallelScan]
// candidates the scan is split across goroutines. With unit vectors the dot
// product is the cosine similarity.
func NearestVectors(q []float32, count, n int, vectorOf func(i int) []float32, tie func(i int) int64, keep func(i int) bool) []int {
	if n <= 0 || count <= 0 {
		return nil
	}
	scan := func(from, to int) *minHeap {
		h := &minHeap{}
		for i := from; i < to; i++ {
			if keep != nil && !keep(i) {
				continue
			}
			v := vectorOf(i)
			if v == nil {
				continue
			}
			t := int64(i)
			if tie != nil {
				t = tie(i)
			}
			h.offer(hit{idx: i, tie: t, score: float64(vector.Dot(q, v))}, n)
		}
		return h
	}
	var h *minHeap
	if parts := min(runtime.GOMAXPROCS(0), 4, count/parallelScan); parts <= 1 {
		h = scan(0, count)
	} else {
		heaps := make([]*minHeap, parts)
		var wg sync.WaitGroup
		step := (count + parts - 1) / parts
		for p := range parts {
			wg.Go(func() { heaps[p] = scan(p*step, min((p+1)*step, count)) })
		}
		wg.Wait()
		h = heaps[0]
		for _, o := range heaps[1:] {
			for _, x := range *o {
				h.offer(x, n)
			}
		}
	}
	hits := h.sorted()
	out := make([]int, len(hits))
	for i, x := range hits {
		out[i] = x.idx
	}
	return out
}

// distance returns the cosine distance between q and chunk c's vector.
func (vi *vectorIndex) distance(c int, q []float32) (float64, bool) {
	if c >= len(vi.slot) || vi.slot[c] < 0 || len(q) != vi.dim {
		return 0, false
	}
	return 1 - float64(vector.Dot(q, vi.vector(c))), true
}

// normalize returns v scaled to unit length (a copy).
func normalize(v []float32) []float32 { return vector.Unit(v) }

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
