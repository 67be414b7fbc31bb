// Package disktest gives tests a small disk of their own to fill: a tmpfs
// mounted for the test (Linux, as root, which CI is). Elsewhere the tests
// that need one skip, saying so.
package disktest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fill writes a file on the file system of dir until the file system is full
// but for leave bytes, and returns the file's path: removing it frees the
// space again.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for size := len(buf); size > 0; {
		_, err := f.Write(buf[:size])
		switch {
		case err == nil:
		case errors.Is(err, syscall.ENOSPC):
			size /= 2 // the last pages, smaller and smaller
		default:
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	if leave > 0 {
		fi, err := f.Stat()
		if err != nil || fi.Size() < leave {
			t.Fatalf("fill %s: cannot leave %d bytes: %v", dir, leave, err)
		}
		if err := f.Truncate(fi.Size() - leave); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
