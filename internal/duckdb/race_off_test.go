//go:build !race

package duckdb

const raceEnabled = false
