package scratch

import (
	"errors"
	"os"
	"syscall"
)

// allocate gives f size bytes of blocks on the disk: fallocate, where the file
// system has it, else zeros written.
func allocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return writeZeros(f, size)
	}
	return err
}
