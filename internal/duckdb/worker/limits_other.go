//go:build !linux

package worker

import (
	"os"

	"datachat/internal/duckdb/wire"
)

// applyLimits has no OS limits to apply on this platform: DuckDB's own
// settings and the server's deadlines are the only bounds.
func applyLimits(l wire.Limits, rwDir string, roFiles []string) ([]string, error) {
	return []string{"no OS limits on this platform (Linux has RLIMIT_DATA, RLIMIT_CPU and Landlock)"}, nil
}

func startQueryCPU(wire.Limits)        {}
func notifyCPULimit(ch chan os.Signal) {}
