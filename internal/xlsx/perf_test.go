package xlsx

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// bigWorkbook writes a workbook of n rows of ten columns (numbers, text,
// dates, booleans) with excelize's stream writer.
func bigWorkbook(tb testing.TB, n int) string {
	tb.Helper()
	f := excelize.NewFile()
	defer f.Close()
	sw, err := f.NewStreamWriter("Sheet1")
	if err != nil {
		tb.Fatal(err)
	}
	date, _ := f.NewStyle(&excelize.Style{NumFmt: 14})
	sw.SetRow("A1", []any{"id", "name", "value", "date", "flag", "a", "b", "c", "d", "e"})
	for i := 2; i <= n+1; i++ {
		cell, _ := excelize.CoordinatesToCellName(1, i)
		sw.SetRow(cell, []any{i, fmt.Sprintf("name %d", i%5000), float64(i) * 1.5, excelize.Cell{StyleID: date, Value: 42000 + i%3000}, i%2 == 0, i * 3, "x", 3.25, i % 7, "yy"})
	}
	if err := sw.Flush(); err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(tb.TempDir(), "big.xlsx")
	if err := f.SaveAs(p); err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestLargeWorkbook reads a generated workbook of XLSX_LARGE_ROWS rows
// (1000000 for the figures in the package's report) and logs the time and
// memory it took.
func TestLargeWorkbook(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("XLSX_LARGE_ROWS"))
	if n <= 0 {
		t.Skip("set XLSX_LARGE_ROWS (e.g. 1000000) to time a large workbook")
	}
	p := bigWorkbook(t, n)
	fi, _ := os.Stat(p)
	runtime.GC()
	start, cpu0 := time.Now(), cpuTime()
	wb := open(t, p, Limits{})
	opened, cpu1 := time.Since(start), cpuTime()
	s := wb.Sheets[0]
	info, err := s.WriteCSV(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	t.Logf("%d rows, %d bytes: Open %v (CPU %v), WriteCSV %v more (CPU %v); Go heap peak (HeapSys) %d MiB",
		s.Rows, fi.Size(), opened, cpu1-cpu0, time.Since(start)-opened, cpuTime()-cpu1, m.HeapSys>>20)
	if s.Rows != int64(n) || info.Rows != int64(n) {
		t.Errorf("got %d rows (%d written), want %d", s.Rows, info.Rows, n)
	}
}

// cpuTime is the process's CPU time, user and system: the machine may be
// shared, so wall-clock times vary.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkOpen(b *testing.B) {
	p := bigWorkbook(b, 20000)
	b.ResetTimer()
	for range b.N {
		wb, err := Open(p, "big.xlsx", Limits{TempDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := wb.Sheets[0].WriteCSV(io.Discard); err != nil {
			b.Fatal(err)
		}
		wb.Close()
	}
}
