//go:build unix

package numcheck

import (
	"syscall"
	"time"
)

// cpuTime is the process's user and system CPU time, for benchmarks on a
// busy machine where wall time says little.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
