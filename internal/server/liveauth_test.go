package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
	"datachat/internal/llmtest"
	"datachat/internal/sqlite"
)

// otherProcess opens a second handle on the test server's SQLite file, as
// `datachat keys revoke` run beside serve does.
func (ts *testServer) otherProcess(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), ts.Store.(*sqlite.Store).Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// keyID returns the id of the API key secret, as `keys list` shows it.
func (ts *testServer) keyID(t *testing.T, secret string) string {
	t.Helper()
	keys, err := ts.Store.APIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Hash == datachat.HashAPIKey(secret) {
			return k.ID
		}
	}
	t.Fatalf("no key with that secret")
	return ""
}

// revokeElsewhere revokes the key secret through another handle on the
// database, as another process does, and returns when it did.
func (ts *testServer) revokeElsewhere(t *testing.T, secret string) time.Time {
	t.Helper()
	if err := ts.otherProcess(t).RevokeAPIKey(t.Context(), ts.keyID(t, secret)); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// newKey creates another API key for the user name and returns it.
func (ts *testServer) newKey(t *testing.T, name string) string {
	t.Helper()
	u, err := ts.Store.EnsureUser(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	secret, hash, prefix := datachat.NewAPIKeySecret()
	if err := ts.Store.CreateAPIKey(t.Context(), &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return secret
}

// credential returns the credential of the key secret, as the server
// authenticates it.
func (ts *testServer) credential(t *testing.T, secret string) datachat.Credential {
	t.Helper()
	_, cred, err := ts.Store.Authenticate(t.Context(), datachat.HashAPIKey(secret))
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// checkCounter counts the store checks of the server's live credentials.
type checkCounter struct {
	mu      sync.Mutex
	n       int
	changed chan struct{}
}

// countChecks makes the server report its checks; set before any traffic.
func (ts *testServer) countChecks() *checkCounter {
	c := &checkCounter{changed: make(chan struct{})}
	ts.live.checked = func(int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n++
		close(c.changed)
		c.changed = make(chan struct{})
	}
	return c
}

func (c *checkCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// await waits until n checks more than from were made.
func (c *checkCounter) await(t *testing.T, from, n int) {
	t.Helper()
	timeout := time.After(20 * time.Second) // a safety net
	for {
		c.mu.Lock()
		got, changed := c.n, c.changed
		c.mu.Unlock()
		if got >= from+n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d checks of the live credentials, want %d", got-from, n)
		}
	}
}

// closedRevoked waits (up to within) for the client's connection to end and
// checks that the server closed it as revoked, with reason.
func (c *eventClient) closedRevoked(t *testing.T, within time.Duration, reason string) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		for range c.events {
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(within):
		t.Fatalf("the WebSocket is still open %s after its key was revoked", within)
	}
	var ce websocket.CloseError
	if !errors.As(c.err, &ce) || ce.Code != wsStatusRevoked || ce.Reason != reason {
		t.Errorf("closed with %v, want status %d and reason %q", c.err, wsStatusRevoked, reason)
	}
}

// dialKey opens a WebSocket on conv with key, its events read into the
// client as they come; see [chatServer.dialEvents] for alice's.
func (cs *chatServer) dialKey(t *testing.T, conv, key string) *eventClient {
	t.Helper()
	conn := cs.dialKeyConn(t, conv, key)
	c := &eventClient{t: t, conn: conn, events: make(chan wireEvent, 1024)}
	go func() {
		for {
			_, b, err := conn.Read(context.Background())
			if err != nil {
				c.err = err
				close(c.events)
				return
			}
			var ev wireEvent
			json.Unmarshal(b, &ev)
			c.events <- ev
		}
	}()
	return c
}

// newStalledChatServer is a chat server that checks for revoked keys every
// 50 ms, whose model answers every turn with text but stalls after its
// first after chunks until the test ends.
func newStalledChatServer(t *testing.T, p llmtest.Protocol, after int, text ...string) *chatServer {
	t.Helper()
	release := make(chan struct{})
	cs := newChatServer(t, p, llmtest.Script{Default: &llmtest.Turn{
		Text:  text,
		Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: after, Release: release},
	}})
	t.Cleanup(func() { close(release) })
	cs.live.interval = 50 * time.Millisecond
	return cs
}

// revokeOnceAsked waits until the model has been asked, then revokes
// alice's key from another process.
func (cs *chatServer) revokeOnceAsked(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := cs.fake.Wait(ctx, func(reqs []llmtest.Request) bool { return len(reqs) > 0 }); err != nil {
		t.Fatal(err)
	}
	cs.revokeElsewhere(t, cs.alice)
}

// revokeWhileStreaming reads the data lines of r, a stream of server-sent
// events that must have answered 200, until their text holds upTo; then
// revokes alice's key from another process and returns all the stream's
// data lines once it has ended.
func (cs *chatServer) revokeWhileStreaming(t *testing.T, r *http.Response, upTo string) []string {
	t.Helper()
	if r.StatusCode != 200 {
		b, _ := io.ReadAll(r.Body)
		t.Fatalf("got %d %s", r.StatusCode, b)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- l
			}
		}
	}()
	var got []string
	for !strings.Contains(strings.Join(got, ""), upTo) {
		l, ok := <-lines
		if !ok {
			t.Fatalf("the stream ended before the answer's text: %q", got)
		}
		got = append(got, l)
	}
	cs.revokeElsewhere(t, cs.alice)
	ended := make(chan struct{})
	go func() {
		for l := range lines {
			got = append(got, l)
		}
		close(ended)
	}()
	await(t, ended, 10*time.Second, "the stream ending")
	return got
}

