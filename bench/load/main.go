// Command load is datachat's load harness (BENCHMARKS.md, "Load"). It builds
// datachat and runs `datachat serve` as its own process, against an
// in-process provider fake (internal/llmtest, OpenAI protocol) that answers
// each question with one tool call, then streams time-stamped tokens at a
// fixed rate. N conversations then chat over WebSockets on 127.0.0.1, a
// bounded number of turns each within a bounded time. It reports the latency
// datachat adds between a token leaving the fake and reaching the client,
// tokens and turns per second, the server's CPU and memory, errors, and it
// checks that every token arrived and every answer was stored complete.
//
//	go run ./bench/load                      # N = 100, 500, 1000 (about 2 minutes)
//	go run ./bench/load -n 100 -turns 3      # one level, shorter
//	go run ./bench/load -footprint           # binary size, start time, idle memory
//
// Every loop is bounded by count and time, and traffic goes to 127.0.0.1 only.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/llmtest"
)

type options struct {
	levels    []int
	turns     int
	duration  time.Duration
	tokens    int
	rate      float64
	think     time.Duration
	tool      string
	idle      int
	bin       string
	footprint bool
	baseline  bool
	keep      bool
	cpus      string
	env       map[string]string
}

func main() {
	log.SetFlags(0)
	// The fake keeps every request it answered; collecting less often keeps
	// the harness's own CPU, which shares the machine with the server, down.
	debug.SetGCPercent(400)
	var o options
	levels := flag.String("n", "100,500,1000", "comma-separated numbers of concurrent conversations, one run each")
	flag.IntVar(&o.turns, "turns", 5, "turns per conversation")
	flag.DurationVar(&o.duration, "duration", 90*time.Second, "per level: no turn starts after this")
	flag.IntVar(&o.tokens, "tokens", 40, "streamed chunks (tokens) per answer")
	flag.Float64Var(&o.rate, "rate", 20, "tokens per second each answer streams at")
	flag.DurationVar(&o.think, "think", time.Second, "longest pause between a conversation's turns (random, uniform)")
	flag.StringVar(&o.tool, "tool", "search_documents", "the tool the fake calls before answering: search_documents or execute_sql (SELECT 42, a DuckDB instance per conversation)")
	flag.IntVar(&o.idle, "idle", 1000, "idle WebSockets opened for the memory-per-socket figure (0: skip)")
	flag.StringVar(&o.bin, "bin", "", "datachat binary to run (default: go build ./cmd/datachat into a temp dir)")
	flag.BoolVar(&o.footprint, "footprint", false, "measure binary size, cold start and idle memory only")
	flag.BoolVar(&o.baseline, "baseline", true, "also measure the fake-to-client path without datachat, at each level")
	flag.BoolVar(&o.keep, "keep", false, "keep the servers' data directories and logs")
	flag.StringVar(&o.cpus, "server-cpus", "", "run the server pinned to these CPUs (taskset -c LIST; run the harness itself under taskset on the others)")
	serverEnv := flag.String("server-env", "", "extra environment of the server, KEY=VALUE,… (e.g. GOGC=200)")
	o.levels, o.env = serve.ParseFlags(levels, serverEnv)
	if o.tool != "search_documents" && o.tool != "execute_sql" {
		log.Fatalf("-tool: want search_documents or execute_sql, got %q", o.tool)
	}

	work, done, err := serve.WorkDir("load", o.keep)
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	if o.bin, err = serve.Binary(work, o.bin); err != nil {
		log.Fatal(err)
	}
	printMachine(o.bin)
	if o.footprint {
		footprint(o, work)
		return
	}
	var rows []string
	for _, n := range o.levels {
		rows = append(rows, runLevel(o, work, n))
	}
	fmt.Println()
	fmt.Println("| N | turns | turns/s | tokens | tokens/s | added latency p50 / p99 / max (ms) | baseline p50 / p99 (ms) | server CPU (cores) | server RSS idle → peak (MB) | errors | busy | lost tokens | incomplete messages |")
	fmt.Println("|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Println(r)
	}
}

func printMachine(bin string) {
	fmt.Print(report.Machine())
	if fi, err := os.Stat(bin); err == nil {
		fmt.Printf("binary: %s, %.1f MB\n", bin, float64(fi.Size())/1e6)
	}
}

