// Command tokens measures the path a token takes through datachat, from the
// provider's stream to the browser's WebSocket (BENCHMARKS.md, "Token
// latency"): N conversations stream answers at once from an in-process fake
// of the OpenAI protocol (internal/llmtest, each chunk stamped with the time
// it was written) through `datachat serve` to WebSocket clients, and the
// latency of every token is the client's read minus the fake's stamp. The
// baseline, run in the same invocation, reads the same fake's streams
// directly over HTTP: the floor the fake, the clients and loopback set on
// this machine.
//
// Several builds can be compared in one run (before and after a change),
// each against a fresh server, in rounds that alternate them with the
// baseline, so that all see the same machine:
//
//	go run ./bench/tokens                                  # this tree, N = 100 and 500
//	go run ./bench/tokens -bin before=/tmp/old,after=/tmp/new -rounds 2
//	go run ./bench/tokens -n 500 -profile /tmp/prof        # DATACHAT_PROFILE_DIR for each server
//
// Every loop is bounded by count and time; traffic goes to 127.0.0.1 only.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/llmtest"
)

type options struct {
	levels   []int
	turns    int
	tokens   int
	rate     float64
	think    time.Duration
	duration time.Duration
	tool     string
	rounds   int
	bins     []build
	profile  string
	trace    bool
	env      map[string]string
	relay    bool
	keep     bool
	// stalled.go
	stalled   int
	stalledKB int
	settle    time.Duration
	reading   bool // with stalled: a third run, NAME+reading, whose extra clients read
}

type build struct{ name, path string }

func main() {
	log.SetFlags(0)
	if upstream := os.Getenv(relayEnv); upstream != "" {
		relayMain(upstream)
		return
	}
	debug.SetGCPercent(400) // the harness shares the cores with the server
	var o options
	levels := flag.String("n", "100,500", "comma-separated numbers of concurrent conversations")
	flag.IntVar(&o.turns, "turns", 3, "turns per conversation")
	flag.IntVar(&o.tokens, "tokens", 40, "streamed chunks (tokens) per answer")
	flag.Float64Var(&o.rate, "rate", 20, "tokens per second each answer streams at")
	flag.DurationVar(&o.think, "think", time.Second, "longest pause between a conversation's turns (random, uniform)")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "per run: no turn starts after this, and each turn must end within it")
	flag.StringVar(&o.tool, "tool", "search_documents", "the tool the fake calls before each answer (search_documents, or none)")
	flag.IntVar(&o.rounds, "rounds", 1, "times each level runs the baseline and every build, alternating")
	bins := flag.String("bin", "", "builds to compare, name=path,… (default: go build ./cmd/datachat, named head)")
	flag.StringVar(&o.profile, "profile", "", "directory: each server runs with DATACHAT_PROFILE_DIR=DIR/NAME-nN-rR")
	flag.BoolVar(&o.trace, "profile-trace", false, "with -profile: the execution trace and mutex and block profiles too (DATACHAT_PROFILE_TRACE; they nearly double the server's CPU)")
	serverEnv := flag.String("server-env", "", "extra environment of every server, K=V,… (GOGC=400, GOMAXPROCS=1, …)")
	flag.BoolVar(&o.relay, "relay", true, "also run the minimal relay (relay.go): the least any server relaying these answers adds")
	flag.BoolVar(&o.keep, "keep", false, "keep the servers' data directories and logs")
	flag.IntVar(&o.stalled, "stalled", 0, "stalled clients beside the N normal ones in a second run of each build, NAME+stalled (stalled.go)")
	flag.IntVar(&o.stalledKB, "stalled-kb", 1024, "KiB of answer each stalled client is sent")
	flag.BoolVar(&o.reading, "stalled-control", false, "with -stalled: a third run of each build, NAME+reading, whose S extra clients ask the same and read every frame (the cost of the extra turns, apart from the clients' stalling)")
	flag.DurationVar(&o.settle, "settle", 0, "with -stalled: after the run, close every client, wait this long and read the server's RSS again (0: don't)")
	o.levels, o.env = serve.ParseFlags(levels, serverEnv)
	if o.tool != "search_documents" && o.tool != "none" {
		log.Fatalf("-tool: want search_documents or none, got %q", o.tool)
	}
	work, done, err := serve.WorkDir("tokens", o.keep)
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	for _, kv := range strings.Split(*bins, ",") {
		if name, path, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			o.bins = append(o.bins, build{name, path})
		}
	}
	if len(o.bins) == 0 {
		path, err := serve.Binary(work, "")
		if err != nil {
			log.Fatal(err)
		}
		o.bins = []build{{"head", path}}
	}
	printMachine()

	var rows []result
	for _, n := range o.levels {
		for round := 1; round <= o.rounds; round++ {
			// The baseline between the builds, in a rotating order.
			runs := []string{"baseline"}
			if o.relay {
				runs = append(runs, "relay")
			}
			for _, b := range o.bins {
				runs = append(runs, b.name)
				if o.stalled > 0 {
					runs = append(runs, b.name+stalledSuffix)
					if o.reading {
						runs = append(runs, b.name+readingSuffix)
					}
				}
			}
			k := (round - 1) % len(runs)
			runs = append(runs[k:], runs[:k]...)
			for _, what := range runs {
				var r result
				switch what {
				case "baseline":
					r = runBaseline(o, n)
				case "relay":
					r = runRelay(o, n)
				default:
					name, extra := extraClients(what)
					r = runServer(o, work, n, round, binNamed(o.bins, name), extra)
				}
				r.n, r.round, r.what = n, round, what
				fmt.Println(r.line())
				if r.settledRSS > 0 {
					fmt.Printf("  RSS (MiB): at rest %.0f, peak %.0f, %s after every client left %.0f (%.2f× rest)\n    at rest: %s\n    after:   %s\n", r.restRSS, r.peakRSS, o.settle, r.settledRSS, r.settledRSS/r.restRSS, r.restMemory, r.settledMemory)
				}
				rows = append(rows, r)
			}
		}
	}
	fmt.Println()
	fmt.Println("| N | round | run | turns | tokens | latency p50 / p90 / p99 / max (ms) | first token p50 / p99 (ms) | server CPU per token (µs) | harness CPU per token (µs) | server CPU (cores) | server peak RSS during the run (MiB) | stalled answers stored complete | errors | lost |")
	fmt.Println("|---:|---:|---|---:|---:|---|---|---:|---:|---:|---:|---|---:|---:|")
	for _, r := range rows {
		fmt.Println(r.row())
	}
}

