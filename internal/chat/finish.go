package chat

import (
	"context"
	"crypto/rand"
	"datachat/internal/numcheck"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"datachat"
)

// finish stores the turn's outcome and usage and sends chat_complete when the
// turn completed or was cancelled.
func (t *turn) finish(ctx context.Context, err error) (*Outcome, error) {
	t.storing.Wait() // the tool rounds first
	// Persist even when the turn's context was cancelled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out := &Outcome{Message: t.msg, Sources: t.state.Sources, Usage: t.state.Usage, EmbeddingMS: t.embeddingMS, RetrievalMS: t.retrievalMS,
		PromptTables: t.schema.Shown, SystemChars: len(t.system)}
	if out.Sources == nil {
		out.Sources = []datachat.Source{}
	}
	// The metrics the answer names are computed before the answer is
	// locked: they are queries.
	var metrics []numcheck.Result
	if t.r.CheckNumbers && !errors.Is(err, errPaused) {
		t.mu.Lock()
		text := t.text.String()
		t.mu.Unlock()
		metrics = t.metricEvidence(ctx, text)
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
	t.msg.Content = t.text.String()
	t.msg.Parts = datachat.MergeParts(t.parts)
	if t.r.CheckNumbers && status != datachat.StatusAwaitingConfirmation {
		t.msg.NumberChecks = t.checkNumbers(t.msg.Content, metrics)
	}
	held := t.pending.String()
	t.pending.Reset()
	m := *t.msg
	if status != datachat.StatusAwaitingConfirmation && t.stored > 0 {
		// The store holds the parts the flusher wrote: it keeps them and
		// takes the rest, rather than the whole answer a second time. A
		// paused answer's parts are stored merged, as its resumed turn
		// reads them back and numbers what follows.
		m.Parts, m.PartsStored = slices.Clone(t.parts), t.stored
	}
	t.mu.Unlock()

	// With streaming off the text arrives when the turn ends or pauses, so the
	// client gets what is stored, as a streaming one does; not when it fails,
	// so that an API client still gets an error status, not a started answer.
	if held != "" && status != datachat.StatusError && status != datachat.StatusInterrupted {
		t.emit(EventToken, TokenEvent{Token: held})
	}
	var u *datachat.Usage
	delta := datachat.TokenCount{Input: t.state.Usage.Input - t.state.Recorded.Input, Output: t.state.Usage.Output - t.state.Recorded.Output}
	if delta.Input > 0 || delta.Output > 0 {
		u = &datachat.Usage{
			ID:     newUsageID(),
			UserID: t.user.ID, ConversationID: t.conv.ID, MessageID: t.msg.ID,
			Provider: t.r.Provider, Model: t.r.ModelID,
			InputTokens: delta.Input, OutputTokens: delta.Output,
			Success: status == datachat.StatusComplete || status == datachat.StatusAwaitingConfirmation, Estimated: t.state.Estimated,
		}
	}
	if serr := t.r.save(sctx, &m, u); serr != nil {
		// The client saw the answer, but the store did not take it: the
		// message is stored as interrupted, with the text the client got
		// and the turn's usage, as soon as the store answers again.
		if err != nil {
			t.r.Logger.Error("turn failed, and its end could not be stored", slog.String("message_id", m.ID), slog.String("error", err.Error()))
		}
		m.Status = datachat.StatusInterrupted
		se := &SaveError{Err: serr}
		ev := ErrorEventFor(se)
		m.Error, m.ErrorReason, m.ErrorSuggestedAction = ev.Message, ev.Reason, ev.SuggestedAction
		t.r.repairLater(&m, u)
		if o := t.r.Observer; o != nil {
			o.TurnEnded(m.Status, time.Since(t.start))
		}
		return out, se
	}
	if u != nil {
		if o := t.r.Observer; o != nil {
			o.TokensUsed(t.r.Provider, t.r.ModelID, delta.Input, delta.Output)
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
			NumberChecks: t.msg.NumberChecks,
		}
		if out.Complete.NumberChecks == nil {
			out.Complete.NumberChecks = []datachat.NumberCheck{}
		}
	}
	return out, err
}