// server is a `datachat serve` process.
type server struct {
	cmd  *exec.Cmd
	proc *serve.Process
	pid  int
	addr string
	key  string
	dir  string
	log  *os.File
}

// startServer starts serve on a fresh data directory and waits for /healthz;
// it returns the time that took.
func startServer(o options, work, name string, env map[string]string) (*server, time.Duration) {
	dir, logf, err := serve.Fresh(work, name)
	if err != nil {
		log.Fatal(err)
	}
	s := &server{dir: dir, log: logf}
	s.cmd = exec.Command(o.bin, "serve")
	if o.cpus != "" {
		s.cmd = exec.Command("taskset", "-c", o.cpus, o.bin, "serve") // taskset execs serve: same pid
	}
	s.cmd.Env = serve.Env(dir, o.env, env)
	start := time.Now()
	p, err := serve.Start(s.cmd, logf, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	s.proc, s.pid, s.addr, s.key = p, p.PID, p.Addr, p.Key
	return s, time.Since(start)
}

func (s *server) url() string { return "http://" + s.addr }

// stop ends the server with SIGTERM, as an operator would.
func (s *server) stop() {
	s.proc.Stop(40 * time.Second)
	s.log.Close()
}

// procStat reads a process's resident memory (bytes) and CPU time used.
func procStat(pid int) (rss int64, cpu time.Duration) {
	return serve.Status(pid, "VmRSS:"), serve.CPU(pid)
}

// script answers each question with one tool call, then the tool result with
// tokens at the fixed rate: one turn pair per conversation turn, so the fake
// never runs out.
func script(o options, turns int) llmtest.Script {
	chunks := make([]string, o.tokens)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("tok%02d ", i)
	}
	call := llmtest.Call(o.tool, `{"query":"regional revenue"}`)
	if o.tool == "execute_sql" {
		call = llmtest.Call(o.tool, `{"query":"SELECT 42 AS answer"}`)
	}
	delay := llmtest.Duration(time.Duration(float64(time.Second) / o.rate))
	s := llmtest.Script{StampTime: true, Default: &llmtest.Turn{Text: []string{"(script exhausted)"}}}
	for range turns {
		s.Turns = append(s.Turns,
			llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{call}},
			llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, Text: chunks, Delay: delay},
		)
	}
	return s
}

// convResult is what one conversation saw.
type convResult struct {
	id        string
	latencies []time.Duration
	byTurn    [][]time.Duration // the same, by turn
	tokens    int               // stamped tokens received
	expected  int               // stamped tokens the fake sent in completed turns
	texts     []string
	turns     int
	errs      map[string]int
}

func (r *convResult) fail(kind string) {
	if r.errs == nil {
		r.errs = map[string]int{}
	}
	r.errs[kind]++
}

// event is a server message as the harness reads it.
type event struct {
	Type string `json:"type"`
	Data struct {
		Token   string `json:"token"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"data"`
}

// converse runs one conversation's turns over one WebSocket.
func converse(ctx context.Context, o options, s *server, id string, start time.Duration, res *convResult) {
	time.Sleep(start)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, resp, err := websocket.Dial(dctx, "ws://"+s.addr+"/ws?conversation_id="+id+"&api_key="+s.key, nil)
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
			res.fail("busy: WebSocket refused (503)")
		} else {
			res.fail("dial: " + err.Error())
		}
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	for turn := 0; turn < o.turns && ctx.Err() == nil; turn++ {
		if turn > 0 && o.think > 0 {
			time.Sleep(time.Duration(rand.Int64N(int64(o.think))))
		}
		if ctx.Err() != nil {
			return
		}
		msg, _ := json.Marshal(map[string]any{"type": "chat_send", "data": map[string]string{"content": fmt.Sprintf("Question %d: revenue by region?", turn+1)}})
		tctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := conn.Write(tctx, websocket.MessageText, msg); err != nil {
			cancel()
			res.fail("write: " + err.Error())
			return
		}
		var text strings.Builder
		got := 0
		done := false
		for !done {
			_, b, err := conn.Read(tctx)
			at := time.Now()
			if err != nil {
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					res.fail("timeout: no chat_complete within 60s")
				} else {
					res.fail("read: " + err.Error())
				}
				return
			}
			var ev event
			if err := json.Unmarshal(b, &ev); err != nil {
				res.fail("bad event")
				continue
			}
			switch ev.Type {
			case "chat_token":
				stamps, _ := llmtest.Stamps(ev.Data.Token)
				for len(res.byTurn) <= turn {
					res.byTurn = append(res.byTurn, nil)
				}
				for _, st := range stamps {
					res.latencies = append(res.latencies, at.Sub(st))
					res.byTurn[turn] = append(res.byTurn[turn], at.Sub(st))
				}
				got += len(stamps)
				text.WriteString(ev.Data.Token)
			case "chat_complete":
				done = true
				if ev.Data.Status != "complete" {
					res.fail("chat_complete " + ev.Data.Status)
					break
				}
				res.turns++
				res.tokens += got
				res.expected += o.tokens
				res.texts = append(res.texts, text.String())
			case "chat_error":
				done = true
				if strings.Contains(strings.ToLower(ev.Data.Message), "busy") || strings.Contains(ev.Data.Message, "restarting") {
					res.fail("busy: " + ev.Data.Message)
				} else {
					res.fail("chat_error: " + ev.Data.Message)
				}
			}
		}
		cancel()
	}
	conn.Close(websocket.StatusNormalClosure, "")
}

