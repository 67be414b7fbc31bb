package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
)

// logWatch is a slog handler that tells tests when the server logs a record
// they wait for: an event to synchronise on instead of a sleep.
type logWatch struct {
	mu       sync.Mutex
	watchers []*logWatcher
}

type logWatcher struct {
	match func(slog.Record) bool
	seen  chan struct{}
	once  sync.Once
}

// watch returns a channel closed once a record matching msg and the given
// attributes (key, value, …) is logged.
func (lw *logWatch) watch(msg string, attrs ...string) <-chan struct{} {
	w := &logWatcher{seen: make(chan struct{}), match: func(r slog.Record) bool {
		if r.Message != msg {
			return false
		}
		got := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		for i := 0; i+1 < len(attrs); i += 2 {
			if got[attrs[i]] != attrs[i+1] {
				return false
			}
		}
		return true
	}}
	lw.mu.Lock()
	lw.watchers = append(lw.watchers, w)
	lw.mu.Unlock()
	return w.seen
}

func (lw *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (lw *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return lw }
func (lw *logWatch) WithGroup(string) slog.Handler            { return lw }
func (lw *logWatch) Handle(_ context.Context, r slog.Record) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, w := range lw.watchers {
		if w.match(r) {
			w.once.Do(func() { close(w.seen) })
		}
	}
	return nil
}

// await waits for ch, failing the test after d (a safety net, not a measure).
func await(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

// receive returns what ch sends, failing the test with late when nothing
// comes within d (a safety net, not a measure).
func receive[T any](t *testing.T, ch <-chan T, d time.Duration, late string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatal(late)
		var zero T
		return zero
	}
}

// rawWS is a WebSocket client written by hand over TCP, so a test decides
// exactly what it reads and answers: it can stop reading, or stop answering
// pings, as a client that vanished without closing does.
type rawWS struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
	// onPing, if set, is called after each ping answered.
	onPing func()
}

