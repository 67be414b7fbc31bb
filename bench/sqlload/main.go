// Command sqlload is datachat's SQL load harness. It builds datachat, runs
// `datachat serve` as its own process on a fresh data directory, with an
// in-process provider fake (internal/llmtest, OpenAI protocol) that answers
// every question by calling execute_sql with a small GROUP BY and then a
// short text. It creates N users with one conversation each, uploads a
// generated CSV to each, and then every conversation loops, with a random
// think time, over a mix of operations: POST /sql with the GROUP BY, a chat
// turn (POST /chat/query, whose tool call runs the same GROUP BY), an upload
// of a second small dataset, and the deletion of one (never the main table).
//
// It reports, as Markdown, latency per kind of request, busy (503) refusals
// and other errors per kind, the server's CPU and memory and those of its SQL
// worker processes, and, for comparison, the same GROUP BY at the same
// concurrency through bare DuckDB in this process (database/sql over the same
// data as Parquet).
//
//	go run ./bench/sqlload                               # N = 50 for 2 minutes
//	go run ./bench/sqlload -duration 10m
//	go run ./bench/sqlload -server-env DATACHAT_SQL_WORKERS=4 -mix sql=50,chat=50
//	go run ./bench/sqlload -n 1 -think 0 -mix sql=100     # one conversation's queries back to back
//
// Before the load, each conversation runs one GROUP BY, which opens its worker
// (-warmup, reported apart), so the load starts as active conversations do.
// BENCHMARKS.md ("SQL under load") has the figures and what they mean.
//
// Every loop is bounded by count and time, traffic goes to 127.0.0.1 only, and
// the server and its workers are stopped at the end, on failure and on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/llmtest"
)

// groupBy is the small GROUP BY every /sql call and every chat turn runs:
// eight groups over the conversation's main table.
const groupBy = `SELECT region, count(*) AS orders, round(sum(amount), 2) AS revenue FROM sales GROUP BY region ORDER BY region`

var regions = []string{"central", "east", "islands", "north", "online", "overseas", "south", "west"}

// kind is a kind of operation a conversation does.
type kind int

const (
	opSQL kind = iota
	opChat
	opUpload
	opDelete
	numKinds
)

var kindNames = [numKinds]string{"sql", "chat", "upload", "delete"}

const maxExtras = 3 // second datasets a conversation holds at most

type options struct {
	n         int
	duration  time.Duration
	think     time.Duration
	mix       [numKinds]int
	rows      int
	extraRows int
	maxOps    int
	seed      uint64
	bin       string
	keep      bool
	baseline  bool
	warmup    bool
	// baselinePerConv gives each conversation its own DuckDB instance in
	// the baseline.
	baselinePerConv bool
	env             map[string]string
	envText         string
}

func main() {
	log.SetFlags(log.Ltime)
	var o options
	flag.IntVar(&o.n, "n", 50, "users, one conversation each, all active at once")
	flag.DurationVar(&o.duration, "duration", 2*time.Minute, "how long the load runs: no operation starts after it")
	flag.DurationVar(&o.think, "think", 500*time.Millisecond, "longest pause before each operation of a conversation (random, uniform)")
	mix := flag.String("mix", "sql=70,chat=20,upload=5,delete=5", "weights of the operations; an upload with "+strconv.Itoa(maxExtras)+" second datasets already there deletes one instead, a delete with none uploads one instead")
	flag.IntVar(&o.rows, "rows", 20000, "rows of each conversation's main CSV (5 columns)")
	flag.IntVar(&o.extraRows, "extra-rows", 2000, "rows of the second dataset uploads add")
	flag.IntVar(&o.maxOps, "max-ops", 100000, "operations per conversation at most, whatever the time")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the data and of the operation mix")
	flag.StringVar(&o.bin, "bin", "", "datachat binary to run (default: go build ./cmd/datachat into a temp dir)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (data dir, server log, CSVs)")
	flag.BoolVar(&o.baseline, "baseline", true, "also run the GROUP BY through bare DuckDB in-process at the same concurrency and duration")
	flag.BoolVar(&o.warmup, "warmup", true, "before the load, run one GROUP BY per conversation (8 at a time), reported apart: the load then starts with each conversation's worker open, as an active conversation has it")
	flag.BoolVar(&o.baselinePerConv, "baseline-per-conversation", false, "in the baseline, one DuckDB instance per conversation (as the server has) instead of one shared")
	flag.StringVar(&o.envText, "server-env", "", "extra environment of the server, KEY=VALUE,… (e.g. DATACHAT_SQL_WORKERS=4)")
	flag.Parse()
	if o.n <= 0 || o.duration <= 0 || o.rows <= 0 || o.extraRows <= 0 || o.maxOps <= 0 || o.think < 0 {
		log.Fatal("-n, -duration, -rows, -extra-rows and -max-ops must be positive, -think not negative")
	}
	var err error
	if o.mix, err = parseMix(*mix); err != nil {
		log.Fatalf("-mix: %v", err)
	}
	if o.env, err = serve.ParseEnv(o.envText); err != nil {
		log.Fatalf("-server-env: %v", err)
	}
	cmdline := "go run ./bench/sqlload"
	for _, a := range os.Args[1:] {
		cmdline += " " + quoteArg(a)
	}
	stopSignals := onSignal()
	defer stopSignals()

	work, done, err := serve.WorkDir("sqlload", o.keep)
	if err != nil {
		log.Fatal(err)
	}
	atExit(done)
	defer runExit()
	if o.bin == "" {
		o.bin = filepath.Join(work, "datachat")
		log.Printf("building datachat into %s", o.bin)
		if err := serve.Build("", o.bin); err != nil {
			fatalf("%v (run from the repository root)", err)
		}
	}
	m := readMachine()
	log.Printf("machine: %s", m)

	convs := writeData(o, work)
	res := runLoad(o, work, convs)
	var base *baselineResult
	if o.baseline {
		base = runBaseline(o, work, convs)
	}
	printReport(o, cmdline, m, res, base)
}

