package chat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"datachat"
)

// Limits of one turn (spec 000, DESIGN.md §4).
const (
	MaxToolCalls     = 5
	MaxSQLFailures   = 3
	maxProviderCalls = MaxToolCalls + MaxSQLFailures + 4 // a bound for misbehaving models
	flushInterval    = time.Second
	contextDropCount = 10
)

// ErrContextTooLarge is the text of the chat_error sent when a conversation no
// longer fits the model's window even after dropping its oldest messages.
const ErrContextTooLarge = "Conversation context too large. Try starting a new conversation."

// Data is a conversation's data as a turn uses it. The methods return
// *datachat.Error: EINVALID for a query or URL the model can correct (its message
// says what is wrong), ENOTFOUND, EBUSY.
type Data interface {
	Datasets(ctx context.Context, conversationID string) ([]*datachat.Dataset, error)
	Query(ctx context.Context, conversationID, sql string) (*datachat.QueryResult, error)
	EstimateRows(ctx context.Context, conversationID, sql string) (int64, error)
	LoadURL(ctx context.Context, conversationID, url string) ([]*datachat.Dataset, error)
	HasDocuments(ctx context.Context, conversationID string) (bool, error)
	Search(ctx context.Context, conversationID string, q SearchQuery) (*SearchResult, error)
}

// SearchQuery asks for the TopK chunks of a conversation's documents most
// relevant to Text, among those matching Filters.
type SearchQuery struct {
	Text    string
	TopK    int
	Filters map[string]any
}

// SearchResult is what a search found and what it cost.
type SearchResult struct {
	Sources     []datachat.Source
	EmbeddingMS float64
	RetrievalMS float64
}

// TurnOptions override the Runner's settings for one turn (spec 003's
// override, and its metadata filters).
type TurnOptions struct {
	Temperature     *float64
	MaxOutputTokens int
	TopK            int // excerpts put in the prompt
	Filters         map[string]any
}

// Runner runs chat turns. Its fields are set once, before the first turn.
type Runner struct {
	Store    datachat.Store
	Data     Data
	Model    Model // nil when no provider is configured
	Provider string
	ModelID  string
	Window   int // the model's context window in tokens

	MaxOutputTokens int
	Temperature     float64
	MaxContextDocs  int
	MaxQueryChars   int
	ConfirmAlways   bool
	Streaming       bool
	RateLimitRPM    int
	TokensPerDay    int64
	Template        *template.Template // nil: DefaultTemplate
	Logger          *slog.Logger
	Now             func() time.Time
	Observer        Observer // nil: nobody watches

	// LeaseOwner and LeaseNode identify this process to the others sharing the
	// database (datachat.Lease); an empty LeaseOwner gets a random one. A
	// turn's lease lasts LeaseTTL (default DefaultLeaseTTL) and is renewed
	// every third of it while the turn runs.
	LeaseOwner string
	LeaseNode  string
	LeaseTTL   time.Duration

	mu     sync.Mutex
	active map[string]bool // conversations with a turn running in this process
}

// DefaultLeaseTTL is how long a streaming message's lease lasts unless
// renewed: how long other processes wait before taking the turn of a process
// that vanished for left behind.
const DefaultLeaseTTL = 15 * time.Second

// ErrInterrupted is the cause with which the server cancels the context of the
// turns still running when it shuts down: their messages are stored as
// interrupted, not cancelled, since the user did not cancel them.
var ErrInterrupted = errors.New("the server is shutting down")

// errShuttingDown is what a turn interrupted by a shutdown answers.
var errShuttingDown = datachat.Errorf(datachat.EBUSY, "The server is restarting: the reply so far is saved. Send your message again in a moment.")

// Lease returns a lease for a turn starting now, by this process.
func (r *Runner) Lease() datachat.Lease {
	r.mu.Lock()
	if r.LeaseOwner == "" {
		b := make([]byte, 8)
		rand.Read(b)
		r.LeaseOwner = hex.EncodeToString(b)
	}
	owner := r.LeaseOwner
	r.mu.Unlock()
	return datachat.Lease{Owner: owner, Node: r.LeaseNode, Until: time.Now().Add(r.leaseTTL())}
}

func (r *Runner) leaseTTL() time.Duration {
	if r.LeaseTTL > 0 {
		return r.LeaseTTL
	}
	return DefaultLeaseTTL
}

// Observer is told what turns do, for metrics. Its methods are called from
// the turn's goroutine and must not block.
type Observer interface {
	// TurnEnded: a turn, or its continuation after a confirmation, ended
	// with this message status d after it started.
	TurnEnded(status string, d time.Duration)
	// FirstToken: the turn's first answer token came d after it started.
	FirstToken(d time.Duration)
	ToolCalled(tool string, ok bool, d time.Duration)
	SQLQueried(ok bool, d time.Duration)
	// ProviderFailed: a model call failed with a datachat.ProviderError.
	ProviderFailed(kind string)
	// TokensUsed: tokens recorded in token_usage.
	TokensUsed(provider, model string, input, output int64)
}

// Event is one message to the client, sent as {"type","data"}.
type Event struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// Sink receives a turn's events in order. It may block (the turn waits); it
// must not keep the event's data.
type Sink func(Event)

