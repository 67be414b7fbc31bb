package llm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
	"datachat/internal/testnet"
)

var testProvider = Provider{Name: "test", KeyVar: "TEST_API_KEY", URLVar: "TEST_BASE_URL"}

// lineDecoder emits each NDJSON line as text and ends at a line "END".
func lineDecoder(body io.Reader, out *Output) error {
	r := NewNDJSONReader(body)
	for {
		line, err := r.Next()
		if err == io.EOF {
			return ErrIncomplete
		}
		if err != nil {
			return err
		}
		out.Chunk(line)
		if string(line) == "END" {
			out.SetUsage(datachat.TokenCount{Input: 3, Output: 4})
			return out.Finish(FinishStop)
		}
		if string(line) == "BAD" {
			return MalformedError(testProvider, errors.New("bad line"))
		}
		if err := out.Emit(datachat.ModelEvent{Text: string(line)}); err != nil {
			return err
		}
	}
}

func newTestClient(cfg Config) *Client {
	cfg.Provider = testProvider
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 20 * time.Millisecond
	}
	if cfg.StreamIdleTimeout == 0 {
		cfg.StreamIdleTimeout = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return NewClient(cfg)
}

type collector struct{ events []datachat.ModelEvent }

func (c *collector) emit(ev datachat.ModelEvent) error {
	c.events = append(c.events, ev)
	return nil
}

func (c *collector) text() string {
	var b strings.Builder
	for _, ev := range c.events {
		b.WriteString(ev.Text)
	}
	return b.String()
}

func kindOf(err error) string {
	var pe *datachat.ProviderError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return ""
}

func TestStreamSuccess(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer k" {
			t.Errorf("Authorization: got %q", got)
		}
		io.WriteString(w, "a\nb\nEND\n")
	}))
	defer srv.Close()
	c := newTestClient(Config{})
	var col collector
	err := c.Stream(context.Background(), Request{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer k"}}, Body: []byte("{}")}, col.emit, lineDecoder)
	if err != nil {
		t.Fatal(err)
	}
	if col.text() != "ab" {
		t.Errorf("text: got %q, want %q", col.text(), "ab")
	}
	n := len(col.events)
	if col.events[n-2].FinishReason != FinishStop || col.events[n-1].Usage == nil || *col.events[n-1].Usage != (datachat.TokenCount{Input: 3, Output: 4}) {
		t.Errorf("end: got %+v, want finish then usage", col.events[n-2:])
	}
}

func TestRetryOnceBeforeOutput(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		io.WriteString(w, "ok\nEND\n")
	}))
	defer srv.Close()
	c := newTestClient(Config{Transport: Transport{RetryDelay: 50 * time.Millisecond}})
	var col collector
	start := time.Now()
	if err := c.Stream(context.Background(), Request{URL: srv.URL}, col.emit, lineDecoder); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || col.text() != "ok" {
		t.Errorf("got %d calls and %q, want 2 and %q", calls.Load(), col.text(), "ok")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("retried after %v, want the retry delay first", d)
	}
}

func TestRetryAtMostOnce(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: srv.URL}, (&collector{}).emit, lineDecoder)
	if kindOf(err) != datachat.ProviderConnection {
		t.Fatalf("got %v, want a connection error", err)
	}
	if calls.Load() != 2 {
		t.Errorf("got %d calls, want 2", calls.Load())
	}
}

func TestNoRetryAfterOutput(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "partial\n")
		rc := http.NewResponseController(w)
		rc.Flush()
		conn, _, _ := rc.Hijack()
		conn.Close()
	}))
	defer srv.Close()
	var col collector
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: srv.URL}, col.emit, lineDecoder)
	if kindOf(err) != datachat.ProviderConnection {
		t.Fatalf("got %v, want a connection error", err)
	}
	if calls.Load() != 1 || col.text() != "partial" {
		t.Errorf("got %d calls and %q, want 1 and %q", calls.Load(), col.text(), "partial")
	}
}

func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	start := time.Now()
	err := newTestClient(Config{Transport: Transport{StreamIdleTimeout: 150 * time.Millisecond}}).Stream(context.Background(), Request{URL: srv.URL}, (&collector{}).emit, lineDecoder)
	if kindOf(err) != datachat.ProviderTimeout {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("timed out after %v, want about 150ms", d)
	}
	if calls.Load() != 1 {
		t.Errorf("got %d calls, want 1 (output had streamed)", calls.Load())
	}
}

