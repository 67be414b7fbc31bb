package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Reserve is disk space held back, as a file in a process's directory, for
// what must work when the disk is full: deleting. A delete frees space but
// needs a little first — SQLite in WAL mode appends the pages it changes to
// its log before it commits, and a full disk fails the commit. Free gives the
// space back to the disk while its function runs, then holds it again.
type Reserve struct {
	path string
	size int64

	mu   sync.Mutex // held while the space is released: one Free at a time
	held int64      // bytes held now
}

// minReserve is the least a Reserve holds when the disk has not room for
// all of it.
const minReserve = 64 << 10

// DefaultReserve is the space a Reserve holds unless told otherwise: enough
// for the log of deleting a conversation with large documents, small beside
// any disk datachat runs on.
const DefaultReserve = 16 << 20

// Reserve returns a reserve of size bytes in d, not yet held: call Hold.
func (d *Dir) Reserve(size int64) *Reserve {
	return &Reserve{path: filepath.Join(d.path, "reserve"), size: size}
}

// Hold takes the reserve's space from the disk, if it does not hold it all
// already. When the disk has not that much free, it holds as much as it can
// (halving down to 64 KiB), so that a delete right after a delete on a full
// disk still finds some, and fails only when it could hold nothing.
func (r *Reserve) Hold() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holdLocked()
}

func (r *Reserve) holdLocked() error {
	if r.held >= r.size {
		return nil
	}
	var err error
	for n := r.size; n >= minReserve && n > r.held; n /= 2 {
		if err = r.allocate(n); err == nil {
			r.held = n
			return nil
		}
	}
	if r.held > 0 {
		// Still what it held before: allocate failed without touching it
		// when it could not grow it.
		return nil
	}
	return fmt.Errorf("hold disk space for deletes: %w", err)
}

// allocate makes the reserve file n bytes of allocated space.
func (r *Reserve) allocate(n int64) error {
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && r.held == 0 {
		os.Remove(r.path) // whatever part was allocated
	}
	return err
}

// Held reports whether the reserve holds space (all or some of it).
func (r *Reserve) Held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held > 0
}

// HeldBytes reports how much space the reserve holds.
func (r *Reserve) HeldBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Free runs fn with the reserve's space given back to the disk, and returns
// its error. Then it holds the space again, as much as the disk has room for;
// a later Hold takes the rest.
func (r *Reserve) Free(fn func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held > 0 {
		if err := os.Remove(r.path); err == nil || errors.Is(err, os.ErrNotExist) {
			r.held = 0
		}
	}
	err := fn()
	r.holdLocked()
	return err
}

// writeZeros writes size zero bytes to f and syncs them.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		size -= n
	}
	return f.Sync()
}