// Event payloads (DESIGN.md §3, WebSocket).
type (
	TokenEvent struct {
		Token string `json:"token"`
	}
	ToolCallStartEvent struct {
		ID   string          `json:"id"`
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}
	ToolCallResultEvent struct {
		ID        string            `json:"id"`
		Tool      string            `json:"tool"`
		OK        bool              `json:"ok"`
		Content   string            `json:"content"`
		Error     string            `json:"error,omitempty"`
		Columns   []datachat.Column `json:"columns,omitempty"`
		Rows      [][]any           `json:"rows,omitempty"`
		RowCount  *int              `json:"row_count,omitempty"`
		Truncated *bool             `json:"truncated,omitempty"`
		ElapsedMS *float64          `json:"elapsed_ms,omitempty"`
	}
	ConfirmationEvent struct {
		ID          string          `json:"id"`
		Action      string          `json:"action"`
		Parameters  json.RawMessage `json:"parameters"`
		Explanation string          `json:"explanation"`
	}
	CompleteEvent struct {
		MessageID    string            `json:"message_id"`
		Status       string            `json:"status"`
		InputTokens  int64             `json:"input_tokens"`
		OutputTokens int64             `json:"output_tokens"`
		TotalTokens  int64             `json:"total_tokens"`
		Sources      []datachat.Source `json:"sources"`
	}
	ErrorEvent struct {
		Message         string `json:"message"`
		Reason          string `json:"reason,omitempty"`
		SuggestedAction string `json:"suggested_action,omitempty"`
	}
)

// ErrorEventFor turns an error from Send or Confirm into a chat_error payload.
func ErrorEventFor(err error) ErrorEvent {
	var pe *datachat.ProviderError
	if errors.As(err, &pe) {
		msg := "The language model request failed."
		switch pe.Kind {
		case datachat.ProviderNotConfigured:
			msg = "No language model is configured."
		case datachat.ProviderContextTooLarge:
			msg = ErrContextTooLarge
		}
		return ErrorEvent{Message: msg, Reason: pe.Reason, SuggestedAction: pe.SuggestedAction}
	}
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return ErrorEvent{Message: rl.Message, Reason: "rate_limited", SuggestedAction: fmt.Sprintf("Try again in %s.", rl.After.Round(time.Second))}
	}
	// A condition of the server (its database unavailable, its disk full),
	// classified where it was recognised.
	var c *datachat.Condition
	if errors.As(err, &c) {
		return ErrorEvent{Message: datachat.ErrorMessage(err), Reason: c.Reason, SuggestedAction: c.SuggestedAction}
	}
	return ErrorEvent{Message: datachat.ErrorMessage(err)}
}

// RateLimitError refuses a turn over a user's limits.
type RateLimitError struct {
	Message string
	After   time.Duration
}

func (e *RateLimitError) Error() string             { return e.Message }
func (e *RateLimitError) RetryAfter() time.Duration { return e.After }

// Outcome is what a turn ended with.
type Outcome struct {
	Message      *datachat.Message // the assistant message
	Usage        datachat.TokenCount
	Sources      []datachat.Source
	Confirmation *datachat.Confirmation // set when the turn waits for the user: send confirmation_required
	// Complete is the chat_complete to send when the turn completed or was
	// cancelled. The caller sends it once it is ready for the next turn, so a
	// client answering chat_complete at once is never told a turn still runs.
	Complete    *CompleteEvent
	EmbeddingMS float64 // spent embedding the retrieval query
	RetrievalMS float64 // spent retrieving excerpts, embedding included
}

// NotConfiguredError is the error of a turn with no provider configured.
func NotConfiguredError() error {
	return &datachat.ProviderError{
		Kind:            datachat.ProviderNotConfigured,
		Reason:          "None of GEMINI_API_KEY, OPENAI_API_KEY or OLLAMA_HOST is set, and no Ollama answers on 127.0.0.1:11434.",
		SuggestedAction: "Set GEMINI_API_KEY (Gemini), OPENAI_API_KEY with OPENAI_BASE_URL (an OpenAI-compatible server), or OLLAMA_HOST (Ollama), then restart datachat.",
	}
}

