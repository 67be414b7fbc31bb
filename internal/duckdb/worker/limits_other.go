//go:build !linux

package duckdb

import (
	"os"
	"syscall"
)

func workerSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// applyLimits has no OS limits to apply on this platform: DuckDB's own
// settings and the server's deadlines are the only bounds.
func applyLimits(l workerLimits, rwDir string, roFiles []string) ([]string, error) {
	return []string{"no OS limits on this platform (Linux has RLIMIT_DATA, RLIMIT_CPU and Landlock)"}, nil
}

func startQueryCPU(workerLimits)       {}
func notifyCPULimit(ch chan os.Signal) {}
