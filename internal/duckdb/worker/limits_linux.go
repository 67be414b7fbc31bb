package worker

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"datachat/internal/duckdb/wire"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// applyLimits puts the calling worker under its OS limits before it starts
// DuckDB: RLIMIT_DATA (every private allocation: DuckDB's buffers and the
// strings and lists its expressions build, which its own memory_limit does
// not track), RLIMIT_CPU over the worker's life, no core dumps, and — where
// the kernel has Landlock — file access to rwDir and the roFiles only, no
// TCP, and no signals or abstract sockets to processes outside its domain. It
// returns the limits in force, for the server's log.
func applyLimits(l wire.Limits, rwDir string, roFiles []string) ([]string, error) {
	var active []string
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return nil, fmt.Errorf("RLIMIT_CORE: %w", err)
	}
	if l.Data > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: uint64(l.Data), Max: uint64(l.Data)}); err != nil {
			return nil, fmt.Errorf("RLIMIT_DATA: %w", err)
		}
		active = append(active, "memory: RLIMIT_DATA "+SizeText(l.Data))
	}
	if l.CPU > 0 {
		used := cpuUsed()
		hard := uint64(used.Seconds()+l.CPU.Seconds()) + 1
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: hard, Max: hard}); err != nil {
			return nil, fmt.Errorf("RLIMIT_CPU: %w", err)
		}
		active = append(active, fmt.Sprintf("CPU time: RLIMIT_CPU %s over the worker's life", l.CPU))
		if l.QueryCPU > 0 {
			active = append(active, fmt.Sprintf("%s of CPU time per query (SIGXCPU)", l.QueryCPU))
		}
	}
	if !l.Landlock {
		return active, nil
	}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return append(active, "landlock: not offered by this kernel"), nil
	}
	rules := []landlock.Rule{
		landlock.RWDirs(rwDir),
		// What DuckDB and its allocator read about the machine when a
		// database opens: the process's cgroup and the limits it sets, the
		// CPUs, memory settings, and the time zone.
		landlock.RODirs("/proc/self", "/sys/fs/cgroup", "/sys/devices/system/cpu", "/sys/kernel/mm/transparent_hugepage", "/usr/share/zoneinfo").IgnoreIfMissing(),
		landlock.ROFiles("/proc/sys/vm/overcommit_memory", "/etc/localtime").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null").IgnoreIfMissing(),
	}
	if len(roFiles) > 0 {
		rules = append(rules, landlock.ROFiles(roFiles...))
	}
	if err := landlock.V9.BestEffort().Restrict(rules...); err != nil {
		return nil, fmt.Errorf("landlock: %w", err)
	}
	what := "files"
	if abi >= 4 {
		what += ", TCP"
	}
	if abi >= 6 {
		what += ", signals and abstract sockets"
	}
	return append(active, fmt.Sprintf("landlock ABI %d: %s limited to what the worker needs", abi, what)), nil
}

// cpuUsed is the CPU time the process has used so far.
func cpuUsed() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startQueryCPU sets the soft CPU limit to the query's budget from now: past
// it the kernel sends SIGXCPU, which interrupts the query (see
// notifyCPULimit); the hard limit stays the worker's life budget.
func startQueryCPU(l wire.Limits) {
	if l.QueryCPU <= 0 || l.CPU <= 0 {
		return
	}
	var cur unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_CPU, &cur) != nil {
		return
	}
	soft := min(uint64((cpuUsed()+time.Duration(l.QueryCPU)).Seconds())+1, cur.Max)
	unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: soft, Max: cur.Max})
}

// notifyCPULimit delivers SIGXCPU to ch (Go ignores it by default).
func notifyCPULimit(ch chan os.Signal) { signal.Notify(ch, syscall.SIGXCPU) }
