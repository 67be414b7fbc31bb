// Package llmtest holds fake LLM servers for tests: loopback HTTP servers that
// speak the real wire protocols of Gemini (SSE, streamGenerateContent),
// OpenAI Chat Completions (SSE) and Ollama (/api/chat NDJSON), framed
// byte for byte like the recorded transcripts in ../shared/fixtures/providers.
// A [Script] says how each chat request is answered (text, tool calls,
// failures, stalls, dropped connections, malformed data); the server records
// every request for tests to inspect, and serves each protocol's embedding
// endpoint with deterministic vectors ([Vector]). cmd/llmfake runs one as a
// process.
package llmtest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Protocol is a wire protocol the fake speaks.
type Protocol string

// Protocols.
const (
	Gemini Protocol = "gemini"
	OpenAI Protocol = "openai"
	Ollama Protocol = "ollama"
)

// ParseProtocol returns the protocol named s.
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(strings.ToLower(s)); p {
	case Gemini, OpenAI, Ollama:
		return p, nil
	}
	return "", fmt.Errorf("llmtest: unknown protocol %q (want gemini, openai or ollama)", s)
}

// Server is a fake LLM server on a loopback address.
type Server struct {
	// URL is the base URL a client of the protocol is given: GEMINI_BASE_URL,
	// OPENAI_BASE_URL (with /v1) or OLLAMA_HOST.
	URL  string
	Addr string // host:port

	protocol Protocol
	wire     wire
	script   Script

	mu        sync.Mutex
	used      []bool
	reqs      []*Request
	changed   chan struct{} // closed (and replaced) when a request arrives or disconnects
	seq       int
	onRequest func(Request)

	ln        net.Listener
	srv       *http.Server
	done      chan struct{}
	closeOnce sync.Once
	handlers  sync.WaitGroup
}

// NewServer starts a fake server for protocol p on 127.0.0.1 and closes it
// when the test ends. A script that does not validate fails the test.
func NewServer(t testing.TB, p Protocol, script Script) *Server {
	t.Helper()
	s, err := Start(p, script, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("llmtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake server for protocol p listening on addr ("127.0.0.1:0"
// for any free port). Close stops it.
func Start(p Protocol, script Script, addr string) (*Server, error) {
	if err := script.validate(); err != nil {
		return nil, err
	}
	w, err := wireFor(p)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("llmtest: listen: %w", err)
	}
	s := &Server{
		Addr:     ln.Addr().String(),
		protocol: p,
		wire:     w,
		script:   script,
		used:     make([]bool, len(script.Turns)),
		ln:       ln,
		done:     make(chan struct{}),
		changed:  make(chan struct{}),
	}
	s.URL = "http://" + s.Addr + w.basePath()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server at once: stalled answers end and open connections
// are closed.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		_ = s.srv.Close()
		s.handlers.Wait()
	})
}

// OnRequest calls f with each request as it arrives, before it is answered.
func (s *Server) OnRequest(f func(Request)) {
	s.mu.Lock()
	s.onRequest = f
	s.mu.Unlock()
}

// Protocol returns the protocol the server speaks.
func (s *Server) Protocol() Protocol { return s.protocol }

// Requests returns copies of the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// ChatRequests returns the chat requests received so far.
func (s *Server) ChatRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Kind == KindChat {
			out = append(out, r)
		}
	}
	return out
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := &Request{
		Protocol: s.protocol,
		Method:   r.Method,
		Path:     r.URL.Path,
		Query:    r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Raw:      raw,
		Body:     parseBody(raw),
		Turn:     -1,
	}
	req.Kind = s.wire.route(r.Method, r.URL.Path)
	switch req.Kind {
	case KindChat:
		s.wire.parseChat(req)
	case KindEmbed:
		s.wire.parseEmbed(req)
	}
	s.mu.Lock()
	req.Index = len(s.reqs)
	s.reqs = append(s.reqs, req)
	s.notifyLocked()
	hook := s.onRequest
	s.mu.Unlock()
	if hook != nil {
		hook(*req)
	}

	if req.Kind != KindOther && s.script.APIKey != "" && s.wire.apiKey(r) != s.script.APIKey {
		s.writeError(w, &ErrorReply{Preset: "auth"}, req.Model)
		return
	}
	switch req.Kind {
	case KindChat:
		s.serveChat(w, r, req)
	case KindEmbed:
		s.serveEmbed(w, req)
	default:
		if !s.wire.serveOther(w, r, s.model(req)) {
			s.writeError(w, &ErrorReply{Status: http.StatusNotFound, Message: "llmtest: no such endpoint: " + r.Method + " " + r.URL.Path}, "")
		}
	}
}

