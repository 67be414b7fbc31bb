package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
)

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
	var g errgroup.Group
	g.SetLimit(limit)
	for _, c := range convs {
		g.Go(func() error { return op(c) })
	}
	if err := g.Wait(); err != nil {
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
	ct, mp := serve.Multipart("extra.csv", extra)
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
