package llmtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/sharedtest"
)

// This file holds what the provider packages' own tests share: recorded
// answers replayed byte for byte, and the check of a streamed answer.

// Recording returns a provider answer or request recorded by others, read
// from ../shared/fixtures/providers (see its README.md): the test skips when
// ../shared is absent, and fails under CI=true.
func Recording(tb testing.TB, name string) []byte {
	tb.Helper()
	return sharedtest.Read(tb, "fixtures/providers/"+name)
}

// RecordedRequest returns a recorded request body (see [Recording]) decoded
// as a JSON object.
func RecordedRequest(tb testing.TB, name string) map[string]any {
	tb.Helper()
	var v map[string]any
	if err := json.Unmarshal(Recording(tb, name), &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// Replay is a loopback server that answers every request with one status and
// body, byte for byte, and records the requests (Method, Path, Query, Header
// and Raw set).
type Replay struct {
	URL string

	mu   sync.Mutex
	reqs []Request
}

// ServeBody starts a [Replay] answering with body, closed when the test ends.
func ServeBody(tb testing.TB, body []byte, status int, contentType string) *Replay {
	tb.Helper()
	rp := &Replay{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rp.mu.Lock()
		rp.reqs = append(rp.reqs, Request{
			Index: len(rp.reqs), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Header: r.Header.Clone(), Raw: raw,
		})
		rp.mu.Unlock()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(body)
	}))
	tb.Cleanup(srv.Close)
	rp.URL = srv.URL
	return rp
}

// Requests returns the requests received so far, in order.
func (rp *Replay) Requests() []Request {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return append([]Request(nil), rp.reqs...)
}

// Count returns how many requests were received.
func (rp *Replay) Count() int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.reqs)
}

// Hello is a one-message chat request.
func Hello() *datachat.ModelRequest {
	return &datachat.ModelRequest{Messages: []datachat.ModelMessage{{Role: "user", Content: "hi"}}}
}

// Want is what a client must make of one streamed answer.
type Want struct {
	Text   string
	Calls  []datachat.ModelToolCall
	Finish string
	Usage  datachat.TokenCount
}

// CheckStream streams [Hello] from m and checks the answer against want: its
// text, its tool calls (ids included), its end ([Events.CheckEnd]), finish
// reason and usage.
func CheckStream(t *testing.T, m Model, want Want) {
	t.Helper()
	evs, err := Collect(context.Background(), m, Hello())
	if err != nil {
		t.Fatal(err)
	}
	if evs.Text() != want.Text {
		t.Errorf("text: got %q, want %q", evs.Text(), want.Text)
	}
	if calls := evs.ToolCalls(); !reflect.DeepEqual(calls, want.Calls) && (len(calls) > 0 || len(want.Calls) > 0) {
		t.Errorf("calls:\ngot  %+v\nwant %+v", calls, want.Calls)
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
	if evs.Finish() != want.Finish || *evs.Usage() != want.Usage {
		t.Errorf("end: got %q %+v, want %q %+v", evs.Finish(), *evs.Usage(), want.Finish, want.Usage)
	}
}