// parseMix reads "sql=70,chat=20,upload=5,delete=5".
func parseMix(s string) ([numKinds]int, error) {
	var mix [numKinds]int
	total := 0
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		i := slices.Index(kindNames[:], strings.TrimSpace(name))
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if !ok || i < 0 || err != nil || n < 0 {
			return mix, fmt.Errorf("%q: want NAME=WEIGHT with NAME one of %s", part, strings.Join(kindNames[:], ", "))
		}
		mix[i] = n
		total += n
	}
	if total == 0 {
		return mix, errors.New("all weights are 0")
	}
	return mix, nil
}

func mixText(mix [numKinds]int) string {
	var parts []string
	for k, w := range mix {
		parts = append(parts, fmt.Sprintf("%s=%d", kindNames[k], w))
	}
	return strings.Join(parts, ",")
}

func quoteArg(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;!#~") {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// Clean-up that must run however the harness ends: the server and its
// workers, the work directory. fatalf and signals run it too.
var exitFuncs struct {
	sync.Mutex
	fns  []func()
	done bool
}

func atExit(f func()) {
	exitFuncs.Lock()
	defer exitFuncs.Unlock()
	exitFuncs.fns = append(exitFuncs.fns, f)
}

// runExit runs the clean-ups once, last registered first.
func runExit() {
	exitFuncs.Lock()
	fns := exitFuncs.fns
	exitFuncs.fns = nil
	exitFuncs.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func fatalf(format string, args ...any) {
	log.Printf(format, args...)
	runExit()
	os.Exit(1)
}

// onSignal stops everything on SIGINT or SIGTERM.
func onSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			log.Printf("%v: stopping the server and cleaning up", sig)
			runExit()
			os.Exit(130)
		case <-quit:
		}
	}()
	return func() { signal.Stop(ch); close(quit) }
}

// machine is what the report says about the machine.
type machine struct {
	cores     int
	model     string
	mem       string
	loadStart string
	nice      int
}

func (m machine) String() string {
	return fmt.Sprintf("%d cores (%s), %s RAM, %s/%s, %s; harness, server and workers at nice %d; load average at start %s",
		m.cores, m.model, m.mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), m.nice, m.loadStart)
}

func readMachine() machine {
	m := machine{cores: runtime.NumCPU(), model: report.CPUModel(), mem: report.Memory(), loadStart: report.LoadAvg()}
	if prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
		m.nice = 20 - prio // the raw system call answers 20 - nice
	}
	return m
}

// conv is one user's conversation and what the load did in it. Only its own
// goroutine touches it during the load.
type conv struct {
	i       int
	user    string
	key     string
	id      string
	csvPath string
	extras  []string // dataset ids of second datasets, oldest first
	cold    bool     // no query since the start or since its tables changed: the next one opens a worker
	samples []sample
}

// sample is one operation's outcome.
type sample struct {
	kind     kind
	at       time.Duration // from the start of the load
	took     time.Duration
	engineMS float64 // /sql: elapsed_ms, DuckDB's own execution and fetch in the worker
	cold     bool    // sql or chat: the first query after the tables changed
	outcome  outcome
	msg      string // busy or error: what the server said
}

type outcome int

const (
	outcomeOK outcome = iota
	outcomeBusy
	outcomeFailed
)

// writeData writes each conversation's main CSV and the second dataset,
// deterministically from the seed.
func writeData(o options, work string) []*conv {
	dir := filepath.Join(work, "csv")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	convs := make([]*conv, o.n)
	for i := range convs {
		c := &conv{i: i, user: fmt.Sprintf("load%03d", i), csvPath: filepath.Join(dir, fmt.Sprintf("sales-%03d.csv", i))}
		rng := rand.New(rand.NewPCG(o.seed, uint64(i)))
		var b bytes.Buffer
		b.WriteString("id,region,product,amount,day\n")
		day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		for r := range o.rows {
			fmt.Fprintf(&b, "%d,%s,product-%02d,%.2f,%s\n", r+1, regions[rng.IntN(len(regions))], rng.IntN(40),
				rng.Float64()*500, day0.AddDate(0, 0, rng.IntN(366)).Format(time.DateOnly))
		}
		if err := os.WriteFile(c.csvPath, b.Bytes(), 0o644); err != nil {
			fatalf("%v", err)
		}
		convs[i] = c
	}
	return convs
}

// extraCSV is the second dataset uploads add: a target per region.
func extraCSV(o options) []byte {
	rng := rand.New(rand.NewPCG(o.seed, math.MaxUint64))
	var b bytes.Buffer
	b.WriteString("id,region,target\n")
	for r := range o.extraRows {
		fmt.Fprintf(&b, "%d,%s,%.2f\n", r+1, regions[rng.IntN(len(regions))], rng.Float64()*1000)
	}
	return b.Bytes()
}

// fake is the provider: llmtest's OpenAI fake behind a dispatcher that
// starts a new one every fakeGeneration requests. The fake keeps every
// request it answered, and requests carry the whole conversation, which
// grows with every turn; a fresh fake now and then keeps the harness's
// memory bounded over long runs.
type fake struct {
	url string
	srv *http.Server

	mu     sync.Mutex
	cur    *llmtest.Server
	served int
	all    []*llmtest.Server
}

const fakeGeneration = 200