func dialRawWS(t *testing.T, addr, path string, header map[string]string, readBuffer int) *rawWS {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if readBuffer > 0 {
		c.(*net.TCPConn).SetReadBuffer(readBuffer)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
	nonce := make([]byte, 16)
	rand.Read(nonce)
	var head strings.Builder
	fmt.Fprintf(&head, "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n",
		path, base64.StdEncoding.EncodeToString(nonce))
	for k, v := range header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(c, head.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	return &rawWS{t: t, c: c, br: br}
}

// write sends one masked client frame.
func (w *rawWS) write(op byte, payload []byte) {
	w.t.Helper()
	frame := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	case n < 1<<16:
		frame = append(frame, 0x80|126, byte(n>>8), byte(n))
	default:
		frame = append(frame, 0x80|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	frame = append(frame, mask...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	if _, err := w.c.Write(frame); err != nil {
		w.t.Fatalf("write frame: %v", err)
	}
}

func (w *rawWS) send(typ string, data any) {
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	w.write(0x1, b)
}

// next reads the next server frame, answering pings on the way; it returns
// the text of a data frame.
func (w *rawWS) next() (string, error) {
	for {
		h := make([]byte, 2)
		if _, err := io.ReadFull(w.br, h); err != nil {
			return "", err
		}
		n := int64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return "", err
			}
			n = int64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return "", err
			}
			n = int64(binary.BigEndian.Uint64(b[:]))
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(w.br, payload); err != nil {
			return "", err
		}
		switch h[0] & 0x0f {
		case 0x9: // ping: pong
			w.write(0xA, payload)
			if w.onPing != nil {
				w.onPing()
			}
		case 0x8:
			return "", fmt.Errorf("close frame %x", payload)
		case 0x1:
			return string(payload), nil
		}
	}
}

// closedWithin reads (and drops) what the server still sends until it
// closes the connection, failing if it is still open d later.
func (w *rawWS) closedWithin(d time.Duration) error {
	w.c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, w.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the server kept the WebSocket open %s later", d)
	}
	return nil
}

// TestWSEventNames: each of a turn's events has a name of its own on the
// wire (the names themselves are what the other tests here read).
func TestWSEventNames(t *testing.T) {
	seen := map[string]chat.EventType{}
	for _, typ := range []chat.EventType{chat.EventToken, chat.EventToolCallStart, chat.EventToolCallResult, chat.EventConfirmation, chat.EventComplete, chat.EventError} {
		name := wsEventNames[typ]
		if other, dup := seen[name]; name == "" || dup {
			t.Errorf("%s: wire name %q (taken by %q)", typ, name, other)
		}
		seen[name] = typ
	}
}

// TestVanishedClientIsDropped: a client that stops reading and answering
// pings, while its answer still fits in the kernel's buffers, is closed on
// the first unanswered ping, and its turn goes on: the answer is completed
// and stored, for the client to find when it comes back.
func TestVanishedClientIsDropped(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{{
		Text:  []string{"hello ", "there ", "again"},
		Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 3, Release: release}, // released once the client is gone
	}}})
	logs := &logWatch{}
	cs.Logger = slog.New(logs)
	cs.cfg.WSPingInterval, cs.cfg.WSPingTimeout = 50*time.Millisecond, 200*time.Millisecond
	conv := cs.newConversation(t, cs.alice)
	completed := logs.watch("chat turn", "conversation_id", conv, "status", datachat.StatusComplete)
	dropped := logs.watch("websocket client gone: closing", "conversation_id", conv)

	ws := dialRawWS(t, strings.TrimPrefix(cs.URL, "http://"), "/ws?conversation_id="+conv, map[string]string{"X-API-Key": cs.alice}, 0)
	ws.send("chat_send", map[string]string{"content": "hi"})
	var text string
	for text != "hello there " { // read, answering pings, until both tokens came
		msg, err := ws.next()
		if err != nil {
			t.Fatalf("before the tokens: %v", err)
		}
		var ev struct {
			Type string
			Data chat.TokenEvent
		}
		json.Unmarshal([]byte(msg), &ev)
		if ev.Type != "chat_token" && ev.Type != "tool_call_start" {
			t.Fatalf("unexpected event %s", msg)
		}
		text += ev.Data.Token
	}
	// From here on the client reads nothing and answers nothing.
	await(t, dropped, 10*time.Second, "the unanswered ping closing the connection")
	if err := ws.closedWithin(5 * time.Second); err != nil {
		t.Error(err)
	}
	free()
	await(t, completed, 10*time.Second, "the turn completing without its client")
	msgs := cs.messages(t, conv)
	if len(msgs) != 2 || msgs[1].Status != datachat.StatusComplete || msgs[1].Content != "hello there again" {
		t.Errorf("stored %v, want the whole answer complete", msgs)
	}
}

// TestPingsGoOn: the server pings a connected client every ping interval
// for as long as it is connected, not once: a client that answered three
// pings and then stops answering is found at the next one and closed.
func TestPingsGoOn(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{})
	logs := &logWatch{}
	cs.Logger = slog.New(logs)
	cs.cfg.WSPingInterval, cs.cfg.WSPingTimeout = 20*time.Millisecond, 200*time.Millisecond
	conv := cs.newConversation(t, cs.alice)
	dropped := logs.watch("websocket client gone: closing", "conversation_id", conv)

	ws := dialRawWS(t, strings.TrimPrefix(cs.URL, "http://"), "/ws?conversation_id="+conv, map[string]string{"X-API-Key": cs.alice}, 0)
	pings, stop := make(chan struct{}, 8), make(chan struct{})
	defer close(stop)
	var n atomic.Int32
	ws.onPing = func() {
		if n.Add(1) == 3 {
			pings <- struct{}{}
			<-stop // answered three pings: from here on, none
		}
	}
	go ws.next()
	select {
	case <-pings:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d pings in 10 s at one every 20 ms, want 3", n.Load())
	}
	await(t, dropped, 10*time.Second, "the fourth ping, unanswered, closing the connection")
}

