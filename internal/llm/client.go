package llm

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"

	"datachat"
)

// Config configures a [Client]. Zero durations take the package defaults; a
// negative one turns that timeout (or the retry delay) off.
type Config struct {
	Provider Provider
	Transport
	// Secrets are removed from everything logged and from errors (API keys).
	Secrets []string
	// ErrorFromResponse maps a failure status and its body to an error; nil
	// means [StatusError] with the body as message.
	ErrorFromResponse func(status int, header http.Header, body []byte) *datachat.ProviderError
}

// Transport is how requests reach a provider, the same settings for every
// provider: each provider's Options carry one. Zero durations take the
// defaults (connect 10s, write 10s, stream idle 60s, retry delay 2s) and
// negative ones turn that timeout off.
type Transport struct {
	// HTTPClient sends the requests; nil means one from [NewHTTPClient]. Its own
	// Timeout, if any, bounds whole answers, so leave it 0 for streaming.
	HTTPClient        *http.Client
	ConnectTimeout    time.Duration // to establish a connection
	WriteTimeout      time.Duration // to send the request once connected
	StreamIdleTimeout time.Duration // for the answer's headers and between chunks
	RetryDelay        time.Duration // before the single retry
	Logger            *slog.Logger  // nil means slog.Default()
}

// Client sends requests to one provider with its timeouts, the retry rule,
// error mapping and logging. It is safe for concurrent use.
type Client struct {
	cfg     Config
	http    *http.Client
	log     *slog.Logger
	connect time.Duration
	write   time.Duration
	idle    time.Duration
	delay   time.Duration
	redact  *strings.Replacer
}

// NewClient returns a Client for cfg.
func NewClient(cfg Config) *Client {
	c := &Client{
		cfg:     cfg,
		http:    cfg.HTTPClient,
		log:     cfg.Logger,
		connect: orDefault(cfg.ConnectTimeout, DefaultConnectTimeout),
		write:   orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		idle:    orDefault(cfg.StreamIdleTimeout, DefaultStreamIdleTimeout),
		delay:   orDefault(cfg.RetryDelay, DefaultRetryDelay),
	}
	if c.http == nil {
		c.http = NewHTTPClient(c.connect)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	var pairs []string
	for _, s := range cfg.Secrets {
		if len(s) >= 4 {
			pairs = append(pairs, s, "[REDACTED]")
		}
	}
	c.redact = strings.NewReplacer(pairs...)
	return c
}

// NewHTTPClient returns an HTTP client whose dialer gives up after
// connectTimeout (<= 0: no limit beyond the request's own watchdog).
func NewHTTPClient(connectTimeout time.Duration) *http.Client {
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	if connectTimeout > 0 {
		dialer.Timeout = connectTimeout
	}
	// Over HTTP/1.1 (local and OpenAI-compatible servers) each streaming
	// answer holds a connection of its own: with hundreds of conversations
	// streaming, a small idle pool closes most connections at the end of each
	// answer and dials again for the next, which costs more CPU than relaying
	// the answer's tokens. An idle connection is closed after 30 s: each holds
	// two goroutines and their buffers, and with Go's default of 90 s the
	// connections of a burst of 300 answers still held 2 MiB of stacks a
	// minute after it (BENCHMARKS, "Stalled clients").
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   max(connectTimeout, 0),
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}}
}

// Request is one HTTP call to a provider.
type Request struct {
	Method   string // POST when empty
	URL      string
	Header   http.Header
	Body     []byte
	Model    string // for the log
	Messages int    // for the log: messages in the request
	Tools    int    // for the log: tools declared
}

// DecodeFunc reads an answer's body and reports what it finds through out. It
// returns nil once the provider's end marker was read, [ErrIncomplete] (or a
// read error) when the body ended early, and a [MalformedError] for data it
// cannot decode.
type DecodeFunc func(body io.Reader, out *Output) error

