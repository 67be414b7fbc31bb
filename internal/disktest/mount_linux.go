package disktest

import (
	"datachat/internal/testenv"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Small mounts a tmpfs of size bytes on a new directory, unmounted when the
// test ends, and returns the directory. Without the right to mount (not
// root) the test is skipped; under CI=true as root it fails instead.
func Small(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if os.Geteuid() == 0 {
			testenv.Missing(t, fmt.Sprintf("mount a %d-byte tmpfs on %s as root: %v", size, dir, err))
		}
		t.Skipf("full-disk test skipped: mounting a tmpfs needs root (CI runs as root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Free reports the bytes free on the file system of dir.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