var revokedMessage = datachat.ErrAPIKeyRevoked.Message

// TestRevokedKeyClosesItsWebSocket: a key revoked by another process while
// its WebSocket runs a turn's SQL query, with the real poll interval, closes
// the socket within a second with 4401 and the reason, stops the query, and
// stores the answer cancelled with the text streamed; the key then opens
// nothing.
func TestRevokedKeyClosesItsWebSocket(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Text: []string{"Summing. "}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+longQuery+`"}`)}},
	}})
	logs := &logWatch{}
	cs.Logger = slog.New(logs)
	conv := cs.newConversation(t, cs.alice)
	cancelled := logs.watch("chat turn", "conversation_id", conv, "status", "cancelled")
	c := cs.dialEvents(t, conv)
	c.send("chat_send", map[string]string{"content": "Sum a lot"})
	c.until("tool_call_start")
	cs.awaitQueryRunning(t)

	revoked := cs.revokeElsewhere(t, cs.alice)
	// The check runs every 500 ms: the socket closes within a second
	// (1.5 s allowed for a loaded machine).
	c.closedRevoked(t, 1500*time.Millisecond, revokedMessage)
	t.Logf("closed %v after the revocation", time.Since(revoked).Round(time.Millisecond))

	if err := queryStopped(cs.testServer); err != nil {
		t.Errorf("the query: %v", err)
	}
	await(t, cancelled, 10*time.Second, "the turn ending cancelled")
	if m := cs.messages(t, conv); len(m) != 2 || m[1].Status != datachat.StatusCancelled || m[1].Content != "Summing. " {
		t.Errorf("stored %v, want the answer cancelled with the text streamed", m)
	}
	if st, body := cs.post(t, "/api/conversations", cs.alice, `{}`); st != 401 {
		t.Errorf("a new request with the revoked key: got %d %v, want 401", st, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	url := strings.Replace(cs.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv
	if _, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"X-API-Key": {cs.alice}}}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("a new WebSocket with the revoked key: got %v %v, want 401 before the upgrade", resp, err)
	}
}

// TestIdleWebSocketOfRevokedKeyCloses: a socket idle between turns, whose
// client answers every ping, is closed all the same.
func TestIdleWebSocketOfRevokedKeyCloses(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) {
		c.WSPingInterval, c.WSPingTimeout = 10*time.Millisecond, 5*time.Second
		c.AuthCheckInterval = 50 * time.Millisecond
	})}
	conv := cs.newConversation(t, cs.alice)
	pinged := make(chan struct{}, 100)
	ws := dialRawWS(t, strings.TrimPrefix(cs.URL, "http://"), "/ws?conversation_id="+conv, map[string]string{"X-API-Key": cs.alice}, 0)
	ws.onPing = func() {
		select {
		case pinged <- struct{}{}:
		default:
		}
	}
	ended := make(chan error, 1)
	go func() {
		_, err := ws.next() // answers pings until a data or close frame
		ended <- err
	}()
	for range 5 {
		await(t, pingedOnce(pinged), 10*time.Second, "a ping")
	}
	cs.revokeElsewhere(t, cs.alice)
	err := receive(t, ended, 10*time.Second, "the idle WebSocket of the revoked key is still open 10 s later, its pings answered")
	want := fmt.Sprintf("close frame %x", append([]byte{byte(wsStatusRevoked >> 8), byte(wsStatusRevoked & 0xff)}, revokedMessage...))
	if err == nil || err.Error() != want {
		t.Errorf("the socket ended with %v, want %s", err, want)
	}
}

