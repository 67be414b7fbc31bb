//go:build !unix

package extract

import (
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapAllocator is nil where there is no mmap: wazero's own allocator.
var mmapAllocator experimental.MemoryAllocator

func memBusy(unsafe.Pointer) func() { return func() {} }
