package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat/internal/llmtest"
)

// serveListener serves s through Server.Serve on a new 127.0.0.1 listener
// (so MaxConnections applies) until the test ends, and returns its address.
func serveListener(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawConn is an HTTP/1.1 client written by hand, to send what net/http's
// client will not: bodies cut short, trickled or never finished.
type rawConn struct {
	t *testing.T
	net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a safety net: no test waits this long
	return &rawConn{t: t, Conn: c, br: bufio.NewReader(c)}
}

// send writes a request head and the first part of its body.
func (c *rawConn) send(head string, body []byte) {
	c.t.Helper()
	if _, err := c.Write(append([]byte(strings.ReplaceAll(head, "\n", "\r\n")+"\r\n"), body...)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// response reads one response and its body.
func (c *rawConn) response() (*http.Response, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read response body: %v", err)
	}
	return resp, string(b)
}

// closedWithin reports whether the server closed the connection (EOF or a
// reset) within d, reading and dropping anything else it sends.
func (c *rawConn) closedWithin(d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, net.ErrClosed):
		return nil // EOF
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("the server kept the connection open %s later", d)
	}
	return nil // reset by the server
}

func TestSecurityHeaderOnEveryResponse(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	key := map[string]string{"X-API-Key": ts.alice}
	for _, sc := range []scenario{
		{name: "page", method: "GET", url: "/", wantStatus: 200},
		{name: "asset", method: "GET", url: "/assets/js/main.js", wantStatus: 200},
		{name: "missing asset", method: "GET", url: "/assets/nope.js", wantStatus: 404},
		{name: "no route", method: "GET", url: "/api/nothing", headers: key, wantStatus: 404},
		{name: "wrong method", method: "PUT", url: "/api/conversations", headers: key, wantStatus: 405},
		{name: "no key", method: "GET", url: "/api/conversations", wantStatus: 401},
		{name: "OpenAI error", method: "GET", url: "/v1/models", wantStatus: 401},
		{name: "healthz", method: "GET", url: "/healthz", wantStatus: 200},
		{name: "api", method: "GET", url: "/api/conversations/" + conv, headers: key, wantStatus: 200},
		{name: "metrics", method: "GET", url: "/metrics", headers: key, wantStatus: 200},
		{name: "bad json", method: "POST", url: "/api/conversations", body: "{", headers: key, wantStatus: 400},
	} {
		req, _ := http.NewRequest(sc.method, ts.URL+sc.url, strings.NewReader(sc.body))
		for k, v := range sc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != sc.wantStatus {
			t.Errorf("%s: got status %d, want %d", sc.name, resp.StatusCode, sc.wantStatus)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", sc.name, got)
		}
	}
	// The WebSocket upgrade, and its refusal.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := strings.Replace(ts.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"X-API-Key": {ts.alice}}})
	if err != nil {
		t.Fatal(err)
	}
	c.CloseNow()
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("WebSocket upgrade: X-Content-Type-Options %q, want nosniff", got)
	}
	_, resp, err = websocket.Dial(ctx, url, nil)
	if err == nil || resp == nil || resp.StatusCode != 401 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("WebSocket refusal: got %v, %v; want 401 with nosniff", resp, err)
	}
}