// pingedOnce turns one receive from pinged into a channel closed by it.
func pingedOnce(pinged <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() { <-pinged; close(ch) }()
	return ch
}

// TestRevocationSparesOtherCredentials: revoking one key of a user leaves
// that user's other keys' connections, and other users', working, check
// after check.
func TestRevocationSparesOtherCredentials(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"still here"}}})
	cs.live.interval = 50 * time.Millisecond
	checks := cs.countChecks()
	alice2 := cs.newKey(t, "alice")
	conv, bobConv := cs.newConversation(t, cs.alice), cs.newConversation(t, cs.bob)
	revoked := cs.dialEvents(t, conv)
	other := cs.dialKey(t, conv, alice2)
	bob := cs.dialKey(t, bobConv, cs.bob)

	cs.revokeElsewhere(t, cs.alice)
	revoked.closedRevoked(t, 10*time.Second, revokedMessage)
	checks.await(t, checks.count(), 3)

	for name, c := range map[string]*eventClient{"alice's other key": other, "bob": bob} {
		c.send("chat_send", map[string]string{"content": "are you there?"})
		evs, ok := c.until("chat_complete")
		if !ok || tokens(evs) != "still here" || evs[len(evs)-1].Type != "chat_complete" {
			t.Errorf("%s: a turn after the revocation got %v (open %v)", name, types(evs), ok)
		}
	}
	for _, key := range []string{alice2, cs.bob} {
		if st, _ := cs.post(t, "/api/conversations", key, `{}`); st != 201 {
			t.Errorf("a request with a key not revoked: got %d, want 201", st)
		}
	}
}

// TestServerRevokeActsAtOnce: a revocation made in this process (Revoke,
// RevokeUser) ends its requests without waiting for a check.
func TestServerRevokeActsAtOnce(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) { c.AuthCheckInterval = time.Hour })}
	alice2 := cs.newKey(t, "alice")
	conv, bobConv := cs.newConversation(t, cs.alice), cs.newConversation(t, cs.bob)
	first, second := cs.dialEvents(t, conv), cs.dialKey(t, conv, alice2)
	bob := cs.dialKey(t, bobConv, cs.bob)

	if n := cs.Revoke(cs.credential(t, cs.alice), datachat.ErrAPIKeyRevoked); n != 1 {
		t.Errorf("Revoke: ended %d requests, want 1", n)
	}
	first.closedRevoked(t, 10*time.Second, revokedMessage)

	disabled := datachat.Errorf(datachat.EUNAUTHORIZED, "Your account was disabled.")
	if n := cs.RevokeUser(cs.aliceID, disabled); n != 1 {
		t.Errorf("RevokeUser: ended %d requests, want 1", n)
	}
	second.closedRevoked(t, 10*time.Second, "Your account was disabled.")
	if err := bob.conn.Ping(t.Context()); err != nil {
		t.Errorf("bob's socket: %v", err)
	}
	if n := cs.Revoke(cs.credential(t, cs.alice), datachat.ErrAPIKeyRevoked); n != 0 {
		t.Errorf("Revoke again: ended %d requests, want 0", n)
	}
}

