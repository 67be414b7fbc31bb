package chat

import (
	"context"

	"datachat"
	"datachat/internal/tools"
)

// saveOverCap reports whether an execute_sql call saves (save_as, with a
// source) a result the source's engine estimates to be larger than the cap:
// the user is asked first. An estimate that fails asks nothing: the query
// fails when it runs, with its error.
func (t *turn) saveOverCap(ctx context.Context, call datachat.ModelToolCall) (int64, bool) {
	a, err := tools.Parse(call.Name, call.Args)
	if err != nil || a.SaveAs == "" || a.Source == "" {
		return 0, false
	}
	n, err := t.estimateRows(ctx, a) // fails for a source not attached
	if err != nil {
		return 0, false
	}
	return n, n > int64(t.r.saveAsMaxRows())
}