func TestSlowConsumerIsNotIdle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a\nb\nEND\n")
	}))
	defer srv.Close()
	slow := func(ev datachat.ModelEvent) error {
		time.Sleep(120 * time.Millisecond)
		return nil
	}
	if err := newTestClient(Config{Transport: Transport{StreamIdleTimeout: 100 * time.Millisecond}}).Stream(context.Background(), Request{URL: srv.URL}, slow, lineDecoder); err != nil {
		t.Fatalf("a caller slower than the idle timeout failed the stream: %v", err)
	}
}

func TestHeaderTimeoutRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-r.Context().Done() // never answers
			return
		}
		io.WriteString(w, "ok\nEND\n")
	}))
	defer srv.Close()
	var col collector
	err := newTestClient(Config{Transport: Transport{StreamIdleTimeout: 100 * time.Millisecond}}).Stream(context.Background(), Request{URL: srv.URL}, col.emit, lineDecoder)
	if err != nil || calls.Load() != 2 {
		t.Fatalf("got %v after %d calls, want success after 2", err, calls.Load())
	}
}

func TestConnectTimeout(t *testing.T) {
	var dials atomic.Int32
	hang := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}}}
	start := time.Now()
	err := newTestClient(Config{Transport: Transport{HTTPClient: hang, ConnectTimeout: 80 * time.Millisecond}}).Stream(context.Background(), Request{URL: "http://127.0.0.1:1/"}, (&collector{}).emit, lineDecoder)
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != datachat.ProviderTimeout || !strings.Contains(pe.Reason, "no connection within 80ms") {
		t.Fatalf("got %v, want a connect timeout", err)
	}
	if dials.Load() != 2 {
		t.Errorf("got %d dials, want 2 (one retry)", dials.Load())
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestConnectionRefusedRetried(t *testing.T) {
	addr := testnet.ClosedAddr(t)
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: "http://" + addr + "/"}, (&collector{}).emit, lineDecoder)
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != datachat.ProviderConnection || pe.SuggestedAction == "" {
		t.Fatalf("got %#v, want a connection error with an action", err)
	}
}

func TestStatusErrorsNotRetried(t *testing.T) {
	for _, tt := range []struct {
		status int
		kind   string
	}{
		{401, datachat.ProviderAuth}, {403, datachat.ProviderAuth}, {429, datachat.ProviderRateLimited},
		{500, datachat.ProviderUnavailable}, {503, datachat.ProviderUnavailable}, {400, datachat.ProviderBadRequest},
	} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(tt.status)
			io.WriteString(w, "nope")
		}))
		err := newTestClient(Config{}).Stream(context.Background(), Request{URL: srv.URL}, (&collector{}).emit, lineDecoder)
		srv.Close()
		var pe *datachat.ProviderError
		if !errors.As(err, &pe) || pe.Kind != tt.kind || pe.Status != tt.status || pe.Reason == "" || pe.SuggestedAction == "" {
			t.Errorf("%d: got %#v, want kind %s with reason and action", tt.status, err, tt.kind)
			continue
		}
		if calls.Load() != 1 {
			t.Errorf("%d: got %d calls, want 1", tt.status, calls.Load())
		}
		if tt.status == 401 && pe.SuggestedAction != "Check TEST_API_KEY" {
			t.Errorf("401 action: got %q", pe.SuggestedAction)
		}
		if tt.status == 429 && pe.RetryAfter != 7*time.Second {
			t.Errorf("429 RetryAfter: got %v, want 7s", pe.RetryAfter)
		}
	}
}

func TestMalformedNotRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "BAD\n")
	}))
	defer srv.Close()
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: srv.URL}, (&collector{}).emit, lineDecoder)
	if kindOf(err) != datachat.ProviderMalformed || calls.Load() != 1 {
		t.Fatalf("got %v after %d calls, want malformed after 1", err, calls.Load())
	}
}

func TestCancelAbortsRequest(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var cancelled time.Time
	emit := func(ev datachat.ModelEvent) error {
		cancelled = time.Now()
		cancel()
		return nil
	}
	err := newTestClient(Config{Transport: Transport{StreamIdleTimeout: 10 * time.Second}}).Stream(ctx, Request{URL: srv.URL}, emit, lineDecoder)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// Ended by the cancel, not by the 10 s idle timeout that would end it
	// otherwise.
	if d := time.Since(cancelled); d >= 10*time.Second {
		t.Errorf("returned %v after cancel: the idle timeout ended it", d)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Fatal("the server never saw the request aborted")
	}
}

func TestEmitErrorReturnedAsIs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a\nEND\n")
	}))
	defer srv.Close()
	stop := errors.New("client went away")
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: srv.URL}, func(datachat.ModelEvent) error { return stop }, lineDecoder)
	if err != stop {
		t.Fatalf("got %v, want the emit error itself", err)
	}
}

