// Package serve starts and stops `datachat serve` for the benchmark programs,
// and reads the CPU time of processes, so that each benchmark measures the
// server the same way.
package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// Build compiles ./cmd/datachat of the module at dir ("" for the current
// directory, the repository root) into out, the compiler's output on
// standard error.
func Build(dir, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/datachat")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// Binary is bin, the datachat binary a benchmark runs, or where bin is "",
// ./cmd/datachat of the current directory (the repository root) built into
// work.
func Binary(work, bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(work, "datachat")
	log.Printf("building datachat into %s", bin)
	if err := Build("", bin); err != nil {
		return "", fmt.Errorf("%w (run from the repository root)", err)
	}
	return bin, nil
}

// ParseFlags parses the command line and the values of a load bench's -n
// (levels) and -server-env (env) flags, and exits with a message naming
// the flag when one cannot be read.
func ParseFlags(levels, env *string) ([]int, map[string]string) {
	flag.Parse()
	l, err := ParseLevels(*levels)
	if err != nil {
		log.Fatalf("-n: %v", err)
	}
	e, err := ParseEnv(*env)
	if err != nil {
		log.Fatalf("-server-env: %v", err)
	}
	return l, e
}

// ParseLevels reads the numbers of concurrent conversations of a -n flag,
// one run each: positive numbers separated by commas.
func ParseLevels(s string) ([]int, error) {
	var levels []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// ParseEnv reads extra server environment given as KEY=VALUE pairs
// separated by commas (a -server-env flag); blank pairs are passed over.
func ParseEnv(s string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}

// WorkDir makes a benchmark's work directory, datachat-NAME-…, in the
// system's temporary directory. The function it returns removes it; with
// keep, WorkDir logs where it is and the function leaves it.
func WorkDir(name string, keep bool) (string, func(), error) {
	dir, err := os.MkdirTemp("", "datachat-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	if keep {
		log.Printf("work directory (kept): %s", dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Fresh makes a new directory for one server under work, named for name,
// and creates its log file, serve.log, in it.
func Fresh(work, name string) (dir string, logf *os.File, err error) {
	dir, err = os.MkdirTemp(work, name+"-")
	if err != nil {
		return "", nil, err
	}
	logf, err = os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return "", nil, err
	}
	return dir, logf, nil
}

// Env is the environment the benchmarks run serve with: its data in dir/data,
// listening on 127.0.0.1:0, JSON logs at info level (as [Start] reads them),
// and no rate, token, socket or connection limit, since one user holds every
// socket of a harness. Each of extra is laid over it in turn.
func Env(dir string, extra ...map[string]string) []string {
	vars := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"),
		"DATACHAT_DATA_DIR": filepath.Join(dir, "data"), "DATACHAT_ADDR": "127.0.0.1:0",
		"DATACHAT_LOG_FORMAT": "json", "DATACHAT_LOG_LEVEL": "info",
		"DATACHAT_RATE_LIMIT_RPM": "0", "DATACHAT_TOKENS_PER_DAY": "0",
		"DATACHAT_MAX_WS_PER_USER": "0", "DATACHAT_MAX_CONNECTIONS": "0",
	}
	for _, e := range extra {
		maps.Copy(vars, e)
	}
	env := make([]string, 0, len(vars))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// Process is a running `datachat serve`.
type Process struct {
	Cmd  *exec.Cmd
	PID  int
	Addr string // host:port it listens on
	Key  string // an API key of the first user, admin, made once serve printed its setup URL
	// Exited is closed once the process has exited and its output is read.
	Exited chan struct{}
}

var (
	servingRE = regexp.MustCompile(`"msg":"serving".*"addr":"([^"]+)"`)
	setupRE   = regexp.MustCompile(`#invite=(\S+)`)
)

// Start starts cmd, a `datachat serve` command with its environment (JSON
// logs at info level, so its address can be read), copies its log (standard
// error) to logf, and returns once /healthz answers, with the address and
// an API key of admin, the user its first start makes (made with `keys
// create` once serve printed admin's setup URL). It fails when serve exits
// first or does not answer within timeout.
func Start(cmd *exec.Cmd, logf *os.File, timeout time.Duration) (*Process, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start serve: %w", err)
	}
	p := &Process{Cmd: cmd, PID: cmd.Process.Pid, Exited: make(chan struct{})}
	addr, setup := make(chan string, 1), make(chan string, 1)
	var pipes sync.WaitGroup
	pipes.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := setupRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case setup <- m[1]:
				default:
				}
			}
		}
	})
	pipes.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	})
	go func() {
		pipes.Wait() // before Wait, which closes the pipes
		cmd.Wait()
		close(p.Exited)
	}()
	fail := func(format string, args ...any) (*Process, error) {
		p.Stop(time.Second)
		return nil, fmt.Errorf(format+"; see %s", append(args, logf.Name())...)
	}
	deadline := time.After(timeout)
	select {
	case p.Addr = <-addr:
	case <-p.Exited:
		return fail("serve exited at start")
	case <-deadline:
		return fail("serve did not start within %s", timeout)
	}
	for {
		if resp, err := http.Get("http://" + p.Addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-p.Exited:
			return fail("serve exited at start")
		case <-deadline:
			return fail("/healthz never answered within %s", timeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case <-setup:
	case <-deadline:
		return fail("no setup URL from serve within %s", timeout)
	}
	keys := exec.Command(cmd.Path, "keys", "create", "--user", "admin")
	keys.Env = cmd.Env
	key, err := keys.Output()
	if err != nil {
		return fail("keys create --user admin: %v", err)
	}
	p.Key = strings.TrimSpace(string(key))
	return p, nil
}

// CreateConversations creates n conversations as the first user, 16 at a
// time, titled title and their number, and returns their ids in order.
func (p *Process) CreateConversations(n int, title string) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			ids[i], errs[i] = p.createConversation(fmt.Sprintf("%s %d", title, i))
			return nil
		})
	}
	g.Wait()
	return ids, errors.Join(errs...)
}

func (p *Process) createConversation(title string) (string, error) {
	body, _ := json.Marshal(map[string]string{"title": title})
	req, _ := http.NewRequest("POST", "http://"+p.Addr+"/api/conversations", bytes.NewReader(body))
	req.Header.Set("X-API-Key", p.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("create conversation: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(b, &c) != nil {
		return "", fmt.Errorf("create conversation: HTTP %d %s", resp.StatusCode, b)
	}
	return c.ID, nil
}

// Multipart is a multipart body with data as the field "file", as an upload
// sends a file, and its content type.
func Multipart(name string, data []byte) (contentType string, body []byte) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	part, _ := w.CreateFormFile("file", name)
	part.Write(data)
	w.Close()
	return w.FormDataContentType(), b.Bytes()
}

// Stop ends the server with SIGTERM, as an operator would, and kills it if
// it has not exited after grace. It returns once the process has exited.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.Exited:
		return
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(grace):
		p.Cmd.Process.Kill()
		<-p.Exited
	}
}

// CPU is the CPU time (user and system) pid has used, from /proc; 0 when it
// cannot be read.
func CPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): utime and stime
	// are the 12th and 13th.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// SelfCPU is the CPU time this process has used.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
