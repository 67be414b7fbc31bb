package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"datachat"
)

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
		ask := call.Name == datachat.ToolRequestConfirmation || t.r.ConfirmAlways && (call.Name == datachat.ToolExecuteSQL || call.Name == datachat.ToolLoadDataset)
		if !ask && call.Name == datachat.ToolLoadDataset {
			var err error
			if ask, err = t.unfamiliarURL(ctx, call); err != nil {
				return err
			}
		}
		if !ask && call.Name == datachat.ToolExecuteSQL {
			_, ask = t.saveOverCap(ctx, call)
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
	t.startTool(call.ID, call.Name, call.Args)
	t.record(call, call.Name, toolResult{content: reason, err: reason})
}

// toolResult is the outcome of one tool call.
type toolResult struct {
	content string // what the model receives
	err     string // set when the call failed
	result  *datachat.QueryResult
	// observed: the catalog told the Observer about the call.
	observed bool
}

// runTool runs tool with args as the answer to call and records the round.
func (t *turn) runTool(ctx context.Context, call datachat.ModelToolCall, tool string, args json.RawMessage) {
	t.startTool(call.ID, tool, args)
	started := t.r.now()
	res := t.execute(ctx, tool, args)
	t.recordAt(call, tool, args, res, started)
}

func (t *turn) execute(ctx context.Context, tool string, args json.RawMessage) toolResult {
	if _, ok := t.tools(ctx).Spec(tool, nil); ok {
		return t.dataTool(ctx, tool, args)
	}
	msg := fmt.Sprintf("unknown tool %q: use execute_sql, load_dataset, search_documents, list_datasets, describe_dataset, list_tables, describe_table or request_confirmation.", tool)
	return toolResult{content: "Error: " + msg, err: msg}
}

// dataTool runs one of the catalog's tools with the turn's policy around
// it: failed SQL counts towards MaxSQLFailures, after which no more runs;
// a table loaded or saved refreshes the prompt; the excerpts found are the
// turn's to cite. The catalog observes the calls it runs.
func (t *turn) dataTool(ctx context.Context, tool string, args json.RawMessage) toolResult {
	sql := tool == datachat.ToolExecuteSQL
	if sql && t.state.SQLFailures >= MaxSQLFailures {
		msg := fmt.Sprintf("Not run: %d SQL attempts failed in this turn. Explain the error to the user instead of running more SQL.", MaxSQLFailures)
		return toolResult{content: "Error: " + msg, err: msg}
	}
	failed := func(err error) toolResult {
		msg := datachat.ErrorMessage(err)
		res := toolResult{content: "Error: " + msg, err: msg}
		if sql {
			t.state.SQLFailures++
			res = t.sqlFailure(res)
		}
		return res
	}
	call := t.toolCall()
	if tool == datachat.ToolListTables || tool == datachat.ToolDescribeTable {
		var err error
		if call.Tables, err = t.allTables(ctx); err != nil {
			return failed(err)
		}
	}
	res, err := t.tools(ctx).Run(ctx, call, tool, args)
	if err != nil {
		if sql && ctx.Err() != nil {
			return toolResult{content: "Error: cancelled", err: "cancelled", observed: true}
		}
		r := failed(err)
		r.observed = true
		return r
	}
	if len(res.Datasets) > 0 && (tool == datachat.ToolLoadDataset || tool == datachat.ToolExecuteSQL) {
		t.refreshSystem(ctx)
	}
	t.state.Sources = append(t.state.Sources, res.Excerpts...)
	return toolResult{content: res.Text, result: res.Rows, observed: true}
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
	t.chooseSchema(ctx, datasets)
	if s, err := SystemPrompt(t.r.Template, t.promptData(datasets, t.initialExcerpts())); err == nil {
		t.system = s
	}
}

func (t *turn) record(call datachat.ModelToolCall, tool string, res toolResult) {
	t.recordAt(call, tool, call.Args, res, t.r.now())
}

// recordAt sends EventToolCallResult, gives the result to the model and stores
// the round.
func (t *turn) recordAt(call datachat.ModelToolCall, tool string, args json.RawMessage, res toolResult, started time.Time) {
	ev := ToolCallResultEvent{ID: call.ID, Tool: tool, OK: res.err == "", Content: res.content, Error: res.err}
	if r := res.result; r != nil {
		t.state.Results = append(t.state.Results, callResult{CallID: call.ID, Result: r})
		ev.Columns, ev.Rows, ev.RowCount, ev.Truncated, ev.ElapsedMS = r.Columns, r.Rows, &r.RowCount, &r.Truncated, &r.ElapsedMS
		if ev.Rows == nil {
			ev.Rows = [][]any{}
		}
	}
	t.emit(EventToolCallResult, ev)
	if o := t.r.Observer; o != nil && !res.observed {
		o.ToolCalled(tool, ev.OK, t.r.now().Sub(started))
	}
	t.state.Transcript = append(t.state.Transcript, datachat.ModelMessage{
		Role: datachat.ModelRoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: res.content,
	})
	t.state.Seq++
	tc := &datachat.ToolCall{
		MessageID: t.msg.ID, Seq: t.state.Seq, CallID: call.ID, Tool: tool, Args: args,
		OK: res.err == "", Result: res.content, Error: res.err,
		StartedAt: started, DurationMS: t.r.now().Sub(started).Milliseconds(),
	}
	if r := res.result; r != nil {
		tc.Columns = resultColumns(r.Columns)
	}
	// Stored beside the next model call rather than before it: the write
	// waits for the store's writer, which every turn shares, and the next
	// token need not. finish waits for it, so the answer's end is written
	// after its rounds.
	t.storing.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.r.Store.CreateToolCall(ctx, tc); err != nil {
			t.r.Logger.Error("store tool call", slog.String("message_id", t.msg.ID), slog.String("error", err.Error()))
		}
	})
}

// resultColumns are a result's column names and types, as a tool call keeps
// them (without samples or descriptions).
func resultColumns(cols []datachat.Column) []datachat.Column {
	out := make([]datachat.Column, len(cols))
	for i, c := range cols {
		out[i] = datachat.Column{Name: c.Name, Type: c.Type, SQLType: c.SQLType}
	}
	return out
}