// Stream sends req and hands a successful answer's body to decode. Spec 002:
// a connection error or timeout before decode emitted anything is retried
// once after the retry delay; nothing else is retried. Failures are
// *datachat.ProviderError, except an error returned by the emit callback
// (returned as is) and cancellation of ctx (an error wrapping ctx.Err()).
//
// Stream emits a final Usage event when the answer failed after the provider
// reported usage, so callers can account for the tokens.
func (c *Client) Stream(ctx context.Context, req Request, emit func(datachat.ModelEvent) error, decode DecodeFunc) error {
	start := time.Now()
	var out *Output
	var err error
	for attempt := 1; ; attempt++ {
		out = &Output{ctx: ctx, log: c.log, provider: c.cfg.Provider.Name, redact: c.redact, emit: emit}
		err = c.attempt(ctx, req, attempt, out, decode)
		if err == nil || attempt > 1 || out.emitted || out.emitErr != nil || !retryable(err) || ctx.Err() != nil {
			break
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "llm_request_retry",
			c.baseAttrs(ctx, req, attempt+1, slog.Duration("delay", c.delay), slog.String("error", c.redact.Replace(err.Error())))...)
		if werr := sleep(ctx, c.delay); werr != nil {
			err = fmt.Errorf("%s: waiting to retry: %w", c.cfg.Provider.Name, werr)
			break
		}
	}
	c.logEnd(ctx, req, start, out, err)
	if err != nil && out.emitErr == nil && out.usage != nil && !out.finished {
		_ = emit(datachat.ModelEvent{Usage: out.usage})
	}
	return err
}

// Do sends req and hands a successful answer's whole body (at most 64 MiB) to
// decode, with the same timeouts, retry rule and errors as [Client.Stream]; for
// unary calls such as embeddings.
func (c *Client) Do(ctx context.Context, req Request, decode func(body []byte) error) error {
	return c.Stream(ctx, req, func(datachat.ModelEvent) error { return nil }, func(body io.Reader, out *Output) error {
		b, err := io.ReadAll(io.LimitReader(body, 64<<20))
		if err != nil {
			return err
		}
		out.Chunk(b)
		return decode(b)
	})
}

func (c *Client) attempt(parent context.Context, req Request, attempt int, out *Output, decode DecodeFunc) error {
	c.log.LogAttrs(parent, slog.LevelInfo, "llm_request_started", c.baseAttrs(parent, req, attempt,
		slog.String("endpoint", c.redact.Replace(redactURL(req.URL))),
		slog.Int("messages", req.Messages),
		slog.Int("tools", req.Tools))...)
	if c.log.Enabled(parent, slog.LevelDebug) {
		c.log.LogAttrs(parent, slog.LevelDebug, "llm_request_body",
			slog.String("request_id", RequestID(parent)),
			slog.String("provider", c.cfg.Provider.Name),
			slog.String("body", c.redact.Replace(string(req.Body))))
	}

	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	wd := &watchdog{cancel: cancel}
	writeCause := &timeoutError{phase: "write", after: c.write}
	wd.arm(c.connect, &timeoutError{phase: "connect", after: c.connect})
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			wd.armBeforeResponse(c.write, writeCause)
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			wd.armBeforeResponse(c.idle, &timeoutError{phase: "idle", after: c.idle})
		},
	})

	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	// Each read of the body by the transport is progress in writing it: the
	// write timeout bounds a stalled upload, not a large one.
	body := func() io.ReadCloser {
		return io.NopCloser(&progressReader{r: bytes.NewReader(req.Body), progress: func() { wd.armBeforeResponse(c.write, writeCause) }})
	}
	if err := checkURL(req.URL); err != nil {
		return c.scrub(badURLError(c.cfg.Provider, err))
	}
	hreq, err := http.NewRequestWithContext(ctx, method, req.URL, body())
	if err != nil {
		return c.scrub(badURLError(c.cfg.Provider, err))
	}
	hreq.ContentLength = int64(len(req.Body))
	hreq.GetBody = func() (io.ReadCloser, error) { return body(), nil }
	if len(req.Body) == 0 {
		hreq.Body = http.NoBody
	}
	for k, vs := range req.Header {
		hreq.Header[k] = vs
	}
	if hreq.Header.Get("Content-Type") == "" && len(req.Body) > 0 {
		hreq.Header.Set("Content-Type", "application/json")
	}

	resp, err := c.http.Do(hreq)
	wd.responded()
	if err != nil {
		return c.classify(parent, wd, err, false, out)
	}
	defer resp.Body.Close()
	answer := &idleReader{r: resp.Body, wd: wd, idle: c.idle}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, rerr := io.ReadAll(io.LimitReader(answer, 1<<20))
		if rerr != nil && len(b) == 0 {
			return c.classify(parent, wd, rerr, true, out)
		}
		var pe *datachat.ProviderError
		if c.cfg.ErrorFromResponse != nil {
			pe = c.cfg.ErrorFromResponse(resp.StatusCode, resp.Header, b)
		}
		if pe == nil {
			pe = StatusError(c.cfg.Provider, resp.StatusCode, string(b))
		}
		if wait := RetryAfter(resp.Header); pe.Kind == datachat.ProviderRateLimited && pe.RetryAfter == 0 && wait > 0 {
			pe.RetryAfter = wait
			pe.SuggestedAction = RateLimitError(c.cfg.Provider, pe.Status, "", wait).SuggestedAction
		}
		return c.scrub(pe)
	}
	return c.classify(parent, wd, decode(answer, out), true, out)
}