// fakeScript answers a user message with execute_sql of the GROUP BY and a
// tool result with one line saying whether the query worked, so the harness
// can tell from the answer.
func fakeScript() llmtest.Script {
	s := llmtest.Script{Default: &llmtest.Turn{Text: []string{"script exhausted"}}}
	call := llmtest.Call("execute_sql", fmt.Sprintf(`{"query":%q}`, groupBy))
	for range fakeGeneration {
		s.Turns = append(s.Turns,
			llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{call}},
			llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
				res := r.LastToolResult()
				first, _, _ := strings.Cut(res, "\n")
				switch {
				case strings.HasPrefix(res, "Error:"):
					return "sqlerror " + res
				case strings.Contains(res, fmt.Sprintf("(%d rows)", len(regions))):
					return "sqlok " + first
				}
				return "sqlodd " + res
			}},
		)
	}
	return s
}

func startFake() *fake {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("fake: %v", err)
	}
	f := &fake{url: "http://" + ln.Addr().String() + "/v1"}
	f.next()
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	return f
}

// next starts a new generation; f.mu is held or f is not yet shared.
func (f *fake) next() {
	s, err := llmtest.Start(llmtest.OpenAI, fakeScript(), "127.0.0.1:0")
	if err != nil {
		fatalf("fake: %v", err)
	}
	if old := f.cur; old != nil {
		// Its answers in flight take milliseconds (no delays in the script).
		time.AfterFunc(time.Minute, old.Close)
	}
	f.cur, f.served = s, 0
	f.all = append(f.all, s)
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.served >= fakeGeneration {
		f.next()
	}
	f.served++
	s := f.cur
	f.mu.Unlock()
	s.ServeHTTP(w, r)
}

func (f *fake) close() {
	f.srv.Close()
	f.mu.Lock()
	all := f.all
	f.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
}

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

// multipartCSV is a multipart body with the CSV as field "file".
func multipartCSV(name string, data []byte) (string, []byte) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	part, _ := w.CreateFormFile("file", name)
	part.Write(data)
	w.Close()
	return w.FormDataContentType(), b.Bytes()
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
		ct, mp := multipartCSV("sales.csv", data)
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

// timeEachConv runs op on every conversation, 8 at a time, and returns the
// latencies op measured, sorted; an error ends the program, named by what.
func timeEachConv(what string, convs []*conv, op func(*conv) (time.Duration, error)) []time.Duration {
	var mu sync.Mutex
	var lat []time.Duration
	eachConv(what, 8, convs, func(c *conv) error {
		took, err := op(c)
		if err != nil {
			return err
		}
		mu.Lock()
		lat = append(lat, took)
		mu.Unlock()
		return nil
	})
	slices.Sort(lat)
	return lat
}

// eachConv runs op on every conversation, at most limit at a time; an error
// ends the program, named by what.
func eachConv(what string, limit int, convs []*conv, op func(*conv) error) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	errs := make(chan error, len(convs))
	for _, c := range convs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := op(c); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fatalf("%s: %v", what, err)
	}
}

// loadResult is what the load measured.
type loadResult struct {
	samples      []sample
	wall         time.Duration
	setupUploads []time.Duration
	warmup       []time.Duration
	serverCPU    time.Duration
	workerCPU    time.Duration
	harnessCPU   time.Duration
	machineBusy  float64 // cores busy on the whole machine, on average
	res          resources
	queue        queueStats
	serverEnv    []string
	loadEnd      string
	serveLog     string
	sqlMetrics   string // the server's own histogram of SQL durations
}

// runLoad starts the fake and the server, sets up the conversations, runs
// the load and stops the server.
func runLoad(o options, work string, convs []*conv) *loadResult {
	f := startFake()
	atExit(f.close)
	s := startServer(o, work, f.url)
	log.Printf("server pid %d on %s, log %s", s.pid, s.addr, s.log.Name())
	log.Printf("creating %d users", len(convs))
	createUsers(o, s, convs)
	log.Printf("creating %d conversations and uploading a %d-row CSV to each", len(convs), o.rows)
	r := &loadResult{serverEnv: s.env, serveLog: s.log.Name()}
	r.setupUploads = setup(s, convs)
	if o.warmup {
		log.Printf("warm-up: one GROUP BY per conversation, 8 at a time")
		r.warmup = warmup(s, convs)
	}
	extra := extraCSV(o)

	mon := startMonitor(s)
	cpu0 := mon.cpu()
	self0 := serve.SelfCPU()
	busy0, total0 := machineCPU()
	log.Printf("load: %d conversations for %v, think ≤ %v, mix %s", len(convs), o.duration, o.think, mixText(o.mix))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range convs {
		wg.Go(func() { converse(ctx, o, s, c, extra, start) })
	}
	progress := time.NewTicker(15 * time.Second)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-progress.C:
			log.Printf("  %v: %d operations done; load average %s", time.Since(start).Round(time.Second), opsDone.Load(), report.LoadAvg())
		}
	}
	progress.Stop()
	r.wall = time.Since(start)
	cpu1 := mon.cpu()
	r.serverCPU, r.workerCPU = cpu1.server-cpu0.server, cpu1.workers-cpu0.workers
	r.harnessCPU = serve.SelfCPU() - self0
	busy1, total1 := machineCPU()
	if total1 > total0 {
		r.machineBusy = float64(busy1-busy0) / float64(total1-total0) * float64(runtime.NumCPU())
	}
	r.loadEnd = report.LoadAvg()
	r.res, r.queue = mon.stop()
	r.sqlMetrics = scrapeSQLMetrics(s)

	log.Printf("load done after %v; stopping the server", r.wall.Round(time.Millisecond))
	s.stop()
	f.close()
	for _, c := range convs {
		r.samples = append(r.samples, c.samples...)
	}
	return r
}

