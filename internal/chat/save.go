package chat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"datachat"
)

// execute_sql's save_as: the result of a query on a database source, saved
// into the conversation as a new table (through the same checked, audited
// path as every query on a source), so that a later query joins it with the
// conversation's datasets.

// saveAs runs a's query on its source and saves the result as the table
// a.SaveAs. A failure counts as a failed SQL attempt, as a query's does.
func (t *turn) saveAs(ctx context.Context, a sqlArgs) toolResult {
	fail := func(err error) toolResult {
		if ctx.Err() != nil {
			return toolResult{content: "Error: cancelled", err: "cancelled"}
		}
		t.state.SQLFailures++
		msg := datachat.ErrorMessage(err)
		return t.sqlFailure(toolResult{content: "Error: " + msg, err: msg})
	}
	if a.Source == "" {
		return fail(datachat.Errorf(datachat.EINVALID, "save_as saves the result of a query on a database: give source too. To keep a result of the datasets, query them again when needed."))
	}
	if err := t.checkSource(a.Source); err != nil {
		return fail(err)
	}
	limit := t.r.saveAsMaxRows()
	qstart := time.Now()
	ds, res, err := t.r.Data.SaveQuery(ctx, t.conv.ID, a.SaveAs, a.Source, func(ctx context.Context, sink datachat.RowSink) (datachat.StreamResult, error) {
		return t.r.Sources.Stream(ctx, t.user, t.conv.ID, a.Source, a.Query, limit, sink)
	})
	if o := t.r.Observer; o != nil && ctx.Err() == nil {
		o.SQLQueried(err == nil, time.Since(qstart))
	}
	if err != nil {
		return fail(err)
	}
	t.refreshSystem(ctx)
	return toolResult{content: savedText(ds, a.Source, res, limit)}
}

// savedText tells the model what was saved and how to use it.
func savedText(ds *datachat.Dataset, source string, res datachat.StreamResult, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Saved %d row%s of the query on %s as the table %s in this conversation.", ds.RowCount, plural(int(ds.RowCount)), source, ds.Name)
	if res.Truncated {
		fmt.Fprintf(&b, " The result was cut: only the first %d rows were saved (DATACHAT_SAVE_AS_MAX_ROWS), or a value longer than 1 MiB was shortened; say so in the answer if it matters.", min(int64(limit), ds.RowCount))
	}
	b.WriteString(" Query it, or join it with the datasets, with execute_sql without source (DuckDB SQL).\n")
	b.WriteString(strings.TrimSpace(schemaText([]*datachat.Dataset{ds})))
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// saveOverCap reports whether an execute_sql call saves (save_as, with a
// source) a result the source's engine estimates to be larger than the cap:
// the user is asked first. An estimate that fails asks nothing: the query
// fails when it runs, with its error.
func (t *turn) saveOverCap(ctx context.Context, call datachat.ModelToolCall) (int64, bool) {
	a, ok := parseSQLArgs(call.Args)
	if !ok || a.SaveAs == "" || a.Source == "" || t.checkSource(a.Source) != nil {
		return 0, false
	}
	n, err := t.estimateRows(ctx, a)
	if err != nil {
		return 0, false
	}
	return n, n > int64(t.r.saveAsMaxRows())
}