// classify turns what went wrong in an attempt into the error Stream returns.
func (c *Client) classify(parent context.Context, wd *watchdog, err error, answered bool, out *Output) error {
	if err == nil {
		return nil
	}
	if out.emitErr != nil {
		return out.emitErr
	}
	if parent.Err() != nil {
		return fmt.Errorf("%s request: %w", c.cfg.Provider.Name, parent.Err())
	}
	var pe *datachat.ProviderError
	if errors.As(err, &pe) {
		return c.scrub(pe)
	}
	if cause := wd.cause(); cause != nil {
		return timeoutProviderError(c.cfg.Provider, cause)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return timeoutProviderError(c.cfg.Provider, &timeoutError{phase: "connect", after: c.connect})
	}
	if errors.Is(err, ErrLineTooLong) {
		return MalformedError(c.cfg.Provider, err)
	}
	return c.scrub(connectionProviderError(c.cfg.Provider, c.scrubErr(err), answered))
}

// scrub removes secrets from an error's texts.
func (c *Client) scrub(pe *datachat.ProviderError) *datachat.ProviderError {
	pe.Reason = c.redact.Replace(pe.Reason)
	pe.Err = c.scrubErr(pe.Err)
	return pe
}

func (c *Client) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	if s := err.Error(); c.redact.Replace(s) != s {
		return errors.New(c.redact.Replace(s))
	}
	return err
}

func (c *Client) baseAttrs(ctx context.Context, req Request, attempt int, more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("request_id", RequestID(ctx)),
		slog.String("provider", c.cfg.Provider.Name),
		slog.String("model", req.Model),
		slog.Int("attempt", attempt),
	}, more...)
}

func (c *Client) logEnd(ctx context.Context, req Request, start time.Time, out *Output, err error) {
	attrs := []slog.Attr{
		slog.String("request_id", RequestID(ctx)),
		slog.String("provider", c.cfg.Provider.Name),
		slog.String("model", req.Model),
		slog.Int("chunks", out.chunks),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()),
	}
	if out.usage != nil {
		attrs = append(attrs,
			slog.Int64("input_tokens", out.usage.Input),
			slog.Int64("output_tokens", out.usage.Output),
			slog.Int64("tokens", out.usage.Input+out.usage.Output))
	}
	if err == nil {
		attrs = append(attrs, slog.String("finish_reason", out.finish))
		c.log.LogAttrs(ctx, slog.LevelInfo, "llm_request_completed", attrs...)
		return
	}
	level := slog.LevelWarn
	var pe *datachat.ProviderError
	switch {
	case errors.As(err, &pe):
		attrs = append(attrs, slog.String("kind", pe.Kind), slog.Int("status", pe.Status))
	case ctx.Err() != nil:
		level = slog.LevelInfo
		attrs = append(attrs, slog.String("kind", "cancelled"))
	}
	attrs = append(attrs, slog.String("error", c.redact.Replace(err.Error())))
	c.log.LogAttrs(ctx, level, "llm_request_failed", attrs...)
}

// Output receives what a DecodeFunc finds in an answer.
type Output struct {
	ctx      context.Context
	log      *slog.Logger
	provider string
	redact   *strings.Replacer
	emit     func(datachat.ModelEvent) error
	emitErr  error
	emitted  bool
	finished bool
	chunks   int
	usage    *datachat.TokenCount
	finish   string
}