// TestRevokedKeyEndsCompletionStream: a streamed /v1/chat/completions ends
// with OpenAI's error event (no [DONE]), its answer stored cancelled; one
// not streamed answers 401 in OpenAI's shape.
func TestRevokedKeyEndsCompletionStream(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			cs := newStalledChatServer(t, llmtest.OpenAI, 3, "Let me ", "think ")
			conv := cs.newConversation(t, cs.alice)
			body := fmt.Sprintf(`{"model":"datachat","stream":%v,"messages":[{"role":"user","content":"Think hard"}]}`, stream)
			if !stream {
				resp := make(chan *http.Response, 1)
				go func() { resp <- cs.completionReq(t, body, map[string]string{"X-Conversation-ID": conv}) }()
				cs.revokeOnceAsked(t)
				r := <-resp
				b, _ := io.ReadAll(r.Body)
				if r.StatusCode != 401 || !strings.Contains(string(b), `"code":"invalid_api_key"`) || !strings.Contains(string(b), revokedMessage) {
					t.Errorf("got %d %s, want 401 in OpenAI's shape saying the key was revoked", r.StatusCode, b)
				}
				if m := cs.messages(t, conv); len(m) != 2 || m[1].Status != datachat.StatusCancelled {
					t.Errorf("stored %v, want the answer cancelled", m)
				}
				return
			}
			r := cs.completionReq(t, body, map[string]string{"X-Conversation-ID": conv})
			got := cs.revokeWhileStreaming(t, r, "think ")
			// The event the README shows.
			want := `{"error":{"message":"The API key was revoked. Use another key.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
			if last := got[len(got)-1]; last != want {
				t.Errorf("the stream ended with %s, want the error event %s", last, want)
			}
			if strings.Contains(strings.Join(got, "\n"), "[DONE]") {
				t.Errorf("the stream of a revoked key says [DONE]: %q", got)
			}
			if m := cs.messages(t, conv); len(m) != 2 || m[1].Status != datachat.StatusCancelled || m[1].Content != "Let me think " {
				t.Errorf("stored %v, want the answer cancelled with the text streamed", m)
			}
		})
	}
}

// TestRevokedKeyEndsChatQuery: a /chat/query whose key is revoked while its
// turn runs answers 401 saying so, its answer stored cancelled.
func TestRevokedKeyEndsChatQuery(t *testing.T) {
	cs := newStalledChatServer(t, llmtest.Gemini, 1, "Hmm ", "let me see")
	conv := cs.newConversation(t, cs.alice)
	type answer struct {
		status int
		body   map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"Think","conversation_id":"`+conv+`"}`)
		done <- answer{st, body}
	}()
	cs.revokeOnceAsked(t)
	a := receive(t, done, 10*time.Second, "/chat/query still runs 10 s after its key was revoked")
	if e, _ := a.body["error"].(map[string]any); a.status != 401 || e["type"] != "unauthorized" || e["message"] != revokedMessage {
		t.Errorf("got %d %v, want 401 saying the key was revoked", a.status, a.body)
	}
	if m := cs.messages(t, conv); len(m) != 2 || m[1].Status != datachat.StatusCancelled {
		t.Errorf("stored %v, want the answer cancelled", m)
	}
}

// TestRevokedKeyEndsMCPCall: an MCP tool call in flight (a long query) on
// /mcp stops, and answers a JSON-RPC error saying the key was revoked.
func TestRevokedKeyEndsMCPCall(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) { c.AuthCheckInterval = 50 * time.Millisecond })}
	conv := cs.newConversation(t, cs.alice)
	s := cs.mcpSession(t, cs.alice)
	done := callLongQuery(context.Background(), s, conv)
	cs.awaitQueryRunning(t)
	cs.revokeElsewhere(t, cs.alice)
	err := receive(t, done, 10*time.Second, "the MCP call still runs 10 s after its key was revoked")
	if err == nil || !strings.Contains(err.Error(), revokedMessage) {
		t.Errorf("the call ended with %v, want an error saying the key was revoked", err)
	}
	if err := queryStopped(cs.testServer); err != nil {
		t.Errorf("the query: %v", err)
	}
}

// TestMCPCallEndsWithItsClient: a client that gives up on a call (its HTTP
// request gone) stops the call's query too.
func TestMCPCallEndsWithItsClient(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t)}
	conv := cs.newConversation(t, cs.alice)
	s := cs.mcpSession(t, cs.alice)
	callCtx, giveUp := context.WithCancel(context.Background())
	done := callLongQuery(callCtx, s, conv)
	cs.awaitQueryRunning(t)
	giveUp()
	<-done
	if err := queryStopped(cs.testServer); err != nil {
		t.Errorf("the query of a call its client gave up on: %v", err)
	}
}

// longQuery runs for hours unless stopped.
const longQuery = "SELECT sum(hash(i)) FROM range(100000000000) t(i)"

// awaitQueryRunning waits until the engine runs one query.
func (ts *testServer) awaitQueryRunning(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ts.Workspace.Engine.WaitLoad(ctx, func(_, running int) bool { return running == 1 }); err != nil {
		t.Fatalf("the query never ran: %v", err)
	}
}

// callLongQuery calls execute_sql with [longQuery] in conv on the MCP
// session s, in a goroutine, and sends the call's error once it ends.
func callLongQuery(ctx context.Context, s *mcp.ClientSession, conv string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "execute_sql", Arguments: map[string]any{
			"conversation_id": conv, "query": longQuery}})
		done <- err
	}()
	return done
}

// queryStopped waits for the engine to run no query, and fails if that
// takes half the engine's own timeout: the query runs for hours unless
// stopped, so ending before the timeout means something stopped it (not a
// measure of how fast).
func queryStopped(ts *testServer) error {
	limit := ts.Workspace.Engine.Options().Timeout / 2
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := ts.Workspace.Engine.WaitLoad(ctx, func(_, running int) bool { return running == 0 }); err != nil {
		return fmt.Errorf("still running %s later, as if left to the engine's timeout", limit)
	}
	return nil
}

