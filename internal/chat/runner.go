package chat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"datachat/internal/tools"
)

// Data is a conversation's data as a turn uses it: the catalog's workspace
// (its datasets, queries, load_dataset's LoadURL, search_documents' Search,
// save_as's SaveQuery), and what the turn's prompt and confirmation gate
// read besides. The methods return *datachat.Error: EINVALID for a query or
// URL the model can correct (its message says what is wrong), ENOTFOUND,
// EBUSY.
type Data interface {
	tools.Workspace
	EstimateRows(ctx context.Context, conversationID, sql string) (int64, error)
	HasDocuments(ctx context.Context, conversationID string) (bool, error)
	Ranker
}

// Ranker ranks short texts by their words: the verified examples by their
// questions ([SelectExamples]) and the tables for the prompt. The workspace
// ranks by BM25 with the document index's stemming and stop words
// (workspace.Rank).
type Ranker interface {
	// Rank returns the indexes of at most n of texts that best match
	// query, best first. Texts sharing no word with query are left out;
	// equal scores keep the texts' order.
	Rank(query string, texts []string, n int) []int
}

// Embedder turns texts into vectors (EMBEDDING_PROVIDER's client, as the
// document index uses it). An error fails the whole batch.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// TurnStore is the part of [datachat.Store] a [Runner] uses: a turn's
// conversation, history and verified examples; its messages, tool rounds and
// leases as they stream and end; its confirmations; and the user's token and
// request budgets. Each method is as datachat.Store documents it, and every
// datachat.Store is one.
type TurnStore interface {
	Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error)
	Messages(ctx context.Context, conversationID string) ([]*datachat.Message, error)
	RecentMessages(ctx context.Context, conversationID string, n int) ([]*datachat.Message, error)
	TurnStart(ctx context.Context, userID, conversationID string, n int) (*datachat.Conversation, *datachat.Confirmation, []*datachat.Message, error)
	Examples(ctx context.Context, userID string) ([]*datachat.Example, error)

	BeginTurn(ctx context.Context, user, assistant *datachat.Message, lease datachat.Lease, now time.Time) error
	RenewLease(ctx context.Context, messageID string, lease datachat.Lease) error
	FlushStreaming(ctx context.Context, batch []datachat.StreamingFlush) (gone []string, err error)
	CreateToolCall(ctx context.Context, tc *datachat.ToolCall) error
	UpdateMessage(ctx context.Context, m *datachat.Message) error
	FinishMessage(ctx context.Context, m *datachat.Message, u *datachat.Usage) error

	datachat.ConfirmationStore

	TokensSince(ctx context.Context, userID string, since time.Time) (int64, error)
	TakeRequest(ctx context.Context, userID string, now time.Time, window time.Duration, limit int) (ok bool, retryAfter time.Duration, err error)
}

var _ TurnStore = datachat.Store(nil)

// TurnOptions override the Runner's settings for one turn (a request's
// override, and its metadata filters).
type TurnOptions struct {
	Temperature     *float64
	MaxOutputTokens int
	TopK            int // excerpts put in the prompt
	Filters         map[string]any
}

// Runner runs chat turns. Its fields are set once, before the first turn.
type Runner struct {
	Store   TurnStore
	Data    Data
	Sources datachat.DBSourceService // database sources; nil: none
	// Tools, if set, runs the data tools; nil: a tools.Catalog over Data
	// and Sources.
	Tools DataTools
	// Budgets are the users' per-user allowances the data tools' calls
	// are charged to (the server's, which MCP's calls spend too); nil:
	// none.
	Budgets  tools.Budgets
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

	// UserTokensPerDay, when set, returns a user's own daily token budget,
	// which overrides TokensPerDay (nil: TokensPerDay; 0: no limit).
	UserTokensPerDay func(ctx context.Context, userID string) (*int64, error)

	// NoDictionary leaves the data dictionary (descriptions and notes) out
	// of the prompt, and NoExamples the verified examples: levers that
	// `datachat eval` turns off to measure them.
	NoDictionary bool
	NoExamples   bool

	// LeaseOwner and LeaseNode identify this process to the others sharing the
	// database (datachat.Lease); an empty LeaseOwner gets a random one. A
	// turn's lease lasts LeaseTTL (default DefaultLeaseTTL) and is renewed
	// every third of it while the turn runs.
	LeaseOwner string
	LeaseNode  string
	LeaseTTL   time.Duration

	// SchemaBudget is how many tokens (characters / 4) the prompt's tables
	// may take — the datasets' and the databases' descriptions — before it
	// holds only those most relevant to the question and names the others,
	// which list_tables and describe_table reach (default
	// DefaultSchemaBudget).
	SchemaBudget int
	// Embedder, if set, ranks the tables by the similarity of their
	// embeddings to the question's too (EMBEDDING_PROVIDER), beside BM25.
	Embedder Embedder

	// SaveAsMaxRows caps the rows execute_sql's save_as brings from a
	// database source into the conversation (DATACHAT_SAVE_AS_MAX_ROWS;
	// default DefaultSaveAsMaxRows). A query the source's engine estimates
	// to return more asks the user first.
	SaveAsMaxRows int

	// CheckNumbers checks every number of an answer against its query
	// results, cited excerpts and question when it ends (number_checks).
	CheckNumbers bool

	// SaveRetry is the first wait between attempts to store a turn's end
	// when the store fails (they double); default 50 ms within a turn, 1 s
	// in the background afterwards.
	SaveRetry time.Duration

	flushes   flusher      // writes the streaming turns' text and leases
	tableVecs tableVectors // the tables' embeddings, by their text

	mu        sync.Mutex
	active    map[string]bool   // conversations with a turn running in this process
	repairs   map[string]repair // turns' ends the store did not take yet, by message
	repairing bool              // a goroutine is storing them
	repaired  func(messageID string)
}

