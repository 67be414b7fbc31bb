package chat

import (
	"context"
	"encoding/json"
	"time"

	"datachat"
	"datachat/internal/tools"
)

// DataTools declares and runs the data tools a turn gives the model —
// execute_sql, load_dataset, search_documents, list_datasets,
// describe_dataset, list_tables and describe_table — once the turn's policy
// let the call through; *tools.Catalog does.
type DataTools interface {
	// Run parses args, charges the user's budget, runs tool and observes
	// the call. Errors are *datachat.Error whose message the model can act
	// on (EINVALID for what it can correct, ENOTFOUND, EBUSY, ERATELIMIT).
	Run(ctx context.Context, c tools.Call, tool string, args json.RawMessage) (*tools.Result, error)
	// EstimateRows is the engine's estimate of the rows an execute_sql
	// call would return, for the confirmation gate.
	EstimateRows(ctx context.Context, c tools.Call, a tools.Args) (int64, error)
	// Spec is tool's declaration for a turn with the attached databases;
	// ok is false for a tool it does not have.
	Spec(tool string, attached []string) (spec datachat.ToolSpec, ok bool)
}

// tools returns the turn's data tools: Runner.Tools, or the catalog over
// Runner.Data and Runner.Sources, charging Runner.Budgets and reporting its
// calls, and the SQL of a turn that is not cancelled, to the Observer.
func (t *turn) tools(ctx context.Context) DataTools {
	if t.r.Tools != nil {
		return t.r.Tools
	}
	cat := &tools.Catalog{
		Workspace: t.r.Data, Estimator: t.r.Data, Sources: t.r.Sources, Budgets: t.r.Budgets,
		SaveAsMaxRows: t.r.saveAsMaxRows(), SchemaText: schemaText, TableText: tableText,
	}
	if o := t.r.Observer; o != nil {
		cat.Observer = sqlObserver{ctx: ctx, o: o}
	}
	return cat
}

// toolCall is what the turn's data tool calls act on: its user's
// conversation, the databases attached to it, the request's filters; the
// excerpts found are numbered after those the turn has.
func (t *turn) toolCall() tools.Call {
	return tools.Call{
		User: t.user, Conversation: t.conv.ID, Attached: t.sourceNames(),
		Filters: t.opts.Filters, FirstExcerpt: len(t.state.Sources) + 1,
	}
}

// sqlObserver reports a turn's tool calls, and its SQL queries unless the
// turn was cancelled.
type sqlObserver struct {
	ctx context.Context
	o   Observer
}

func (s sqlObserver) ToolCalled(tool string, ok bool, d time.Duration) {
	s.o.ToolCalled(tool, ok, d)
}

func (s sqlObserver) SQLQueried(ok bool, d time.Duration) {
	if s.ctx.Err() == nil {
		s.o.SQLQueried(ok, d)
	}
}

// estimateRows is an execute_sql call's estimate, for the confirmation
// gate.
func (t *turn) estimateRows(ctx context.Context, a tools.Args) (int64, error) {
	return t.tools(ctx).EstimateRows(ctx, t.toolCall(), a)
}
