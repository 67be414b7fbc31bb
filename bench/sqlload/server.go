package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"datachat/bench/internal/serve"
)

// server is the `datachat serve` process.
type server struct {
	cmd    *exec.Cmd
	proc   *serve.Process
	pid    int
	addr   string
	key    string // the admin key of the first start
	dir    string
	env    []string
	log    *os.File
	exited chan struct{}
	once   sync.Once

	seenMu sync.Mutex
	seen   map[int]uint64 // worker pids ever seen, with their start times
}

// startServer starts serve on a fresh data directory and waits for /healthz.
func startServer(o options, work, providerURL string) *server {
	dir := filepath.Join(work, "server")
	for _, d := range []string{dir, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			fatalf("%v", err)
		}
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		fatalf("%v", err)
	}
	vars := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"),
		"TMPDIR":            filepath.Join(dir, "tmp"), // the SQL workers' directories
		"DATACHAT_DATA_DIR": filepath.Join(dir, "data"), "DATACHAT_ADDR": "127.0.0.1:0",
		"DATACHAT_LOG_FORMAT": "json", "DATACHAT_LOG_LEVEL": "info",
		"DATACHAT_RATE_LIMIT_RPM": "0", "DATACHAT_TOKENS_PER_DAY": "0",
		"LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sqlload", "OPENAI_BASE_URL": providerURL,
	}
	for k, v := range o.env {
		vars[k] = v
	}
	s := &server{dir: dir, log: logf, seen: map[int]uint64{}}
	for k, v := range vars {
		s.env = append(s.env, k+"="+v)
	}
	slices.Sort(s.env)
	s.cmd = exec.Command(o.bin, "serve")
	s.cmd.Env = s.env
	p, err := serve.Start(s.cmd, logf, 60*time.Second)
	if err != nil {
		fatalf("%v", err)
	}
	s.proc, s.pid, s.addr, s.key, s.exited = p, p.PID, p.Addr, p.Key, p.Exited
	atExit(s.stop)
	return s
}

func (s *server) url() string { return "http://" + s.addr }

// stop ends the server with SIGTERM, as an operator would (it stops its
// workers itself), then kills any worker that outlived it, by pid.
func (s *server) stop() { s.once.Do(s.stopOnce) }

func (s *server) stopOnce() {
	s.proc.Stop(45 * time.Second)
	s.log.Close()
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	left := 0
	for pid, start := range s.seen {
		if st, ok := readStat(pid); ok && st.start == start {
			syscall.Kill(pid, syscall.SIGKILL)
			left++
		}
	}
	if left > 0 {
		log.Printf("%d SQL worker processes outlived the server: killed", left)
	}
}

// createUsers makes a key per user with `datachat keys create`, as an
// operator would, against the running server's data directory, 4 at a time.
func createUsers(o options, s *server, convs []*conv) {
	eachConv("create users", 4, convs, func(c *conv) error {
		cmd := exec.Command(o.bin, "keys", "create", "--user", c.user)
		cmd.Env = s.env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("keys create --user %s: %v: %s", c.user, err, stderr.Bytes())
		}
		c.key = strings.TrimSpace(string(out))
		return nil
	})
}

var client = &http.Client{Transport: &http.Transport{
	Proxy:               nil, // 127.0.0.1 only
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 1024,
	IdleConnTimeout:     time.Minute,
}}

// call makes one API request with a user's key and returns the status and
// body; status 0 is a transport error.
func call(ctx context.Context, s *server, key, method, path, contentType string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url()+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-API-Key", key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// errorMessage is the message of an error answer.
func errorMessage(status int, body []byte, err error) string {
	if err != nil {
		return err.Error()
	}
	var e struct {
		Error struct{ Message, Type string }
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return fmt.Sprintf("%d %s", status, e.Error.Message)
	}
	return fmt.Sprintf("%d %.100s", status, body)
}

// setup creates each user's conversation and uploads its main CSV, 8 at a
// time, and returns the upload latencies.
func setup(s *server, convs []*conv) []time.Duration {
	return timeEachConv("setup", convs, func(c *conv) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		st, body, err := call(ctx, s, c.key, "POST", "/api/conversations", "application/json", strings.NewReader(`{"title":"sqlload"}`))
		var created struct{ ID string }
		if err != nil || st != 201 || json.Unmarshal(body, &created) != nil {
			return 0, fmt.Errorf("create conversation for %s: %s", c.user, errorMessage(st, body, err))
		}
		c.id, c.cold = created.ID, true
		data, err := os.ReadFile(c.csvPath)
		if err != nil {
			return 0, err
		}
		ct, mp := serve.Multipart("sales.csv", data)
		start := time.Now()
		st, body, err = call(ctx, s, c.key, "POST", "/api/conversations/"+c.id+"/datasets", ct, bytes.NewReader(mp))
		took := time.Since(start)
		var d struct{ Name string }
		if err != nil || st != 201 || json.Unmarshal(body, &d) != nil || d.Name != "sales" {
			return 0, fmt.Errorf("upload sales.csv for %s: %s (table %q)", c.user, errorMessage(st, body, err), d.Name)
		}
		return took, nil
	})
}

// warmup runs each conversation's first GROUP BY, 8 at a time, and returns
// the latencies: each opens the conversation's worker.
func warmup(s *server, convs []*conv) []time.Duration {
	return timeEachConv("warm-up", convs, func(c *conv) (time.Duration, error) {
		sm := sqlOp(s, c)
		if sm.outcome != outcomeOK {
			return 0, fmt.Errorf("query of %s: %s", c.user, sm.msg)
		}
		return sm.took, nil
	})
}
