package llmtest

import (
	"context"
	"datachat/internal/testlog"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/llm"
)

// Model is what [RunModelSuite] tests: a provider client, which is both a
// chat.Model and a chat.Embedder.
type Model interface {
	Stream(ctx context.Context, req *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ClientSettings are what the suite builds each client with.
type ClientSettings struct {
	BaseURL   string // the fake's URL
	APIKey    string
	Transport llm.Transport // the idle timeout, retry delay and logger
}

// Suite describes the provider under test.
type Suite struct {
	Protocol Protocol
	New      func(ClientSettings) Model
	// KeyVar is the variable an auth error's suggested action names; "" for
	// providers without a key.
	KeyVar string
}

// Timings the suite gives clients, short so it runs fast. The short idle
// timeout is given only where a turn stalls or hangs on purpose; elsewhere
// clients get suiteCalmIdle, so a loaded machine's pauses never read as a
// stall.
const (
	SuiteIdleTimeout = 300 * time.Millisecond
	SuiteRetryDelay  = 50 * time.Millisecond
	suiteCalmIdle    = time.Minute
)

// RunModelSuite checks a provider client against a fake server of its
// protocol: text streaming, one and two tool calls, a tool result sent back,
// usage, typed errors, the retry-once rule, idle timeouts, malformed data,
// cancellation, embeddings and key redaction in logs.
func RunModelSuite(t *testing.T, s Suite) {
	t.Helper()
	t.Run("Text", func(t *testing.T) { t.Parallel(); s.testText(t) })
	t.Run("OneToolCall", func(t *testing.T) { t.Parallel(); s.testOneToolCall(t) })
	t.Run("TwoToolCalls", func(t *testing.T) { t.Parallel(); s.testTwoToolCalls(t) })
	t.Run("ToolResultFollowUp", func(t *testing.T) { t.Parallel(); s.testToolResult(t) })
	t.Run("Errors", func(t *testing.T) { t.Parallel(); s.testErrors(t) })
	t.Run("ErrorMidStream", func(t *testing.T) { t.Parallel(); s.testErrorMidStream(t) })
	t.Run("DropBeforeFirstTokenRetriedOnce", func(t *testing.T) { t.Parallel(); s.testDropBefore(t) })
	t.Run("DropTwiceGivesUp", func(t *testing.T) { t.Parallel(); s.testDropTwice(t) })
	t.Run("DropAfterTokensNotRetried", func(t *testing.T) { t.Parallel(); s.testDropAfter(t) })
	t.Run("StallBeforeFirstTokenRetried", func(t *testing.T) { t.Parallel(); s.testStallBefore(t) })
	t.Run("StallPastIdleTimeout", func(t *testing.T) { t.Parallel(); s.testStallAfter(t) })
	t.Run("NoResponseHeaders", func(t *testing.T) { t.Parallel(); s.testHang(t) })
	t.Run("Malformed", func(t *testing.T) { t.Parallel(); s.testMalformed(t) })
	t.Run("Truncated", func(t *testing.T) { t.Parallel(); s.testTruncated(t) })
	t.Run("CancelAbortsRequest", func(t *testing.T) { t.Parallel(); s.testCancel(t) })
	t.Run("EmitError", func(t *testing.T) { t.Parallel(); s.testEmitError(t) })
	t.Run("Embed", func(t *testing.T) { t.Parallel(); s.testEmbed(t) })
	t.Run("APIKey", func(t *testing.T) { t.Parallel(); s.testAPIKey(t) })
	t.Run("LogsHideKey", func(t *testing.T) { t.Parallel(); s.testLogs(t) })
}

func (s Suite) start(t *testing.T, script Script) (*Server, Model) {
	srv := NewServer(t, s.Protocol, script)
	idle := suiteCalmIdle
	for _, turn := range script.Turns {
		if f := turn.Fault; f != nil && (f.Kind == FaultStall || f.Kind == FaultHang) {
			idle = SuiteIdleTimeout
		}
	}
	return srv, s.New(ClientSettings{
		BaseURL: srv.URL, APIKey: script.APIKey,
		Transport: llm.Transport{StreamIdleTimeout: idle, RetryDelay: SuiteRetryDelay, Logger: slog.New(slog.DiscardHandler)},
	})
}

// framesBefore is the number of frames the protocol sends before text chunk n.
func (s Suite) framesBefore(n int) int {
	if s.Protocol == OpenAI {
		return n + 1 // the role-only opening chunk
	}
	return n
}

var sqlTool = datachat.ToolSpec{
	Name: "execute_sql", Description: "Run a SQL query over the datasets.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"DuckDB SQL"}},"required":["query"]}`),
}

var searchTool = datachat.ToolSpec{
	Name: "search_documents", Description: "Search the documents.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"top_k":{"type":"integer"}},"required":["query"]}`),
}

func baseRequest() *datachat.ModelRequest {
	temp := 0.5
	return &datachat.ModelRequest{
		System:          "You answer questions about data.",
		Messages:        []datachat.ModelMessage{{Role: datachat.ModelRoleUser, Content: "How many rows are there?"}},
		Tools:           []datachat.ToolSpec{sqlTool, searchTool},
		Temperature:     &temp,
		MaxOutputTokens: 256,
	}
}

func providerError(t *testing.T, err error, kind string) *datachat.ProviderError {
	t.Helper()
	var pe *datachat.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("got error %v (%T), want a *datachat.ProviderError of kind %s", err, err, kind)
	}
	if pe.Kind != kind {
		t.Fatalf("got kind %q (%v), want %q", pe.Kind, pe, kind)
	}
	if pe.Reason == "" || pe.SuggestedAction == "" {
		t.Errorf("error %#v lacks a reason or a suggested action", pe)
	}
	return pe
}

func wantRequests(t *testing.T, srv *Server, n int) []Request {
	t.Helper()
	reqs := srv.ChatRequests()
	if len(reqs) != n {
		t.Fatalf("the fake saw %d chat requests, want %d", len(reqs), n)
	}
	return reqs
}

func (s Suite) testText(t *testing.T) {
	srv, m := s.start(t, Script{Turns: []Turn{{Text: []string{"Hello", ", world", "!"}, Usage: &Usage{Input: 12, Output: 3}}}})
	evs, err := Collect(context.Background(), m, baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	if got := evs.Text(); got != "Hello, world!" {
		t.Errorf("text: got %q, want %q", got, "Hello, world!")
	}
	if len(evs) != 5 {
		t.Errorf("got %d events, want 3 text chunks, finish and usage: %+v", len(evs), evs)
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
	if got := evs.Finish(); got != "stop" {
		t.Errorf("finish: got %q, want stop", got)
	}
	if u := evs.Usage(); u == nil || *u != (datachat.TokenCount{Input: 12, Output: 3}) {
		t.Errorf("usage: got %+v, want {12 3}", u)
	}
	req := wantRequests(t, srv, 1)[0]
	if !req.Stream || req.Model == "" {
		t.Errorf("request: stream %v, model %q; want a streaming request naming the model", req.Stream, req.Model)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Text != "You answer questions about data." ||
		req.Messages[1].Role != "user" || req.Messages[1].Text != "How many rows are there?" {
		t.Errorf("request messages: got %+v", req.Messages)
	}
	if !req.HasTool("execute_sql") || !req.HasTool("search_documents") {
		t.Errorf("request tools: got %v", req.Tools)
	}
}

func (s Suite) testOneToolCall(t *testing.T) {
	_, m := s.start(t, Script{Turns: []Turn{Calls(Call("execute_sql", `{"query":"SELECT count(*) FROM sales"}`))}})
	evs, err := Collect(context.Background(), m, baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	calls := evs.ToolCalls()
	if len(calls) != 1 || calls[0].Name != "execute_sql" || calls[0].ID == "" ||
		!JSONEqual(calls[0].Args, []byte(`{"query":"SELECT count(*) FROM sales"}`)) {
		t.Fatalf("tool calls: got %+v", calls)
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
	if got := evs.Finish(); got != "tool_calls" {
		t.Errorf("finish: got %q, want tool_calls", got)
	}
}

func (s Suite) testTwoToolCalls(t *testing.T) {
	_, m := s.start(t, Script{Turns: []Turn{Calls(
		Call("execute_sql", `{"query":"SELECT 1"}`),
		Call("search_documents", `{"query":"refund policy","top_k":3}`),
	)}})
	evs, err := Collect(context.Background(), m, baseRequest())
	if err != nil {
		t.Fatal(err)
	}
	calls := evs.ToolCalls()
	if len(calls) != 2 || calls[0].Name != "execute_sql" || calls[1].Name != "search_documents" {
		t.Fatalf("tool calls: got %+v", calls)
	}
	if calls[0].ID == calls[1].ID {
		t.Errorf("both calls have id %q", calls[0].ID)
	}
	if !JSONEqual(calls[1].Args, []byte(`{"query":"refund policy","top_k":3}`)) {
		t.Errorf("second call args: got %s", calls[1].Args)
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
}

func (s Suite) testToolResult(t *testing.T) {
	srv, m := s.start(t, Script{Turns: []Turn{
		Calls(Call("execute_sql", `{"query":"SELECT count(*) AS n FROM sales"}`)),
		{Match: &Match{LastRole: "tool"}, Reply: `There are {{field .LastToolResult "rows.0.0"}} sales.`},
	}})
	req := baseRequest()
	evs, err := Collect(context.Background(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	calls := evs.ToolCalls()
	if len(calls) != 1 {
		t.Fatalf("got %d calls, want 1", len(calls))
	}
	call := calls[0]
	req.Messages = append(req.Messages,
		datachat.ModelMessage{Role: datachat.ModelRoleAssistant, ToolCalls: []datachat.ModelToolCall{call}},
		datachat.ModelMessage{Role: datachat.ModelRoleTool, ToolCallID: call.ID, ToolName: call.Name,
			Content: `{"columns":[{"name":"n","type":"integer"}],"rows":[[4217]],"row_count":1,"truncated":false}`},
	)
	evs, err = Collect(context.Background(), m, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := evs.Text(); got != "There are 4217 sales." {
		t.Errorf("answer: got %q, want %q", got, "There are 4217 sales.")
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
	second := wantRequests(t, srv, 2)[1]
	n := len(second.Messages)
	if n < 2 {
		t.Fatalf("follow-up messages: got %+v", second.Messages)
	}
	asst, result := second.Messages[n-2], second.Messages[n-1]
	if asst.Role != "assistant" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Name != "execute_sql" ||
		!JSONEqual(asst.ToolCalls[0].Args, call.Args) || asst.ToolCalls[0].ID != call.ID || asst.ToolCalls[0].Signature != call.Signature {
		t.Errorf("follow-up assistant message: got %+v, want the call %+v", asst, call)
	}
	if result.Role != "tool" || result.ToolCallID != call.ID || !strings.Contains(result.Text, "4217") {
		t.Errorf("follow-up tool message: got %+v", result)
	}
	if s.Protocol != OpenAI && result.ToolName != "execute_sql" {
		t.Errorf("follow-up tool message names %q, want execute_sql", result.ToolName)
	}
}

func (s Suite) testErrors(t *testing.T) {
	for _, tt := range []struct {
		preset string
		kind   string
		status int
	}{
		{"auth", datachat.ProviderAuth, 0},
		{"permission_denied", datachat.ProviderAuth, 0},
		{"rate_limit", datachat.ProviderRateLimited, 429},
		{"unavailable", datachat.ProviderUnavailable, 503},
		{"server_error", datachat.ProviderUnavailable, 500},
		{"context_too_large", datachat.ProviderContextTooLarge, 0},
		{"model_not_found", datachat.ProviderBadRequest, 404},
	} {
		t.Run(tt.preset, func(t *testing.T) {
			t.Parallel()
			srv, m := s.start(t, Script{Turns: []Turn{Preset(tt.preset), Texts("must not be reached")}})
			evs, err := Collect(context.Background(), m, baseRequest())
			pe := providerError(t, err, tt.kind)
			if tt.status != 0 && pe.Status != tt.status {
				t.Errorf("status: got %d, want %d", pe.Status, tt.status)
			}
			if tt.kind == datachat.ProviderAuth && s.KeyVar != "" && !strings.Contains(pe.SuggestedAction, s.KeyVar) {
				t.Errorf("action %q does not name %s", pe.SuggestedAction, s.KeyVar)
			}
			if tt.preset == "rate_limit" && s.Protocol != Ollama && pe.RetryAfter <= 0 {
				t.Errorf("RetryAfter: got %v, want the delay the provider gave", pe.RetryAfter)
			}
			if len(evs) != 0 {
				t.Errorf("events on failure: %+v", evs)
			}
			wantRequests(t, srv, 1)
		})
	}
}

func (s Suite) testErrorMidStream(t *testing.T) {
	after := s.framesBefore(1)
	turn := Turn{Text: []string{"one", "two"}, Error: &ErrorReply{Preset: "unavailable", After: &after}}
	s.checkFailure(t, Script{Turns: []Turn{turn}}, datachat.ProviderUnavailable, "one")
}

// checkFailure streams script, whose first turn fails: the client must fail
// with an error of kind, having emitted text, without retrying.
func (s Suite) checkFailure(t *testing.T, script Script, kind, text string) {
	t.Helper()
	srv, m := s.start(t, script)
	evs, err := Collect(context.Background(), m, baseRequest())
	providerError(t, err, kind)
	if evs.Text() != text {
		t.Errorf("text before the failure: got %q, want %q", evs.Text(), text)
	}
	wantRequests(t, srv, 1)
}

func (s Suite) testDropBefore(t *testing.T) {
	srv, m := s.start(t, Script{Turns: []Turn{Faulty(FaultDrop, 0, "lost"), Texts("second", " try")}})
	start := time.Now()
	evs, err := Collect(context.Background(), m, baseRequest())
	if err != nil {
		t.Fatalf("got %v, want success on the retry", err)
	}
	if evs.Text() != "second try" {
		t.Errorf("text: got %q", evs.Text())
	}
	if err := evs.CheckEnd(); err != nil {
		t.Error(err)
	}
	if d := time.Since(start); d < SuiteRetryDelay {
		t.Errorf("retried after %v, before the retry delay %v", d, SuiteRetryDelay)
	}
	wantRequests(t, srv, 2)
}

func (s Suite) testDropTwice(t *testing.T) {
	srv, m := s.start(t, Script{Turns: []Turn{Faulty(FaultDrop, 0), Faulty(FaultDrop, 0), Texts("never")}})
	_, err := Collect(context.Background(), m, baseRequest())
	providerError(t, err, datachat.ProviderConnection)
	wantRequests(t, srv, 2)
}

func (s Suite) testDropAfter(t *testing.T) {
	s.checkFailure(t, Script{Turns: []Turn{Faulty(FaultDrop, s.framesBefore(1), "one", "two"), Texts("never")}}, datachat.ProviderConnection, "one")
}

func (s Suite) testStallBefore(t *testing.T) {
	srv, m := s.start(t, Script{Turns: []Turn{Faulty(FaultStall, 0, "late"), Texts("on time")}})
	evs, err := Collect(context.Background(), m, baseRequest())
	if err != nil {
		t.Fatalf("got %v, want success on the retry", err)
	}
	if evs.Text() != "on time" {
		t.Errorf("text: got %q", evs.Text())
	}
	wantRequests(t, srv, 2)
}

func (s Suite) testStallAfter(t *testing.T) {
	srv, m := s.start(t, Script{Turns: []Turn{Faulty(FaultStall, s.framesBefore(1), "one", "two"), Texts("never")}})
	start := time.Now()
	evs, err := Collect(context.Background(), m, baseRequest())
	providerError(t, err, datachat.ProviderTimeout)
	if d := time.Since(start); d < SuiteIdleTimeout {
		t.Errorf("timed out after %v, before the idle timeout of %v", d, SuiteIdleTimeout)
	}
	if evs.Text() != "one" {
		t.Errorf("text before the stall: got %q", evs.Text())
	}
	wantRequests(t, srv, 1)
}

func (s Suite) testHang(t *testing.T) {
	hang := Turn{Text: []string{"late"}, Fault: &Fault{Kind: FaultHang}}
	srv, m := s.start(t, Script{Turns: []Turn{hang, hang, Texts("never")}})
	_, err := Collect(context.Background(), m, baseRequest())
	providerError(t, err, datachat.ProviderTimeout)
	wantRequests(t, srv, 2)
}

func (s Suite) testMalformed(t *testing.T) {
	t.Run("AfterTokens", func(t *testing.T) {
		t.Parallel()
		s.checkFailure(t, Script{Turns: []Turn{Faulty(FaultMalformed, s.framesBefore(1), "one", "two"), Texts("never")}}, datachat.ProviderMalformed, "one")
	})
	t.Run("First", func(t *testing.T) {
		t.Parallel()
		srv, m := s.start(t, Script{Turns: []Turn{Faulty(FaultMalformed, 0, "one"), Texts("never")}})
		_, err := Collect(context.Background(), m, baseRequest())
		providerError(t, err, datachat.ProviderMalformed)
		wantRequests(t, srv, 1)
	})
}

func (s Suite) testTruncated(t *testing.T) {
	s.checkFailure(t, Script{Turns: []Turn{Faulty(FaultTruncate, 0, "one", "two"), Texts("never")}}, datachat.ProviderConnection, "onetwo")
}

func (s Suite) testCancel(t *testing.T) {
	chunks := make([]string, 40)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("w%d ", i)
	}
	srv, m := s.start(t, Script{Turns: []Turn{{Text: chunks, Delay: Duration(50 * time.Millisecond)}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled bool
	err := m.Stream(ctx, baseRequest(), func(ev datachat.ModelEvent) error {
		if ev.Text != "" && !cancelled {
			cancelled = true
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an error wrapping context.Canceled", err)
	}
	// The fake marks a request disconnected only when its client went before
	// the last of the 40 chunks: the stream stopped at the cancel.
	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := srv.Wait(wait, func(reqs []Request) bool { return len(reqs) == 1 && reqs[0].Disconnected }); err != nil {
		t.Fatalf("the fake never saw the request aborted: %v", err)
	}
	wantRequests(t, srv, 1)
}

func (s Suite) testEmitError(t *testing.T) {
	_, m := s.start(t, Script{Turns: []Turn{Texts("a", "b")}})
	stop := errors.New("the browser went away")
	err := m.Stream(context.Background(), baseRequest(), func(datachat.ModelEvent) error { return stop })
	if err != stop {
		t.Fatalf("got %v, want the emit callback's error", err)
	}
}

func (s Suite) testEmbed(t *testing.T) {
	texts := []string{"revenue by region", "Revenue by REGION!", "refund policy"}
	srv, m := s.start(t, Script{EmbeddingDim: 32})
	vecs, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) {
		t.Fatalf("got %d vectors, want %d", len(vecs), len(texts))
	}
	for i, text := range texts {
		if !reflect.DeepEqual(vecs[i], Vector(text, 32)) {
			t.Errorf("vector %d: got %v, want Vector(%q)", i, vecs[i], text)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Kind != KindEmbed || !reflect.DeepEqual(reqs[0].Inputs, texts) {
		t.Errorf("embedding requests: got %+v", reqs)
	}

	_, failing := s.start(t, Script{EmbedError: &ErrorReply{Preset: "auth"}})
	_, err = failing.Embed(context.Background(), texts)
	providerError(t, err, datachat.ProviderAuth)
}

func (s Suite) testAPIKey(t *testing.T) {
	srv := NewServer(t, s.Protocol, Script{APIKey: "right-key-123", Turns: []Turn{Texts("ok")}})
	settings := ClientSettings{BaseURL: srv.URL, APIKey: "wrong-key-456",
		Transport: llm.Transport{StreamIdleTimeout: SuiteIdleTimeout, RetryDelay: SuiteRetryDelay, Logger: slog.New(slog.DiscardHandler)}}
	_, err := Collect(context.Background(), s.New(settings), baseRequest())
	providerError(t, err, datachat.ProviderAuth)
	settings.APIKey = "right-key-123"
	evs, err := Collect(context.Background(), s.New(settings), baseRequest())
	if err != nil || evs.Text() != "ok" {
		t.Fatalf("with the right key: got %q, %v", evs.Text(), err)
	}
}

func (s Suite) testLogs(t *testing.T) {
	const key = "sk-llmtest-SECRET-0042"
	srv := NewServer(t, s.Protocol, Script{APIKey: key, Turns: []Turn{
		Texts("fine"),
		Fail(401, "Incorrect API key provided: "+key),
	}})
	var logs testlog.Buffer
	m := s.New(ClientSettings{
		BaseURL: srv.URL, APIKey: key,
		Transport: llm.Transport{StreamIdleTimeout: SuiteIdleTimeout, RetryDelay: SuiteRetryDelay,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	})
	ctx := context.Background()
	if _, err := Collect(ctx, m, baseRequest()); err != nil {
		t.Fatal(err)
	}
	_, err := Collect(ctx, m, baseRequest())
	pe := providerError(t, err, datachat.ProviderAuth)
	if strings.Contains(pe.Error(), key) || strings.Contains(pe.Reason, key) {
		t.Errorf("the error shows the key: %v", pe)
	}
	out := logs.String()
	if strings.Contains(out, key) {
		t.Errorf("the log shows the API key:\n%s", out)
	}
	for _, event := range []string{"llm_request_started", "llm_response_chunk", "llm_request_completed"} {
		if !strings.Contains(out, `"msg":"`+event+`"`) {
			t.Errorf("no %s in the log:\n%s", event, out)
		}
	}
}
