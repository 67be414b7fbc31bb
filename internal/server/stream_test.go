package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
)

// turnEnds is a chat.Observer telling a test when a turn ends, and how.
type turnEnds struct{ ended chan string }

func (o turnEnds) TurnEnded(status string, _ time.Duration) { o.ended <- status }
func (turnEnds) FirstToken(time.Duration)                   {}
func (turnEnds) ToolCalled(string, bool, time.Duration)     {}
func (turnEnds) SQLQueried(bool, time.Duration)             {}
func (turnEnds) ProviderFailed(string)                      {}
func (turnEnds) TokensUsed(string, string, int64, int64)    {}

// TestStreamingClientThatStopsReadingIsCut: a client of a streaming HTTP
// answer (/v1/chat/completions, /v1/responses) that stops reading, through
// tiny socket buffers, is cut after the write timeout — its connection
// closed — while its turn goes on to the end, its answer completed and
// stored. Each step waits for an event, none for time.
func TestStreamingClientThatStopsReadingIsCut(t *testing.T) {
	chunks := make([]string, 400)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%03d%s ", i, strings.Repeat("x", 8<<10))
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"a long answer, please"}]}`},
		{"/v1/responses", `{"model":"datachat","stream":true,"input":"a long answer, please"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			ends := turnEnds{ended: make(chan string, 4)}
			cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{{
				Text: chunks,
				// Held after its last chunk (the first frame is the role's) until the test says.
				Fault: &llmtest.Fault{Kind: llmtest.FaultStall, After: 1 + len(chunks), Release: release},
			}}}, func(r *chat.Runner) { r.Observer = ends })
			logs := &logWatch{}
			cs.Logger = slog.New(logs)
			cs.cfg.WSWriteTimeout = 100 * time.Millisecond
			cut := logs.watch("streaming client too slow or gone: cut, its turn goes on")

			addr := serveSmallBuffers(t, cs.Handler())

			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4096)
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				tc.path, cs.alice, len(tc.body), tc.body)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("response: %v, %v", resp, err)
			}
			conv := resp.Header.Get("X-Conversation-ID")
			// The client reads nothing more from here on.
			await(t, cut, 10*time.Second, "the stalled client cut")
			// Its connection is closed: what the kernel holds, then the end.
			c.SetReadDeadline(time.Now().Add(5 * time.Second)) // a safety net
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Errorf("reading to the end of the cut connection: %v", err)
			}
			if msgs := cs.messages(t, conv); len(msgs) != 2 || msgs[1].Status != datachat.StatusStreaming {
				t.Fatalf("while the provider is held: %d messages, the last %s (%d bytes), want the answer streaming", len(msgs), msgs[len(msgs)-1].Status, len(msgs[len(msgs)-1].Content))
			}
			free()
			select {
			case status := <-ends.ended:
				if status != datachat.StatusComplete {
					t.Fatalf("the turn ended %s, want complete", status)
				}
			case <-time.After(10 * time.Second): // a safety net
				t.Fatal("the turn did not end")
			}
			msgs := cs.messages(t, conv)
			full := strings.Join(chunks, "")
			if len(msgs) != 2 || msgs[1].Status != datachat.StatusComplete || msgs[1].Content != full {
				t.Errorf("stored status %s with %d of %d bytes, want the whole answer complete", msgs[1].Status, len(msgs[1].Content), len(full))
			}
		})
	}
}

// TestStreamingKeepAliveOutlivesTheWriteTimeout: the write timeout bounds
// each write of a streaming answer, not the connection: a second request on
// the same keep-alive connection, answered later than the write timeout
// after the first ended, is answered. (The server has no WriteTimeout of
// its own that would set the deadline again for each request.) The wait
// here is the subject of the test — longer than the write timeout — not a
// synchronisation.
func TestStreamingKeepAliveOutlivesTheWriteTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	release := make(chan struct{})
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{Contains: "first"}, Text: []string{"one"}},
		{Match: &llmtest.Match{Contains: "second"}, Text: []string{"two"},
			Fault: &llmtest.Fault{Kind: llmtest.FaultHang, Release: release}},
	}})
	cs.cfg.WSWriteTimeout = timeout
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	var reused []bool
	ask := func(q string) string {
		body := `{"model":"datachat","stream":true,"messages":[{"role":"user","content":"` + q + `"}]}`
		req, _ := http.NewRequest("POST", cs.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+cs.alice)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: reading the stream: %v (got %q)", q, err, b)
		}
		return string(b)
	}
	if b := ask("the first question"); !strings.Contains(b, `"one"`) || !strings.Contains(b, "[DONE]") {
		t.Fatalf("first answer: %s", b)
	}
	time.AfterFunc(4*timeout, func() { close(release) })
	if b := ask("the second question"); !strings.Contains(b, `"two"`) || !strings.Contains(b, "[DONE]") {
		t.Errorf("second answer, on the same connection after the write timeout: %q", b)
	}
	if len(reused) != 2 || !reused[1] {
		t.Errorf("connections reused: %v, want the second request on the first's connection", reused)
	}
}
