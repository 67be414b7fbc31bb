// Command outage measures `datachat serve`'s memory across a PostgreSQL
// outage under load (issue 25: "after a 2-minute PostgreSQL outage under
// load, RSS within 1.2× its pre-outage value a minute after recovery").
//
// It starts a PostgreSQL cluster of its own (internal/postgres/testdata/
// start-test-cluster.sh, in a temporary directory, on a free port), a fake
// OpenAI-compatible model (internal/llmtest) and `datachat serve` on that
// database, then runs -n conversations over WebSockets, each asking its next
// question after its answer or its error (a pause of up to -think between),
// through three phases: -before with the database up, -outage with it
// stopped (pg_ctl stop -m fast, as an operator's restart), and -after once
// it is started again. It reports, per phase, the turns completed and
// failed and the server's RSS at its end, its peak RSS, and how long after
// the database came back the first turn completed. Run from the
// repository root:
//
//	go run ./bench/outage -n 50 -before 60s -outage 2m -after 60s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/llmtest"
	"datachat/internal/testnet"
)

type options struct {
	n                     int
	before, outage, after time.Duration
	think                 time.Duration
	tokens                int
	bin                   string
	keep                  bool
}

// counts are one phase's turns.
type counts struct{ complete, failed atomic.Int64 }

func main() {
	log.SetFlags(0)
	var o options
	flag.IntVar(&o.n, "n", 50, "concurrent conversations")
	flag.DurationVar(&o.before, "before", 60*time.Second, "load with the database up, before the outage")
	flag.DurationVar(&o.outage, "outage", 2*time.Minute, "how long the database is stopped, the load going on")
	flag.DurationVar(&o.after, "after", 60*time.Second, "load after the database is back, before RSS is read again")
	flag.DurationVar(&o.think, "think", time.Second, "longest pause between a conversation's turns (random, uniform)")
	flag.IntVar(&o.tokens, "tokens", 40, "streamed chunks per answer (at 20 a second)")
	flag.StringVar(&o.bin, "bin", "", "the datachat binary (default: go build ./cmd/datachat)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (the server's log, the cluster)")
	flag.Parse()

	work, cleanup, err := serve.WorkDir("outage", o.keep)
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	if o.bin, err = serve.Binary(work, o.bin); err != nil {
		log.Fatal(err)
	}
	pg, err := startCluster()
	if err != nil {
		log.Fatal(err)
	}
	defer pg.remove()

	chunks := make([]string, o.tokens)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("word%d ", i)
	}
	fake, err := llmtest.Start(llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: chunks, Delay: llmtest.Duration(50 * time.Millisecond)}}, "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()

	dir, logf, err := serve.Fresh(work, "serve")
	if err != nil {
		log.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(o.bin, "serve")
	cmd.Env = serve.Env(dir, map[string]string{
		"DATACHAT_DATABASE_URL": pg.url,
		"LLM_PROVIDER":          "openai", "OPENAI_API_KEY": "outage", "OPENAI_BASE_URL": fake.URL,
	})
	srv, err := serve.Start(cmd, logf, 60*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(60 * time.Second)
	ids, err := srv.CreateConversations(o.n, "outage")
	if err != nil {
		log.Fatal(err)
	}
	serve.WaitIdle(srv.PID)
	fmt.Printf("machine: load average %s; %d conversations, %d tokens an answer; phases %s up, %s down, %s up\n",
		report.LoadAvg(), o.n, o.tokens, o.before, o.outage, o.after)
	fmt.Printf("RSS at rest, before the load: %.0f MiB\n", serve.MiB(serve.Status(srv.PID, "VmRSS:")))

	var phase atomic.Pointer[counts]
	phases := [3]counts{}
	phase.Store(&phases[0])
	var firstAfter atomic.Int64 // ns from the restart to the first turn completed after it
	var restarted atomic.Int64  // unix ns the database accepted connections again
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { converse(ctx, srv, id, o, &phase, &restarted, &firstAfter) })
	}

	var peak float64
	watch := func(d time.Duration) float64 {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			peak = max(peak, serve.MiB(serve.Status(srv.PID, "VmRSS:")))
			time.Sleep(min(time.Second, time.Until(end)))
		}
		return serve.MiB(serve.Status(srv.PID, "VmRSS:"))
	}
	pre := watch(o.before)
	fmt.Printf("before the outage (%s up): RSS %.0f MiB; turns %d complete, %d failed\n", o.before, pre, phases[0].complete.Load(), phases[0].failed.Load())

	phase.Store(&phases[1])
	if err := pg.ctl("-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		log.Fatal(err)
	}
	down := watch(o.outage)
	fmt.Printf("at the end of the outage (%s down): RSS %.0f MiB; turns %d complete, %d failed\n", o.outage, down, phases[1].complete.Load(), phases[1].failed.Load())

	phase.Store(&phases[2])
	if err := pg.start(); err != nil {
		log.Fatal(err)
	}
	restarted.Store(time.Now().UnixNano())
	post := watch(o.after)
	stop()
	wg.Wait()
	first := "no turn completed"
	if ns := firstAfter.Load(); ns > 0 {
		first = fmt.Sprintf("%.2f s", time.Duration(ns).Seconds())
	}
	fmt.Printf("%s after the database came back: RSS %.0f MiB (%.2f× its value before the outage); turns %d complete, %d failed; first turn completed %s after it accepted connections\n",
		o.after, post, post/pre, phases[2].complete.Load(), phases[2].failed.Load(), first)
	fmt.Printf("peak RSS %.0f MiB; load average at the end %s\n", peak, report.LoadAvg())
}