// SaveError is a turn whose end the store did not take: the client saw the
// answer, but it is not stored yet (the Runner keeps trying; see
// Runner.Repairs).
type SaveError struct{ Err error }

func (e *SaveError) Error() string { return "the answer could not be saved: " + e.Err.Error() }
func (e *SaveError) Unwrap() error { return e.Err }

// newUsageID names a turn's usage once, so that saving it again (a retry)
// records it once.
func newUsageID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// saveAttempts is how many times a turn's end is tried before the turn gives
// up (the Runner then keeps trying in the background); the waits between
// them double from Runner.SaveRetry.
const saveAttempts = 7

// save stores a turn's end, retrying with a bound; it gives up early on an
// error retrying cannot mend (the message was deleted).
func (r *Runner) save(ctx context.Context, m *datachat.Message, u *datachat.Usage) error {
	wait := r.SaveRetry
	if wait <= 0 {
		wait = 50 * time.Millisecond
	}
	var err error
	for attempt := range saveAttempts {
		if err = r.Store.FinishMessage(ctx, m, u); err == nil || datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return err
		}
		if attempt == saveAttempts-1 {
			break
		}
		r.Logger.Warn("store the end of a turn", slog.String("message_id", m.ID), slog.Int("attempt", attempt+1), slog.String("error", err.Error()))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		wait *= 2
	}
	return err
}

// repair is a turn's end the store did not take yet.
type repair struct {
	m *datachat.Message
	u *datachat.Usage
}

// repairWaitCap bounds the wait between two rounds of repairs (it starts at
// Runner.SaveRetry, default 1 s, and doubles). The user waits on it: until
// its message is stored, the conversation refuses new turns ("a reply is
// still being written"), and its text and usage are not in the store. 2 s
// stores it within about 2 s of the store's return, well within the lease
// (DefaultLeaseTTL), so the owning process repairs it before any other
// process or turn would; and it costs, while the store stays away, one
// failed attempt every 2 s per process, not one per message (a round stops
// at the first that finds the store unavailable) — next to the clients,
// told to retry every datachat.StoreRetryAfter, nothing.
const repairWaitCap = 2 * time.Second

// repairLater keeps trying to store a turn's end, in the background, until
// the store takes it: the message then reads as the client saw it, and its
// usage counts. It is this process's job (the message is leased to it, so
// other processes leave it alone until the lease lapses).
func (r *Runner) repairLater(m *datachat.Message, u *datachat.Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.repairs == nil {
		r.repairs = map[string]repair{}
	}
	r.repairs[m.ID] = repair{m, u}
	if !r.repairing {
		r.repairing = true
		go r.repairLoop()
	}
}

// Repairs reports how many turns' ends wait to be stored.
func (r *Runner) Repairs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.repairs)
}