// smallBuffers makes the connections a listener accepts send through a tiny
// kernel buffer, so a client that stops reading blocks the server's writes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// serveSmallBuffers serves h on a loopback listener of [smallBuffers] until
// the test ends, and returns its address.
func serveSmallBuffers(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(smallBuffers{ln})
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// TestClientThatStopsReadingIsCut: a client that reads nothing of a long
// answer (through tiny socket buffers) is cut — by the write timeout, by
// its outbox's bound, or by the ping it cannot answer while the server's
// writes to it are blocked —, its answer is still completed and stored, and
// meanwhile, while the stalled turn still runs, another client's turn
// streams and completes. Each step waits for an event (a log record, the
// fake provider's release), none for time.
func TestClientThatStopsReadingIsCut(t *testing.T) {
	chunks := make([]string, 400)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%03d%s ", i, strings.Repeat("x", 8<<10))
	}
	const never = time.Hour
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		log  string // what the server logs as it cuts the client
	}{
		{"write timeout", func(c *Config) {
			c.WSOutboxBytes, c.WSWriteTimeout, c.WSPingInterval = 64<<20, 100*time.Millisecond, never
		}, "websocket client too slow: closing"},
		{"outbox bound", func(c *Config) {
			c.WSOutboxBytes, c.WSWriteTimeout, c.WSPingInterval = 64<<10, never, never
		}, "websocket client too slow: closing"},
		{"unanswered ping", func(c *Config) {
			c.WSOutboxBytes, c.WSWriteTimeout, c.WSPingInterval, c.WSPingTimeout = 64<<20, never, 50*time.Millisecond, 200*time.Millisecond
		}, "websocket client gone: closing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
				{Match: &llmtest.Match{Contains: "long answer"}, Text: chunks,
					// Held after its last chunk (the first frame is the role's) until the test says.
					Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1 + len(chunks), Release: release}},
				{Match: &llmtest.Match{Contains: "short answer"}, Text: []string{"one ", "two ", "three"}},
			}})
			logs := &logWatch{}
			cs.Logger = slog.New(logs)
			tc.cfg(&cs.cfg)
			stalled, other := cs.newConversation(t, cs.alice), cs.newConversation(t, cs.alice)
			cut := logs.watch(tc.log, "conversation_id", stalled)
			completed := logs.watch("chat turn", "conversation_id", stalled, "status", datachat.StatusComplete)

			addr := serveSmallBuffers(t, cs.Handler())

			ws := dialRawWS(t, addr, "/ws?conversation_id="+stalled, map[string]string{"X-API-Key": cs.alice}, 4096)
			ws.send("chat_send", map[string]string{"content": "a long answer, please"})
			// The client reads nothing from here on.
			await(t, cut, 10*time.Second, "the stalled client cut")
			if err := ws.closedWithin(5 * time.Second); err != nil {
				t.Error(err)
			}

			// The stalled turn still runs (its provider is held), and another
			// client's turn streams to its end meanwhile.
			c := cs.dialEvents(t, other)
			c.send("chat_send", map[string]string{"content": "a short answer, please"})
			evs, ok := c.until("chat_complete")
			var text string
			for _, ev := range evs {
				if ev.Type == "chat_token" {
					var d chat.TokenEvent
					json.Unmarshal(ev.Data, &d)
					text += d.Token
				}
			}
			if !ok || evs[len(evs)-1].Type != "chat_complete" || text != "one two three" {
				t.Fatalf("the other client got %v, %q; want its tokens and chat_complete", types(evs), text)
			}
			if msgs := cs.messages(t, stalled); len(msgs) != 2 || msgs[1].Status != datachat.StatusStreaming {
				t.Fatalf("the stalled conversation while held: %v, want its answer streaming", msgs)
			}

			free()
			await(t, completed, 10*time.Second, "the stalled client's turn completed")
			msgs := cs.messages(t, stalled)
			full := strings.Join(chunks, "")
			if len(msgs) != 2 || msgs[1].Status != datachat.StatusComplete || msgs[1].Content != full {
				t.Errorf("stored status %s with %d of %d bytes, want the whole answer complete", msgs[1].Status, len(msgs[1].Content), len(full))
			}
		})
	}
}

