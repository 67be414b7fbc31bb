package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"datachat/bench/internal/report"
	"datachat/bench/internal/serve"
	"datachat/internal/llmtest"
)

// The datachat run: a fresh `datachat serve` started on its own data
// directory, its conversations created and driven over WebSockets, and the
// wait for it to be idle.

// runServer runs n conversations through a fresh `datachat serve` of b,
// with o.stalled extra clients beside them, stalled or reading, as extra
// says.
func runServer(o options, work string, n, round int, b build, extra extra) result {
	if extra == noExtra {
		o.stalled = 0
	}
	fake, err := startFake(o, n)
	if err != nil {
		log.Fatal(err)
	}
	defer fake.Close()
	env := map[string]string{"LLM_PROVIDER": "openai", "OPENAI_API_KEY": "tokens", "OPENAI_BASE_URL": fake.URL}
	for k, v := range o.env {
		env[k] = v
	}
	if o.profile != "" {
		env["DATACHAT_PROFILE_DIR"] = filepath.Join(o.profile, fmt.Sprintf("%s%s-n%d-r%d", b.name, extra.suffix(), n, round))
		env["DATACHAT_PROFILE_TRACE"] = strconv.FormatBool(o.trace)
	}
	name := fmt.Sprintf("%s-n%d-r%d", b.name, n, round)
	name += extra.suffix()
	srv := startServer(work, name, b.path, env)
	defer srv.stop()
	ids := createConversations(srv, n+o.stalled)
	stalledIDs := ids[n:]
	serve.WaitIdle(srv.pid)

	r := result{loadAverage: report.LoadAvg(), restRSS: serve.MiB(serve.Status(srv.pid, "VmRSS:"))}
	if !serve.ResetPeak(srv.pid) {
		log.Printf("%s: the peak RSS could not be reset: it includes start-up's", name)
	}
	if o.settle > 0 && o.stalled > 0 {
		r.restMemory = memoryBreakdown(srv.addr, srv.key, srv.pid)
	}
	cpu0, self0 := serve.CPU(srv.pid), serve.SelfCPU()
	closeStalled := func() {}
	if o.stalled > 0 {
		closeStalled = stallClients(srv.addr, srv.key, stalledIDs, extra == readingExtra)
	}
	defer func() { closeStalled() }()
	convs, wall := driveWS(o, n, func(i int) string { return "ws://" + srv.addr + "/ws?conversation_id=" + ids[i] }, &websocket.DialOptions{
		Subprotocols: []string{"datachat.v1", "datachat.key." + srv.key},
	})
	r.wall = wall
	r.serverCPU, r.harnessCPU = serve.CPU(srv.pid)-cpu0, serve.SelfCPU()-self0
	r.peakRSS = serve.MiB(serve.Status(srv.pid, "VmHWM:"))
	if o.stalled > 0 {
		r.stalled = fmt.Sprintf("%d of %d", storedComplete(srv.addr, srv.key, stalledIDs), o.stalled)
		if o.settle > 0 {
			// The normal clients closed when driveWS returned.
			closeStalled()
			closeStalled = func() {}
			time.Sleep(o.settle)
			r.settledRSS = serve.MiB(serve.Status(srv.pid, "VmRSS:"))
			r.settledMemory = memoryBreakdown(srv.addr, srv.key, srv.pid)
		}
	}
	collect(&r, convs)
	return r
}

// driveWS runs n conversations, each over a WebSocket to url(i) opened at its
// first turn and closed at the end.
func driveWS(o options, n int, url func(i int) string, opts *websocket.DialOptions) ([]*conversation, time.Duration) {
	conns := make([]*websocket.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.CloseNow()
			}
		}
	}()
	return drive(o, n, func(ctx context.Context, i, t int, c *conversation) error {
		if conns[i] == nil {
			conn, _, err := websocket.Dial(ctx, url(i), opts)
			if err != nil {
				return errors.New("dial failed")
			}
			conn.SetReadLimit(1 << 20)
			conns[i] = conn
		}
		return wsTurn(ctx, conns[i], o, t, c)
	})
}

// wsTurn runs turn t of a conversation over its WebSocket: chat_send, then
// the events until chat_complete or chat_error, each token's latency taken
// from its stamp.
func wsTurn(ctx context.Context, conn *websocket.Conn, o options, t int, c *conversation) error {
	msg, _ := json.Marshal(map[string]any{"type": "chat_send", "data": map[string]string{"content": fmt.Sprintf("Question %d: revenue by region?", t+1)}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return errors.New("write failed")
	}
	sent := time.Now()
	got := 0
	for {
		_, data, err := conn.Read(ctx)
		at := time.Now()
		if err != nil {
			return errors.New("read failed or timed out")
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Token, Status, Message string
			} `json:"data"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return errors.New("bad event")
		}
		switch ev.Type {
		case "chat_token":
			if got == 0 {
				c.first = append(c.first, at.Sub(sent))
			}
			stamps, _ := llmtest.Stamps(ev.Data.Token)
			for _, st := range stamps {
				c.lat = append(c.lat, at.Sub(st))
				c.addTurn(t, at.Sub(st))
			}
			got += len(stamps)
		case "chat_complete":
			c.tokens += got
			if ev.Data.Status != "complete" {
				c.fail("chat_complete " + ev.Data.Status)
				return nil
			}
			c.turns++
			c.lost += o.tokens - got
			return nil
		case "chat_error":
			c.tokens += got
			c.fail("chat_error: " + ev.Data.Message)
			return nil
		}
	}
}

// server is a `datachat serve` process.
type server struct {
	cmd       *exec.Cmd
	proc      *serve.Process
	pid       int
	addr, key string
	log       *os.File
}

// startServer starts serve on a fresh data directory (SQLite) and waits for
// /healthz.
func startServer(work, name, bin string, env map[string]string) *server {
	dir, logf, err := serve.Fresh(work, name)
	if err != nil {
		log.Fatal(err)
	}
	s := &server{log: logf, cmd: exec.Command(bin, "serve")}
	s.cmd.Env = serve.Env(dir, env)
	p, err := serve.Start(s.cmd, logf, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	s.proc, s.pid, s.addr, s.key = p, p.PID, p.Addr, p.Key
	return s
}

// stop ends the server with SIGTERM, as an operator would (the profiles of
// DATACHAT_PROFILE_DIR are written then).
func (s *server) stop() {
	s.proc.Stop(60 * time.Second)
	s.log.Close()
}

// createConversations creates n conversations, 16 at a time.
func createConversations(s *server, n int) []string {
	ids, err := s.proc.CreateConversations(n, "tokens")
	if err != nil {
		log.Fatal(err)
	}
	return ids
}