func (r *Runner) repairLoop() {
	wait := r.SaveRetry
	if wait <= 0 {
		wait = time.Second
	}
	for {
		r.mu.Lock()
		todo := make([]repair, 0, len(r.repairs))
		for _, p := range r.repairs {
			todo = append(todo, p)
		}
		r.mu.Unlock()
		r.storeRepairs(context.Background(), todo)
		r.mu.Lock()
		if len(r.repairs) == 0 {
			r.repairing = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		time.Sleep(wait)
		wait = min(wait*2, repairWaitCap)
	}
}

// storeRepairs tries once to store each of todo, and returns those the store
// did not take. A round stops at the first that finds the store unavailable:
// the others would find it so too.
func (r *Runner) storeRepairs(ctx context.Context, todo []repair) (left []repair) {
	for i, p := range todo {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := r.Store.FinishMessage(actx, p.m, p.u)
		cancel()
		if err != nil && datachat.ErrorCode(err) != datachat.ENOTFOUND {
			left = append(left, p)
			if datachat.ErrorCode(err) == datachat.EBUSY || ctx.Err() != nil {
				return append(left, todo[i+1:]...)
			}
			continue
		}
		r.mu.Lock()
		_, pending := r.repairs[p.m.ID] // not when SaveRepairs took it over
		delete(r.repairs, p.m.ID)
		r.mu.Unlock()
		r.Logger.Info("stored the end of a turn after the store came back", slog.String("message_id", p.m.ID))
		if pending && r.repaired != nil {
			r.repaired(p.m.ID)
		}
	}
	return left
}

// SaveRepairs is the last try, for a server that stops, at the turns' ends
// the store has not taken yet (see Repairs): it tries them until all are
// stored or ctx ends, waiting between rounds as the background repairs do,
// then logs each still unsaved — its text and usage are lost with the
// process — and forgets them, which ends the background repairs. It returns
// how many were left unsaved.
func (r *Runner) SaveRepairs(ctx context.Context) int {
	r.mu.Lock()
	todo := make([]repair, 0, len(r.repairs))
	for _, p := range r.repairs {
		todo = append(todo, p)
	}
	r.repairs = nil
	r.mu.Unlock()
	if len(todo) == 0 {
		return 0
	}
	r.Logger.Info("storing the ends of turns the store did not take, before stopping", slog.Int("count", len(todo)))
	wait := r.SaveRetry
	if wait <= 0 {
		wait = 50 * time.Millisecond
	}
	for {
		if todo = r.storeRepairs(ctx, todo); len(todo) == 0 {
			return 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			for _, p := range todo {
				attrs := []any{slog.String("message_id", p.m.ID), slog.String("conversation_id", p.m.ConversationID)}
				if p.u != nil {
					attrs = append(attrs, slog.String("user_id", p.u.UserID), slog.Int64("input_tokens", p.u.InputTokens), slog.Int64("output_tokens", p.u.OutputTokens))
				}
				r.Logger.Error("the end of a turn is not saved: the store did not take it before the server stopped; its message stays streaming until another process marks it interrupted, and its usage is not counted", attrs...)
			}
			return len(todo)
		case <-timer.C:
		}
		wait = min(wait*2, repairWaitCap)
	}
}

// checkNumbers checks the numbers of the answer's text against its evidence:
// the SQL results the model read, the excerpts it could cite, the question,
// and the values of the dictionary's metrics it names.
func (t *turn) checkNumbers(answer string, metrics []numcheck.Result) []datachat.NumberCheck {
	ev := numcheck.Evidence{Question: t.question(), Excerpts: numcheck.ExcerptsFromSources(t.state.Sources)}
	for _, r := range t.state.Results {
		ev.Results = append(ev.Results, numcheck.ResultFromQuery(r.CallID, r.Result))
	}
	ev.Results = append(ev.Results, metrics...)
	// Not the turn's context: a cancelled answer is checked too. The
	// checker's own limits (numbers, time) bound it; the numbers past them
	// are left unchecked, as numbers in code or years are.
	res := numcheck.CheckAnswerWithin(context.Background(), answer, ev, numcheck.Limits{})
	if res.Stopped != "" {
		t.r.Logger.Info("the numbers of a long answer were checked only in part", slog.String("message_id", t.msg.ID),
			slog.Int("checked", len(res.Checks)), slog.Int("unchecked_from", res.From), slog.String("limit", res.Stopped))
	}
	checks := res.Checks
	out := make([]datachat.NumberCheck, len(checks))
	for i, c := range checks {
		src, err := json.Marshal(c.Source)
		if err != nil {
			src = []byte("null")
		}
		out[i] = datachat.NumberCheck{Text: c.Text, Start: c.Start, End: c.End, Status: c.Status, Source: src}
	}
	return out
}

// question is the user's message this turn answers.
func (t *turn) question() string {
	for i := len(t.history) - 1; i >= 0; i-- {
		if t.history[i].Role == datachat.RoleUser {
			return t.history[i].Content
		}
	}
	return ""
}