// TestRefusalsDoNotReadTheBody sends requests whose bodies never finish: a
// refusal (no key, a bad key, over a budget) answers at once, says
// Connection: close, and closes without waiting for the rest.
func TestRefusalsDoNotReadTheBody(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.UploadsPerHour = 4 }) // a burst of 1
	conv := ts.newConversation(t, ts.alice)
	addr := strings.TrimPrefix(ts.URL, "http://")
	if st, res := ts.post(t, "/api/conversations/"+conv+"/datasets", ts.alice, `{"url":"http://127.0.0.1:1/x.csv"}`); st != 400 {
		t.Fatalf("first upload: got %d %v, want it taken (and failed on the URL)", st, res)
	}
	part := bytes.Repeat([]byte("x"), 1000)
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no key", "POST /api/conversations HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 100000\n", 401},
		{"no key, small body", "POST /api/conversations HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 2000\n", 401},
		{"bad key, chunked", "POST /api/conversations HTTP/1.1\nHost: x\nX-API-Key: dck_nope\nTransfer-Encoding: chunked\n", 401},
		{"no key, upload", "POST /api/conversations/" + conv + "/datasets HTTP/1.1\nHost: x\nContent-Type: multipart/form-data; boundary=b\nContent-Length: 10000000\n", 401},
		{"no key, OpenAI route", "POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 100000\n", 401},
		{"bad key, MCP", "POST /mcp HTTP/1.1\nHost: x\nAuthorization: Bearer dck_nope\nContent-Type: application/json\nContent-Length: 100000\n", 401},
		{"no route", "POST /api/nothing HTTP/1.1\nHost: x\nX-API-Key: " + ts.alice + "\nContent-Length: 100000\n", 404},
		{"over the upload budget", "POST /api/conversations/" + conv + "/datasets HTTP/1.1\nHost: x\nX-API-Key: " + ts.alice + "\nContent-Type: multipart/form-data; boundary=b\nContent-Length: 10000000\n", 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			body := part
			if strings.Contains(tc.head, "chunked") {
				body = []byte(fmt.Sprintf("%x\r\n%s\r\n", len(part), part))
			}
			c.send(tc.head, body)
			resp, b := c.response()
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, b, tc.status)
			}
			if !resp.Close { // http.ReadResponse takes Connection: close out of the header
				t.Errorf("the answer does not say Connection: close")
			}
			if err := c.closedWithin(5 * time.Second); err != nil {
				t.Error(err)
			}
		})
	}

	// A request whose body was read keeps its connection.
	c := dialRaw(t, addr)
	for i := range 2 {
		c.send("POST /api/conversations HTTP/1.1\nHost: x\nX-API-Key: "+ts.alice+"\nContent-Type: application/json\nContent-Length: 2\n", []byte("{}"))
		if resp, b := c.response(); resp.StatusCode != 201 || resp.Close {
			t.Fatalf("request %d on a kept connection: %d %s (close %v)", i, resp.StatusCode, b, resp.Close)
		}
	}
}

// TestSlowBodiesAreCut: a body that delivers less than BodyMinBytes within
// BodyReadTimeout is cut with a 400 saying so, and the connection closed,
// whether it stalls, trickles, or goes to a handler that never reads it.
func TestSlowBodiesAreCut(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) {
		c.BodyReadTimeout, c.BodyMinBytes = 300*time.Millisecond, 64<<10
	})
	conv := ts.newConversation(t, ts.alice)
	addr := strings.TrimPrefix(ts.URL, "http://")
	key := "X-API-Key: " + ts.alice + "\n"
	multipartHead := "Content-Type: multipart/form-data; boundary=b\n"
	filePart := []byte("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\r\nx,y\n")

	for _, tc := range []struct {
		name, head string
		body       []byte
		trickle    bool
	}{
		{"upload stalls", "POST /api/conversations/" + conv + "/datasets HTTP/1.1\nHost: x\n" + key + multipartHead + "Content-Length: 1000000\n", filePart, false},
		{"upload trickles", "POST /api/conversations/" + conv + "/datasets HTTP/1.1\nHost: x\n" + key + multipartHead + "Content-Length: 1000000\n", filePart, true},
		{"document trickles", "POST /api/conversations/" + conv + "/documents HTTP/1.1\nHost: x\n" + key + multipartHead + "Content-Length: 1000000\n", []byte("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.md\"\r\n\r\n# x\n"), true},
		{"fields trickle", "POST /api/conversations/" + conv + "/documents HTTP/1.1\nHost: x\n" + key + multipartHead + "Content-Length: 1000000\n", []byte("--b\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{"), true},
		{"SQL stalls", "POST /api/conversations/" + conv + "/sql HTTP/1.1\nHost: x\n" + key + "Content-Type: application/json\nContent-Length: 1000\n", []byte(`{"query":"SEL`), false},
		{"chunked JSON trickles", "POST /api/conversations HTTP/1.1\nHost: x\n" + key + "Content-Type: application/json\nTransfer-Encoding: chunked\n", []byte("1\r\n{\r\n"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			c.send(tc.head, tc.body)
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() { // 1 KiB every 20 ms: far below 64 KiB in 300 ms
				defer close(trickled)
				if !tc.trickle {
					return
				}
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				piece := bytes.Repeat([]byte(" "), 1024) // valid in JSON, CSV and Markdown alike
				if strings.Contains(tc.head, "chunked") {
					piece = []byte(fmt.Sprintf("%x\r\n%s\r\n", len(piece), piece))
				}
				for range 500 {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := c.Write(piece); err != nil {
						return
					}
				}
			}()
			resp, b := c.response()
			close(stop)
			<-trickled
			if resp.StatusCode != 400 || !strings.Contains(b, "arrived too slowly: less than 64 KiB in 300ms") {
				t.Errorf("got %d %s, want 400 saying the body arrived too slowly", resp.StatusCode, b)
			}
			if err := c.closedWithin(5 * time.Second); err != nil {
				t.Error(err)
			}
		})
	}

	// A body no handler reads cannot hold the connection either.
	c := dialRaw(t, addr)
	c.send("GET /api/conversations HTTP/1.1\nHost: x\n"+key+"Content-Length: 100000\n", []byte("x"))
	if resp, b := c.response(); resp.StatusCode != 200 {
		t.Fatalf("GET with an unread body: %d %s", resp.StatusCode, b)
	}
	if err := c.closedWithin(5 * time.Second); err != nil {
		t.Errorf("a body nobody reads, stalled: %v", err)
	}
}