func (s *Server) model(req *Request) string {
	switch {
	case req.Model != "":
		return req.Model
	case s.script.Model != "":
		return s.script.Model
	}
	return s.wire.defaultModel()
}

// pick chooses the turn answering req; nil if the script has none left.
func (s *Server) pick(req *Request) *Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.script.Turns {
		if s.used[i] || !s.script.Turns[i].Match.matches(req) {
			continue
		}
		s.used[i] = true
		req.Turn = i
		return &s.script.Turns[i]
	}
	return s.script.Default
}

func (s *Server) markDisconnected(req *Request) {
	s.mu.Lock()
	req.Disconnected = true
	s.notifyLocked()
	s.mu.Unlock()
}

// notifyLocked wakes the callers of Wait.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait returns once cond holds for the requests received so far (copies, in
// arrival order), checking again whenever one arrives or its client goes; or
// with ctx's error when ctx ends first.
func (s *Server) Wait(ctx context.Context, cond func([]Request) bool) error {
	for {
		s.mu.Lock()
		changed := s.changed // taken first: a change after it closes it
		s.mu.Unlock()
		if cond(s.Requests()) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) nextSeq() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return s.seq
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, req *Request) {
	turn := s.pick(req)
	if turn == nil {
		s.writeError(w, &ErrorReply{Status: http.StatusInternalServerError,
			Message: fmt.Sprintf("llmtest: the script has no turn left for request %d", req.Index)}, req.Model)
		return
	}
	if turn.Error != nil && turn.Error.After == nil {
		s.writeError(w, turn.Error, req.Model)
		return
	}
	a, err := s.resolve(turn, req)
	if err != nil {
		s.writeError(w, &ErrorReply{Status: http.StatusInternalServerError, Message: err.Error()}, req.Model)
		return
	}
	ctx := r.Context()
	fault := turn.Fault
	if fault != nil && fault.Kind == FaultHang {
		if !s.wait(ctx, time.Duration(fault.For), fault.Release) {
			s.markDisconnected(req)
			return
		}
	}
	if fault != nil && fault.Kind == FaultDrop && fault.After <= 0 {
		drop(w)
		return
	}
	if !req.Stream {
		ct, body := s.wire.whole(req, a)
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write(body)
		return
	}

	frames := s.wire.frames(req, a)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", s.wire.streamContentType())
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	delay := time.Duration(turn.Delay)
	if delay == 0 {
		delay = time.Duration(s.script.Delay)
	}
	for i := 0; i <= len(frames); i++ {
		if e := turn.Error; e != nil && *e.After == i {
			_, _ = w.Write(s.wire.errorFrame(s.wire.errorReply(e, s.model(req))))
			_ = rc.Flush()
			return
		}
		if fault != nil && fault.After == i {
			switch fault.Kind {
			case FaultStall:
				if !s.wait(ctx, time.Duration(fault.For), fault.Release) {
					s.markDisconnected(req)
					return
				}
			case FaultDrop:
				drop(w)
				return
			case FaultMalformed:
				_, _ = w.Write(s.wire.malformedFrame())
				_ = rc.Flush()
				return
			}
		}
		if i == len(frames) {
			break
		}
		if i > 0 && delay > 0 && !s.wait(ctx, delay, nil) {
			s.markDisconnected(req)
			return
		}
		if _, err := w.Write(frames[i]()); err != nil || rc.Flush() != nil || ctx.Err() != nil {
			s.markDisconnected(req)
			return
		}
	}
}

// wait pauses for d (0: until the client or the server goes away), or until
// release is closed, and reports whether the client is still there.
func (s *Server) wait(ctx context.Context, d time.Duration, release <-chan struct{}) bool {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	case <-timeout:
		return ctx.Err() == nil
	case <-release:
		return ctx.Err() == nil
	}
}

