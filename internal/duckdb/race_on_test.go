//go:build race

package duckdb

// raceEnabled: the test binary, and so every worker process it starts, is
// built with the race detector, which needs several times the memory a
// worker's limits are set for.
const raceEnabled = true