// TestWebSocketKeyAsSubprotocol: the page sends its key as a subprotocol
// (a browser cannot set headers on a WebSocket), and the server selects
// datachat.v1, never echoing the key; headers and ?api_key= still work.
func TestWebSocketKeyAsSubprotocol(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t)}
	conv := cs.newConversation(t, cs.alice)
	base := strings.Replace(cs.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name      string
		url       string
		protocols []string
		header    http.Header
		status    int
		selected  string
	}{
		{"key as a subprotocol", base, []string{"datachat.v1", "datachat.key." + cs.alice}, nil, 101, "datachat.v1"},
		{"key first", base, []string{"datachat.key." + cs.alice, "datachat.v1"}, nil, 101, "datachat.v1"},
		{"wrong key as a subprotocol", base, []string{"datachat.v1", "datachat.key.dck_wrong"}, nil, 401, ""},
		{"empty key", base, []string{"datachat.v1", "datachat.key."}, nil, 401, ""},
		{"bob's key on alice's conversation", base, []string{"datachat.v1", "datachat.key." + cs.bob}, nil, 404, ""},
		{"header", base, nil, http.Header{"X-API-Key": {cs.alice}}, 101, ""},
		{"bearer", base, nil, http.Header{"Authorization": {"Bearer " + cs.alice}}, 101, ""},
		{"query parameter, kept for existing clients", base + "&api_key=" + cs.alice, nil, nil, 101, ""},
		{"no key", base, []string{"datachat.v1"}, nil, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, resp, err := websocket.Dial(ctx, tc.url, &websocket.DialOptions{Subprotocols: tc.protocols, HTTPHeader: tc.header})
			if tc.status != 101 {
				if err == nil || resp == nil || resp.StatusCode != tc.status {
					t.Fatalf("got %v %v, want HTTP %d", resp, err, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.CloseNow()
			if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != tc.selected {
				t.Errorf("selected subprotocol %q, want %q", got, tc.selected)
			}
			if strings.Contains(fmt.Sprint(resp.Header), cs.alice) {
				t.Errorf("the key is echoed in the response headers: %v", resp.Header)
			}
		})
	}
	// The refusal without a key says how a browser sends one.
	_, resp, _ := websocket.Dial(ctx, base, nil)
	if resp != nil {
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), "subprotocol datachat.key.KEY") {
			t.Errorf("401 without a key: %s", b)
		}
	}
}

// TestWebSocketCapPerUser: beyond MaxWSPerUser a user's next WebSocket is
// refused before the upgrade with a 429 saying what to do; other users are
// not affected, and a closed socket frees its place.
func TestWebSocketCapPerUser(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) { c.MaxWSPerUser = 2 })}
	conv := cs.newConversation(t, cs.alice)
	bobConv := cs.newConversation(t, cs.bob)
	cs.dial(t, conv, cs.alice)
	cs.dial(t, conv, cs.alice)
	url := strings.Replace(cs.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv
	_, resp, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{HTTPHeader: http.Header{"X-API-Key": {cs.alice}}})
	if err == nil || resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third socket: got %v %v, want 429 with Retry-After", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "Too many open chat connections: you have 2") || !strings.Contains(string(b), "Close datachat in other tabs") {
		t.Errorf("refusal: %s", b)
	}
	cs.dial(t, bobConv, cs.bob) // bob has his own

	// A released place is free again.
	release, err := cs.admitWS("carol")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.admitWS("carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.admitWS("carol"); err == nil {
		t.Fatal("carol's third place: admitted")
	}
	release()
	if _, err := cs.admitWS("carol"); err != nil {
		t.Errorf("after a release: %v", err)
	}
}

// eventClient is a WebSocket client recording every event and why reading
// stopped.
type eventClient struct {
	t      *testing.T
	conn   *websocket.Conn
	events chan wireEvent
	err    error // once events is closed
}

// dialEvents opens a WebSocket on conv with alice's key.
func (cs *chatServer) dialEvents(t *testing.T, conv string) *eventClient {
	t.Helper()
	return cs.dialKey(t, conv, cs.alice)
}

func (c *eventClient) send(typ string, data any) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", typ, err)
	}
}

// until returns the events up to the first of type end (or chat_error); ok
// is false if the connection ended first.
func (c *eventClient) until(end string) (evs []wireEvent, ok bool) {
	c.t.Helper()
	timeout := time.After(20 * time.Second) // a safety net
	for {
		select {
		case ev, open := <-c.events:
			if !open {
				return evs, false
			}
			evs = append(evs, ev)
			if ev.Type == end || ev.Type == "chat_error" {
				return evs, true
			}
		case <-timeout:
			c.t.Fatalf("no %s within 20s; events so far: %v", end, types(evs))
		}
	}
}

