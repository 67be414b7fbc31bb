package serve

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// MiB is n bytes in MiB.
func MiB(n int64) float64 { return float64(n) / (1 << 20) }

// Status reads a kB field of /proc/PID/status ("VmRSS:", "VmHWM:"), in
// bytes; 0 when it cannot be read.
func Status(pid int, field string) int64 {
	return procField(fmt.Sprintf("/proc/%d/status", pid), field)
}

// Anonymous is the process's anonymous resident memory (smaps_rollup), in
// bytes: what its RSS holds apart from files mapped, the binary included.
func Anonymous(pid int) int64 {
	return procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Anonymous:")
}

// procField reads a kB field of a /proc file, in bytes.
func procField(path, field string) int64 {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// WaitIdle waits, for at most 30 s, until the process used under 5 % of a
// core over half a second: serve compiles PDFium in the background after it
// starts (a few seconds of one core), and a load starts once that is done.
func WaitIdle(pid int) {
	const every = 500 * time.Millisecond
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		c0 := CPU(pid)
		time.Sleep(every)
		if CPU(pid)-c0 < every/20 {
			return
		}
	}
}

// ResetPeak starts the process's peak RSS (VmHWM) afresh from its RSS now
// (clear_refs 5, Linux 4.0 on), so that a peak read later is the load's and
// not start-up's (serve's PDFium compile peaks at several times its rest).
// It reports whether the kernel took it.
func ResetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}