// opsDone counts operations finished, for progress lines.
var opsDone atomic.Int64

// converse runs one conversation's operations until ctx ends or it did
// maxOps.
func converse(ctx context.Context, o options, s *server, c *conv, extra []byte, start time.Time) {
	rng := rand.New(rand.NewPCG(o.seed, uint64(c.i)+1<<32))
	total := 0
	for _, w := range o.mix {
		total += w
	}
	// Conversations start spread over the first second, not in lock-step.
	if !sleep(ctx, time.Duration(c.i)*time.Second/time.Duration(o.n)) {
		return
	}
	for ops := 0; ops < o.maxOps; ops++ {
		if o.think > 0 && !sleep(ctx, time.Duration(rng.Int64N(int64(o.think)))) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		pick := rng.IntN(total)
		k := opSQL
		for i, w := range o.mix {
			if pick < w {
				k = kind(i)
				break
			}
			pick -= w
		}
		if k == opUpload && len(c.extras) >= maxExtras {
			k = opDelete
		} else if k == opDelete && len(c.extras) == 0 {
			k = opUpload
		}
		at := time.Since(start)
		var sm sample
		switch k {
		case opSQL:
			sm = sqlOp(s, c)
		case opChat:
			sm = chatOp(s, c)
		case opUpload:
			sm = uploadOp(s, c, extra)
		case opDelete:
			sm = deleteOp(s, c)
		}
		sm.kind, sm.at = k, at
		c.samples = append(c.samples, sm)
		opsDone.Add(1)
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// classify turns a request's outcome into a sample (status 0: transport
// error).
func classify(start time.Time, status int, body []byte, err error) sample {
	sm := sample{took: time.Since(start)}
	switch {
	case err == nil && status >= 200 && status < 300:
	case err == nil && status == http.StatusServiceUnavailable:
		sm.outcome, sm.msg = outcomeBusy, errorMessage(status, body, err)
	default:
		sm.outcome, sm.msg = outcomeFailed, errorMessage(status, body, err)
	}
	return sm
}

func sqlOp(s *server, c *conv) sample {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"query": groupBy})
	start := time.Now()
	st, b, err := call(ctx, s, c.key, "POST", "/api/conversations/"+c.id+"/sql", "application/json", bytes.NewReader(body))
	sm := classify(start, st, b, err)
	sm.cold = c.cold
	if sm.outcome == outcomeOK {
		var res struct {
			RowCount  int     `json:"row_count"`
			ElapsedMS float64 `json:"elapsed_ms"`
		}
		if json.Unmarshal(b, &res) != nil || res.RowCount != len(regions) {
			sm.outcome, sm.msg = outcomeFailed, fmt.Sprintf("200 with %d rows, want %d", res.RowCount, len(regions))
		}
		sm.engineMS = res.ElapsedMS
		c.cold = false
	}
	return sm
}

// chatOp asks one question through POST /chat/query in the conversation; the
// fake runs the GROUP BY through execute_sql and answers whether it worked.
func chatOp(s *server, c *conv) sample {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"query": "Revenue by region?", "conversation_id": c.id})
	start := time.Now()
	st, b, err := call(ctx, s, c.key, "POST", "/chat/query", "application/json", bytes.NewReader(body))
	sm := classify(start, st, b, err)
	sm.cold = c.cold
	if sm.outcome != outcomeOK {
		return sm
	}
	var res struct{ Answer string }
	json.Unmarshal(b, &res)
	switch a := res.Answer; {
	case strings.HasPrefix(a, "sqlok"):
		c.cold = false
	case strings.Contains(strings.ToLower(a), "busy"):
		sm.outcome, sm.msg = outcomeBusy, "execute_sql: "+a
	default:
		sm.outcome, sm.msg = outcomeFailed, "answer: "+a
	}
	return sm
}

func uploadOp(s *server, c *conv, extra []byte) sample {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ct, mp := multipartCSV("extra.csv", extra)
	start := time.Now()
	st, b, err := call(ctx, s, c.key, "POST", "/api/conversations/"+c.id+"/datasets", ct, bytes.NewReader(mp))
	sm := classify(start, st, b, err)
	if sm.outcome == outcomeOK {
		var d struct{ ID string }
		json.Unmarshal(b, &d)
		c.extras = append(c.extras, d.ID)
		c.cold = true
	}
	return sm
}

func deleteOp(s *server, c *conv) sample {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := c.extras[0]
	start := time.Now()
	st, b, err := call(ctx, s, c.key, "DELETE", "/api/conversations/"+c.id+"/datasets/"+id, "", nil)
	sm := classify(start, st, b, err)
	if sm.outcome == outcomeOK || st == http.StatusNotFound {
		c.extras = c.extras[1:]
		c.cold = true
	}
	return sm
}

// procInfo is what /proc says about one process.
type procInfo struct {
	ppid    int
	start   uint64        // start time, clock ticks after boot: with the pid, names the process
	cpu     time.Duration // user + system
	ccpu    time.Duration // of its waited-for children that ended
	rss     int64
	private int64 // resident and not shared: its heap, DuckDB's buffers
}

// readProc reads a process's stat and memory.
func readProc(pid int) (procInfo, bool) {
	p, ok := readStat(pid)
	if ok {
		p.readMemory(pid)
	}
	return p, ok
}

// readStat reads /proc/PID/stat: parent, start time, CPU.
func readStat(pid int) (procInfo, bool) {
	var p procInfo
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return p, false
	}
	// The command name (field 2) may hold spaces: count from its end; field
	// k (1-based) is f[k-3].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return p, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return p, false
	}
	num := func(k int) int64 { n, _ := strconv.ParseInt(f[k-3], 10, 64); return n }
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / 100 } // USER_HZ
	p.ppid = int(num(4))
	p.cpu = tick(num(14) + num(15))
	p.ccpu = tick(num(16) + num(17))
	p.start = uint64(num(22))
	return p, true
}

