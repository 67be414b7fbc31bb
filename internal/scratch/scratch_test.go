package scratch

import (
	"bufio"
	"datachat/internal/disktest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHelperHold is not a test: started by TestSweep as another process, it
// claims a directory, writes a file in it, prints its path and waits to be
// killed.
func TestHelperHold(t *testing.T) {
	parent := os.Getenv("SCRATCH_TEST_HOLD")
	if parent == "" {
		t.Skip("helper process of TestSweep")
	}
	d, err := Claim(parent)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path(), "upload-1"), make([]byte, 1000), 0o600)
	os.Stdout.WriteString(d.Path() + "\n")
	os.Stdin.Read(make([]byte, 1)) // until killed
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestSweep: a directory another live process holds stays; once that process
// is killed (SIGKILL: it removes nothing itself), the next sweep removes it.
func TestSweep(t *testing.T) {
	if runtime.GOOS == "windows" || !canLock {
		t.Skip("no flock here")
	}
	parent := t.TempDir()
	own, err := Claim(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Release()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), "SCRATCH_TEST_HOLD="+parent)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	other := strings.TrimSpace(line)

	// A directory whose process died before it locked it, and leftovers of
	// an earlier release, one old and one maybe in use.
	lockless := filepath.Join(parent, prefix+"1-dead")
	os.Mkdir(lockless, 0o700)
	os.Chtimes(lockless, time.Now().Add(-2*time.Minute), time.Now().Add(-2*time.Minute))
	claiming := filepath.Join(parent, prefix+"2-new") // its lock file comes next
	os.Mkdir(claiming, 0o700)
	// Directories of processes on another host, whose locks this host may
	// not see: kept while their owner touches them.
	remote, remoteStale := filepath.Join(parent, prefix+"3-remote"), filepath.Join(parent, prefix+"4-remote")
	for _, d := range []string{remote, remoteStale} {
		os.Mkdir(d, 0o700)
		os.WriteFile(filepath.Join(d, lockName), []byte("elsewhere.example 42\n"), 0o600)
	}
	os.Chtimes(filepath.Join(remoteStale, lockName), time.Now().Add(-RemoteStale-time.Minute), time.Now().Add(-RemoteStale-time.Minute))
	old, recent := filepath.Join(parent, "upload-old"), filepath.Join(parent, "upload-new")
	for _, p := range []string{old, recent, filepath.Join(parent, "keep.me")} {
		os.WriteFile(p, []byte("x"), 0o600)
	}
	os.Chtimes(old, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour))

	sw, err := Sweep(parent, "upload-*")
	if err != nil {
		t.Fatal(err)
	}
	if sw.Dirs != 2 || sw.Other != 1 {
		t.Errorf("first sweep: got %+v, want the lockless directory, the stale remote one and the old leftover", sw)
	}
	for p, want := range map[string]bool{own.Path(): true, other: true, lockless: false, claiming: true,
		remote: true, remoteStale: false, old: false, recent: true, filepath.Join(parent, "keep.me"): true} {
		if exists(p) != want {
			t.Errorf("after the first sweep: %s exists %v, want %v", p, exists(p), want)
		}
	}

	cmd.Process.Kill()
	cmd.Wait()
	sw, err = Sweep(parent, "upload-*")
	if err != nil {
		t.Fatal(err)
	}
	if sw.Dirs != 1 || sw.Bytes < 1000 || exists(other) {
		t.Errorf("sweep after the kill: got %+v, %s exists %v; want it removed, its 1000 bytes and more", sw, other, exists(other))
	}
	if !exists(own.Path()) {
		t.Error("the sweep removed this process's own directory")
	}
	if err := own.Release(); err != nil || exists(own.Path()) {
		t.Errorf("Release: %v, still there: %v", err, exists(own.Path()))
	}
}

// TestClaimRacesSweep: claims and sweeps at once never leave a claimed
// directory removed under its owner.
func TestClaimRacesSweep(t *testing.T) {
	if !canLock {
		t.Skip("no flock here")
	}
	parent := t.TempDir()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				Sweep(parent)
			}
		}
	}()
	var dirs []*Dir
	for range 200 {
		d, err := Claim(parent)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	close(stop)
	<-done
	for _, d := range dirs {
		if !exists(filepath.Join(d.Path(), lockName)) {
			t.Errorf("%s was removed though claimed", d.Path())
		}
		d.Release()
	}
}

// TestReserve: a held reserve's space comes back for a delete on a full disk
// and is held again after, when there is room.
func TestReserve(t *testing.T) {
	disk := disktest.Small(t, 8<<20)
	d, err := Claim(filepath.Join(disk, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	r := d.Reserve(1 << 20)
	if err := r.Hold(); err != nil || !r.Held() {
		t.Fatalf("Hold: %v", err)
	}
	filler := disktest.Fill(t, disk, 0)
	write := func() error { return os.WriteFile(filepath.Join(disk, "needs-space"), make([]byte, 512<<10), 0o600) }
	if err := write(); err == nil {
		t.Fatal("a write on the full disk went through")
	}
	if err := r.Free(write); err != nil {
		t.Fatalf("a write with the reserve freed: %v", err)
	}
	if got := r.HeldBytes(); got == 0 || got > 512<<10 {
		t.Errorf("after the write, the reserve holds %d bytes, want what was left (at most 512 KiB)", got)
	}
	// A second write on the full disk finds what was held again.
	if err := r.Free(func() error { return os.WriteFile(filepath.Join(disk, "needs-space-2"), make([]byte, 128<<10), 0o600) }); err != nil {
		t.Fatalf("a second write with the reserve freed: %v", err)
	}
	os.Remove(filler)
	if err := r.Hold(); err != nil || !r.Held() {
		t.Errorf("Hold once space is freed: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(d.Path(), "reserve")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("reserve file: %v %v", fi, err)
	}
}