// TestSteadySlowUploadGoesThrough uploads a dataset in pieces spread over
// several read windows, each piece above the minimum: the deadline moves
// with the progress, so the upload is taken though it lasts longer than one
// window.
func TestSteadySlowUploadGoesThrough(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) {
		c.BodyReadTimeout, c.BodyMinBytes = 2*time.Second, 16<<10
	})
	conv := ts.newConversation(t, ts.alice)
	var csv bytes.Buffer
	csv.WriteString("n,twice\n")
	for i := 0; csv.Len() < 15*40<<10; i++ {
		fmt.Fprintf(&csv, "%d,%d\n", i, 2*i)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "steady.csv")
	fw.Write(csv.Bytes())
	mw.Close()

	pr, pw := io.Pipe()
	go func() { // 15 pieces of 40 KiB, 200 ms apart: 3 s in all, over 2 s windows
		b := body.Bytes()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for len(b) > 0 {
			n := min(len(b), 40<<10)
			if _, err := pw.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			if len(b) > 0 {
				<-tick.C
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", ts.URL+"/api/conversations/"+conv+"/datasets", pr)
	req.ContentLength = int64(body.Len())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", ts.alice)
	st, d := doJSON(t, req)
	if st != 201 || d["name"] != "steady" {
		t.Fatalf("steady upload: got %d %v, want 201", st, d)
	}
}

// fakeConn records the read deadlines a pacedBody sets.
type fakeConn struct{ deadlines []time.Time }

func (f *fakeConn) SetReadDeadline(t time.Time) error {
	f.deadlines = append(f.deadlines, t)
	return nil
}

// TestPacedBodyMovesItsDeadline checks the deadline's arithmetic on a fake
// clock: it starts with the first read, moves each time the minimum arrived,
// not before, and is lifted at the end of the body.
func TestPacedBodyMovesItsDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	conn := &fakeConn{}
	body := io.NopCloser(io.MultiReader(strings.NewReader(strings.Repeat("a", 10)), strings.NewReader(strings.Repeat("b", 10)), strings.NewReader("c")))
	b := &pacedBody{body: body, conn: conn, now: func() time.Time { return now }, window: time.Second, min: 8}
	buf := make([]byte, 6)
	read := func() {
		t.Helper()
		if _, err := b.Read(buf); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		now = now.Add(100 * time.Millisecond)
	}
	read() // 6 bytes: the window starts
	want := []time.Time{time.Unix(1000, 0).Add(time.Second)}
	read() // 10: past the minimum, the deadline moves
	want = append(want, time.Unix(1000, 100e6).Add(time.Second))
	read() // 6 more
	read() // 10: moves again
	want = append(want, time.Unix(1000, 300e6).Add(time.Second))
	for !b.ended.Load() {
		read()
	}
	want = append(want, time.Time{}) // lifted at the end
	if len(conn.deadlines) != len(want) {
		t.Fatalf("deadlines: got %v, want %v", conn.deadlines, want)
	}
	for i := range want {
		if !conn.deadlines[i].Equal(want[i]) {
			t.Errorf("deadline %d: got %v, want %v", i, conn.deadlines[i], want[i])
		}
	}

	// A read that times out says what was too slow.
	b = &pacedBody{body: io.NopCloser(timeoutReader{}), conn: conn, now: time.Now, window: 30 * time.Second, min: 64 << 10}
	if _, err := b.Read(buf); err == nil || !strings.Contains(err.Error(), "less than 64 KiB in 30s") || ErrorStatus(err) != 400 {
		t.Errorf("timeout: got %v, want a 400 naming the pace", err)
	}
}

type timeoutReader struct{}

func (timeoutReader) Read([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }

// TestConnectionCap: with MaxConnections open, a new connection waits until
// one closes.
func TestConnectionCap(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.MaxConnections = 2 })
	addr := serveListener(t, ts.Server)
	get := "GET /healthz HTTP/1.1\nHost: x\n"
	first, second := dialRaw(t, addr), dialRaw(t, addr)
	for _, c := range []*rawConn{first, second} {
		c.send(get, nil)
		if resp, _ := c.response(); resp.StatusCode != 200 {
			t.Fatalf("healthz: %d", resp.StatusCode)
		}
	}
	third := dialRaw(t, addr) // the kernel accepts it; the server does not yet
	third.send(get, nil)
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.br.Peek(1); err == nil {
		t.Fatal("a third connection was served beyond MaxConnections=2")
	}
	// This check can only miss a bug (a server too slow to answer in
	// 300 ms), never fail a correct server.
	first.Close()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, _ := third.response(); resp.StatusCode != 200 {
		t.Errorf("third connection once one closed: %d", resp.StatusCode)
	}
}