func names(bins []build) []string {
	var s []string
	for _, b := range bins {
		s = append(s, b.name)
	}
	return s
}

func binNamed(bins []build, name string) build {
	for _, b := range bins {
		if b.name == name {
			return b
		}
	}
	panic(name)
}

func printMachine() { fmt.Print(report.Machine()) }

// result is one run: the baseline or one build at one N.
type result struct {
	n, round      int
	what          string
	lat           []time.Duration // sorted
	byTurn        map[int][]time.Duration
	turns         int
	tokens        int // stamped tokens received
	lost          int // stamped tokens sent in completed turns but not received
	serverCPU     time.Duration
	harnessCPU    time.Duration
	wall          time.Duration
	errs          map[string]int
	loadAverage   string
	first         []time.Duration // chat_send to the first token, sorted
	peakRSS       float64         // MiB, from the load's start (start-up's peak reset); 0 for the baseline and the relay
	restRSS       float64         // MiB: the server's RSS before the load
	settledRSS    float64         // MiB: its RSS -settle after every client left; 0: not read
	settledMemory string          // what the Go runtime held then (memoryBreakdown)
	restMemory    string          // and at rest, before the load
	stalled       string          // "complete of stalled", or "-"
}

func (r result) errCount() int {
	n := 0
	for _, v := range r.errs {
		n += v
	}
	return n
}

func (r result) perToken(d time.Duration) string {
	if r.tokens == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(d.Nanoseconds())/1e3/float64(r.tokens))
}

func (r result) line() string {
	var kinds []string
	for k, v := range r.errs {
		kinds = append(kinds, fmt.Sprintf("%d× %s", v, k))
	}
	slices.Sort(kinds)
	return fmt.Sprintf("N=%d round %d %s: %d turns, %d tokens in %.1fs; latency p50 %s p90 %s p99 %s max %s ms (p99 by turn %s); CPU per token: server %s µs, harness %s µs; errors %v; lost %d; load %s",
		r.n, r.round, r.what, r.turns, r.tokens, r.wall.Seconds(),
		report.MS(report.Percentile(r.lat, .5)), report.MS(report.Percentile(r.lat, .9)), report.MS(report.Percentile(r.lat, .99)), report.MS(report.Percentile(r.lat, 1)), r.p99ByTurn(),
		r.perToken(r.serverCPU), r.perToken(r.harnessCPU), kinds, r.lost, r.loadAverage)
}

func (r result) row() string {
	server, cores := "-", "-"
	if r.what != "baseline" {
		server, cores = r.perToken(r.serverCPU), fmt.Sprintf("%.2f", r.serverCPU.Seconds()/r.wall.Seconds())
	}
	first, rss, stalled := "-", "-", cmp.Or(r.stalled, "-")
	if len(r.first) > 0 {
		first = report.MS(report.Percentile(r.first, .5)) + " / " + report.MS(report.Percentile(r.first, .99))
	}
	if r.peakRSS > 0 {
		rss = fmt.Sprintf("%.0f", r.peakRSS)
	}
	return fmt.Sprintf("| %d | %d | %s | %d | %d | %s / %s / **%s** / %s | %s | %s | %s | %s | %s | %s | %d | %d |",
		r.n, r.round, r.what, r.turns, r.tokens,
		report.MS(report.Percentile(r.lat, .5)), report.MS(report.Percentile(r.lat, .9)), report.MS(report.Percentile(r.lat, .99)), report.MS(report.Percentile(r.lat, 1)),
		first, server, r.perToken(r.harnessCPU), cores, rss, stalled, r.errCount(), r.lost)
}

