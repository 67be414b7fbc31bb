package workspace

import (
	"context"
	"slices"
	"strings"

	"datachat"
)

// ReadTables returns the signatures of the conversation's tables that sql
// reads, as DuckDB's parse tree of the query names them (see
// duckdb.Engine.Relations): what a verified example records to be offered
// later only over tables with the same columns. EINVALID when sql does not
// parse as one SELECT.
func (w *Workspace) ReadTables(ctx context.Context, conversationID, sql string) ([]datachat.TableSignature, error) {
	ds, err := w.Store.Datasets(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	names, err := w.Engine.Relations(ctx, conversationID, w.engineTables(ds), sql)
	if err != nil {
		return nil, err
	}
	out := []datachat.TableSignature{}
	for _, d := range ds {
		if slices.Contains(names, d.Name) {
			out = append(out, d.Signature())
		}
	}
	return out, nil
}

// SaveExample verifies and stores a user's example for the conversation
// e.ConversationID: a correct one's query runs (run: even when it ran
// before, since it was edited) and must succeed, and must read at least one
// of the conversation's tables; their signatures become e.Tables. A wrong
// one is stored with whatever tables it reads. It returns the result of the
// query when it ran. EINVALID when the query fails or reads no table.
func (w *Workspace) SaveExample(ctx context.Context, e *datachat.Example, run bool) (*datachat.QueryResult, error) {
	e.SQL = strings.TrimSpace(e.SQL)
	e.Question = strings.TrimSpace(e.Question)
	var res *datachat.QueryResult
	if e.Verdict == datachat.VerdictCorrect && run {
		var err error
		if res, err = w.Query(ctx, e.ConversationID, e.SQL); err != nil {
			if datachat.ErrorCode(err) == datachat.EINVALID {
				return nil, datachat.Errorf(datachat.EINVALID, "The query failed, so it cannot be marked correct: %s", datachat.ErrorMessage(err))
			}
			return nil, err
		}
	}
	tables, err := w.ReadTables(ctx, e.ConversationID, e.SQL)
	switch {
	case err != nil && e.Verdict == datachat.VerdictCorrect:
		return nil, err
	case err != nil && datachat.ErrorCode(err) != datachat.EINVALID:
		return nil, err
	case err != nil:
		tables = nil // a wrong query that does not parse reads nothing
	case len(tables) == 0 && e.Verdict == datachat.VerdictCorrect:
		return nil, datachat.Errorf(datachat.EINVALID, "The query reads none of the conversation's tables: a verified example shows how to query them.")
	}
	e.Tables = tables
	if err := w.Store.SaveExample(ctx, e); err != nil {
		return nil, err
	}
	return res, nil
}
