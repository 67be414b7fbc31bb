package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"datachat"
	"datachat/internal/tools"
)

// resume rebuilds a paused turn from its confirmation.
func (r *Runner) resume(ctx context.Context, user *datachat.User, conv *datachat.Conversation, c *datachat.Confirmation, sink Sink) (*turn, error) {
	msgs, err := r.Store.Messages(ctx, conv.ID)
	if err != nil {
		return nil, err
	}
	t := &turn{r: r, user: user, conv: conv, sink: sink, start: r.now()}
	if t.state, err = decodeTurnState(c.State); err != nil {
		return nil, fmt.Errorf("confirmation %s: %w", c.ID, err)
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
	// The answer goes on from where it paused.
	t.text.WriteString(t.msg.Content)
	t.parts = slices.Clone(t.msg.Parts)
	t.frozen, t.stored = len(t.parts), len(t.parts)
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
	if err := t.describeSources(ctx); err != nil {
		return nil, err
	}
	t.chooseSchema(ctx, datasets)
	t.system, err = SystemPrompt(r.Template, t.promptData(datasets, t.initialExcerpts()))
	return t, err
}

// unfamiliarURL reports whether a load_dataset call names a URL that no
// message of the user's in this conversation contains: the model found it
// somewhere else (a document, a cell, a page it read), and loading it would
// send a request — maybe carrying data in its query — where the user never
// asked. Such a load waits for the user's approval.
func (t *turn) unfamiliarURL(ctx context.Context, call datachat.ModelToolCall) (bool, error) {
	a, err := tools.Parse(call.Name, call.Args)
	if err != nil {
		return false, nil // execute answers the bad arguments
	}
	url := a.URL
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
	if call.Name == datachat.ToolExecuteSQL {
		q, err := tools.Parse(call.Name, call.Args)
		if err != nil {
			t.startTool(call.ID, call.Name, call.Args)
			t.state.SQLFailures++
			t.record(call, call.Name, t.sqlFailure(toolResult{content: "Error: " + datachat.ErrorMessage(err), err: "missing query"}))
			return false, nil
		}
		rows, err := t.estimateRows(ctx, q)
		if err != nil {
			// The query cannot even be planned: no need to ask the user.
			t.startTool(call.ID, call.Name, call.Args)
			t.state.SQLFailures++
			msg := datachat.ErrorMessage(err)
			t.record(call, call.Name, t.sqlFailure(toolResult{content: "Error: " + msg, err: msg}))
			return false, nil
		}
		a.Action = datachat.ToolExecuteSQL
		a.Parameters, _ = json.Marshal(map[string]any{"query": q.Query, "estimated_rows": rows})
		a.Explanation = "Run this SQL query over your data?"
		switch {
		case q.Source != "" && q.SaveAs != "":
			limit := t.r.saveAsMaxRows()
			a.Parameters, _ = json.Marshal(map[string]any{"query": q.Query, "source": q.Source, "save_as": q.SaveAs, "estimated_rows": rows, "max_rows": limit})
			a.Explanation = fmt.Sprintf("Save the result of this query in the database %s as the table %s in this conversation?", q.Source, q.SaveAs)
			if rows > int64(limit) {
				a.Explanation = fmt.Sprintf("Save the result of this query in the database %s as the table %s in this conversation? The database estimates about %d rows; only the first %d would be saved (DATACHAT_SAVE_AS_MAX_ROWS), which takes time and disk space.",
					q.Source, q.SaveAs, rows, limit)
			}
		case q.Source != "":
			a.Parameters, _ = json.Marshal(map[string]any{"query": q.Query, "source": q.Source, "estimated_rows": rows})
			a.Explanation = fmt.Sprintf("Run this SQL query in the database %s?", q.Source)
		}
	} else if call.Name == datachat.ToolLoadDataset {
		l, err := tools.Parse(call.Name, call.Args)
		if err != nil {
			t.skip(call, "Error: "+datachat.ErrorMessage(err))
			return false, nil
		}
		a.Action = datachat.ToolLoadDataset
		a.Parameters, _ = json.Marshal(l)
		a.Explanation = "Load the dataset at this address? It was not in your messages: the assistant found it elsewhere (a document or a dataset), and loading it sends a request to that server."
		if t.r.ConfirmAlways {
			a.Explanation = "Load the dataset at this address?"
		}
	} else {
		err := json.Unmarshal(call.Args, &a)
		if err == nil && a.Action != datachat.ToolExecuteSQL && a.Action != datachat.ToolLoadDataset {
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
	state, err := encodeTurnState(t.state)
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
		if c.Action == datachat.ToolExecuteSQL {
			var p tools.Args
			if err := json.Unmarshal(c.Parameters, &p); err != nil {
				return fmt.Errorf("confirmation %s: parameters: %w", c.ID, err)
			}
			args, _ = json.Marshal(p) // the query, its source and save_as, without the estimate
		}
		t.startTool(call.ID, c.Action, args)
		started := t.r.now()
		res := t.execute(ctx, c.Action, args)
		if call.Name == datachat.ToolRequestConfirmation {
			res.content = "The user approved. Result:\n" + res.content
		}
		t.recordAt(call, c.Action, args, res, started)
	} else {
		reason := "The user declined this action"
		if c.Note != "" {
			reason += ": " + c.Note
		}
		reason += ". Do not run it; ask the user how they want to proceed."
		t.startTool(call.ID, call.Name, call.Args)
		t.record(call, call.Name, toolResult{content: reason, err: "declined by the user"})
	}
	skipped := t.state.Skipped
	t.state.Skipped = nil
	for _, sc := range skipped {
		t.skip(sc, "Not run: it came after an action that needed the user's confirmation. Call it again if it is still needed.")
	}
	return nil
}
