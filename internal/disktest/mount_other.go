//go:build !linux

package disktest

import "testing"

// Small would mount a small tmpfs; only Linux is supported: the test is
// skipped.
func Small(t testing.TB, size int64) string {
	t.Skip("full-disk test skipped: it mounts a tmpfs, which needs Linux (and root)")
	return ""
}

// Free is not supported here.
func Free(t testing.TB, dir string) int64 {
	t.Skip("full-disk test skipped: needs Linux")
	return 0
}
