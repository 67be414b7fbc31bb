package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

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
