package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/coder/websocket"

	"datachat/bench/internal/report"
)

// footprint measures the binary, its start, and its idle memory.
func footprint(o options, work string) {
	fi, err := os.Stat(o.bin)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\n== footprint\nbinary size: %.1f MB (%d bytes)\n", float64(fi.Size())/1e6, fi.Size())

	// Start: exec to /healthz answering 200, on a new data directory (a first
	// start: migrations, the admin key) and on an existing one.
	var first, again []time.Duration
	var idle []int64
	for i := range 7 {
		s, took := startServer(o, work, fmt.Sprint("start", i), nil)
		first = append(first, took)
		time.Sleep(2 * time.Second)
		rss, _ := procStat(s.pid)
		idle = append(idle, rss)
		s.stop()
		// The same data directory again.
		s2 := restart(o, s)
		again = append(again, s2.took)
		s2.srv.stop()
	}
	slices.Sort(first)
	slices.Sort(again)
	slices.Sort(idle)
	fmt.Printf("start to /healthz 200, new data dir: median %s ms (min %s, max %s, 7 runs)\n", report.MS(first[3]), report.MS(first[0]), report.MS(first[6]))
	fmt.Printf("start to /healthz 200, existing data dir: median %s ms (min %s, max %s)\n", report.MS(again[3]), report.MS(again[0]), report.MS(again[6]))
	fmt.Printf("idle RSS 2 s after start: median %.1f MB (min %.1f, max %.1f)\n", mb(idle[3]), mb(idle[0]), mb(idle[6]))

	firstQuery(o, work)
	if o.idle > 0 {
		idleSockets(o, work)
	}
}

// firstQuery measures what the first SQL query costs a fresh server: the
// sandboxed DuckDB instance of its conversation opens on demand.
func firstQuery(o options, work string) {
	s, _ := startServer(o, work, "query", nil)
	defer s.stop()
	ids := createConversations(s, 1)
	time.Sleep(2 * time.Second)
	before, _ := procStat(s.pid)
	start := time.Now()
	var res struct {
		Rows [][]any `json:"rows"`
	}
	if st, err := apiJSON(s, "POST", "/api/conversations/"+ids[0]+"/sql", `{"query":"SELECT 42 AS answer"}`, &res); err != nil || st != 200 {
		log.Fatalf("first query: HTTP %d %v", st, err)
	}
	took := time.Since(start)
	time.Sleep(time.Second)
	after, _ := procStat(s.pid)
	fmt.Printf("first SQL query (opens the conversation's DuckDB instance): %s ms; RSS %.1f MB → %.1f MB\n", report.MS(took), mb(before), mb(after))
}

type restarted struct {
	srv  *server
	took time.Duration
}

// restart starts serve again on a stopped server's data directory.
func restart(o options, old *server) restarted {
	s := &server{dir: old.dir, key: old.key}
	logf, _ := os.OpenFile(filepath.Join(old.dir, "serve.log"), os.O_APPEND|os.O_WRONLY, 0o600)
	s.log = logf
	s.cmd = exec.Command(o.bin, "serve")
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"DATACHAT_DATA_DIR=" + filepath.Join(old.dir, "data"), "DATACHAT_ADDR=" + old.addr,
		"DATACHAT_LOG_FORMAT=json"}
	s.cmd.Stderr = logf
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		log.Fatal(err)
	}
	s.pid, s.addr = s.cmd.Process.Pid, old.addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if resp, err := http.Get(s.url() + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			log.Fatal("restarted serve never answered /healthz")
		}
	}
	return restarted{s, time.Since(start)}
}

// idleSockets measures the memory an idle WebSocket costs the server.
func idleSockets(o options, work string) {
	m := o.idle
	s, _ := startServer(o, work, "idle", nil)
	defer s.stop()
	ids := createConversations(s, m)
	time.Sleep(2 * time.Second)
	before, _ := procStat(s.pid)
	conns := make([]*websocket.Conn, 0, m)
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := websocket.Dial(ctx, "ws://"+s.addr+"/ws?conversation_id="+id+"&api_key="+s.key, nil)
		cancel()
		if err != nil {
			log.Fatalf("dial idle WebSocket %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	time.Sleep(3 * time.Second)
	after, _ := procStat(s.pid)
	fmt.Printf("idle WebSockets: %d open; server RSS %.1f MB → %.1f MB: %.1f KB per idle WebSocket\n",
		m, mb(before), mb(after), float64(after-before)/1024/float64(m))
	for _, c := range conns {
		c.CloseNow()
	}
}
