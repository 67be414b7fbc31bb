package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat"
)

// Limits of one turn: tool calls, and failed SQL statements before the turn
// gives up.
const (
	MaxToolCalls     = 5
	MaxSQLFailures   = 3
	maxProviderCalls = MaxToolCalls + MaxSQLFailures + 4 // a bound for misbehaving models
	flushInterval    = time.Second
	contextDropCount = 10
)

// ErrContextTooLarge is the text of the EventError sent when a conversation no
// longer fits the model's window even after dropping its oldest messages.
const ErrContextTooLarge = "Conversation context too large. Try starting a new conversation."

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
	sources      []datachat.DBSourceInfo // the conversation's database sources
	schema       schemaChoice            // the tables the prompt describes
	state        turnState

	confirmation *datachat.Confirmation // to ask for, when pausing

	// The answer so far, guarded by mu while the flusher runs: its text, and
	// its parts in order (text and tool calls). Parts below frozen no longer
	// change (the flusher took them); those below stored are in the store.
	mu      sync.Mutex
	text    strings.Builder
	parts   []datachat.Part
	tail    int            // where the last part's text starts in text, while it grows
	storing sync.WaitGroup // tool rounds being stored (recordAt), waited for by finish
	frozen  int
	stored  int
	pending strings.Builder // tokens held back when streaming is off
	tokened bool            // a token arrived (for Observer.FirstToken)
}

// turnStateVersion is the version of turnState's JSON. A paused turn is
// stored as that JSON and resumed by whatever version of datachat runs when
// the user answers: a change that a stored state would be read wrongly with
// (a field renamed, removed or given another meaning) raises the version and
// teaches decodeTurnState to read the older one. TestTurnStateGolden holds a
// state of each version.
const turnStateVersion = 1

// turnState is what a paused turn needs to continue; it is stored with its
// confirmation.
type turnState struct {
	// Version is turnStateVersion when stored; 0 in states stored before
	// versions, which are version 1.
	Version        int                      `json:"version"`
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
	// Examples are the verified examples the prompt holds.
	Examples []PromptExample `json:"examples,omitempty"`
	// Results are the answer's successful SQL results, by the call that got
	// them: the evidence its numbers are checked against.
	Results []callResult `json:"results,omitempty"`
}

// encodeTurnState is the stored form of a paused turn's state.
func encodeTurnState(s turnState) ([]byte, error) {
	s.Version = turnStateVersion
	return json.Marshal(s)
}

// decodeTurnState reads a stored state, refusing one of a version this
// datachat does not know (stored by a newer one) with a message the user can
// act on.
func decodeTurnState(b []byte) (turnState, error) {
	var s turnState
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("bad state: %w", err)
	}
	switch s.Version {
	case 0, turnStateVersion:
		s.Version = turnStateVersion
		return s, nil
	}
	return s, datachat.Errorf(datachat.ECONFLICT,
		"This question waits for a confirmation stored by a newer version of datachat (state version %d; this one reads %d). Ask the question again.",
		s.Version, turnStateVersion)
}

// callResult is one execute_sql result the model read.
type callResult struct {
	CallID string                `json:"call_id"`
	Result *datachat.QueryResult `json:"result"`
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
	if err := t.describeSources(ctx); err != nil {
		return err
	}
	var excerpts []datachat.Source
	if k := t.topK(); t.hasDocuments && k > 0 {
		res, err := t.r.Data.Search(ctx, t.conv.ID, datachat.SearchQuery{Text: t.searchText(question), TopK: k, Filters: t.opts.Filters})
		if err != nil {
			return err
		}
		excerpts = res.Sources
		t.embeddingMS, t.retrievalMS = res.EmbeddingMS, res.RetrievalMS
		t.state.Sources = excerpts
		t.state.Excerpts = len(excerpts)
	}
	if t.state.Examples, err = t.examplesFor(ctx, question, datasets); err != nil {
		return err
	}
	t.chooseSchema(ctx, datasets)
	t.system, err = SystemPrompt(t.r.Template, t.promptData(datasets, excerpts))
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
	stop := t.r.startStreaming(t)
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
func (t *turn) request(ctx context.Context) *datachat.ModelRequest {
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
		req.Tools = t.toolSpecs(ctx)
	}
	return req
}

// call streams one model call, relaying text as it arrives. The call's text
// is the end of the answer's, which token appends to: it is not held twice
// (a stalled client's turns held each long answer in both).
func (t *turn) call(ctx context.Context) (string, []datachat.ModelToolCall, error) {
	req := t.request(ctx)
	var (
		calls    []datachat.ModelToolCall
		reported bool
	)
	t.mu.Lock()
	start := t.text.Len()
	t.mu.Unlock()
	err := t.r.Model.Stream(ctx, req, func(ev datachat.ModelEvent) error {
		switch {
		case ev.Text != "":
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
	t.mu.Lock()
	text := t.text.String()[start:]
	t.mu.Unlock()
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
		t.state.Usage.Output += EstimateTokens(len(text))
		t.state.Estimated = true
	}
	var pe *datachat.ProviderError
	if o := t.r.Observer; o != nil && errors.As(err, &pe) {
		o.ProviderFailed(pe.Kind)
	}
	return text, calls, err
}

// token relays one text delta and appends it to the stored answer.
func (t *turn) token(s string) {
	t.mu.Lock()
	if o := t.r.Observer; o != nil && !t.tokened {
		t.tokened = true
		o.FirstToken(time.Since(t.start))
	}
	t.text.WriteString(s)
	// The open text part is the end of the answer's text, from tail on:
	// appending to the part's own string would copy it whole at every
	// token (quadratic in a long answer), and hold the text twice.
	if n := len(t.parts); n > t.frozen && t.parts[n-1].Type == datachat.PartText {
		t.parts[n-1].Text = t.text.String()[t.tail:]
	} else {
		t.tail = t.text.Len() - len(s)
		t.parts = append(t.parts, datachat.Part{Type: datachat.PartText, Text: s})
	}
	if !t.r.Streaming {
		t.pending.WriteString(s)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.emit(EventToken, TokenEvent{Token: s})
}

// startTool adds a tool call to the answer's parts and tells the client it
// started.
func (t *turn) startTool(id, tool string, args json.RawMessage) {
	t.mu.Lock()
	t.parts = append(t.parts, datachat.Part{Type: datachat.PartToolCall, CallID: id})
	t.mu.Unlock()
	t.emit(EventToolCallStart, ToolCallStartEvent{ID: id, Tool: tool, Args: args})
}

// answerSoFar returns the answer's text and parts.
func (t *turn) answerSoFar() (string, []datachat.Part) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.text.String(), slices.Clone(t.parts)
}

func (t *turn) emit(typ EventType, data any) {
	if t.sink != nil {
		t.sink(Event{Type: typ, Data: data})
	}
}
