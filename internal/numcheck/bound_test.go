package numcheck

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// manyNumbers is an answer of n numbers in prose, table rows and lists:
// the 300,000-number answer took the checker 12.7 s and 1.4 GiB.
func manyNumbers(n int) string {
	var b strings.Builder
	for i := range n {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "Region %c sold %d units", 'A'+i%26, 1000+i%9000)
		case 1:
			fmt.Fprintf(&b, ", worth $%d.%02dK", i%900, i%100)
		default:
			fmt.Fprintf(&b, " (%d.%d%%).\n", i%100, i%10)
		}
	}
	return b.String()
}

var manyEvidence = Evidence{Results: []Result{{ToolCallID: "c1", Columns: []string{"units"}, Rows: [][]any{{int64(1000)}, {int64(1001)}}}}}

// TestCheckAnswerBounded: an answer of 300,000 numbers is checked up to
// the limit — the first numbers in reading order — and says where it
// stopped and why.
func TestCheckAnswerBounded(t *testing.T) {
	answer := manyNumbers(300_000)
	checks := CheckAnswer(answer, manyEvidence)
	if len(checks) != DefaultMaxNumbers {
		t.Fatalf("%d numbers checked, want %d", len(checks), DefaultMaxNumbers)
	}
	got := CheckAnswerWithin(context.Background(), answer, manyEvidence, Limits{MaxNumbers: 10})
	if len(got.Checks) != 10 || got.Stopped != StoppedNumbers {
		t.Fatalf("got %d checks, stopped %q; want 10, %q", len(got.Checks), got.Stopped, StoppedNumbers)
	}
	want := []string{"1000", "$1.01K", "2.2%", "1003", "$4.04K", "5.5%", "1006", "$7.07K", "8.8%", "1009"}
	for i, c := range got.Checks {
		if c.Text != want[i] {
			t.Errorf("check %d is %q, want %q (the first numbers in reading order)", i, c.Text, want[i])
		}
	}
	if r := []rune(answer); !strings.HasPrefix(string(r[got.From:]), "10.10K") {
		t.Errorf("stopped at %d, %q…; want the 11th number", got.From, string(r[got.From:got.From+10]))
	}
	if got.Checks[0].Status != Matched || got.Checks[1].Status != Unmatched {
		t.Errorf("statuses: %+v", got.Checks[:2])
	}
	// All of a short answer: nothing stopped.
	all := CheckAnswerWithin(context.Background(), manyNumbers(30), manyEvidence, Limits{MaxNumbers: 30})
	if len(all.Checks) != 30 || all.Stopped != "" || all.From != 0 {
		t.Errorf("30 numbers, limit 30: %d checks, stopped %q at %d", len(all.Checks), all.Stopped, all.From)
	}
}

// TestCheckAnswerDeadline: a context that has ended stops the check at
// its next look (every 64 numbers), saying so.
func TestCheckAnswerDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	answer := manyNumbers(1000)
	got := CheckAnswerWithin(ctx, answer, manyEvidence, Limits{})
	if len(got.Checks) != 63 || got.Stopped != StoppedTime {
		t.Fatalf("got %d checks, stopped %q; want 63, %q", len(got.Checks), got.Stopped, StoppedTime)
	}
	if got.From != got.Checks[62].End && got.From <= got.Checks[62].Start {
		t.Errorf("stopped at %d, after the check at %d", got.From, got.Checks[62].Start)
	}
}

// BenchmarkCheckAnswerMany measures answers of 5,000 (the limit) and
// 300,000 numbers: the time and the memory allocated per check, and the
// heap in use after it.
func BenchmarkCheckAnswerMany(b *testing.B) {
	for _, n := range []int{DefaultMaxNumbers, 300_000} {
		answer := manyNumbers(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			var checked int
			for b.Loop() {
				checked = len(CheckAnswer(answer, manyEvidence))
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(checked), "checked")
			b.ReportMetric(float64(len(answer))/(1<<20), "answer-MiB")
		})
	}
}

// TestCheckAnswerWithoutDigits: every number starts with a digit, so an
// answer without one is not read: a 256 KiB answer in prose (Greek, with
// a table and code) allocates nearly nothing and checks nothing, where it
// was held as runes, with a mask and its lines (over 1 MiB). One digit at
// its very end is still found and checked.
func TestCheckAnswerWithoutDigits(t *testing.T) {
	var b strings.Builder
	for b.Len() < 256<<10 {
		b.WriteString("Οι πωλήσεις αυξήθηκαν σε κάθε περιοχή, as the table shows.\n\n| region | trend |\n|---|---|\n| North | up |\n\n`SELECT region FROM sales`\n")
	}
	prose := b.String()
	got := CheckAnswerWithin(context.Background(), prose, manyEvidence, Limits{})
	if got.Checks == nil || len(got.Checks) != 0 || got.Stopped != "" || got.From != 0 {
		t.Fatalf("prose: %d checks (nil %v), stopped %q at %d; want none, not nil, nothing stopped", len(got.Checks), got.Checks == nil, got.Stopped, got.From)
	}
	if a := testing.AllocsPerRun(5, func() { CheckAnswerWithin(context.Background(), prose, manyEvidence, Limits{}) }); a > 10 {
		t.Errorf("%.0f allocations checking prose without a digit, want at most 10", a)
	}
	got = CheckAnswerWithin(context.Background(), prose+" 1000 units.", manyEvidence, Limits{})
	if len(got.Checks) != 1 || got.Checks[0].Text != "1000" || got.Checks[0].Status != Matched {
		t.Errorf("prose then 1000: %+v, want 1000 matched", got.Checks)
	}
}
