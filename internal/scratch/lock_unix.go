//go:build unix

package scratch

import (
	"errors"
	"os"
	"syscall"
)

// canLock: flock tells a live owner from a gone one.
const canLock = true

// tryLock takes an exclusive flock on f without waiting; false when another
// open file (another process's, or this one's own claim) holds it.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}
