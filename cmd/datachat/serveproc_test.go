package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// serveProc is `datachat serve` running as its own process (the binary built
// by datachatBinary), for the tests that kill it, stop it with a signal, or
// run two of them on one database.
type serveProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	Addr string // host:port it listens on
	// On a first start (no users yet): the token of the setup URL serve
	// printed, and an API key of its user admin, made with keys create.
	Setup string
	Key   string

	mu     sync.Mutex
	stderr strings.Builder
	logged chan struct{} // closed (and replaced) on each line logged
	exited chan struct{}
	err    error // the process's exit, once exited is closed
}

// procEnv is the environment of a spawned serve: the machine's PATH and HOME,
// quiet logs, no rate limits, and vars.
func procEnv(vars map[string]string) []string {
	env := map[string]string{
		"PATH":                    os.Getenv("PATH"),
		"HOME":                    os.Getenv("HOME"),
		"TMPDIR":                  os.TempDir(),
		"DATACHAT_ADDR":           "127.0.0.1:0",
		"DATACHAT_LOG_FORMAT":     "json",
		"DATACHAT_LOG_LEVEL":      "info",
		"DATACHAT_RATE_LIMIT_RPM": "0",
		"DATACHAT_TOKENS_PER_DAY": "0",
		"DATACHAT_QUERY_THREADS":  "1",
		"LLM_STREAM_IDLE_TIMEOUT": "10s",
		"LLM_RETRY_DELAY":         "100ms",
		"DATACHAT_SHUTDOWN_GRACE": "5s",
	}
	for k, v := range vars {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

var (
	setupURL   = regexp.MustCompile(`http://[^/\s]+/#invite=(\S+)`)
	servingLog = regexp.MustCompile(`"msg":"serving".*"addr":"([^"]+)"`)
)

// startProc starts serve with vars and waits until /healthz answers. The
// process is killed when the test ends if it is still running.
func startProc(t *testing.T, vars map[string]string) *serveProc {
	t.Helper()
	p := &serveProc{t: t, exited: make(chan struct{}), logged: make(chan struct{})}
	p.cmd = exec.Command(datachatBinary(t), "serve")
	p.cmd.Env = procEnv(vars)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	type started struct {
		addr     string
		setupNew bool // the log said a setup URL was printed on stdout
	}
	addr := make(chan started, 1)
	setup := make(chan string, 1)
	var pipes sync.WaitGroup
	pipes.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := setupURL.FindStringSubmatch(sc.Text()); m != nil {
				setup <- m[1]
			}
		}
	})
	pipes.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		setupNew := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			close(p.logged) // wakes waitLog
			p.logged = make(chan struct{})
			p.mu.Unlock()
			if strings.Contains(line, "first user admin created") {
				setupNew = true
			}
			if m := servingLog.FindStringSubmatch(line); m != nil {
				addr <- started{m[1], setupNew}
			}
		}
	})
	go func() {
		pipes.Wait() // Wait must not run before the pipes are read out
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("serve %s log:\n%s", p.Addr, p.Log())
		}
	})
	var st started
	select {
	case st = <-addr:
		p.Addr = st.addr
	case <-p.exited:
		t.Fatalf("serve exited at start: %v\n%s", p.err, p.Log())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start in 30s:\n%s", p.Log())
	}
	if st.setupNew { // printed before serving was logged: it is on its way
		select {
		case p.Setup = <-setup:
		case <-time.After(10 * time.Second):
			t.Fatalf("serve logged a first user but printed no setup URL:\n%s", p.Log())
		}
		// The tests drive the API with a key, as a script would.
		keys := exec.Command(datachatBinary(t), "keys", "create", "--user", "admin")
		keys.Env = procEnv(vars)
		key, err := keys.Output()
		if err != nil {
			t.Fatalf("keys create --user admin beside the first start: %v", err)
		}
		p.Key = strings.TrimSpace(string(key))
	}
	// The listener was open before serving was logged: one request answers.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(p.URL() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz of %s: %v\n%s", p.Addr, err, p.Log())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz of %s: HTTP %d\n%s", p.Addr, resp.StatusCode, p.Log())
	}
	return p
}

// startFirstProc is startProc on a first start (no users yet): it returns
// serve and the API key of its user admin.
func startFirstProc(t *testing.T, vars map[string]string) (*serveProc, string) {
	t.Helper()
	p := startProc(t, vars)
	if p.Key == "" {
		t.Fatal("no setup URL (and so no admin key) on the first start")
	}
	return p, p.Key
}

// waitLog waits until the process has logged a line containing s, failing
// the test after d (a safety net).
func (p *serveProc) waitLog(s string, d time.Duration) {
	p.t.Helper()
	timeout := time.After(d)
	for {
		p.mu.Lock()
		logged, seen := p.logged, strings.Contains(p.stderr.String(), s)
		p.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-logged:
		case <-p.exited:
			p.t.Fatalf("serve exited before logging %q:\n%s", s, p.Log())
		case <-timeout:
			p.t.Fatalf("serve did not log %q within %s:\n%s", s, d, p.Log())
		}
	}
}

