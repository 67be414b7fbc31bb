//go:build unix

package extract

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapAllocator backs each PDFium instance's WebAssembly memory with an
// anonymous mapping of its maximum size, reserved but not committed: the
// memory grows in place (wazero's default reallocates and copies, holding
// the old and the new memory at once), pages count only once touched, and
// closing the instance returns them to the system at once rather than to
// the Go heap. The budget's arithmetic (PDFOptions.MemoryBudget) then holds
// for the process's resident memory too.
//
// An instance is closed (Free) by a timeout while PDFium may still run in
// it, until it next checks that it was closed: unmapping then would crash
// the process. So while a document is read its region is marked busy
// (memBusy); Free of a busy region only gives its pages back (MADV_DONTNEED:
// the mapping stays valid, reading zeros), and the region is unmapped when
// the read has returned (memDone).
var mmapAllocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
	return &mmapMemory{max: max}
})

type mmapMemory struct {
	max uint64
	buf []byte // the whole mapping; nil until the first Reallocate and after unmapping

	// under mmapMu
	busy, freed bool
}

var (
	mmapMu  sync.Mutex
	regions = map[*byte]*mmapMemory{} // by the mapping's first byte
)

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if m.buf == nil {
		b, err := syscall.Mmap(-1, 0, int(max(m.max, 1<<16)), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
		if err != nil {
			return nil
		}
		m.buf = b
		mmapMu.Lock()
		regions[&b[0]] = m
		mmapMu.Unlock()
	}
	return m.buf[:size]
}

func (m *mmapMemory) Free() {
	mmapMu.Lock()
	defer mmapMu.Unlock()
	if m.buf == nil || m.freed {
		return
	}
	m.freed = true
	if m.busy {
		syscall.Madvise(m.buf, syscall.MADV_DONTNEED)
		return
	}
	m.unmapLocked()
}

func (m *mmapMemory) unmapLocked() {
	delete(regions, &m.buf[0])
	syscall.Munmap(m.buf)
	m.buf = nil
}

// memBusy marks the region that starts at base as in use by a read, and
// returns the function that ends that use (unmapping the region if it was
// freed meanwhile). base is the address of the instance's memory; a region
// we did not map is left alone.
func memBusy(base unsafe.Pointer) (done func()) {
	mmapMu.Lock()
	defer mmapMu.Unlock()
	m := regions[(*byte)(base)]
	if m == nil {
		return func() {}
	}
	m.busy = true
	return func() {
		mmapMu.Lock()
		defer mmapMu.Unlock()
		m.busy = false
		if m.freed && m.buf != nil {
			m.unmapLocked()
		}
	}
}
