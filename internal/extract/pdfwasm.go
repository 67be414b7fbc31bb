package extract

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"unsafe"

	"github.com/klippa-app/go-pdfium"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// PDFium's WebAssembly: the compilation caches runtimes share, and the size
// and address of an instance's memory, which go-pdfium does not expose.

// wasmCaches hold PDFium compiled to machine code, by [PDFOptions.CacheDir]
// ("": in memory only): every Extractor has its own runtime (the memory limit
// is the runtime's) but compiles from its cache in milliseconds instead of
// seconds. A cache kept in a directory lives while a runtime uses it: closing
// it unmaps the machine code, which the directory gives back on the next
// start. The memory-only cache lives as long as the process.
var (
	wasmCachesMu sync.Mutex
	wasmCaches   = map[string]*wasmCache{}
)

// wasmCache is one compilation cache and the runtimes using it.
type wasmCache struct {
	dir  string
	c    wazero.CompilationCache
	refs int // under wasmCachesMu
}

// acquireCache returns the cache kept in dir, the memory-only one when dir is
// empty or cannot hold a cache, counted as used until release.
func acquireCache(dir string) *wasmCache {
	wasmCachesMu.Lock()
	defer wasmCachesMu.Unlock()
	if c := wasmCaches[dir]; c != nil {
		c.refs++
		return c
	}
	if dir != "" {
		if dc, err := wazero.NewCompilationCacheWithDir(dir); err == nil {
			c := &wasmCache{dir: dir, c: dc, refs: 1}
			wasmCaches[dir] = c
			return c
		}
		dir = ""
		if c := wasmCaches[dir]; c != nil {
			c.refs++
			return c
		}
	}
	c := &wasmCache{c: wazero.NewCompilationCache(), refs: 1}
	wasmCaches[dir] = c
	return c
}

// release ends one use of the cache; the last use of a cache kept in a
// directory closes it, unmapping the machine code compiled or read into it.
func (c *wasmCache) release() {
	wasmCachesMu.Lock()
	defer wasmCachesMu.Unlock()
	if c.refs--; c.refs > 0 || c.dir == "" {
		return
	}
	if wasmCaches[c.dir] == c {
		delete(wasmCaches, c.dir)
	}
	c.c.Close(context.Background())
}

// drop forgets the cache kept in a directory and empties the directory, so
// that the next process writes it anew; then it releases the caller's use.
func (c *wasmCache) drop() {
	wasmCachesMu.Lock()
	if wasmCaches[c.dir] == c {
		delete(wasmCaches, c.dir)
	}
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(c.dir, e.Name()))
	}
	wasmCachesMu.Unlock()
	c.release()
}

// wasmMemoryBase returns the address of the WebAssembly memory of inst, or
// nil when it cannot be found (see wasmMemory).
func wasmMemoryBase(inst pdfium.Pdfium) (p unsafe.Pointer) {
	defer func() {
		if recover() != nil {
			p = nil
		}
	}()
	mem := wasmAPIMemory(inst)
	if mem == nil {
		return nil
	}
	if b, ok := mem.Read(0, 1); ok && len(b) == 1 {
		return unsafe.Pointer(&b[0])
	}
	return nil
}

// wasmMemory returns the size in bytes of the WebAssembly memory of inst, or
// -1 when it cannot be found. go-pdfium does not expose it: its instance
// implementation holds the module in the exported field Module, whose Memory
// method returns the wazero memory. A test checks that this still works.
func wasmMemory(inst pdfium.Pdfium) (n int64) {
	defer func() {
		if recover() != nil {
			n = -1
		}
	}()
	mem := wasmAPIMemory(inst)
	if mem == nil {
		return -1
	}
	return int64(mem.Size())
}

// wasmAPIMemory returns the wazero memory of inst, or nil. It may panic.
func wasmAPIMemory(inst pdfium.Pdfium) api.Memory {
	impl := reflect.ValueOf(inst.GetImplementation())
	if impl.Kind() == reflect.Pointer {
		impl = impl.Elem()
	}
	mod := impl.FieldByName("Module")
	if !mod.IsValid() || mod.IsNil() {
		return nil
	}
	out := mod.MethodByName("Memory").Call(nil)
	mem, _ := out[0].Interface().(api.Memory)
	return mem
}