// URL is the process's base URL.
func (p *serveProc) URL() string { return "http://" + p.Addr }

// Log returns what the process logged so far.
func (p *serveProc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Signal sends sig to the process.
func (p *serveProc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Kill kills the process with SIGKILL, if it still runs, and waits for it.
func (p *serveProc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Wait waits up to d for the process to exit and returns its exit error.
func (p *serveProc) Wait(d time.Duration) error {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		p.t.Fatalf("serve %s still runs %s later:\n%s", p.Addr, d, p.Log())
		return nil
	}
}

// wsClient is a WebSocket client of one conversation that records every event
// with the time it arrived.
type wsClient struct {
	t      *testing.T
	conn   *websocket.Conn
	events chan wsEvent
	closed chan struct{}
	err    error // why reading stopped, once closed is closed
}

type wsEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	At   time.Time       `json:"-"`
}

// closedWith4401 waits for c to close, 2 s at the most after the command
// cmd returned (the server checks every 500 ms), and checks that it closed
// with status 4401 and reason.
func (c *wsClient) closedWith4401(t *testing.T, cmd, reason string) {
	t.Helper()
	at := time.Now()
	select {
	case <-c.closed:
		t.Logf("closed %v after %s returned", time.Since(at).Round(time.Millisecond), cmd)
	case <-time.After(2 * time.Second):
		t.Fatalf("the WebSocket is still open 2 s after %s", cmd)
	}
	var ce websocket.CloseError
	if !errors.As(c.err, &ce) || ce.Code != 4401 || ce.Reason != reason {
		t.Errorf("closed with %v, want 4401 and the reason %q", c.err, reason)
	}
}

// stillServed checks that key still reaches the API at base and that c, a
// WebSocket of it, is still open and answers a ping; who names the key in
// the failures.
func (c *wsClient) stillServed(t *testing.T, base, key, who string) {
	t.Helper()
	if st, _ := do(t, "GET", base+"/api/conversations", key, ""); st != 200 {
		t.Errorf("%s: got %d, want 200", who, st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.conn.Ping(ctx); err != nil {
		t.Errorf("%s's WebSocket: %v", who, err)
	}
}

func dialWS(t *testing.T, base, key, conversationID string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := strings.Replace(base, "http://", "ws://", 1) + "/ws?conversation_id=" + conversationID + "&api_key=" + key
	conn, resp, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", url, err, status)
	}
	conn.SetReadLimit(16 << 20)
	c := &wsClient{t: t, conn: conn, events: make(chan wsEvent, 4096), closed: make(chan struct{})}
	go func() {
		defer close(c.closed)
		for {
			_, b, err := conn.Read(context.Background())
			if err != nil {
				c.err = err
				close(c.events)
				return
			}
			ev := wsEvent{At: time.Now()}
			if err := json.Unmarshal(b, &ev); err != nil {
				c.err = err
				close(c.events)
				return
			}
			c.events <- ev
		}
	}()
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	return c
}

func (c *wsClient) send(typ string, data any) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", typ, err)
	}
}

// next returns the next event, failing the test after d.
func (c *wsClient) next(d time.Duration) (wsEvent, bool) {
	c.t.Helper()
	select {
	case ev, ok := <-c.events:
		return ev, ok
	case <-time.After(d):
		c.t.Fatalf("no WebSocket event in %s", d)
		return wsEvent{}, false
	}
}

// until collects events up to the first of one of the types given (or
// chat_error, or the end of the connection), failing the test after d.
func (c *wsClient) until(d time.Duration, types ...string) []wsEvent {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var got []wsEvent
	for {
		ev, ok := c.next(time.Until(deadline))
		if !ok {
			return got
		}
		got = append(got, ev)
		if ev.Type == "chat_error" {
			return got
		}
		for _, typ := range types {
			if ev.Type == typ {
				return got
			}
		}
	}
}

// tokensText joins the chat_token events' tokens.
func tokensText(evs []wsEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == "chat_token" {
			var d struct {
				Token string `json:"token"`
			}
			json.Unmarshal(ev.Data, &d)
			b.WriteString(d.Token)
		}
	}
	return b.String()
}

// field reads a string field of an event's data.
func field(ev wsEvent, name string) string {
	var m map[string]any
	json.Unmarshal(ev.Data, &m)
	s, _ := m[name].(string)
	return s
}

// apiMessage is a message as GET /api/conversations/{id} shows it.
type apiMessage struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

// conversationMessages returns a conversation's messages through the API.
func conversationMessages(t *testing.T, base, key, id string) []apiMessage {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/conversations/"+id, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("get conversation: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("get conversation: HTTP %d %s", resp.StatusCode, b)
	}
	var c struct {
		Messages []apiMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("get conversation: %v: %s", err, b)
	}
	return c.Messages
}

// newConversation creates a conversation through the API and returns its id.
func newConversation(t *testing.T, base, key string) string {
	t.Helper()
	st, body := do(t, "POST", base+"/api/conversations", key, `{"title":"t"}`)
	if st != 201 {
		t.Fatalf("create conversation: HTTP %d %v", st, body)
	}
	return body["id"].(string)
}