// readMemory reads /proc/PID/statm: resident and private memory.
func (p *procInfo) readMemory(pid int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return
	}
	if f := strings.Fields(string(b)); len(f) >= 3 {
		page := int64(os.Getpagesize())
		res, _ := strconv.ParseInt(f[1], 10, 64)
		shared, _ := strconv.ParseInt(f[2], 10, 64)
		p.rss, p.private = res*page, max(res-shared, 0)*page
	}
}

// children lists a process's children by scanning /proc.
func children(ppid int) map[int]procInfo {
	out := map[int]procInfo{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok && p.ppid == ppid {
			p.readMemory(pid)
			out[pid] = p
		}
	}
	return out
}

// machineCPU returns the machine's busy and total CPU ticks (/proc/stat).
func machineCPU() (busy, total int64) {
	b, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		n, _ := strconv.ParseInt(s, 10, 64)
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// resources are the peaks the monitor saw.
type resources struct {
	serverRSSStart  int64
	serverRSSPeak   int64
	workersPeak     int   // worker processes at once, at most
	workersRSSPeak  int64 // their RSS summed, at most
	workersPrivPeak int64 // their private memory summed, at most
	workersAtRSS    int   // workers when their summed RSS peaked
	totalRSSPeak    int64 // server + workers
	workersSeen     int   // distinct worker processes over the run
}

type queueStats struct {
	samples   int
	maxQueued int
	sumQueued int
	maxRun    int
	sumRun    int
}

// cpuTotals are the CPU the server and its workers used so far.
type cpuTotals struct{ server, workers time.Duration }

// monitor samples the server's and its workers' memory every 250 ms and
// the engine's queue (/metrics) every second.
type monitor struct {
	s    *server
	quit chan struct{}
	wg   sync.WaitGroup

	mu  sync.Mutex
	res resources
	q   queueStats
}

func startMonitor(s *server) *monitor {
	m := &monitor{s: s, quit: make(chan struct{})}
	if p, ok := readProc(s.pid); ok {
		m.res.serverRSSStart, m.res.serverRSSPeak = p.rss, p.rss
	}
	m.every(250*time.Millisecond, m.sampleProcs)
	m.every(time.Second, m.sampleQueue)
	return m
}

// every runs sample once a period until the monitor stops.
func (m *monitor) every(period time.Duration, sample func()) {
	m.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-m.quit:
				return
			case <-t.C:
				sample()
			}
		}
	})
}

func (m *monitor) sampleProcs() {
	srv, ok := readProc(m.s.pid)
	if !ok {
		return
	}
	kids := children(m.s.pid)
	var rss, priv int64
	m.s.seenMu.Lock()
	for pid, k := range kids {
		rss += k.rss
		priv += k.private
		m.s.seen[pid] = k.start
	}
	seen := len(m.s.seen)
	m.s.seenMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &m.res
	r.serverRSSPeak = max(r.serverRSSPeak, srv.rss)
	r.workersPeak = max(r.workersPeak, len(kids))
	if rss > r.workersRSSPeak {
		r.workersRSSPeak, r.workersAtRSS = rss, len(kids)
	}
	r.workersPrivPeak = max(r.workersPrivPeak, priv)
	r.totalRSSPeak = max(r.totalRSSPeak, srv.rss+rss)
	r.workersSeen = seen
}

var gaugeRE = regexp.MustCompile(`(?m)^(datachat_sql_queue_depth|datachat_sql_running_queries) (\S+)$`)

func (m *monitor) sampleQueue() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, b, err := call(ctx, m.s, m.s.key, "GET", "/metrics", "", nil)
	if err != nil || st != 200 {
		return
	}
	var queued, running int
	for _, g := range gaugeRE.FindAllSubmatch(b, -1) {
		v, _ := strconv.ParseFloat(string(g[2]), 64)
		if string(g[1]) == "datachat_sql_queue_depth" {
			queued = int(v)
		} else {
			running = int(v)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.q.samples++
	m.q.maxQueued = max(m.q.maxQueued, queued)
	m.q.sumQueued += queued
	m.q.maxRun = max(m.q.maxRun, running)
	m.q.sumRun += running
}

// cpu returns the CPU the server and its workers have used: the workers'
// is that of the live ones plus what ended ones left in the server's
// children's time.
func (m *monitor) cpu() cpuTotals {
	srv, _ := readProc(m.s.pid)
	t := cpuTotals{server: srv.cpu, workers: srv.ccpu}
	for _, k := range children(m.s.pid) {
		t.workers += k.cpu
	}
	return t
}

func (m *monitor) stop() (resources, queueStats) {
	close(m.quit)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.res, m.q
}

// scrapeSQLMetrics summarises the server's own histogram of SQL durations
// (datachat_sql_query_duration_seconds), one line per label set: count,
// mean, and the share within 100 ms and within 1 s.
func scrapeSQLMetrics(s *server) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, b, err := call(ctx, s, s.key, "GET", "/metrics", "", nil)
	if err != nil || st != 200 {
		return ""
	}
	type hist struct {
		count, sum, within100ms, within1s float64
	}
	hs := map[string]*hist{}
	var names []string
	re := regexp.MustCompile(`^datachat_sql_query_duration_seconds_(bucket|sum|count)\{(.*?),?(?:le="([^"]+)")?\} (\S+)$`)
	for _, l := range strings.Split(string(b), "\n") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		labels := m[2]
		h := hs[labels]
		if h == nil {
			h = &hist{}
			hs[labels] = h
			names = append(names, labels)
		}
		v, _ := strconv.ParseFloat(m[4], 64)
		switch {
		case m[1] == "sum":
			h.sum = v
		case m[1] == "count":
			h.count = v
		case m[3] == "0.1":
			h.within100ms = v
		case m[3] == "1":
			h.within1s = v
		}
	}
	var out []string
	for _, n := range names {
		h := hs[n]
		if h.count == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("- {%s}: %.0f queries, mean %.1f ms, %.1f %% within 100 ms, %.1f %% within 1 s",
			n, h.count, h.sum/h.count*1000, h.within100ms/h.count*100, h.within1s/h.count*100))
	}
	return strings.Join(out, "\n")
}