// drop closes the connection under a response, flushing what was written: a
// body cut short, or no response at all.
func drop(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func (s *Server) serveEmbed(w http.ResponseWriter, req *Request) {
	if s.script.EmbedError != nil {
		s.writeError(w, s.script.EmbedError, req.Model)
		return
	}
	dim := s.script.EmbeddingDim
	if dim <= 0 {
		dim = 64
	}
	vectors := make([][]float32, len(req.Inputs))
	for i, text := range req.Inputs {
		vectors[i] = Vector(text, dim)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.wire.embedAnswer(req, s.model(req), vectors))
}

func (s *Server) writeError(w http.ResponseWriter, e *ErrorReply, model string) {
	if model == "" {
		model = s.script.Model
	}
	if model == "" {
		model = s.wire.defaultModel()
	}
	er := s.wire.errorReply(e, model)
	for k, v := range er.headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", er.contentType)
	w.WriteHeader(er.status)
	_, _ = w.Write(er.body)
}

// answer is a turn resolved against its request.
type answer struct {
	seq      int
	model    string
	created  time.Time
	thinking []string
	texts    []string
	calls    []ToolCall
	usage    Usage
	finish   string
	complete bool
	stamp    bool
}

// text returns text chunk i as sent now, stamped if the script says so.
func (a *answer) text(i int) string {
	if a.stamp {
		return Stamp(time.Now()) + a.texts[i]
	}
	return a.texts[i]
}

func (s *Server) resolve(t *Turn, req *Request) (*answer, error) {
	a := &answer{
		seq:      s.nextSeq(),
		model:    s.model(req),
		created:  time.Now(),
		thinking: t.Thinking,
		texts:    append([]string(nil), t.Text...),
		finish:   t.FinishReason,
		complete: t.Fault == nil || t.Fault.Kind != FaultTruncate,
		stamp:    s.script.StampTime,
	}
	if t.Reply != "" {
		text, err := renderReply(t.Reply, req)
		if err != nil {
			return nil, err
		}
		a.texts = append(a.texts, words(text)...)
	}
	if t.ReplyFunc != nil {
		a.texts = append(a.texts, words(t.ReplyFunc(req))...)
	}
	outBytes := 0
	for _, x := range a.texts {
		outBytes += len(x)
	}
	calls := t.ToolCalls
	if t.ToolCallsFunc != nil {
		calls = append(slices.Clone(calls), t.ToolCallsFunc(req)...)
	}
	for i, c := range calls {
		if len(c.ArgChunks) > 0 {
			c.Args = json.RawMessage(strings.Join(c.ArgChunks, ""))
		}
		if len(strings.TrimSpace(string(c.Args))) == 0 {
			c.Args = json.RawMessage("{}")
		}
		if c.ID == "" && s.protocol != Gemini {
			c.ID = fmt.Sprintf("call_%s%02d", shortID(a.seq), i)
		}
		if c.Signature == "" && s.protocol == Gemini && i == 0 {
			sum := sha256.Sum256([]byte(fmt.Sprintf("%d/%s/%s", a.seq, c.Name, c.Args)))
			c.Signature = base64.StdEncoding.EncodeToString(sum[:])
		}
		outBytes += len(c.Name) + len(c.Args)
		a.calls = append(a.calls, c)
	}
	if t.Usage != nil {
		a.usage = *t.Usage
	}
	if a.usage.Input == 0 {
		a.usage.Input = max(1, int64(len(req.Raw)/4))
	}
	if a.usage.Output == 0 {
		a.usage.Output = max(1, int64(outBytes/4))
	}
	return a, nil
}

// shortID is a deterministic, id-like string for sequence number n.
func shortID(n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("llmtest", n)))
	return strings.NewReplacer("+", "x", "/", "y", "=", "").Replace(base64.StdEncoding.EncodeToString(sum[:]))[:12]
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func queryValue(raw, key string) string {
	q, _ := url.ParseQuery(raw)
	return q.Get(key)
}

// marshal encodes v compactly without HTML escaping, as the providers do.
func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("llmtest: encode %T: %v", v, err))
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}