// apiJSON calls the API with the admin key.
func apiJSON(s *server, method, path, body string, out any) (int, error) {
	req, _ := http.NewRequest(method, s.url()+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", s.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, nil
}

// createConversations creates n conversations, 16 at a time.
func createConversations(s *server, n int) []string {
	ids, err := s.proc.CreateConversations(n, "load")
	if err != nil {
		log.Fatal(err)
	}
	return ids
}

// runLevel runs n conversations against a fresh server and returns its
// table row.
func runLevel(o options, work string, n int) string {
	fmt.Printf("\n== N = %d: %d turns each, %d tokens per answer at %.0f/s, tool %s\n", n, o.turns, o.tokens, o.rate, o.tool)
	fake, err := llmtest.Start(llmtest.OpenAI, script(o, n*o.turns), "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	s, _ := startServer(o, work, fmt.Sprintf("n%d", n), map[string]string{
		"LLM_PROVIDER": "openai", "OPENAI_API_KEY": "load", "OPENAI_BASE_URL": fake.URL,
	})
	defer s.stop()
	fmt.Printf("server pid %d on %s, log %s\n", s.pid, s.addr, s.log.Name())
	ids := createConversations(s, n)
	time.Sleep(time.Second)
	idleRSS, cpu0 := procStat(s.pid)
	self0 := serve.SelfCPU()

	// Sample the server's memory while the load runs.
	var peak atomic.Int64
	peak.Store(idleRSS)
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				if rss, _ := procStat(s.pid); rss > peak.Load() {
					peak.Store(rss)
				}
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	results := make([]*convResult, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i, id := range ids {
		results[i] = &convResult{id: id}
		// Conversations start spread over the first second, not in lock-step.
		wg.Go(func() { converse(ctx, o, s, id, time.Duration(i)*time.Second/time.Duration(n), results[i]) })
	}
	wg.Wait()
	wall := time.Since(start)
	close(stopSampling)
	sampler.Wait()
	_, cpu1 := procStat(s.pid)
	selfUsed := serve.SelfCPU() - self0

	var lat []time.Duration
	var turns, tokens, expected int
	errs := map[string]int{}
	for _, r := range results {
		lat = append(lat, r.latencies...)
		turns += r.turns
		tokens += r.tokens
		expected += r.expected
		for k, v := range r.errs {
			errs[k] += v
		}
	}
	slices.Sort(lat)
	var byTurn []string
	for turn := range o.turns {
		var l []time.Duration
		for _, r := range results {
			if turn < len(r.byTurn) {
				l = append(l, r.byTurn[turn]...)
			}
		}
		slices.Sort(l)
		byTurn = append(byTurn, fmt.Sprintf("turn %d: p50 %s p99 %s", turn+1, report.MS(report.Percentile(l, .5)), report.MS(report.Percentile(l, .99))))
	}

	// Every completed turn's answer is stored, complete, with the full text.
	incomplete := verifyStored(s, results)

	var errCount, busy int
	var errKinds []string
	for k, v := range errs {
		errCount += v
		if strings.HasPrefix(k, "busy") {
			busy += v
		}
		errKinds = append(errKinds, fmt.Sprintf("%dx %s", v, k))
	}
	slices.Sort(errKinds)
	serverCPU := (cpu1 - cpu0).Seconds() / wall.Seconds()
	fmt.Printf("wall %.1fs; %d turns (%.1f/s); %d tokens (%.0f/s) of %d sent in completed turns\n",
		wall.Seconds(), turns, float64(turns)/wall.Seconds(), tokens, float64(tokens)/wall.Seconds(), expected)
	fmt.Printf("token latency, fake → client through datachat: p50 %s ms, p90 %s, p99 %s, p99.9 %s, max %s (%d samples)\n",
		report.MS(report.Percentile(lat, .5)), report.MS(report.Percentile(lat, .9)), report.MS(report.Percentile(lat, .99)), report.MS(report.Percentile(lat, .999)), report.MS(report.Percentile(lat, 1)), len(lat))
	fmt.Printf("by turn (ms): %s\n", strings.Join(byTurn, "; "))
	fmt.Printf("server: CPU %.2f cores (%.1fs over %.1fs), RSS idle %.1f MB → peak %.1f MB; harness (client + fake) CPU %.2f cores\n",
		serverCPU, (cpu1 - cpu0).Seconds(), wall.Seconds(), mb(idleRSS), mb(peak.Load()), selfUsed.Seconds()/wall.Seconds())
	fmt.Printf("errors: %d %v; stored answers incomplete or missing: %d\n", errCount, errKinds, incomplete)

	base := "-"
	if o.baseline {
		b50, b99 := baseline(o, n)
		base = report.MS(b50) + " / " + report.MS(b99)
		fmt.Printf("baseline, fake → client directly (no datachat): p50 %s ms, p99 %s ms\n", report.MS(b50), report.MS(b99))
	}
	return fmt.Sprintf("| %d | %d | %.1f | %d | %.0f | %s / %s / %s | %s | %.2f | %.0f → %.0f | %d | %d | %d | %d |",
		n, turns, float64(turns)/wall.Seconds(), tokens, float64(tokens)/wall.Seconds(),
		report.MS(report.Percentile(lat, .5)), report.MS(report.Percentile(lat, .99)), report.MS(report.Percentile(lat, 1)), base,
		serverCPU, mb(idleRSS), mb(peak.Load()), errCount, busy, expected-tokens, incomplete)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// verifyStored reads every conversation back and counts the completed turns
// whose stored answer is missing, not complete, or not exactly the text the
// client received.
func verifyStored(s *server, results []*convResult) int {
	var bad atomic.Int64
	var g errgroup.Group
	g.SetLimit(8)
	for _, r := range results {
		g.Go(func() error {
			var c struct {
				Messages []struct {
					Role, Content, Status string
				} `json:"messages"`
			}
			if st, err := apiJSON(s, "GET", "/api/conversations/"+r.id, "", &c); err != nil || st != 200 {
				bad.Add(int64(len(r.texts)))
				return nil
			}
			var answers []string
			for _, m := range c.Messages {
				if m.Role == "assistant" && m.Status == "complete" {
					answers = append(answers, m.Content)
				}
			}
			for i, want := range r.texts {
				if i >= len(answers) || answers[i] != want {
					bad.Add(1)
				}
			}
			return nil
		})
	}
	g.Wait()
	return int(bad.Load())
}

// baseline streams the same answers from a fake straight to n clients, no
// datachat in between, in the same pattern (turns, think time): the floor the
// harness, the fake and loopback set on this machine.
func baseline(o options, n int) (p50, p99 time.Duration) {
	chunks := make([]string, o.tokens)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("tok%02d ", i)
	}
	fake, err := llmtest.Start(llmtest.OpenAI, llmtest.Script{StampTime: true,
		Default: &llmtest.Turn{Text: chunks, Delay: llmtest.Duration(time.Duration(float64(time.Second) / o.rate))}}, "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * time.Second / time.Duration(n))
			var mine []time.Duration
			for turn := range o.turns {
				if turn > 0 && o.think > 0 {
					time.Sleep(time.Duration(rand.Int64N(int64(o.think))))
				}
				body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
				resp, err := client.Post(fake.URL+"/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					return
				}
				llmtest.ReadStampedStream(resp.Body, func(d time.Duration) { mine = append(mine, d) })
				resp.Body.Close()
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return report.Percentile(lat, .5), report.Percentile(lat, .99)
}
