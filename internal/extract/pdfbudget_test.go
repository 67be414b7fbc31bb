package extract

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"datachat/internal/testfiles"
)

// peakRSS returns the process's peak resident memory since the last
// resetPeakRSS (Linux: VmHWM), or -1.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// BenchmarkPDFBombsAtOnce reads ten Flate bombs (200 KiB unpacking to 200
// MiB each) at once, four at a time, with the default per-document limit:
// the red team's 10 hostile PDFs took the server to 1.64 GiB. It reports the
// process's peak RSS during the reads.
func BenchmarkPDFBombsAtOnce(b *testing.B) {
	bomb := testfiles.FlateBomb()
	e := NewExtractor(PDFOptions{MaxConcurrent: 4, MaxQueued: 16})
	defer e.Close()
	resetPeakRSS()
	if _, err := e.Extract(b.Context(), bytes.NewReader(threePages), "warm.pdf", 1<<20); err != nil {
		b.Fatal(err)
	}
	base := peakRSS()
	var peak int64
	for b.Loop() {
		resetPeakRSS()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { e.Extract(b.Context(), bytes.NewReader(bomb), "bomb.pdf", 1<<20) })
		}
		wg.Wait()
		peak = max(peak, peakRSS())
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(base)/(1<<20), "base-RSS-MiB")
	b.ReportMetric(float64(e.PDFStats().PeakReserved)/(1<<20), "peak-reserved-MiB")
	b.ReportMetric(float64(e.PDFStats().MaxMemory)/(1<<20), "max-wasm-MiB")
}

// TestPDFMemoryBudget reads ten Flate bombs and ten ordinary PDFs at once,
// four at a time, with a per-document limit of 64 MiB and a budget of 128
// MiB: at no time is more reserved than the budget, no instance grows past
// the per-document limit, every bomb fails on its limit, every ordinary
// file is read, and at the end only what idle instances hold is reserved.
func TestPDFMemoryBudget(t *testing.T) {
	const limit, budget = 64 << 20, 128 << 20
	e := newExtractor(t, PDFOptions{MemoryLimit: limit, MemoryBudget: budget, MaxConcurrent: 4, MaxQueued: 32})
	bomb := testfiles.FlateBomb()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	pages := make([]int, 20)
	for i := range 20 {
		wg.Go(func() {
			data, name := threePages, "report.pdf"
			if i%2 == 0 {
				data, name = bomb, "bomb.pdf"
			}
			doc, err := e.Extract(t.Context(), bytes.NewReader(data), name, 1<<20)
			errs[i] = err
			if doc != nil {
				pages[i] = doc.Pages
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 {
			checkInvalid(t, err, ErrTooLarge, "bomb.pdf", "needs more than the memory limit of 64 MiB")
		} else if err != nil || pages[i] != 3 {
			t.Errorf("report %d: %d pages, %v", i, pages[i], err)
		}
	}
	st := e.PDFStats()
	if st.PeakReserved > budget || st.PeakReserved < limit {
		t.Errorf("peak reserved %d MiB, want within the budget of %d MiB", st.PeakReserved>>20, budget>>20)
	}
	if st.MaxMemory > limit {
		t.Errorf("an instance grew to %d MiB, past the limit of %d MiB", st.MaxMemory>>20, limit>>20)
	}
	if st.Reserved < 0 || st.Reserved > keepPDFMemory*int64(st.Instances-st.Discarded) {
		t.Errorf("at the end %d bytes reserved with %d instances kept", st.Reserved, st.Instances-st.Discarded)
	}
	t.Logf("%+v", st)
}

// TestPDFMemoryBudgetIdle: an instance kept idle holds its memory of the
// budget, and a document that needs the budget has it thrown away instead
// of waiting on it forever.
func TestPDFMemoryBudgetIdle(t *testing.T) {
	const limit = 64 << 20
	e := newExtractor(t, PDFOptions{MemoryLimit: limit, MemoryBudget: limit, MaxConcurrent: 2})
	if _, err := extractWith(t, e, t.Context(), "a.pdf", threePages); err != nil {
		t.Fatal(err)
	}
	st := e.PDFStats()
	if st.Reserved <= 0 || st.Reserved > keepPDFMemory || st.Instances != 1 || st.Discarded != 0 {
		t.Fatalf("after one document: %+v; want its instance kept, holding its memory", st)
	}
	// The next document takes the kept instance: it fits in the budget.
	if _, err := extractWith(t, e, t.Context(), "b.pdf", threePages); err != nil {
		t.Fatal(err)
	}
	if st := e.PDFStats(); st.Instances != 1 || st.PeakReserved > limit {
		t.Fatalf("after two documents: %+v", st)
	}
	// Two at once: one waits for the budget; the other's instance is not
	// kept but given up, and both are read.
	var wg sync.WaitGroup
	for _, name := range []string{"c.pdf", "d.pdf"} {
		wg.Go(func() {
			if _, err := e.Extract(t.Context(), bytes.NewReader(threePages), name, 1<<20); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	wg.Wait()
	if st := e.PDFStats(); st.PeakReserved > limit {
		t.Errorf("peak reserved %d, budget %d", st.PeakReserved, limit)
	}
}