// chunks is the answer every turn streams.
func chunks(o options) []string {
	c := make([]string, o.tokens)
	for i := range c {
		c[i] = fmt.Sprintf("tok%02d ", i)
	}
	return c
}

func delay(o options) llmtest.Duration {
	return llmtest.Duration(time.Duration(float64(time.Second) / o.rate))
}

// conversation is what one client saw.
type conversation struct {
	first  []time.Duration
	lat    []time.Duration
	byTurn map[int][]time.Duration // lat by the turn's index
	tokens int
	lost   int
	turns  int
	errs   map[string]int
}

func (c *conversation) addTurn(t int, d time.Duration) {
	if c.byTurn == nil {
		c.byTurn = map[int][]time.Duration{}
	}
	c.byTurn[t] = append(c.byTurn[t], d)
}

func (c *conversation) fail(kind string) {
	if c.errs == nil {
		c.errs = map[string]int{}
	}
	c.errs[kind]++
}

// drive runs n clients, the i-th starting i/n of a second in, each running
// its turns through one with a pause of up to o.think between them. No turn
// starts after o.duration, and each ends by then plus o.duration.
func drive(o options, n int, turn func(ctx context.Context, i, t int, c *conversation) error) (results []*conversation, wall time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	results = make([]*conversation, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		results[i] = &conversation{}
		wg.Go(func() {
			c := results[i]
			time.Sleep(time.Duration(i) * time.Second / time.Duration(n))
			for t := range o.turns {
				if t > 0 && o.think > 0 {
					time.Sleep(time.Duration(rand.Int64N(int64(o.think))))
				}
				if ctx.Err() != nil {
					return
				}
				tctx, tcancel := context.WithTimeout(context.Background(), o.duration)
				err := turn(tctx, i, t, c)
				tcancel()
				if err != nil {
					c.fail(err.Error())
					return
				}
			}
		})
	}
	wg.Wait()
	return results, time.Since(start)
}

func collect(r *result, convs []*conversation) {
	for _, c := range convs {
		r.lat = append(r.lat, c.lat...)
		r.first = append(r.first, c.first...)
		for t, l := range c.byTurn {
			if r.byTurn == nil {
				r.byTurn = map[int][]time.Duration{}
			}
			r.byTurn[t] = append(r.byTurn[t], l...)
		}
		r.tokens += c.tokens
		r.lost += c.lost
		r.turns += c.turns
		for k, v := range c.errs {
			if r.errs == nil {
				r.errs = map[string]int{}
			}
			r.errs[k] += v
		}
	}
	slices.Sort(r.lat)
	slices.Sort(r.first)
	for _, l := range r.byTurn {
		slices.Sort(l)
	}
}

// p99ByTurn is the p99 latency of each turn's tokens (the first turns of
// all conversations start within the first second).
func (r result) p99ByTurn() string {
	var s []string
	for t := range len(r.byTurn) {
		s = append(s, report.MS(report.Percentile(r.byTurn[t], .99)))
	}
	return strings.Join(s, " / ")
}

// runBaseline streams the answers from a fake straight to n HTTP clients.
func runBaseline(o options, n int) result {
	fake, err := llmtest.Start(llmtest.OpenAI, llmtest.Script{StampTime: true,
		Default: &llmtest.Turn{Text: chunks(o), Delay: delay(o)}}, "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	r := result{loadAverage: report.LoadAvg()}
	self0 := serve.SelfCPU()
	convs, wall := drive(o, n, func(ctx context.Context, _, t int, c *conversation) error {
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", fake.URL+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return errors.New("baseline request failed")
		}
		defer resp.Body.Close()
		got := 0
		llmtest.ReadStampedStream(resp.Body, func(lat time.Duration) {
			c.lat = append(c.lat, lat)
			c.addTurn(t, lat)
			got++
		})
		c.turns++
		c.tokens += got
		c.lost += o.tokens - got
		return nil
	})
	r.wall, r.harnessCPU = wall, serve.SelfCPU()-self0
	collect(&r, convs)
	return r
}

// startFake starts the fake provider for n conversations on 127.0.0.1.
func startFake(o options, n int) (*llmtest.Server, error) {
	return llmtest.Start(llmtest.OpenAI, script(o, n), "127.0.0.1:0")
}

// script is what the fake answers n conversations: for each turn a call of
// o.tool (unless none), then, once the tool's result is sent, the answer.
func script(o options, n int) llmtest.Script {
	s := llmtest.Script{StampTime: true, Default: &llmtest.Turn{Text: []string{"(script exhausted)"}}}
	s.Turns = stalledTurns(o)
	for range n * o.turns {
		answer := llmtest.Turn{Text: chunks(o), Delay: delay(o)}
		if o.tool == "none" {
			s.Turns = append(s.Turns, answer)
			continue
		}
		answer.Match = &llmtest.Match{LastRole: "tool"}
		s.Turns = append(s.Turns,
			llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call(o.tool, `{"query":"regional revenue"}`)}},
			answer)
	}
	return s
}