// multipartBody builds a multipart body from parts written in order; a part
// with a file name is a file.
type formPart struct{ name, filename, value string }

func multipartBody(parts ...formPart) (string, []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		var w io.Writer
		if p.filename != "" {
			w, _ = mw.CreateFormFile(p.name, p.filename)
		} else {
			w, _ = mw.CreateFormField(p.name)
		}
		io.WriteString(w, p.value)
	}
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// TestMultipartFieldsAreChecked: an upload takes the field file and only its
// endpoint's own small fields before it, once each and within their size;
// names are at most 255 characters.
func TestMultipartFieldsAreChecked(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	datasets, documents := "/api/conversations/"+conv+"/datasets", "/api/conversations/"+conv+"/documents"
	csv := "a,b\n1,2\n"
	file := formPart{"file", "t.csv", csv}
	doc := formPart{"file", "notes.md", "# Notes\n\nSome text.\n"}
	many := make([]formPart, 3000)
	for i := range many {
		many[i] = formPart{fmt.Sprintf("f%d", i), "", strings.Repeat("x", 4<<10)}
	}
	manyNames := make([]formPart, 3000)
	for i := range manyNames {
		manyNames[i] = formPart{"name", "", "n"}
	}
	long := strings.Repeat("é", 256)
	for _, tc := range []struct {
		name   string
		url    string
		parts  []formPart
		status int
		want   string
	}{
		{"dataset with a name", datasets, []formPart{{"name", "", "Sales"}, file}, 201, `"name":"sales"`},
		{"dataset name of 255 characters", datasets, []formPart{{"name", "", strings.Repeat("é", 255)}, file}, 201, `"source":"t.csv"`},
		{"unknown field", datasets, []formPart{{"title", "", "x"}, file}, 400, `Unknown multipart field \"title\"`},
		{"unknown field after a known one", datasets, []formPart{{"name", "", "x"}, {"metadata", "", "{}"}, file}, 400, `Unknown multipart field \"metadata\"`},
		{"3000 fields", datasets, append(many, file), 400, `Unknown multipart field \"f0\"`},
		{"3000 name fields", datasets, append(manyNames, file), 400, `\"name\" is sent twice`},
		{"name over 1 KiB", datasets, []formPart{{"name", "", strings.Repeat("n", 1025)}, file}, 400, `\"name\" is larger than 1 KiB`},
		{"name of 256 characters", datasets, []formPart{{"name", "", long}, file}, 400, "The name is 256 characters long; at most 255"},
		{"file name of 256 characters", datasets, []formPart{{"file", strings.Repeat("a", 252) + ".csv", csv}}, 400, "The file name is 256 characters long"},
		{"file without a name", datasets, []formPart{{"file", "", csv}}, 400, "no file name"},
		{"no file", datasets, []formPart{{"name", "", "x"}}, 400, `No file: upload it as multipart field \"file\"`},
		{"document with metadata", documents, []formPart{{"metadata", "", `{"source":"wiki"}`}, doc}, 201, `"name":"notes.md"`},
		{"document metadata over 64 KiB", documents, []formPart{{"metadata", "", `{"k":"` + strings.Repeat("v", 64<<10) + `"}`}, doc}, 400, `\"metadata\" is larger than 64 KiB`},
		{"document with a name field", documents, []formPart{{"name", "", "x"}, doc}, 400, `Unknown multipart field \"name\"`},
		{"document metadata twice", documents, []formPart{{"metadata", "", "{}"}, {"metadata", "", "{}"}, doc}, 400, "sent twice"},
		{"document file name of 300 characters", documents, []formPart{{"file", strings.Repeat("d", 297) + ".md", "# x\n"}}, 400, "The file name is 300 characters long"},
		{"a part without a field name", documents, []formPart{{"", "", "x"}, doc}, 400, `Unknown multipart field \"\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := multipartBody(tc.parts...)
			req, _ := http.NewRequest("POST", ts.URL+tc.url, bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("X-API-Key", ts.alice)
			if st, b, _ := send(t, req); st != tc.status || !strings.Contains(b, tc.want) {
				t.Errorf("got %d %s, want %d containing %s", st, b, tc.status, tc.want)
			}
		})
	}

	// Part headers count towards the fields' bytes: a header of 1 MiB is
	// refused before it is held.
	body := "--b\r\nContent-Disposition: form-data; name=\"name\"\r\nX-Pad: " + strings.Repeat("p", 1<<20) + "\r\n\r\nx\r\n--b--\r\n"
	req, _ := http.NewRequest("POST", ts.URL+datasets, strings.NewReader(body))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=b")
	req.Header.Set("X-API-Key", ts.alice)
	if st, res := doJSON(t, req); st != 400 || !strings.Contains(fmt.Sprint(res), "fields before the file take more than") {
		t.Errorf("a 1 MiB part header: got %d %v, want 400 saying the fields are too large", st, res)
	}

	// Names in JSON are capped too, and in MCP's load_dataset.
	if st, res := ts.post(t, datasets, ts.alice, `{"url":"http://127.0.0.1:1/x.csv","name":"`+long+`"}`); st != 400 || !strings.Contains(fmt.Sprint(res), "256 characters") {
		t.Errorf("JSON name of 256 characters: got %d %v, want 400", st, res)
	}
	_, text, isErr := callTool(t, ts.mcpSession(t, ts.alice), "load_dataset", map[string]any{"conversation_id": conv, "url": "http://127.0.0.1:1/x.csv", "name": long})
	if !isErr || !strings.Contains(text, "name is 256 characters long; at most 255") {
		t.Errorf("MCP load_dataset with a name of 256 characters: error %v %q", isErr, text)
	}
}

// TestBodyPaceDoesNotBoundAnswers: once a body is read to its end its
// deadline is lifted, so an answer that takes longer than the read window
// (a turn, a streamed completion) is not cut by it.
func TestBodyPaceDoesNotBoundAnswers(t *testing.T) {
	slow := llmtest.Turn{Text: []string{"slow ", "answer"}, Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 2, For: llmtest.Duration(time.Second)}}
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{slow, slow}})
	cs.cfg.BodyReadTimeout = 200 * time.Millisecond // the stall lasts five windows
	if st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"take your time"}`); st != 200 || body["answer"] != "slow answer" {
		t.Errorf("/chat/query: got %d %v, want the whole answer", st, body)
	}
	resp := cs.completionReq(t, `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"take your time"}]}`, nil)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "answer") || !strings.Contains(string(b), "[DONE]") {
		t.Errorf("streamed completion: got %d %v %s, want the whole stream", resp.StatusCode, err, b)
	}
}
