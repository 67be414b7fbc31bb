package workspace

import (
	"context"
	"path/filepath"
	"slices"

	"datachat"
	"datachat/internal/duckdb"
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
	ts := make([]duckdb.Table, len(ds))
	for i, d := range ds {
		ts[i] = duckdb.Table{Name: d.Name, Path: filepath.Join(w.Loader.Dir(), d.Path)}
	}
	names, err := w.Engine.Relations(ctx, conversationID, ts, sql)
	if err != nil {
		return nil, queryError(err)
	}
	out := []datachat.TableSignature{}
	for _, d := range ds {
		if slices.Contains(names, d.Name) {
			out = append(out, d.Signature())
		}
	}
	return out, nil
}
