package chat

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"datachat"
)

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
