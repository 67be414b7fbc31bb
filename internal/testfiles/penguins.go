package testfiles

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// PenguinsName is the file name [Penguins] writes; its table is "penguins".
const PenguinsName = "penguins.csv"

// Facts of [PenguinsCSV], true by construction.
const (
	PenguinsRows   = 344
	AdelieCount    = 152
	ChinstrapCount = 68
	GentooCount    = 124
	// AdelieBodyMass is sum(body_mass_g) over the Adelie penguins, one of
	// which has no measurements.
	AdelieBodyMass = 558800
	// MeanBodyMass is round(avg(body_mass_g)) over all penguins: the 342
	// masses add up to 1,437,000 g.
	MeanBodyMass = 4202
	FemaleCount  = 165
	MaleCount    = 168
	UnknownSex   = 11 // penguins with an empty sex
)

// PenguinsCSV returns a CSV shaped like the Palmer penguins data set:
// columns species, island, bill_length_mm, bill_depth_mm (one decimal),
// flipper_length_mm, body_mass_g (integers) and sex (MALE, FEMALE or
// empty); one Adelie and one Gentoo have only species and island. The
// measurements are pseudo-random within each species' range, the body
// masses adjusted so that each species' add up to the real data set's
// (which gives [AdelieBodyMass] and [MeanBodyMass]).
func PenguinsCSV() []byte { return bytes.Clone(penguinsCSV()) }

// Penguins writes [PenguinsCSV] to dir/penguins.csv and returns the path.
func Penguins(tb testing.TB, dir string) string {
	tb.Helper()
	return Write(tb, dir, PenguinsName, penguinsCSV())
}

// species describes the penguins of one species.
type species struct {
	name          string
	islands       []island
	female, male  int // the others have an empty sex
	blank         bool
	bill, depth   [2]int // ranges in tenths of a millimetre
	flipper, mass [2]int // ranges in millimetres and grams
	massSum       int    // what the masses add up to
}

type island struct {
	name string
	n    int
}

var allSpecies = []species{
	{name: "Adelie", islands: []island{{"Torgersen", 52}, {"Biscoe", 44}, {"Dream", 56}},
		female: 73, male: 73, blank: true,
		bill: [2]int{321, 460}, depth: [2]int{155, 215}, flipper: [2]int{172, 210}, mass: [2]int{2850, 4775},
		massSum: AdelieBodyMass},
	{name: "Gentoo", islands: []island{{"Biscoe", 124}},
		female: 58, male: 61, blank: true,
		bill: [2]int{409, 596}, depth: [2]int{131, 173}, flipper: [2]int{203, 231}, mass: [2]int{3950, 6300},
		massSum: 624350},
	{name: "Chinstrap", islands: []island{{"Dream", 68}},
		female: 34, male: 34,
		bill: [2]int{409, 580}, depth: [2]int{164, 208}, flipper: [2]int{178, 212}, mass: [2]int{2700, 4800},
		massSum: 253850},
}

// rng is splitmix64: a small generator whose sequence no library update
// can change.
type rng uint64

func (r *rng) intn(n int) int {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int((z ^ z>>31) % uint64(n))
}

// between returns a value in [lo, hi] on a grid of step.
func (r *rng) between(lo, hi, step int) int { return lo + step*r.intn((hi-lo)/step+1) }

var penguinsCSV = sync.OnceValue(func() []byte {
	r := rng(2007)
	var b bytes.Buffer
	b.WriteString("species,island,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g,sex\n")
	for _, sp := range allSpecies {
		n := 0
		for _, is := range sp.islands {
			n += is.n
		}
		sexes := make([]string, n)
		for i := range sexes {
			switch {
			case i < sp.female:
				sexes[i] = "FEMALE"
			case i < sp.female+sp.male:
				sexes[i] = "MALE"
			}
		}
		for i := n - 1; i > 0; i-- {
			j := r.intn(i + 1)
			sexes[i], sexes[j] = sexes[j], sexes[i]
		}
		blank := -1 // the row without measurements: the first without a sex
		if sp.blank {
			for i, s := range sexes {
				if s == "" {
					blank = i
					break
				}
			}
		}
		mass := make([]int, n)
		sum := 0
		for i := range mass {
			if i != blank {
				mass[i] = r.between(sp.mass[0], sp.mass[1], 25)
				sum += mass[i]
			}
		}
		adjust(mass, blank, sp.massSum-sum, sp.mass)
		row := 0
		for _, is := range sp.islands {
			for range is.n {
				if row == blank {
					fmt.Fprintf(&b, "%s,%s,,,,,\n", sp.name, is.name)
				} else {
					bill, depth := r.between(sp.bill[0], sp.bill[1], 1), r.between(sp.depth[0], sp.depth[1], 1)
					fmt.Fprintf(&b, "%s,%s,%d.%d,%d.%d,%d,%d,%s\n", sp.name, is.name, bill/10, bill%10, depth/10, depth%10,
						r.between(sp.flipper[0], sp.flipper[1], 1), mass[row], sexes[row])
				}
				row++
			}
		}
	}
	return b.Bytes()
})

// adjust moves the masses (all but skip) by 25 g at a time, within
// limits, until they have changed by diff in total.
func adjust(mass []int, skip, diff int, limits [2]int) {
	for pass := 0; diff != 0; pass++ {
		if pass > 1000 {
			panic("testfiles: cannot reach the asked sum of masses")
		}
		for i := range mass {
			step := 25
			if diff < 0 {
				step = -25
			}
			if diff == 0 {
				return
			}
			if i == skip || mass[i]+step < limits[0] || mass[i]+step > limits[1] {
				continue
			}
			mass[i] += step
			diff -= step
		}
	}
}