// closed waits for the connection to end and returns its close status.
func (c *eventClient) closed() websocket.StatusCode {
	c.t.Helper()
	for {
		select {
		case _, open := <-c.events:
			if !open {
				return websocket.CloseStatus(c.err)
			}
		case <-time.After(20 * time.Second):
			c.t.Fatal("the WebSocket is still open 20s later")
		}
	}
}

// TestShutdownDeliversTheLastEvent drains the server while two turns stream,
// every step ordered by an event, none by time: a chat_send is refused, a
// held turn released during the grace completes, and the turn still running
// when the grace ends (the test ends it) is interrupted — its chat_error
// reaches the client before the socket closes as going away.
func TestShutdownDeliversTheLastEvent(t *testing.T) {
	hold := make(chan struct{})
	stall := make(chan struct{})
	defer close(stall)
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{Contains: "short one"}, Text: []string{"s1 ", "s2 ", "s3 "},
			Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 2, Release: hold}},
		{Match: &llmtest.Match{Contains: "long one"}, Text: []string{"l1 ", "l2 ", "l3 "},
			Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 3, Release: stall}}, // never released in time
	}})
	logs := &logWatch{}
	cs.Logger = slog.New(logs)
	draining := logs.watch("draining")
	convA, convB, convC := cs.newConversation(t, cs.alice), cs.newConversation(t, cs.alice), cs.newConversation(t, cs.alice)
	a, b, c := cs.dialEvents(t, convA), cs.dialEvents(t, convB), cs.dialEvents(t, convC)

	b.send("chat_send", map[string]string{"content": "long one"})
	evB, _ := b.until("chat_token")
	a.send("chat_send", map[string]string{"content": "short one"})
	evA, _ := a.until("chat_token")

	grace, endGrace := context.WithCancel(context.Background())
	defer endGrace()
	shut := make(chan error, 1)
	go func() { shut <- cs.Shutdown(grace) }()
	await(t, draining, 10*time.Second, "draining")

	c.send("chat_send", map[string]string{"content": "hello?"})
	if evs, _ := c.until("chat_complete"); len(evs) != 1 || evs[0].Type != "chat_error" || !strings.Contains(string(evs[0].Data), "restarting") {
		t.Errorf("chat_send while draining: got %v, want one chat_error saying the server is restarting", types(evs))
	}
	if st, _ := cs.post(t, "/api/conversations", cs.alice, `{}`); st != 503 {
		t.Errorf("a new request while draining: got %d, want 503", st)
	}

	close(hold) // the short turn finishes within the grace
	more, _ := a.until("chat_complete")
	evA = append(evA, more...)
	if last := evA[len(evA)-1]; last.Type != "chat_complete" || decode[chat.CompleteEvent](t, last.Data).Status != "complete" {
		t.Errorf("short turn ended with %v", types(evA))
	}

	endGrace() // the long one is interrupted
	more, ok := b.until("chat_complete")
	evB = append(evB, more...)
	if last := evB[len(evB)-1]; !ok || last.Type != "chat_error" || !strings.Contains(string(last.Data), "restarting") {
		t.Fatalf("long turn ended with %v (connection open %v), want a chat_error saying the server is restarting", types(evB), ok)
	}
	for _, cl := range []*eventClient{a, b, c} {
		if st := cl.closed(); st != websocket.StatusGoingAway {
			t.Errorf("close status %v, want going away", st)
		}
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}

	if m := cs.messages(t, convA); len(m) != 2 || m[1].Status != datachat.StatusComplete || m[1].Content != "s1 s2 s3 " {
		t.Errorf("short turn stored as %v", m)
	}
	if m := cs.messages(t, convB); len(m) != 2 || m[1].Status != datachat.StatusInterrupted || m[1].Content != tokens(evB) {
		t.Errorf("long turn stored as %v, want interrupted with %q", m, tokens(evB))
	}
	if m := cs.messages(t, convC); len(m) != 0 {
		t.Errorf("the refused chat_send stored %v", m)
	}
}