// converse runs one conversation's turns until ctx ends: over a WebSocket
// it reopens after any failure (while the database is down the server
// answers the upgrade 503), each turn counted in the phase it ends in.
func converse(ctx context.Context, srv *serve.Process, id string, o options, phase *atomic.Pointer[counts], restarted, firstAfter *atomic.Int64) {
	url := "ws://" + srv.Addr + "/ws?conversation_id=" + id
	opts := &websocket.DialOptions{Subprotocols: []string{"datachat.v1", "datachat.key." + srv.Key}}
	var conn *websocket.Conn
	defer func() {
		if conn != nil {
			conn.CloseNow()
		}
	}()
	for t := 0; ctx.Err() == nil && t < 100000; t++ {
		pause := time.Duration(rand.Int64N(int64(o.think) + 1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		if conn == nil {
			c, _, err := websocket.Dial(ctx, url, opts)
			if err != nil {
				phase.Load().failed.Add(1)
				continue
			}
			c.SetReadLimit(1 << 20)
			conn = c
		}
		err := turn(ctx, conn, t)
		p := phase.Load()
		if err != nil {
			p.failed.Add(1)
			if !errors.Is(err, errTurnFailed) {
				conn.CloseNow()
				conn = nil
			}
			continue
		}
		p.complete.Add(1)
		if at := restarted.Load(); at > 0 {
			firstAfter.CompareAndSwap(0, time.Now().UnixNano()-at)
		}
	}
}

var errTurnFailed = errors.New("chat_error")

// turn asks one question and reads the events until chat_complete or
// chat_error.
func turn(ctx context.Context, conn *websocket.Conn, t int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	msg, _ := json.Marshal(map[string]any{"type": "chat_send", "data": map[string]string{"content": fmt.Sprintf("Question %d", t+1)}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return err
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		var ev struct{ Type string }
		json.Unmarshal(data, &ev)
		switch ev.Type {
		case "chat_complete":
			return nil
		case "chat_error":
			return errTurnFailed
		}
	}
}

// cluster is the benchmark's own PostgreSQL cluster.
type cluster struct {
	dir, bindir, url string
	port             int
}

// startCluster starts a cluster in a new temporary directory on a free
// port, with the script the store tests use.
func startCluster() (*cluster, error) {
	dir, err := os.MkdirTemp("", "datachat-outage-pg-")
	if err != nil {
		return nil, err
	}
	port, err := testnet.FreePort()
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, port: port}
	out, err := exec.Command("sh", "internal/postgres/testdata/start-test-cluster.sh", dir, strconv.Itoa(port)).Output()
	if err != nil {
		return nil, fmt.Errorf("start-test-cluster.sh (run from the repository root, with PostgreSQL installed): %v", err)
	}
	c.url = strings.TrimSpace(string(out))
	bindir, err := exec.Command("sh", "-c", `d=$(pg_config --bindir 2>/dev/null); [ -x "$d/pg_ctl" ] && echo "$d" || ls -d /usr/lib/postgresql/*/bin | sort -t/ -k5 -n -r | head -1`).Output()
	if err != nil {
		return nil, err
	}
	c.bindir = strings.TrimSpace(string(bindir))
	return c, nil
}

// ctl runs pg_ctl on the cluster as its owner (postgres, when run as root).
func (c *cluster) ctl(args ...string) error {
	args = append([]string{filepath.Join(c.bindir, "pg_ctl"), "-D", filepath.Join(c.dir, "data")}, args...)
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *cluster) start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir)
	return c.ctl("-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "start")
}

func (c *cluster) remove() {
	c.ctl("-m", "immediate", "stop")
	os.RemoveAll(c.dir)
}