func TestUsageEmittedOnFailureAfterUsage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a\nBAD\n")
	}))
	defer srv.Close()
	var col collector
	dec := func(body io.Reader, out *Output) error {
		out.SetUsage(datachat.TokenCount{Input: 9, Output: 1})
		return lineDecoder(body, out)
	}
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: srv.URL}, col.emit, dec)
	if kindOf(err) != datachat.ProviderMalformed {
		t.Fatalf("got %v", err)
	}
	last := col.events[len(col.events)-1]
	if last.Usage == nil || last.Usage.Input != 9 {
		t.Errorf("got last event %+v, want the usage reported so far", last)
	}
}

func TestInvalidURL(t *testing.T) {
	err := newTestClient(Config{}).Stream(context.Background(), Request{URL: "ftp://example.invalid/x"}, (&collector{}).emit, lineDecoder)
	if kindOf(err) != datachat.ProviderNotConfigured {
		t.Fatalf("got %v, want not_configured", err)
	}
}

func TestLoggingRedactsSecrets(t *testing.T) {
	const secret = "sk-very-secret-key-1234"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(401)
			io.WriteString(w, "bad key "+secret)
			return
		}
		io.WriteString(w, "echo "+secret+"\nEND\n")
	}))
	defer srv.Close()
	var logs bytes.Buffer
	c := newTestClient(Config{Secrets: []string{secret}, Transport: Transport{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}})
	ctx := WithRequestID(context.Background(), "req-42")
	req := Request{URL: srv.URL + "/ok?key=" + secret, Header: http.Header{"Authorization": {"Bearer " + secret}}, Body: []byte(`{"k":"` + secret + `"}`), Model: "m", Messages: 2}
	if err := c.Stream(ctx, req, (&collector{}).emit, lineDecoder); err != nil {
		t.Fatal(err)
	}
	req.URL = srv.URL + "/fail"
	err := c.Stream(ctx, req, (&collector{}).emit, lineDecoder)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("error %v shows the secret", err)
	}
	out := logs.String()
	if strings.Contains(out, secret) {
		t.Errorf("the log shows the secret:\n%s", out)
	}
	for _, want := range []string{`"msg":"llm_request_started"`, `"msg":"llm_response_chunk"`, `"msg":"llm_request_completed"`, `"msg":"llm_request_failed"`,
		`"request_id":"req-42"`, `"duration_ms":`, `"chunks":`, `"messages":2`, `"tokens":7`, `"endpoint":"` + srv.URL + `/ok"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

func TestRequestID(t *testing.T) {
	if got := RequestID(context.Background()); got != "" {
		t.Errorf("got %q from an empty context", got)
	}
	if got := RequestID(WithRequestID(context.Background(), "abc")); got != "abc" {
		t.Errorf("got %q, want abc", got)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"12"}}, 12 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"1e300"}}, 24 * time.Hour},
		{http.Header{"Retry-After": {"NaN"}}, 0},
		{http.Header{"Retry-After": {"+Inf"}}, 24 * time.Hour},
		{http.Header{"Retry-After-Ms": {"1e300"}}, 24 * time.Hour},
	} {
		if got := RetryAfter(tt.h); got != tt.want {
			t.Errorf("%v: got %v, want %v", tt.h, got, tt.want)
		}
	}
	future := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	if got := RetryAfter(http.Header{"Retry-After": {future}}); got < 28*time.Second || got > 31*time.Second {
		t.Errorf("HTTP date: got %v, want about 30s", got)
	}
}

func TestMentionsContextLimit(t *testing.T) {
	for msg, want := range map[string]bool{
		"This model's maximum context length is 128000 tokens.":                                   true,
		"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).": true,
		"the input length exceeds the context length":                                             true,
		"context canceled": false,
		"registry.ollama.ai/library/gemma3:1b does not support tools": false,
	} {
		if got := MentionsContextLimit(msg); got != want {
			t.Errorf("%q: got %v, want %v", msg, got, want)
		}
	}
}

func TestWriteTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			defer conn.Close() // accepts, never reads: the upload stalls
		}
	}()
	body := bytes.Repeat([]byte("x"), 32<<20)
	start := time.Now()
	err = newTestClient(Config{Transport: Transport{WriteTimeout: 150 * time.Millisecond, StreamIdleTimeout: 10 * time.Second}}).
		Stream(context.Background(), Request{URL: "http://" + ln.Addr().String() + "/", Body: body}, (&collector{}).emit, lineDecoder)
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) || pe.Kind != datachat.ProviderTimeout || !strings.Contains(pe.Reason, "sending the request") {
		t.Fatalf("got %v, want a write timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	if conns.Load() != 2 {
		t.Errorf("got %d connections, want 2 (one retry)", conns.Load())
	}
}
