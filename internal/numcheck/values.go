package numcheck

import "math"

// Values returns the values the checker reads a number as, given its text as
// an answer writes it (a [Check]'s Text): first its plain reading, with its
// sign, magnitude and percent applied ("-$1.2M" is -1200000, "15.3%" is
// 0.153), then its other readings ("15.3%" also as 15.3, "$1.2 billion" also
// as 1.2). Nil when the text holds no number the checker reads; when it holds
// several, the first.
func Values(text string) []float64 {
	d := newDoc(text)
	toks, _ := d.scan(math.MaxInt)
	for k := range toks {
		t := &toks[k]
		if t.skip != "" {
			continue
		}
		var out []float64
		for _, in := range interps(t) {
			out = append(out, in.a.float())
		}
		return out
	}
	return nil
}
