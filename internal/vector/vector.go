// Package vector holds the arithmetic of embedding vectors that the document
// index (internal/retrieval) and the chat's table ranking (internal/chat)
// share: scaling to unit length, and the dot product, which for unit vectors
// is their cosine similarity. It imports nothing of datachat's.
package vector

import "math"

// Unit returns v scaled to unit length (a copy); a zero vector stays zero.
func Unit(v []float32) []float32 {
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

// Dot is the dot product of two vectors of one length (b at least as long
// as a), in eight running float32 sums for speed (PostgreSQL's sum of real
// products agrees with it to float32 precision). With unit vectors it is
// their cosine similarity.
func Dot(a, b []float32) float32 {
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
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}