// DefaultSaveAsMaxRows is the default of Runner.SaveAsMaxRows.
const DefaultSaveAsMaxRows = tools.DefaultSaveAsMaxRows

func (r *Runner) saveAsMaxRows() int {
	if r.SaveAsMaxRows > 0 {
		return r.SaveAsMaxRows
	}
	return DefaultSaveAsMaxRows
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
	return datachat.Lease{Owner: owner, Node: r.LeaseNode, Until: r.now().Add(r.leaseTTL())}
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

// checkLimits applies the per-user request and token limits before a model call.
func (r *Runner) checkLimits(ctx context.Context, userID string) error {
	now := r.now()
	limit := r.TokensPerDay
	if r.UserTokensPerDay != nil {
		own, err := r.UserTokensPerDay(ctx, userID)
		if err != nil {
			return err
		}
		if own != nil {
			limit = *own
		}
	}
	if limit > 0 {
		used, err := r.Store.TokensSince(ctx, userID, now.Add(-24*time.Hour))
		if err != nil {
			return err
		}
		if used >= limit {
			return &datachat.Error{
				Code:       datachat.ERATELIMIT,
				Message:    fmt.Sprintf("Daily token limit reached: %d of %d tokens used in the last 24 hours.", used, limit),
				RetryAfter: time.Hour,
			}
		}
	}
	if r.RateLimitRPM > 0 {
		ok, after, err := r.Store.TakeRequest(ctx, userID, now, time.Minute, r.RateLimitRPM)
		if err != nil {
			return err
		}
		if !ok {
			return &datachat.Error{
				Code:       datachat.ERATELIMIT,
				Message:    fmt.Sprintf("Rate limit reached: %d requests per minute.", r.RateLimitRPM),
				RetryAfter: max(after, time.Second),
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
	if !r.begin(conversationID) {
		// Busy, or not the user's to know about.
		if _, err := r.Store.Conversation(ctx, user.ID, conversationID); err != nil {
			return nil, err
		}
		return nil, datachat.ErrReplyInProgress
	}
	defer r.end(conversationID)
	// One read for the conversation, its pending confirmation and the
	// history, read once no other turn of this process runs in it. Pruning
	// keeps at most the newest MaxContextMessages, the new question among
	// them: read no more than that.
	conv, pending, history, err := r.Store.TurnStart(ctx, user.ID, conversationID, MaxContextMessages-1)
	if err != nil {
		return nil, err
	}
	if r.Model == nil {
		return nil, NotConfiguredError()
	}
	if pending != nil {
		return nil, datachat.Errorf(datachat.ECONFLICT, "The assistant is waiting for you to approve or decline an action first.")
	}
	if err := r.checkLimits(ctx, user.ID); err != nil {
		return nil, err
	}
	userMsg := &datachat.Message{ConversationID: conv.ID, Role: datachat.RoleUser, Content: content, Status: datachat.StatusComplete}
	msg := &datachat.Message{ConversationID: conv.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	// The store refuses when another process runs a turn in the conversation.
	if err := r.Store.BeginTurn(ctx, userMsg, msg, r.Lease(), r.now()); err != nil {
		if datachat.ErrorCode(err) == datachat.ECONFLICT {
			return nil, datachat.ErrReplyInProgress
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

// pending finds the confirmation waiting in the user's conversation and holds
// the conversation's turn until release. ENOTFOUND when none waits,
// datachat.ErrReplyInProgress when a turn runs.
func (r *Runner) pending(ctx context.Context, user *datachat.User, conversationID string) (_ *datachat.Conversation, _ *datachat.Confirmation, release func(), _ error) {
	conv, err := r.Store.Conversation(ctx, user.ID, conversationID)
	if err != nil {
		return nil, nil, nil, err
	}
	if !r.begin(conv.ID) {
		return nil, nil, nil, datachat.ErrReplyInProgress
	}
	pending, err := r.Store.PendingConfirmation(ctx, conv.ID)
	if err != nil {
		r.end(conv.ID)
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return nil, nil, nil, datachat.Errorf(datachat.ENOTFOUND, "There is no action waiting for confirmation.")
		}
		return nil, nil, nil, err
	}
	return conv, pending, func() { r.end(conv.ID) }, nil
}

// Confirm answers a pending confirmation and continues its turn.
func (r *Runner) Confirm(ctx context.Context, user *datachat.User, conversationID, confirmationID string, approved bool, note string, sink Sink) (*Outcome, error) {
	ctx = datachat.WithUserID(ctx, user.ID)
	conv, pending, release, err := r.pending(ctx, user, conversationID)
	if err != nil {
		return nil, err
	}
	defer release()
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
	conv, pending, release, err := r.pending(ctx, user, conversationID)
	if err != nil {
		return nil, err
	}
	defer release()
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