// TestRevokedKeyEndsUpload: an upload whose client is still sending when its
// key is revoked is cut: 401 saying so, and no dataset.
func TestRevokedKeyEndsUpload(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) { c.AuthCheckInterval = 50 * time.Millisecond })}
	checks := cs.countChecks()
	conv := cs.newConversation(t, cs.alice)
	pr, pw := io.Pipe()
	defer pw.Close()
	mw := multipart.NewWriter(pw)
	req, _ := http.NewRequest("POST", cs.URL+"/api/conversations/"+conv+"/datasets", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", cs.alice)
	type answer struct {
		resp *http.Response
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		done <- answer{resp, err}
	}()
	fw, err := mw.CreateFormFile("file", "big.csv")
	if err != nil {
		t.Fatal(err)
	}
	// 16 MiB more than the sockets' buffers hold: once written, the server
	// is reading the body, under the key.
	line := strings.Repeat("x", 1023) + "\n"
	fmt.Fprint(fw, "a\n")
	for range 16 << 10 {
		if _, err := io.WriteString(fw, line); err != nil {
			t.Fatal(err)
		}
	}
	// A check with the upload live, then the revocation; the client sends
	// nothing more, mid-file.
	checks.await(t, checks.count(), 1)
	cs.revokeElsewhere(t, cs.alice)
	a := receive(t, done, 10*time.Second, "the upload still runs 10 s after its key was revoked")
	if a.err != nil {
		t.Fatalf("the upload got no answer: %v", a.err)
	}
	defer a.resp.Body.Close()
	var body struct {
		Error struct{ Message, Type string }
	}
	json.NewDecoder(a.resp.Body).Decode(&body)
	if a.resp.StatusCode != 401 || body.Error.Message != revokedMessage {
		t.Errorf("got %d %+v, want 401 saying the key was revoked", a.resp.StatusCode, body)
	}
	if ds, err := cs.Store.Datasets(t.Context(), conv); err != nil || len(ds) != 0 {
		t.Errorf("datasets after the cut upload: %v %v", ds, err)
	}
}

// TestRevocationRacesKeyCreation creates keys and opens WebSockets with them
// while other keys are revoked, through the store of another process and
// through Server.Revoke: every revoked key's socket closes, and no other.
func TestRevocationRacesKeyCreation(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) { c.AuthCheckInterval = 20 * time.Millisecond })}
	checks := cs.countChecks()
	other := cs.otherProcess(t)
	const n = 12
	type conn struct {
		key     string
		c       *eventClient
		revoked bool
	}
	conns := make([]conn, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("user%d", i%4)
			key := cs.newKey(t, name)
			conv := cs.newConversation(t, key)
			c := cs.dialKey(t, conv, key)
			conns[i] = conn{key: key, c: c, revoked: i%3 != 0}
			if !conns[i].revoked {
				return
			}
			if i%2 == 0 {
				if err := other.RevokeAPIKey(t.Context(), cs.keyID(t, key)); err != nil {
					t.Error(err)
				}
				return
			}
			cred := cs.credential(t, key)
			if err := cs.Store.RevokeAPIKey(t.Context(), cred.ID); err != nil {
				t.Error(err)
			}
			cs.Revoke(cred, datachat.ErrAPIKeyRevoked)
		})
	}
	wg.Wait()
	for _, cn := range conns {
		if cn.revoked {
			cn.c.closedRevoked(t, 10*time.Second, revokedMessage)
		}
	}
	checks.await(t, checks.count(), 3)
	for i, cn := range conns {
		if cn.revoked {
			continue
		}
		if err := cn.c.conn.Ping(t.Context()); err != nil {
			t.Errorf("socket %d, not revoked: %v", i, err)
		}
	}
}

// TestShutdownStopsTheWatcher: after Shutdown no goroutine of the server's
// check is left, though WebSockets were open when it began, and no request
// starts one again.
func TestShutdownStopsTheWatcher(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}})
	conv := cs.newConversation(t, cs.alice)
	c := cs.dialEvents(t, conv)
	if n := cs.live.watchers(); n == 0 {
		t.Fatal("no watcher runs while a WebSocket is open")
	}
	if err := cs.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.closed()
	if n := cs.live.watchers(); n != 0 {
		t.Errorf("%d watchers still run after Shutdown", n)
	}
	// A request after Shutdown (the handler mounted elsewhere) starts none.
	cs.live.track(cs.credential(t, cs.bob))
	if n := cs.live.watchers(); n != 0 {
		t.Errorf("%d watchers started after Shutdown", n)
	}
}
