// Package pgtest gives tests and benchmarks a throwaway PostgreSQL: a schema
// of their own in a shared database ([NewSchema]), or a cluster of a test's
// own ([Start]), which the test may stop and start again: the database going
// away and coming back under a running server. Start uses
// testdata/start-test-cluster.sh of package postgres (which installs nothing
// unless it runs as root), and pg_ctl as the cluster's owner (postgres when
// the tests run as root, as in CI).
package pgtest

import (
	"datachat/internal/testenv"
	"datachat/internal/testnet"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a running test cluster on 127.0.0.1.
type Cluster struct {
	URL  string // postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
	Dir  string // the cluster directory: data/, log, the socket
	Port int

	t      testing.TB
	bindir string
}

// Start starts a cluster of the test's own, stopped and removed when the test
// ends. Tests that need it are skipped, with a message saying how to enable
// them, unless DATACHAT_TEST_POSTGRES_URL is set (PostgreSQL is installed
// here), and fail instead under CI=true.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv("DATACHAT_TEST_POSTGRES_URL") == "" {
		const how = "set DATACHAT_TEST_POSTGRES_URL=postgres://… (internal/postgres/testdata/start-test-cluster.sh starts a throwaway cluster and prints its URL); this test starts a cluster of its own beside it, which it stops and restarts"
		testenv.Missing(t, "PostgreSQL outage test: "+how)
	}
	bindir, err := binDir()
	if err != nil {
		t.Fatalf("PostgreSQL's programs: %v", err)
	}
	// Under /tmp, not t.TempDir: as root the cluster runs as postgres, who
	// must reach its directory.
	dir, err := os.MkdirTemp("", "datachat-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	port, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Port: port, t: t, bindir: bindir}
	t.Cleanup(func() {
		c.pgctl("-m", "immediate", "stop") // may already be stopped
		os.RemoveAll(dir)
	})
	out, err := exec.Command("sh", script(), dir, strconv.Itoa(c.Port)).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += "\n" + string(ee.Stderr)
		}
		t.Fatalf("start a test cluster in %s: %s", dir, msg)
	}
	c.URL = strings.TrimSpace(string(out))
	return c
}

// Stop stops the cluster the way an operator's restart does (pg_ctl stop -m
// fast: sessions are terminated, with SQLSTATE 57P01), and waits until it is
// down.
func (c *Cluster) Stop() {
	c.t.Helper()
	if out, err := c.pgctl("-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		c.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// Restart starts the stopped cluster again and waits until it accepts
// connections.
func (c *Cluster) Restart() {
	c.t.Helper()
	opts := "-p " + strconv.Itoa(c.Port) + " -k " + c.Dir + " -c listen_addresses=127.0.0.1"
	if out, err := c.pgctl("-o", opts, "-l", filepath.Join(c.Dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
		c.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// pgctl runs pg_ctl on the cluster as its owner.
func (c *Cluster) pgctl(args ...string) ([]byte, error) {
	args = append([]string{filepath.Join(c.bindir, "pg_ctl"), "-D", filepath.Join(c.Dir, "data")}, args...)
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	return exec.Command(args[0], args[1:]...).CombinedOutput()
}

// script is the path of start-test-cluster.sh, beside this package.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "start-test-cluster.sh")
}

// binDir finds PostgreSQL's server programs as start-test-cluster.sh does:
// pg_config's bindir, else Debian's newest /usr/lib/postgresql/*/bin, else
// PATH.
func binDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	p, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

func version(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// WaitUntil polls cond every 20 ms until it holds or d passes, and returns
// how long that took: the recovery times the outage tests report.
func WaitUntil(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond) // a bounded poll on observable state
	}
	return time.Since(start)
}