// CleanQuery validates a question: trimmed, control characters other than
// newlines and tabs removed, not empty, at most maxChars characters.
func CleanQuery(s string, maxChars int) (string, error) {
	if !utf8.ValidString(s) {
		return "", datachat.Errorf(datachat.EINVALID, "The message must be valid UTF-8.")
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return "", datachat.Errorf(datachat.EINVALID, "The message is empty.")
	case maxChars > 0 && n > maxChars:
		return "", datachat.Errorf(datachat.EINVALID, "The message is %d characters long; the limit is %d.", n, maxChars)
	}
	return s, nil
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// begin marks a conversation busy; false if a turn is already running there.
func (r *Runner) begin(conversationID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active == nil {
		r.active = map[string]bool{}
	}
	if r.active[conversationID] {
		return false
	}
	r.active[conversationID] = true
	return true
}

func (r *Runner) end(conversationID string) {
	r.mu.Lock()
	delete(r.active, conversationID)
	r.mu.Unlock()
}

// Busy reports whether a turn is running in the conversation.
func (r *Runner) Busy(conversationID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[conversationID]
}

// checkLimits applies the per-user request and token limits before a model call.
func (r *Runner) checkLimits(ctx context.Context, userID string) error {
	now := r.now()
	if r.TokensPerDay > 0 {
		used, err := r.Store.TokensSince(ctx, userID, now.Add(-24*time.Hour))
		if err != nil {
			return err
		}
		if used >= r.TokensPerDay {
			return &RateLimitError{
				Message: fmt.Sprintf("Daily token limit reached: %d of %d tokens used in the last 24 hours.", used, r.TokensPerDay),
				After:   time.Hour,
			}
		}
	}
	if r.RateLimitRPM > 0 {
		ok, after, err := r.Store.TakeRequest(ctx, userID, now, time.Minute, r.RateLimitRPM)
		if err != nil {
			return err
		}
		if !ok {
			return &RateLimitError{
				Message: fmt.Sprintf("Rate limit reached: %d requests per minute.", r.RateLimitRPM),
				After:   max(after, time.Second),
			}
		}
	}
	return nil
}

// Send runs one turn: it stores the user's message, streams the model's answer
// with its tool calls to sink, and stores the answer. An error before the turn
// starts (bad input, busy conversation, limits, no provider) comes back with a
// nil Outcome; an error during the turn comes back with the Outcome of the
// stored, failed message. The caller turns errors into chat_error.
func (r *Runner) Send(ctx context.Context, user *datachat.User, conversationID, content string, opts TurnOptions, sink Sink) (*Outcome, error) {
	ctx = datachat.WithUserID(ctx, user.ID)
	content, err := CleanQuery(content, r.MaxQueryChars)
	if err != nil {
		return nil, err
	}
	conv, err := r.Store.Conversation(ctx, user.ID, conversationID)
	if err != nil {
		return nil, err
	}
	if r.Model == nil {
		return nil, NotConfiguredError()
	}
	if !r.begin(conv.ID) {
		return nil, datachat.Errorf(datachat.ECONFLICT, "A reply is still being written in this conversation; wait for it or stop it first.")
	}
	defer r.end(conv.ID)
	if _, err := r.Store.PendingConfirmation(ctx, conv.ID); err == nil {
		return nil, datachat.Errorf(datachat.ECONFLICT, "The assistant is waiting for you to approve or decline an action first.")
	} else if datachat.ErrorCode(err) != datachat.ENOTFOUND {
		return nil, err
	}
	if err := r.checkLimits(ctx, user.ID); err != nil {
		return nil, err
	}

	// Pruning keeps at most the newest MaxContextMessages, the new question
	// among them: read no more than that.
	history, err := r.Store.RecentMessages(ctx, conv.ID, MaxContextMessages-1)
	if err != nil {
		return nil, err
	}
	userMsg := &datachat.Message{ConversationID: conv.ID, Role: datachat.RoleUser, Content: content, Status: datachat.StatusComplete}
	msg := &datachat.Message{ConversationID: conv.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	// The store refuses when another process runs a turn in the conversation.
	if err := r.Store.BeginTurn(ctx, userMsg, msg, r.Lease(), time.Now()); err != nil {
		if datachat.ErrorCode(err) == datachat.ECONFLICT {
			return nil, datachat.Errorf(datachat.ECONFLICT, "A reply is still being written in this conversation; wait for it or stop it first.")
		}
		return nil, err
	}
	t := &turn{r: r, user: user, conv: conv, msg: msg, sink: sink, start: r.now(), opts: opts}
	t.history = append(history, userMsg)
	if err := t.prepare(ctx, content); err != nil {
		return t.finish(ctx, err)
	}
	return t.run(ctx)
}

// Confirm answers a pending confirmation and continues its turn.
func (r *Runner) Confirm(ctx context.Context, user *datachat.User, conversationID, confirmationID string, approved bool, note string, sink Sink) (*Outcome, error) {
	ctx = datachat.WithUserID(ctx, user.ID)
	conv, err := r.Store.Conversation(ctx, user.ID, conversationID)
	if err != nil {
		return nil, err
	}
	if !r.begin(conv.ID) {
		return nil, datachat.Errorf(datachat.ECONFLICT, "A reply is still being written in this conversation.")
	}
	defer r.end(conv.ID)
	pending, err := r.Store.PendingConfirmation(ctx, conv.ID)
	if err != nil {
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return nil, datachat.Errorf(datachat.ENOTFOUND, "There is no action waiting for confirmation.")
		}
		return nil, err
	}
	if pending.ID != confirmationID {
		return nil, datachat.Errorf(datachat.ENOTFOUND, "Confirmation %q is not the one waiting (%s).", confirmationID, pending.ID)
	}
	if r.Model == nil {
		return nil, NotConfiguredError()
	}
	status := datachat.ConfirmDeclined
	if approved {
		status = datachat.ConfirmApproved
	}
	note = strings.TrimSpace(note)
	c, err := r.Store.ResolveConfirmation(ctx, pending.ID, status, note)
	if err != nil {
		return nil, err
	}
	t, err := r.resume(ctx, user, conv, c, sink)
	if err != nil {
		return nil, err
	}
	if err := t.answerConfirmation(ctx, c); err != nil {
		return t.finish(ctx, err)
	}
	return t.run(ctx)
}

// CancelPending declines a pending confirmation because the user stopped the
// turn, and ends the turn as cancelled.
func (r *Runner) CancelPending(ctx context.Context, user *datachat.User, conversationID string, sink Sink) (*Outcome, error) {
	conv, err := r.Store.Conversation(ctx, user.ID, conversationID)
	if err != nil {
		return nil, err
	}
	if !r.begin(conv.ID) {
		return nil, datachat.Errorf(datachat.ECONFLICT, "A reply is still being written in this conversation.")
	}
	defer r.end(conv.ID)
	pending, err := r.Store.PendingConfirmation(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	c, err := r.Store.ResolveConfirmation(ctx, pending.ID, datachat.ConfirmDeclined, "cancelled")
	if err != nil {
		return nil, err
	}
	t, err := r.resume(ctx, user, conv, c, sink)
	if err != nil {
		return nil, err
	}
	return t.finish(ctx, context.Canceled)
}

// turn is one running turn.
type turn struct {
	r     *Runner
	user  *datachat.User
	conv  *datachat.Conversation
	msg   *datachat.Message
	sink  Sink
	start time.Time
	opts  TurnOptions

	embeddingMS, retrievalMS float64

	history      []*datachat.Message // pruned, for the model
	system       string
	hasDocuments bool
	state        turnState

	confirmation *datachat.Confirmation // to ask for, when pausing

	mu      sync.Mutex // guards msg.Content, dirty and pending while the flusher runs
	dirty   bool
	pending strings.Builder // tokens held back when streaming is off
	tokened bool            // a token arrived (for Observer.FirstToken)
}

// turnState is what a paused turn needs to continue; it is stored with its
// confirmation.
type turnState struct {
	HistoryIDs     []string                 `json:"history_ids"`
	Transcript     []datachat.ModelMessage  `json:"transcript"`
	ToolCalls      int                      `json:"tool_calls"`
	SQLFailures    int                      `json:"sql_failures"`
	NoTools        bool                     `json:"no_tools"`
	ContextRetried bool                     `json:"context_retried"`
	Seq            int                      `json:"seq"`
	Usage          datachat.TokenCount      `json:"usage"`
	Recorded       datachat.TokenCount      `json:"recorded"` // already written to token_usage
	Estimated      bool                     `json:"estimated"`
	Sources        []datachat.Source        `json:"sources"`
	Excerpts       int                      `json:"excerpts"` // how many of Sources the prompt holds
	Pending        *datachat.ModelToolCall  `json:"pending"`
	Skipped        []datachat.ModelToolCall `json:"skipped"`
}

// prepare prunes the history and builds the system prompt with the excerpts
// relevant to the question.
func (t *turn) prepare(ctx context.Context, question string) error {
	datasets, err := t.r.Data.Datasets(ctx, t.conv.ID)
	if err != nil {
		return err
	}
	if t.hasDocuments, err = t.r.Data.HasDocuments(ctx, t.conv.ID); err != nil {
		return err
	}
	var excerpts []datachat.Source
	if k := t.topK(); t.hasDocuments && k > 0 {
		res, err := t.r.Data.Search(ctx, t.conv.ID, SearchQuery{Text: t.searchText(question), TopK: k, Filters: t.opts.Filters})
		if err != nil {
			return err
		}
		excerpts = res.Sources
		t.embeddingMS, t.retrievalMS = res.EmbeddingMS, res.RetrievalMS
		t.state.Sources = excerpts
		t.state.Excerpts = len(excerpts)
	}
	t.system, err = SystemPrompt(t.r.Template, PromptData{
		Datasets: datasets, Excerpts: excerpts, HasDocuments: t.hasDocuments, ConfirmAlways: t.r.ConfirmAlways,
	})
	if err != nil {
		return err
	}
	window := t.r.Window
	if window <= 0 {
		window = 128_000
	}
	t.history = Prune(t.history, len(t.system), window*8/10)
	for _, m := range t.history {
		t.state.HistoryIDs = append(t.state.HistoryIDs, m.ID)
	}
	return nil
}

// searchText is the retrieval query: the question plus the last user messages.
func (t *turn) searchText(question string) string {
	parts := []string{question}
	for i := len(t.history) - 2; i >= 0 && len(parts) < 3; i-- {
		if t.history[i].Role == datachat.RoleUser {
			parts = append(parts, t.history[i].Content)
		}
	}
	return strings.Join(parts, "\n")
}

// resume rebuilds a paused turn from its confirmation.
func (r *Runner) resume(ctx context.Context, user *datachat.User, conv *datachat.Conversation, c *datachat.Confirmation, sink Sink) (*turn, error) {
	msgs, err := r.Store.Messages(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	t := &turn{r: r, user: user, conv: conv, sink: sink, start: r.now()}
	if err := json.Unmarshal(c.State, &t.state); err != nil {
		return nil, fmt.Errorf("confirmation %s: bad state: %w", c.ID, err)
	}
	byID := make(map[string]*datachat.Message, len(msgs))
	for _, m := range msgs {
		byID[m.ID] = m
	}
	for _, id := range t.state.HistoryIDs {
		if m := byID[id]; m != nil {
			t.history = append(t.history, m)
		}
	}
	if t.msg = byID[c.MessageID]; t.msg == nil {
		return nil, fmt.Errorf("confirmation %s: message %s is gone", c.ID, c.MessageID)
	}
	// Leased before it streams, so no other process takes it for left behind.
	if err := r.Store.RenewLease(ctx, t.msg.ID, r.Lease()); err != nil {
		return nil, err
	}
	t.msg.Status = datachat.StatusStreaming
	if err := r.Store.UpdateMessage(ctx, t.msg); err != nil {
		return nil, err
	}
	datasets, err := r.Data.Datasets(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	if t.hasDocuments, err = r.Data.HasDocuments(ctx, conv.ID); err != nil {
		return nil, err
	}
	t.system, err = SystemPrompt(r.Template, PromptData{
		Datasets: datasets, Excerpts: t.initialExcerpts(), HasDocuments: t.hasDocuments, ConfirmAlways: r.ConfirmAlways,
	})
	return t, err
}

// initialExcerpts are the sources the turn's prompt was built with; later ones
// came from search_documents.
func (t *turn) initialExcerpts() []datachat.Source {
	return t.state.Sources[:t.state.Excerpts]
}

// topK is how many excerpts go into the prompt.
func (t *turn) topK() int {
	if t.opts.TopK > 0 {
		return t.opts.TopK
	}
	return t.r.MaxContextDocs
}

// run streams model calls and runs their tools until the model answers without
// tools, the turn pauses for a confirmation, or it fails.
func (t *turn) run(ctx context.Context) (*Outcome, error) {
	stop := t.startFlusher()
	err := t.loop(ctx)
	stop()
	return t.finish(ctx, err)
}

// errPaused ends the loop when a confirmation is needed.
var errPaused = errors.New("waiting for confirmation")

func (t *turn) loop(ctx context.Context) error {
	for calls := 0; ; calls++ {
		if calls >= maxProviderCalls {
			return nil // the model kept calling tools it was told it cannot use
		}
		text, toolCalls, err := t.call(ctx)
		if err != nil {
			var pe *datachat.ProviderError
			if errors.As(err, &pe) && pe.Kind == datachat.ProviderContextTooLarge && !t.state.ContextRetried && text == "" {
				t.state.ContextRetried = true
				t.history = DropOldest(t.history, contextDropCount)
				t.state.HistoryIDs = t.state.HistoryIDs[len(t.state.HistoryIDs)-len(t.history):]
				continue
			}
			return err
		}
		t.state.Transcript = append(t.state.Transcript, datachat.ModelMessage{Role: datachat.ModelRoleAssistant, Content: text, ToolCalls: toolCalls})
		if len(toolCalls) == 0 {
			return nil
		}
		if err := t.runTools(ctx, toolCalls); err != nil {
			return err
		}
	}
}

// request builds the next model request.
func (t *turn) request() *datachat.ModelRequest {
	msgs := historyMessages(t.history)
	msgs = append(msgs, t.state.Transcript...)
	req := &datachat.ModelRequest{
		Model:           t.r.ModelID,
		System:          t.system,
		Messages:        msgs,
		MaxOutputTokens: t.r.MaxOutputTokens,
	}
	if t.opts.MaxOutputTokens > 0 {
		req.MaxOutputTokens = t.opts.MaxOutputTokens
	}
	temp := t.r.Temperature
	if t.opts.Temperature != nil {
		temp = *t.opts.Temperature
	}
	req.Temperature = &temp
	if !t.state.NoTools {
		req.Tools = tools(t.state.SQLFailures >= MaxSQLFailures, t.hasDocuments)
	}
	return req
}

// call streams one model call, relaying text as it arrives.
func (t *turn) call(ctx context.Context) (string, []datachat.ModelToolCall, error) {
	req := t.request()
	var (
		text     strings.Builder
		calls    []datachat.ModelToolCall
		reported bool
	)
	err := t.r.Model.Stream(ctx, req, func(ev datachat.ModelEvent) error {
		switch {
		case ev.Text != "":
			text.WriteString(ev.Text)
			t.token(ev.Text)
		case ev.ToolCall != nil:
			tc := *ev.ToolCall
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d", t.state.Seq+len(calls)+1)
			}
			if len(tc.Args) == 0 {
				tc.Args = json.RawMessage(`{}`)
			}
			calls = append(calls, tc)
		case ev.Usage != nil && (ev.Usage.Input > 0 || ev.Usage.Output > 0):
			// A provider that reports nothing sends zeros: estimate instead.
			reported = true
			t.state.Usage.Input += ev.Usage.Input
			t.state.Usage.Output += ev.Usage.Output
		}
		return nil
	})
	if !reported {
		// No usage from the provider (failed or cancelled call): estimate.
		chars := len(req.System)
		for _, m := range req.Messages {
			chars += len(m.Content)
			for _, c := range m.ToolCalls {
				chars += len(c.Args)
			}
		}
		t.state.Usage.Input += EstimateTokens(chars)
		t.state.Usage.Output += EstimateTokens(text.Len())
		t.state.Estimated = true
	}
	var pe *datachat.ProviderError
	if o := t.r.Observer; o != nil && errors.As(err, &pe) {
		o.ProviderFailed(pe.Kind)
	}
	return text.String(), calls, err
}

// token relays one text delta and appends it to the stored answer.
func (t *turn) token(s string) {
	t.mu.Lock()
	if o := t.r.Observer; o != nil && !t.tokened {
		t.tokened = true
		o.FirstToken(time.Since(t.start))
	}
	t.msg.Content += s
	t.dirty = true
	if !t.r.Streaming {
		t.pending.WriteString(s)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.emit("chat_token", TokenEvent{Token: s})
}

func (t *turn) emit(typ string, data any) {
	if t.sink != nil {
		t.sink(Event{Type: typ, Data: data})
	}
}

// startFlusher writes the answer's text to the store at least once a second
// while it streams, so a crash loses at most a second of it, and renews the
// message's lease every third of its TTL, so other processes sharing the
// database know the turn is alive (tokens or not: a long SQL query too).
func (t *turn) startFlusher() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := t.r.leaseTTL() / 3
		tick := time.NewTicker(min(flushInterval, every))
		defer tick.Stop()
		renew := time.Now().Add(every)
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				t.flush()
				if !now.Before(renew) {
					t.renewLease()
					renew = now.Add(every)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (t *turn) renewLease() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.r.Store.RenewLease(ctx, t.msg.ID, t.r.Lease()); err != nil {
		t.r.Logger.Warn("renew streaming message lease", slog.String("message_id", t.msg.ID), slog.String("error", err.Error()))
	}
}

func (t *turn) flush() {
	t.mu.Lock()
	if !t.dirty {
		t.mu.Unlock()
		return
	}
	m := *t.msg
	t.dirty = false
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.r.Store.UpdateMessage(ctx, &m); err != nil {
		t.r.Logger.Warn("flush streaming message", slog.String("message_id", m.ID), slog.String("error", err.Error()))
	}
}

// runTools runs the tool calls of one model response in order.
func (t *turn) runTools(ctx context.Context, calls []datachat.ModelToolCall) error {
	for i, call := range calls {
		if err := ctx.Err(); err != nil {
			return err
		}
		if t.state.ToolCalls >= MaxToolCalls {
			t.state.NoTools = true
			t.skip(call, fmt.Sprintf("Not run: the limit of %d tool calls per turn was reached. Answer the user now with what you have, without calling tools.", MaxToolCalls))
			continue
		}
		t.state.ToolCalls++
		ask := call.Name == ToolRequestConfirmation || t.r.ConfirmAlways && (call.Name == ToolExecuteSQL || call.Name == ToolLoadDataset)
		if !ask && call.Name == ToolLoadDataset {
			var err error
			if ask, err = t.unfamiliarURL(ctx, call); err != nil {
				return err
			}
		}
		if ask {
			paused, err := t.requestConfirmation(ctx, call)
			if err != nil {
				return err
			}
			if paused {
				t.state.Skipped = append(t.state.Skipped, calls[i+1:]...)
				return errPaused
			}
			continue
		}
		t.runTool(ctx, call, call.Name, call.Args)
	}
	return nil
}

// skip answers a call without running it.
func (t *turn) skip(call datachat.ModelToolCall, reason string) {
	t.emit("tool_call_start", ToolCallStartEvent{ID: call.ID, Tool: call.Name, Args: call.Args})
	t.record(call, call.Name, toolResult{content: reason, err: reason})
}

// toolResult is the outcome of one tool call.
type toolResult struct {
	content string // what the model receives
	err     string // set when the call failed
	result  *datachat.QueryResult
}

// runTool runs tool with args as the answer to call and records the round.
func (t *turn) runTool(ctx context.Context, call datachat.ModelToolCall, tool string, args json.RawMessage) {
	t.emit("tool_call_start", ToolCallStartEvent{ID: call.ID, Tool: tool, Args: args})
	started := time.Now()
	res := t.execute(ctx, tool, args)
	t.recordAt(call, tool, args, res, started)
}

func (t *turn) execute(ctx context.Context, tool string, args json.RawMessage) toolResult {
	fail := func(format string, a ...any) toolResult {
		msg := fmt.Sprintf(format, a...)
		return toolResult{content: "Error: " + msg, err: msg}
	}
	switch tool {
	case ToolExecuteSQL:
		var a struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.Query) == "" {
			t.state.SQLFailures++
			return t.sqlFailure(fail("execute_sql needs {\"query\": \"SELECT …\"}."))
		}
		if t.state.SQLFailures >= MaxSQLFailures {
			return fail("Not run: %d SQL attempts failed in this turn. Explain the error to the user instead of running more SQL.", MaxSQLFailures)
		}
		qstart := time.Now()
		r, err := t.r.Data.Query(ctx, t.conv.ID, a.Query)
		if o := t.r.Observer; o != nil && ctx.Err() == nil {
			o.SQLQueried(err == nil, time.Since(qstart))
		}
		if err != nil {
			if ctx.Err() != nil {
				return fail("cancelled")
			}
			t.state.SQLFailures++
			return t.sqlFailure(fail("%s", datachat.ErrorMessage(err)))
		}
		return toolResult{content: ResultText(r), result: r}
	case ToolLoadDataset:
		var a struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.URL) == "" {
			return fail("load_dataset needs {\"url\": \"https://…\"}.")
		}
		ds, err := t.r.Data.LoadURL(ctx, t.conv.ID, strings.TrimSpace(a.URL))
		if err != nil {
			return fail("%s", datachat.ErrorMessage(err))
		}
		t.refreshSystem(ctx)
		return toolResult{content: datasetText(ds)}
	case ToolSearchDocuments:
		var a struct {
			Query string `json:"query"`
			TopK  int    `json:"top_k"`
		}
		if err := json.Unmarshal(args, &a); err != nil || strings.TrimSpace(a.Query) == "" {
			return fail("search_documents needs {\"query\": \"…\"}.")
		}
		k := a.TopK
		if k <= 0 {
			k = 5
		}
		res, err := t.r.Data.Search(ctx, t.conv.ID, SearchQuery{Text: a.Query, TopK: min(k, 20), Filters: t.opts.Filters})
		if err != nil {
			return fail("%s", datachat.ErrorMessage(err))
		}
		found := res.Sources
		first := len(t.state.Sources) + 1
		t.state.Sources = append(t.state.Sources, found...)
		return toolResult{content: sourcesText(found, first)}
	}
	return fail("unknown tool %q: use execute_sql, load_dataset, search_documents or request_confirmation.", tool)
}

// sqlFailure adds the instruction to stop after the last allowed failure.
func (t *turn) sqlFailure(r toolResult) toolResult {
	if t.state.SQLFailures >= MaxSQLFailures {
		r.content += fmt.Sprintf("\n\nThat was failed SQL attempt %d of %d: do not run more SQL in this turn. Explain the error to the user.", t.state.SQLFailures, MaxSQLFailures)
	}
	return r
}

// refreshSystem rebuilds the system prompt after a dataset was loaded, so the
// next call sees its schema.
func (t *turn) refreshSystem(ctx context.Context) {
	datasets, err := t.r.Data.Datasets(ctx, t.conv.ID)
	if err != nil {
		return
	}
	if s, err := SystemPrompt(t.r.Template, PromptData{
		Datasets: datasets, Excerpts: t.initialExcerpts(), HasDocuments: t.hasDocuments, ConfirmAlways: t.r.ConfirmAlways,
	}); err == nil {
		t.system = s
	}
}

func (t *turn) record(call datachat.ModelToolCall, tool string, res toolResult) {
	t.recordAt(call, tool, call.Args, res, time.Now())
}

// recordAt sends tool_call_result, gives the result to the model and stores
// the round.
func (t *turn) recordAt(call datachat.ModelToolCall, tool string, args json.RawMessage, res toolResult, started time.Time) {
	ev := ToolCallResultEvent{ID: call.ID, Tool: tool, OK: res.err == "", Content: res.content, Error: res.err}
	if r := res.result; r != nil {
		ev.Columns, ev.Rows, ev.RowCount, ev.Truncated, ev.ElapsedMS = r.Columns, r.Rows, &r.RowCount, &r.Truncated, &r.ElapsedMS
		if ev.Rows == nil {
			ev.Rows = [][]any{}
		}
	}
	t.emit("tool_call_result", ev)
	if o := t.r.Observer; o != nil {
		o.ToolCalled(tool, ev.OK, time.Since(started))
	}
	t.state.Transcript = append(t.state.Transcript, datachat.ModelMessage{
		Role: datachat.ModelRoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: res.content,
	})
	t.state.Seq++
	tc := &datachat.ToolCall{
		MessageID: t.msg.ID, Seq: t.state.Seq, CallID: call.ID, Tool: tool, Args: args,
		OK: res.err == "", Result: res.content, Error: res.err,
		StartedAt: started, DurationMS: time.Since(started).Milliseconds(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.r.Store.CreateToolCall(ctx, tc); err != nil {
		t.r.Logger.Error("store tool call", slog.String("message_id", t.msg.ID), slog.String("error", err.Error()))
	}
}

// unfamiliarURL reports whether a load_dataset call names a URL that no
// message of the user's in this conversation contains: the model found it
// somewhere else (a document, a cell, a page it read), and loading it would
// send a request — maybe carrying data in its query — where the user never
// asked. Such a load waits for the user's approval.
func (t *turn) unfamiliarURL(ctx context.Context, call datachat.ModelToolCall) (bool, error) {
	var a struct {
		URL string `json:"url"`
	}
	if json.Unmarshal(call.Args, &a) != nil || strings.TrimSpace(a.URL) == "" {
		return false, nil // execute answers the bad arguments
	}
	url := strings.TrimSpace(a.URL)
	msgs, err := t.r.Store.Messages(ctx, t.conv.ID)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Role == datachat.RoleUser && strings.Contains(m.Content, url) {
			return false, nil
		}
	}
	return true, nil
}

// requestConfirmation handles a request_confirmation call (or, with
// DATACHAT_CONFIRM_SQL=always, an execute_sql or load_dataset call, or a
// load_dataset of a URL the user did not give). It reports whether the turn
// must pause; if not, it has answered the call itself.
func (t *turn) requestConfirmation(ctx context.Context, call datachat.ModelToolCall) (bool, error) {
	var a struct {
		Action      string          `json:"action"`
		Parameters  json.RawMessage `json:"parameters"`
		Explanation string          `json:"explanation"`
	}
	if call.Name == ToolExecuteSQL {
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(call.Args, &q); err != nil || strings.TrimSpace(q.Query) == "" {
			t.emit("tool_call_start", ToolCallStartEvent{ID: call.ID, Tool: call.Name, Args: call.Args})
			t.state.SQLFailures++
			t.record(call, call.Name, t.sqlFailure(toolResult{content: `Error: execute_sql needs {"query": "SELECT …"}.`, err: "missing query"}))
			return false, nil
		}
		rows, err := t.r.Data.EstimateRows(ctx, t.conv.ID, q.Query)
		if err != nil {
			// The query cannot even be planned: no need to ask the user.
			t.emit("tool_call_start", ToolCallStartEvent{ID: call.ID, Tool: call.Name, Args: call.Args})
			t.state.SQLFailures++
			msg := datachat.ErrorMessage(err)
			t.record(call, call.Name, t.sqlFailure(toolResult{content: "Error: " + msg, err: msg}))
			return false, nil
		}
		a.Action = ToolExecuteSQL
		a.Parameters, _ = json.Marshal(map[string]any{"query": q.Query, "estimated_rows": rows})
		a.Explanation = "Run this SQL query over your data?"
	} else if call.Name == ToolLoadDataset {
		var l struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(call.Args, &l); err != nil || strings.TrimSpace(l.URL) == "" {
			t.skip(call, `Error: load_dataset needs {"url": "https://…"}.`)
			return false, nil
		}
		a.Action = ToolLoadDataset
		a.Parameters, _ = json.Marshal(map[string]string{"url": strings.TrimSpace(l.URL)})
		a.Explanation = "Load the dataset at this address? It was not in your messages: the assistant found it elsewhere (a document or a dataset), and loading it sends a request to that server."
		if t.r.ConfirmAlways {
			a.Explanation = "Load the dataset at this address?"
		}
	} else {
		err := json.Unmarshal(call.Args, &a)
		if err == nil && a.Action != ToolExecuteSQL && a.Action != ToolLoadDataset {
			err = errors.New("bad action")
		}
		if err != nil || len(a.Parameters) == 0 || string(a.Parameters) == "null" {
			t.skip(call, `Error: request_confirmation needs {"action": "execute_sql" or "load_dataset", "parameters": {…the tool's arguments…}, "explanation": "…"}.`)
			return false, nil
		}
		if strings.TrimSpace(a.Explanation) == "" {
			a.Explanation = "Please confirm this action."
		}
	}
	t.state.Pending = &call
	t.confirmation = &datachat.Confirmation{
		ConversationID: t.conv.ID, MessageID: t.msg.ID, CallID: call.ID,
		Action: a.Action, Parameters: a.Parameters, Explanation: a.Explanation, Status: datachat.ConfirmPending,
	}
	return true, nil
}

// pause stores the turn's state with its confirmation; the caller asks the
// user (Outcome.Confirmation) once it is ready for the answer.
func (t *turn) pause(ctx context.Context) error {
	c := t.confirmation
	state, err := json.Marshal(t.state)
	if err != nil {
		return err
	}
	c.State = state
	return t.r.Store.CreateConfirmation(ctx, c)
}

// answerConfirmation gives the model the user's answer to the paused call:
// the approved action's result, or that the user declined.
func (t *turn) answerConfirmation(ctx context.Context, c *datachat.Confirmation) error {
	if t.state.Pending == nil {
		return fmt.Errorf("confirmation %s: no pending call in its state", c.ID)
	}
	call := *t.state.Pending
	t.state.Pending = nil
	if c.Status == datachat.ConfirmApproved {
		args := c.Parameters
		if c.Action == ToolExecuteSQL {
			var p struct {
				Query string `json:"query"`
			}
			json.Unmarshal(c.Parameters, &p)
			args, _ = json.Marshal(map[string]string{"query": p.Query})
		}
		t.emit("tool_call_start", ToolCallStartEvent{ID: call.ID, Tool: c.Action, Args: args})
		started := time.Now()
		res := t.execute(ctx, c.Action, args)
		if call.Name == ToolRequestConfirmation {
			res.content = "The user approved. Result:\n" + res.content
		}
		t.recordAt(call, c.Action, args, res, started)
	} else {
		reason := "The user declined this action"
		if c.Note != "" {
			reason += ": " + c.Note
		}
		reason += ". Do not run it; ask the user how they want to proceed."
		t.emit("tool_call_start", ToolCallStartEvent{ID: call.ID, Tool: call.Name, Args: call.Args})
		t.record(call, call.Name, toolResult{content: reason, err: "declined by the user"})
	}
	skipped := t.state.Skipped
	t.state.Skipped = nil
	for _, sc := range skipped {
		t.skip(sc, "Not run: it came after an action that needed the user's confirmation. Call it again if it is still needed.")
	}
	return nil
}

// finish stores the turn's outcome and usage and sends chat_complete when the
// turn completed or was cancelled.
func (t *turn) finish(ctx context.Context, err error) (*Outcome, error) {
	// Persist even when the turn's context was cancelled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out := &Outcome{Message: t.msg, Sources: t.state.Sources, Usage: t.state.Usage, EmbeddingMS: t.embeddingMS, RetrievalMS: t.retrievalMS}
	if out.Sources == nil {
		out.Sources = []datachat.Source{}
	}

	t.mu.Lock()
	status := datachat.StatusComplete
	switch {
	case errors.Is(err, errPaused):
		status = datachat.StatusAwaitingConfirmation
	case err != nil && errors.Is(context.Cause(ctx), ErrInterrupted):
		status = datachat.StatusInterrupted
		err = errShuttingDown
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || (err != nil && ctx.Err() != nil):
		status = datachat.StatusCancelled
		err = nil
	case err != nil:
		status = datachat.StatusError
		ev := ErrorEventFor(err)
		t.msg.Error, t.msg.ErrorReason, t.msg.ErrorSuggestedAction = ev.Message, ev.Reason, ev.SuggestedAction
	}
	t.msg.Status = status
	t.msg.InputTokens, t.msg.OutputTokens = t.state.Usage.Input, t.state.Usage.Output
	t.msg.Sources = t.state.Sources // so a reopened answer's [n] resolve
	t.dirty = false
	held := t.pending.String()
	t.pending.Reset()
	m := *t.msg
	t.mu.Unlock()

	if held != "" && status == datachat.StatusComplete {
		t.emit("chat_token", TokenEvent{Token: held})
	}
	if serr := t.r.Store.UpdateMessage(sctx, &m); serr != nil {
		return out, errors.Join(err, serr)
	}
	delta := datachat.TokenCount{Input: t.state.Usage.Input - t.state.Recorded.Input, Output: t.state.Usage.Output - t.state.Recorded.Output}
	if delta.Input > 0 || delta.Output > 0 {
		u := &datachat.Usage{
			UserID: t.user.ID, ConversationID: t.conv.ID, MessageID: t.msg.ID,
			Provider: t.r.Provider, Model: t.r.ModelID,
			InputTokens: delta.Input, OutputTokens: delta.Output,
			Success: status == datachat.StatusComplete || status == datachat.StatusAwaitingConfirmation, Estimated: t.state.Estimated,
		}
		if o := t.r.Observer; o != nil {
			o.TokensUsed(t.r.Provider, t.r.ModelID, delta.Input, delta.Output)
		}
		if uerr := t.r.Store.RecordUsage(sctx, u); uerr != nil {
			t.r.Logger.Error("record usage", slog.String("message_id", t.msg.ID), slog.String("error", uerr.Error()))
		}
		t.state.Recorded = t.state.Usage
	}
	if o := t.r.Observer; o != nil {
		o.TurnEnded(status, time.Since(t.start))
	}
	if status == datachat.StatusAwaitingConfirmation {
		out.Confirmation = t.confirmation
		return out, t.pause(sctx)
	}
	if status == datachat.StatusComplete || status == datachat.StatusCancelled {
		out.Complete = &CompleteEvent{
			MessageID: t.msg.ID, Status: status,
			InputTokens: t.state.Usage.Input, OutputTokens: t.state.Usage.Output,
			TotalTokens: t.state.Usage.Input + t.state.Usage.Output, Sources: out.Sources,
		}
	}
	return out, err
}
