package duckdb

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// procUsage returns a process's private memory (resident pages not shared
// with other processes: its heap, DuckDB's buffers) and the CPU time it has
// used, from /proc (Linux); zeros elsewhere.
func procUsage(pid int) (private int64, cpu time.Duration) {
	page := int64(os.Getpagesize())
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm"); err == nil {
		if f := bytes.Fields(b); len(f) >= 3 {
			resident, _ := strconv.ParseInt(string(f[1]), 10, 64)
			shared, _ := strconv.ParseInt(string(f[2]), 10, 64)
			private = max(resident-shared, 0) * page
		}
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// The command name (field 2) may hold spaces: count from its end.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			f := bytes.Fields(b[i+1:])
			if len(f) >= 13 {
				utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
				stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
				cpu = time.Duration(utime+stime) * time.Second / 100 // USER_HZ
			}
		}
	}
	return private, cpu
}

// totalMemory returns the machine's memory in bytes (Linux), or 0 when unknown.
func totalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}
