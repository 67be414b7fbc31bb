// Package chromatest starts real Chroma servers for tests: the one of npm
// chromadb 3.5.0 (bindings pinned to 1.0.5) installed in
// internal/chroma/testdata/node with
//
//	(cd internal/chroma/testdata/node && npm ci)
//
// Each server listens on a free loopback port and keeps its data in a
// temporary folder. A test needing one is skipped when node or the package
// is missing, except in CI (CI=true or 1), where it fails instead.
package chromatest

import (
	"bytes"
	"context"
	"datachat/internal/testenv"
	"datachat/internal/testnet"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// StartTimeout bounds the wait for a new server's heartbeat.
const StartTimeout = 30 * time.Second

// Dir is the npm project holding the server, found from this source file.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "node")
}

// Available returns the node binary and the chroma script, or an error
// saying what is missing and how to install it.
func Available() (node, script string, err error) {
	hint := "; to run the Chroma tests: (cd internal/chroma/testdata/node && npm ci)"
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", errors.New("node is not installed" + hint)
	}
	script = filepath.Join(Dir(), "node_modules", ".bin", "chroma")
	if _, err := os.Stat(script); err != nil {
		return "", "", errors.New("the npm package chromadb is not installed" + hint)
	}
	return node, script, nil
}

// Require skips tb when no server can be started (see [Available]), or fails
// it when env CI is true or 1.
func Require(tb testing.TB) {
	tb.Helper()
	if _, _, err := Available(); err != nil {
		testenv.Missing(tb, err.Error())
	}
}

// Server is a running Chroma server.
type Server struct {
	URL string // http://127.0.0.1:PORT

	cmd     *exec.Cmd
	exited  chan error // receives the process's end
	tmp     string     // removed by Close
	logPath string
	once    sync.Once
}

// Start starts a server for tb, stopped when tb's test ends. It skips or
// fails tb as [Require] does.
func Start(tb testing.TB) *Server {
	tb.Helper()
	Require(tb)
	s, err := StartServer(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartServer starts a server with its data in a new temporary folder and
// waits (at most [StartTimeout]) for its heartbeat. Close stops it. For a
// server shared by a package's tests, call it once from a test and Close it
// in TestMain.
func StartServer(ctx context.Context) (*Server, error) {
	node, script, err := Available()
	if err != nil {
		return nil, err
	}
	var last error
	for range 3 { // a free port can be taken before the server binds it
		s, err := start(ctx, node, script)
		if err == nil {
			return s, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func start(ctx context.Context, node, script string) (*Server, error) {
	port, err := testnet.FreePort()
	if err != nil {
		return nil, fmt.Errorf("chromatest: %w", err)
	}
	tmp, err := os.MkdirTemp("", "chromatest-")
	if err != nil {
		return nil, fmt.Errorf("chromatest: %w", err)
	}
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), tmp: tmp, logPath: filepath.Join(tmp, "chroma.log")}
	logf, err := os.Create(s.logPath)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("chromatest: %w", err)
	}
	defer logf.Close()
	data := filepath.Join(tmp, "data")
	s.cmd = exec.Command(node, script, "run", "--path", data, "--port", strconv.Itoa(port), "--host", "127.0.0.1")
	s.cmd.Dir = tmp
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = append(os.Environ(), "CHROMA_TELEMETRY=false", "ANONYMIZED_TELEMETRY=false")
	s.cmd.SysProcAttr = sysProcAttr()
	s.cmd.WaitDelay = 5 * time.Second
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("chromatest: start chroma: %w", err)
	}
	exited := make(chan error, 1)
	s.exited = exited
	go func() { exited <- s.cmd.Wait() }()

	wctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(wctx, http.MethodGet, s.URL+"/api/v2/heartbeat", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-exited:
			msg := s.logTail()
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("chromatest: chroma exited before answering (%v); its output:\n%s", err, msg)
		case <-wctx.Done():
			killTree(s.cmd.Process)
			<-exited
			msg := s.logTail()
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("chromatest: chroma did not answer %s/api/v2/heartbeat within %s; its output:\n%s", s.URL, StartTimeout, msg)
		case <-tick.C:
		}
	}
}

// Close stops the server (it keeps nothing worth a clean shutdown) and
// removes its data.
func (s *Server) Close() {
	s.once.Do(func() {
		killTree(s.cmd.Process)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
		}
		os.RemoveAll(s.tmp)
	})
}

// Log returns the end of the server's output, for a failing test's report.
func (s *Server) Log() string { return s.logTail() }

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.TrimSpace(b))
}