// Chunk records one chunk of the answer as it came off the wire (an SSE data
// field, an NDJSON line), logging it at debug level as llm_response_chunk.
func (o *Output) Chunk(data []byte) {
	o.chunks++
	if o.log.Enabled(o.ctx, slog.LevelDebug) {
		o.log.LogAttrs(o.ctx, slog.LevelDebug, "llm_response_chunk",
			slog.String("request_id", RequestID(o.ctx)),
			slog.String("provider", o.provider),
			slog.Int("chunk_num", o.chunks),
			slog.String("data", o.redact.Replace(string(data))))
	}
}

// Emit passes ev to the caller. Text and tool calls only: the end of the answer
// goes through [Output.Finish].
func (o *Output) Emit(ev datachat.ModelEvent) error {
	if o.emitErr != nil {
		return o.emitErr
	}
	o.emitted = true
	if err := o.emit(ev); err != nil {
		o.emitErr = err
		return err
	}
	return nil
}

// SetUsage records the usage the provider reported so far; the last call wins.
func (o *Output) SetUsage(u datachat.TokenCount) { o.usage = &u }

// Finish ends the answer: it emits the finish reason and then exactly one
// Usage event (zero counts when the provider reported none).
func (o *Output) Finish(reason string) error {
	if o.finished {
		return nil
	}
	o.finished = true
	o.finish = reason
	if err := o.Emit(datachat.ModelEvent{FinishReason: reason}); err != nil {
		return err
	}
	u := datachat.TokenCount{}
	if o.usage != nil {
		u = *o.usage
	}
	return o.Emit(datachat.ModelEvent{Usage: &u})
}

// NewOutput returns an Output passing events to emit, for decoding an answer
// outside a Client (replaying a recorded transcript, fuzzing a decoder).
func NewOutput(ctx context.Context, emit func(datachat.ModelEvent) error) *Output {
	return &Output{ctx: ctx, log: slog.New(slog.DiscardHandler), redact: strings.NewReplacer(), emit: emit}
}

// Emitted reports whether any event reached the caller.
func (o *Output) Emitted() bool { return o.emitted }

// watchdog cancels a request whose current phase takes too long: connecting,
// writing the request, waiting for the answer's headers, each read of the body.
type watchdog struct {
	mu       sync.Mutex
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	gen      int
	fired    *timeoutError
	answered bool
}

func (w *watchdog) arm(d time.Duration, cause *timeoutError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armLocked(d, cause)
}

func (w *watchdog) armLocked(d time.Duration, cause *timeoutError) {
	if w.fired != nil {
		return
	}
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if d <= 0 {
		return
	}
	gen := w.gen
	w.timer = time.AfterFunc(d, func() { w.fire(gen, cause) })
}

// armBeforeResponse arms the watchdog from an httptrace hook, which can run
// after the response arrived (a server answering before reading the body).
func (w *watchdog) armBeforeResponse(d time.Duration, cause *timeoutError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.answered {
		w.armLocked(d, cause)
	}
}

func (w *watchdog) fire(gen int, cause *timeoutError) {
	w.mu.Lock()
	if gen != w.gen || w.fired != nil {
		w.mu.Unlock()
		return
	}
	w.fired = cause
	w.mu.Unlock()
	w.cancel(cause)
}

// responded stops the timer once the answer's headers are in (or the request
// failed); reads of the body arm it again.
func (w *watchdog) responded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answered = true
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

func (w *watchdog) cause() *timeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

// idleReader bounds each read of an answer's body by the idle timeout; time the
// caller spends between reads does not count.
type idleReader struct {
	r    io.Reader
	wd   *watchdog
	idle time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.wd.arm(r.idle, &timeoutError{phase: "idle", after: r.idle})
	n, err := r.r.Read(p)
	r.wd.responded()
	return n, err
}

// progressReader reports each read of a request body.
type progressReader struct {
	r        io.Reader
	progress func()
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.progress()
	}
	return n, err
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// checkURL accepts absolute http and https URLs.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("unsupported URL %q: want http:// or https:// with a host", redactURL(raw))
	}
	return nil
}

// redactURL drops a URL's user info and key parameter (Gemini accepts ?key=).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	if q := u.Query(); q.Has("key") {
		q.Del("key")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
