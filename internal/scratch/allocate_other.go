//go:build !linux

package scratch

import "os"

// allocate gives f size bytes of blocks on the disk, by writing zeros.
func allocate(f *os.File, size int64) error { return writeZeros(f, size) }
