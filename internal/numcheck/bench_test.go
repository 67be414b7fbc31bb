package numcheck

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// bigEvidence is a 1,000-row × 20-column result of mixed types, a question
// and two excerpts.
func bigEvidence() Evidence {
	rng := rand.New(rand.NewPCG(1, 2))
	cols := make([]string, 20)
	for c := range cols {
		cols[c] = fmt.Sprintf("col_%d", c)
	}
	cols[0], cols[1], cols[2], cols[3] = "region", "day", "revenue", "share"
	rows := make([][]any, 1000)
	for r := range rows {
		row := make([]any, 20)
		row[0] = fmt.Sprintf("Region %c%d", 'A'+r%26, r)
		row[1] = fmt.Sprintf("2024-%02d-%02d", 1+r%12, 1+r%28)
		row[2] = json.Number(fmt.Sprintf("%.2f", rng.Float64()*1e6))
		row[3] = json.Number(fmt.Sprintf("%.4f", rng.Float64()))
		for c := 4; c < 20; c++ {
			switch c % 4 {
			case 0:
				row[c] = int64(rng.IntN(100000))
			case 1:
				row[c] = fmt.Sprintf("%.2f", rng.Float64()*1e4) // DECIMAL
			case 2:
				row[c] = json.Number(fmt.Sprintf("%.6g", rng.NormFloat64()*50))
			default:
				row[c] = fmt.Sprintf("note %d: %d items", r, rng.IntN(500))
			}
		}
		rows[r] = row
	}
	return Evidence{
		Question: "Which regions had revenue above $500,000 in 2024? Show the top 20.",
		Results:  []Result{{ToolCallID: "c1", Columns: cols, Rows: rows, RowCount: 1000}},
		Excerpts: []Excerpt{
			{SourceID: "d1", Text: "Revenue grew 12% to $4.2 billion in fiscal 2024, with 31 regions above target."},
			{SourceID: "d2", Text: "The 2023 plan assumed a 3.5% margin and 1,200 stores."},
		},
	}
}

// bigAnswer is about 4,000 characters of prose and a table quoting numbers
// of ev, some rounded, some invented.
func bigAnswer(ev Evidence) string {
	var b strings.Builder
	b.WriteString("Here is what the data shows for 2024 [1].\n\n| Region | Revenue | Share |\n|---|---:|---:|\n")
	rows := ev.Results[0].Rows
	for i := 0; i < 20; i++ {
		r := rows[i*37]
		rev, _ := r[2].(json.Number).Float64()
		sh, _ := r[3].(json.Number).Float64()
		fmt.Fprintf(&b, "| %s | $%.1fK | %.1f%% |\n", r[0], rev/1000, sh*100)
	}
	b.WriteString("\n")
	for b.Len() < 4000 {
		i := b.Len() % 1000
		r := rows[i]
		rev, _ := r[2].(json.Number).Float64()
		fmt.Fprintf(&b, "%s made about $%.2fM (%d units), while the invented total was %d. ", r[0], rev/1e6, r[4], 1000+i*7)
	}
	return b.String()
}

// BenchmarkCheckAnswer is the brief's worst case: a 1,000-row × 20-column
// result (a quarter of its cells text with digits) and a 4,000-character
// answer with 160-odd numbers, many of them coarse ("about $0.52M"). It also
// reports CPU time per call (cpu-ns/op; GC included), which a busy machine
// disturbs less than wall time.
func BenchmarkCheckAnswer(b *testing.B) {
	ev := bigEvidence()
	answer := bigAnswer(ev)
	c0, n := cpuTime(), 0
	for b.Loop() {
		CheckAnswer(answer, ev)
		n++
	}
	if c := cpuTime() - c0; c > 0 {
		b.ReportMetric(float64(c.Nanoseconds())/float64(n), "cpu-ns/op")
	}
	b.ReportMetric(float64(len([]rune(answer))), "answer_chars")
}

// BenchmarkCheckAnswerSmall is a typical answer: a few numbers, a small result.
func BenchmarkCheckAnswerSmall(b *testing.B) {
	a := "North led with $97,354 (15.3%), ahead of South at $88.1K; East fell 5%. All 4 regions are shown."
	for b.Loop() {
		CheckAnswer(a, revenue)
	}
}

// BenchmarkCheckAnswerLongProse is a 64 KiB answer in prose with a number
// every 8 KiB: the words around each number are read, not every word of
// the answer.
func BenchmarkCheckAnswerLongProse(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 64<<10 {
		if sb.Len()%(8<<10) < 60 {
			fmt.Fprintf(&sb, "North sold about %d units, ", 97000+sb.Len())
		}
		sb.WriteString("and the regions kept their Order, with Nothing unusual in the Quarter ")
	}
	a := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		CheckAnswer(a, revenue)
	}
}

// TestBigInputOnce runs the benchmark's input once, checks that it finds
// both matched and unmatched numbers, and logs how long it took.
func TestBigInputOnce(t *testing.T) {
	ev := bigEvidence()
	answer := bigAnswer(ev)
	start := time.Now()
	cs := CheckAnswer(answer, ev)
	t.Logf("%d chars, 1000×20 result: %d checks in %v", len([]rune(answer)), len(cs), time.Since(start))
	var m, u int
	for _, c := range cs {
		if c.Status == Matched {
			m++
		} else {
			u++
		}
	}
	if m == 0 || u == 0 {
		t.Errorf("got %d matched and %d unmatched, want both", m, u)
	}
}

// TestPathologicalInputs makes sure degenerate answers finish (a hang or a
// blow-up fails; timings are only logged, the machine may be busy).
func TestPathologicalInputs(t *testing.T) {
	for name, s := range map[string]string{
		"digits":   strings.Repeat("1", 5000),
		"zeros":    "1" + strings.Repeat("0", 5000),
		"groups":   "1" + strings.Repeat(",000", 2000),
		"spaces":   "1" + strings.Repeat(" 000", 2000),
		"ticks":    strings.Repeat("`` ", 3000),
		"pipes":    "| 1 |\n|---|\n" + strings.Repeat("| 1 ", 3000),
		"numbers":  strings.Repeat("1 ", 5000),
		"exponent": strings.Repeat("1e999 ", 1000),
		"dots":     strings.Repeat("1.", 5000),
		"dashes":   strings.Repeat("1-", 5000),
		"sup":      strings.Repeat("<sup>", 3000),
		"brackets": strings.Repeat("[1", 3000),
		"percents": strings.Repeat("5% ", 3000),
		"long":     strings.Repeat("1000000000000000000000000000000 ", 300),
	} {
		start := time.Now()
		CheckAnswer(s, revenue)
		d := time.Since(start)
		t.Logf("%s: %v", name, d)
		if d > 10*time.Second {
			t.Errorf("%s: %v", name, d)
		}
	}
}
