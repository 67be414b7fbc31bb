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
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
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
	if o.bin, err = serve.Binary(work, o.bin); err != nil {
		fatalf("%v", err)
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
