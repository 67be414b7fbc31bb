// Package report holds what the benchmark programs print the same way: the
// machine they ran on, and latencies as percentiles in milliseconds.
package report

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes this machine in one line, ending with its load average
// and a newline: cores, CPU model, memory, platform and Go version.
func Machine() string {
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("machine: %d cores (%s), %s RAM, %s/%s, %s; load average %s",
		runtime.NumCPU(), CPUModel(), Memory(), runtime.GOOS, runtime.GOARCH, runtime.Version(), load)
}

// CPUModel is the CPU's model name from /proc/cpuinfo, "?" where unknown.
func CPUModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`model name\s*:\s*(.*)`).FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return "?"
}

// Memory is the machine's memory from /proc/meminfo in GiB, "?" where
// unknown.
func Memory() string {
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.Atoi(string(m[1]))
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "?"
}

// LoadAvg is the 1, 5 and 15 minute load averages, "?" where unknown.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Percentile returns the p-th quantile (0 to 1) of sorted latencies: the
// element at (len-1)·p, rounded down; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

// MS formats d in milliseconds with two decimals (microsecond precision).
func MS(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
