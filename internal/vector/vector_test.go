package vector

import (
	"math"
	"testing"
)

func TestUnitAndDot(t *testing.T) {
	v := []float32{3, 4, 0, 0, 0, 0, 0, 0, 0, 12} // length 13, past one block of eight
	u := Unit(v)
	if got := Dot(u, u); math.Abs(float64(got)-1) > 1e-6 {
		t.Errorf("a unit vector with itself: got %v, want 1", got)
	}
	if got, want := Dot(v, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}), float32(19); got != want {
		t.Errorf("dot: got %v, want %v", got, want)
	}
	if z := Unit([]float32{0, 0}); z[0] != 0 || z[1] != 0 {
		t.Errorf("zero vector: got %v, want zeros", z)
	}
	if &Unit(v)[0] == &v[0] {
		t.Error("Unit changed its argument's array")
	}
}