// baselineResult is the GROUP BY through bare DuckDB.
type baselineResult struct {
	lat       []time.Duration
	errs      int
	wall      time.Duration
	cpu       time.Duration // this process's, while the baseline ran
	threads   int
	instances int
	version   string
}

// runBaseline runs the GROUP BY through bare DuckDB in this process, with
// each conversation's CSV converted to Parquet and the server's default
// threads (the cores) and memory limit: N goroutines with the same think
// time, for the same duration. By default one instance holds a view per
// conversation; -baseline-per-conversation gives each its own instance, as
// the server does (but in one process).
func runBaseline(o options, work string, convs []*conv) *baselineResult {
	dir := filepath.Join(work, "baseline")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("%v", err)
	}
	threads := runtime.NumCPU()
	ctx := context.Background()
	open := func(name string, conns int) *sql.DB {
		connector, err := duckdbdriver.NewConnector("?temp_directory="+filepath.Join(dir, "spill-"+name), nil)
		if err != nil {
			fatalf("baseline: %v", err)
		}
		db := sql.OpenDB(connector)
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		if _, err := db.ExecContext(ctx, fmt.Sprintf("SET threads = %d; SET memory_limit = '1GiB'; SET parquet_metadata_cache = true", threads)); err != nil {
			fatalf("baseline: %v", err)
		}
		return db
	}
	dbs := make([]*sql.DB, len(convs))
	queries := make([]string, len(convs))
	shared := open("shared", len(convs))
	defer shared.Close()
	for i, c := range convs {
		pq := filepath.Join(dir, fmt.Sprintf("sales-%03d.parquet", c.i))
		if _, err := shared.ExecContext(ctx, fmt.Sprintf("COPY (SELECT * FROM read_csv('%s')) TO '%s' (FORMAT parquet)", c.csvPath, pq)); err != nil {
			fatalf("baseline: %v", err)
		}
		view := fmt.Sprintf("sales_%03d", c.i)
		dbs[i] = shared
		if o.baselinePerConv {
			view = "sales"
			dbs[i] = open(fmt.Sprint(c.i), 1)
			defer dbs[i].Close()
		}
		if _, err := dbs[i].ExecContext(ctx, fmt.Sprintf("CREATE VIEW %s AS SELECT * FROM read_parquet('%s')", view, pq)); err != nil {
			fatalf("baseline: %v", err)
		}
		queries[i] = strings.Replace(groupBy, "FROM sales", "FROM "+view, 1)
	}
	r := &baselineResult{threads: threads, instances: 1}
	if o.baselinePerConv {
		r.instances = len(convs)
	}
	shared.QueryRowContext(ctx, "SELECT version()").Scan(&r.version)
	log.Printf("baseline: bare DuckDB (%d instances), %d goroutines for %v", r.instances, len(convs), o.duration)

	lctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs atomic.Int64
	cpu0 := serve.SelfCPU()
	start := time.Now()
	for i, c := range convs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(o.seed, uint64(c.i)+1<<32))
			if !sleep(lctx, time.Duration(c.i)*time.Second/time.Duration(o.n)) {
				return
			}
			var mine []time.Duration
			for ops := 0; ops < o.maxOps; ops++ {
				if o.think > 0 && !sleep(lctx, time.Duration(rng.Int64N(int64(o.think)))) {
					break
				}
				if lctx.Err() != nil {
					break
				}
				t0 := time.Now()
				n, err := countRows(ctx, dbs[i], queries[i])
				if err != nil || n != len(regions) {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			r.lat = append(r.lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.wall = time.Since(start)
	r.cpu = serve.SelfCPU() - cpu0
	r.errs = int(errs.Load())
	slices.Sort(r.lat)
	return r
}

// countRows runs q and reads every row, as the server does.
func countRows(ctx context.Context, db *sql.DB, q string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	var region string
	var orders int64
	var revenue float64
	for rows.Next() {
		if err := rows.Scan(&region, &orders, &revenue); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	v := float64(d.Microseconds()) / 1000
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func mib(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// stats are one row of the per-kind table.
type stats struct {
	n, ok, busy, failed int
	lat                 []time.Duration // of successful requests, sorted
}

func collect(samples []sample, keep func(sample) bool) stats {
	var s stats
	for _, sm := range samples {
		if !keep(sm) {
			continue
		}
		s.n++
		switch sm.outcome {
		case outcomeOK:
			s.ok++
			s.lat = append(s.lat, sm.took)
		case outcomeBusy:
			s.busy++
		case outcomeFailed:
			s.failed++
		}
	}
	slices.Sort(s.lat)
	return s
}

func (s stats) row(name string, wall time.Duration) string {
	if s.n == 0 {
		return fmt.Sprintf("| %s | 0 | | | | | | | |", name)
	}
	return fmt.Sprintf("| %s | %d | %.1f | %d | %d | %s | %s | %s | %s |", name, s.n, float64(s.n)/wall.Seconds(), s.busy, s.failed,
		ms(percentile(s.lat, .5)), ms(percentile(s.lat, .9)), ms(percentile(s.lat, .99)), ms(percentile(s.lat, 1)))
}

func printReport(o options, cmdline string, m machine, r *loadResult, base *baselineResult) {
	all := func(k kind) func(sample) bool { return func(s sample) bool { return s.kind == k } }
	sqlAll := collect(r.samples, all(opSQL))
	chat := collect(r.samples, all(opChat))

	fmt.Println()
	fmt.Println("## datachat SQL load")
	fmt.Println()
	fmt.Printf("Command: `%s`\n\n", cmdline)
	fmt.Printf("Machine: %s; at the end %s.", m, r.loadEnd)
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err == nil && strings.TrimSpace(string(b)) == "1" {
		fmt.Print(" The kernel groups processes by session (sched_autogroup): the harness's session gets a fair share of the CPU against each other busy session, whatever its nice.")
	}
	fmt.Print("\n\n")
	var extra []string
	for _, kv := range r.serverEnv {
		if strings.HasPrefix(kv, "DATACHAT_") && !strings.HasPrefix(kv, "DATACHAT_DATA_DIR=") && !strings.HasPrefix(kv, "DATACHAT_ADDR=") &&
			!strings.HasPrefix(kv, "DATACHAT_LOG_") {
			extra = append(extra, kv)
		}
	}
	fmt.Printf("Server: `datachat serve` with %s (SQL engine otherwise at its defaults); provider: llmtest OpenAI fake in the harness. Log: %s%s.\n\n",
		strings.Join(extra, ", "), r.serveLog, map[bool]string{true: "", false: " (removed; -keep keeps it)"}[o.keep])
	fmt.Printf("Load: %d users with one conversation each (a %d-row, 5-column CSV as table `sales`), think time uniform in [0, %v) before each operation, mix %s; query `%s`.\n\n",
		o.n, o.rows, o.think, mixText(o.mix), groupBy)

	sqlSt := sqlAll
	fmt.Println("| N | duration | requests | sql GROUP BY p50 / p90 / p99 / max (ms) | busy 503 (sql / chat / upload / delete) | other errors (sql / chat / upload / delete) | chat turn p50 / p99 (ms) | server CPU (cores) | workers CPU (cores) | server RSS start → peak (MiB) | workers at peak: processes, RSS sum (private) (MiB) | baseline bare DuckDB p50 / p99 (ms) |")
	fmt.Println("|---:|---:|---:|---|---|---|---|---:|---:|---|---|---|")
	var busyK, failK []string
	for k := range numKinds {
		st := collect(r.samples, all(k))
		busyK = append(busyK, strconv.Itoa(st.busy))
		failK = append(failK, strconv.Itoa(st.failed))
	}
	baseCol := "—"
	if base != nil {
		baseCol = ms(percentile(base.lat, .5)) + " / " + ms(percentile(base.lat, .99))
	}
	fmt.Printf("| %d | %v | %d | %s / %s / %s / %s | %s | %s | %s / %s | %.2f | %.2f | %s → %s | %d, %s (%s) | %s |\n\n",
		o.n, r.wall.Round(time.Second), len(r.samples),
		ms(percentile(sqlSt.lat, .5)), ms(percentile(sqlSt.lat, .9)), ms(percentile(sqlSt.lat, .99)), ms(percentile(sqlSt.lat, 1)),
		strings.Join(busyK, " / "), strings.Join(failK, " / "), ms(percentile(chat.lat, .5)), ms(percentile(chat.lat, .99)),
		r.serverCPU.Seconds()/r.wall.Seconds(), r.workerCPU.Seconds()/r.wall.Seconds(),
		mib(r.res.serverRSSStart), mib(r.res.serverRSSPeak), r.res.workersAtRSS, mib(r.res.workersRSSPeak), mib(r.res.workersPrivPeak), baseCol)

	fmt.Println("| requests | count | per s | busy 503 | other errors | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Println(sqlAll.row("`/sql` GROUP BY, all", r.wall))
	fmt.Println(collect(r.samples, func(s sample) bool { return s.kind == opSQL && !s.cold }).row("`/sql` GROUP BY, tables unchanged since the last query", r.wall))
	coldName := "`/sql` GROUP BY, first after an upload or delete (a new worker)"
	if !o.warmup {
		coldName = "`/sql` GROUP BY, first after the start, an upload or a delete (a new worker)"
	}
	fmt.Println(collect(r.samples, func(s sample) bool { return s.kind == opSQL && s.cold }).row(coldName, r.wall))
	fmt.Println(chat.row("chat turn (`/chat/query`: 2 model calls + the GROUP BY)", r.wall))
	fmt.Println(collect(r.samples, all(opUpload)).row(fmt.Sprintf("upload of a %d-row CSV", o.extraRows), r.wall))
	fmt.Println(collect(r.samples, all(opDelete)).row("delete of a second dataset", r.wall))
	if base != nil {
		b := stats{n: len(base.lat) + base.errs, ok: len(base.lat), failed: base.errs, lat: base.lat}
		fmt.Println(b.row(fmt.Sprintf("baseline: the GROUP BY through bare DuckDB in-process (%s, %d threads, %d instance(s); %.2f cores)",
			base.version, base.threads, base.instances, base.cpu.Seconds()/base.wall.Seconds()), base.wall))
	}
	var engine []time.Duration
	for _, s := range r.samples {
		if s.kind == opSQL && s.outcome == outcomeOK {
			engine = append(engine, time.Duration(s.engineMS*float64(time.Millisecond)))
		}
	}
	slices.Sort(engine)
	fmt.Println()
	fmt.Printf("Setup: %d uploads of the %d-row CSV, 8 at a time: p50 %s ms, max %s ms.\n",
		len(r.setupUploads), o.rows, ms(percentile(r.setupUploads, .5)), ms(percentile(r.setupUploads, 1)))
	if len(r.warmup) > 0 {
		fmt.Printf("Warm-up, before the load: each conversation's first GROUP BY (it opens the conversation's worker), 8 at a time: p50 %s ms, max %s ms.\n",
			ms(percentile(r.warmup, .5)), ms(percentile(r.warmup, 1)))
	}
	fmt.Printf("`/sql` elapsed_ms (DuckDB's execution and fetch inside the worker): p50 %s ms, p99 %s ms, max %s ms; the rest of the latency is HTTP, the store, the queue, the worker's start and the pipe.\n",
		ms(percentile(engine, .5)), ms(percentile(engine, .99)), ms(percentile(engine, 1)))
	if r.queue.samples > 0 {
		fmt.Printf("SQL engine (from /metrics each second): queued max %d, mean %.1f; running max %d, mean %.1f.\n",
			r.queue.maxQueued, float64(r.queue.sumQueued)/float64(r.queue.samples), r.queue.maxRun, float64(r.queue.sumRun)/float64(r.queue.samples))
	}
	fmt.Printf("Processes: server RSS peak %s MiB; worker processes at most %d at once (%d distinct over the run), their RSS summed at most %s MiB (%s MiB private), server + workers at most %s MiB.\n",
		mib(r.res.serverRSSPeak), r.res.workersPeak, r.res.workersSeen, mib(r.res.workersRSSPeak), mib(r.res.workersPrivPeak), mib(r.res.totalRSSPeak))
	ours := (r.serverCPU + r.workerCPU + r.harnessCPU).Seconds() / r.wall.Seconds()
	fmt.Printf("CPU during the load, in cores: server %.2f, workers %.2f, harness (client, fake) %.2f; everything else on the machine %.2f (the machine was %.2f of %d busy).\n",
		r.serverCPU.Seconds()/r.wall.Seconds(), r.workerCPU.Seconds()/r.wall.Seconds(), r.harnessCPU.Seconds()/r.wall.Seconds(),
		max(0, r.machineBusy-ours), r.machineBusy, runtime.NumCPU())
	if n := len(r.samples); n > 0 {
		fmt.Printf("CPU per operation (server + workers over all %d operations): %.1f ms.\n", n, (r.serverCPU+r.workerCPU).Seconds()*1000/float64(n))
	}

	timeline(o, r)
	errorList(r.samples)

	fmt.Println()
	fmt.Printf("Targets (%d active conversations, mixed load):\n", o.n)
	totalBusy := 0
	for _, s := range r.samples {
		if s.outcome == outcomeBusy {
			totalBusy++
		}
	}
	verdict := func(okay bool) string { return map[bool]string{true: "met", false: "MISSED"}[okay] }
	p50, p99 := percentile(sqlAll.lat, .5), percentile(sqlAll.lat, .99)
	fmt.Printf("- no busy refusal for a user within their limits (each user runs one request at a time): %d busy — %s\n", totalBusy, verdict(totalBusy == 0))
	fmt.Printf("- small GROUP BY p50 ≤ 100 ms: %s ms — %s\n", ms(p50), verdict(len(sqlAll.lat) > 0 && p50 <= 100*time.Millisecond))
	fmt.Printf("- small GROUP BY p99 ≤ 1 s: %s ms — %s\n", ms(p99), verdict(len(sqlAll.lat) > 0 && p99 <= time.Second))
	if r.sqlMetrics != "" {
		fmt.Println()
		fmt.Println("The server's own SQL histogram, datachat_sql_query_duration_seconds (queueing included; source chat: execute_sql in chat turns, api: `/sql`):")
		fmt.Println()
		fmt.Println(r.sqlMetrics)
	}
}

// timeline prints the GROUP BY latency and the chat turns by window, to show
// drift over the run.
func timeline(o options, r *loadResult) {
	win := max(o.duration/10, 10*time.Second)
	n := int((o.duration + win - 1) / win)
	if n <= 1 {
		return
	}
	fmt.Println()
	fmt.Println("| window | sql n | sql p50 (ms) | sql p99 (ms) | chat n | chat p50 (ms) | busy | other errors |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	for w := range n {
		in := func(k kind) func(sample) bool {
			return func(s sample) bool {
				return s.kind == k && s.at >= time.Duration(w)*win && (s.at < time.Duration(w+1)*win || w == n-1)
			}
		}
		sq, ch := collect(r.samples, in(opSQL)), collect(r.samples, in(opChat))
		bz, fl := 0, 0
		for k := range numKinds {
			st := collect(r.samples, in(k))
			bz += st.busy
			fl += st.failed
		}
		fmt.Printf("| %v–%v | %d | %s | %s | %d | %s | %d | %d |\n", time.Duration(w)*win, time.Duration(w+1)*win,
			sq.n, ms(percentile(sq.lat, .5)), ms(percentile(sq.lat, .99)), ch.n, ms(percentile(ch.lat, .5)), bz, fl)
	}
}

// errorList prints each distinct busy or error message with its count.
func errorList(samples []sample) {
	counts := map[string]int{}
	for _, s := range samples {
		if s.outcome != outcomeOK {
			msg := s.msg
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
			counts[fmt.Sprintf("%s %s: %s", kindNames[s.kind], map[outcome]string{outcomeBusy: "busy", outcomeFailed: "error"}[s.outcome], msg)]++
		}
	}
	if len(counts) == 0 {
		return
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	fmt.Println()
	fmt.Println("Busy refusals and errors:")
	for _, k := range keys {
		fmt.Printf("- %d× %s\n", counts[k], k)
	}
}
