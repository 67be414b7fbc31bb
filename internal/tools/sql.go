package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"datachat"
)

// executeSQL runs a's query: on its source, or without one on the
// conversation's datasets with DuckDB.
func (cat *Catalog) executeSQL(ctx context.Context, c Call, a Args) (*Result, error) {
	var (
		r   *datachat.QueryResult
		err error
	)
	if a.Source == "" {
		r, err = cat.query(ctx, c.Conversation, a.Query)
	} else {
		if err := cat.checkSource(c, a.Source, "omit source to query the datasets."); err != nil {
			return nil, err
		}
		start := time.Now()
		r, err = cat.Sources.Query(ctx, c.User, c.Conversation, a.Source, a.Query)
		cat.observe(err, start)
	}
	if err != nil {
		return nil, err
	}
	return &Result{Text: datachat.ResultText(r), Rows: r}, nil
}

// RowEstimator estimates the rows a query on a conversation's datasets
// would return, without running it (DuckDB's EXPLAIN); the chat's Data does.
type RowEstimator interface {
	EstimateRows(ctx context.Context, conversationID, sql string) (int64, error)
}

// EstimateRows is the engine's estimate of the rows execute_sql's query a
// would return, on its source or on the datasets, for a confirmation gate:
// the same choice of engine and the same source checks as running it.
// EINVALID when there is nothing to estimate with.
func (cat *Catalog) EstimateRows(ctx context.Context, c Call, a Args) (int64, error) {
	if c.User != nil {
		ctx = datachat.WithUserID(ctx, c.User.ID)
	}
	if a.Source != "" {
		if err := cat.checkSource(c, a.Source, "omit source to query the datasets."); err != nil {
			return 0, err
		}
		return cat.Sources.EstimateRows(ctx, c.User, c.Conversation, a.Source, a.Query)
	}
	if cat.Estimator == nil {
		return 0, datachat.Errorf(datachat.EINVALID, "No estimate of the rows of a query on the datasets here.")
	}
	return cat.Estimator.EstimateRows(ctx, c.Conversation, a.Query)
}

// saveAs runs a's query on its source and saves the result into the
// conversation as the table a.SaveAs (through the same checked, audited
// path as every query on a source), so that a later query joins it with
// the conversation's datasets.
func (cat *Catalog) saveAs(ctx context.Context, c Call, a Args) (*Result, error) {
	if a.Source == "" {
		return nil, datachat.Errorf(datachat.EINVALID, "save_as saves the result of a query on a database: give source too. To keep a result of the datasets, query them again when needed.")
	}
	if err := cat.checkSource(c, a.Source, "save_as needs one."); err != nil {
		return nil, err
	}
	limit := cat.saveAsMaxRows()
	start := time.Now()
	ds, res, err := cat.Workspace.SaveQuery(ctx, c.Conversation, a.SaveAs, a.Source, func(ctx context.Context, sink datachat.RowSink) (datachat.StreamResult, error) {
		return cat.Sources.Stream(ctx, c.User, c.Conversation, a.Source, a.Query, limit, sink)
	})
	cat.observe(err, start)
	if err != nil {
		return nil, err
	}
	return &Result{Text: cat.savedText(ds, a.Source, res, limit), Datasets: []*datachat.Dataset{ds}, Saved: res, Elapsed: time.Since(start)}, nil
}

func (cat *Catalog) saveAsMaxRows() int {
	if cat.SaveAsMaxRows > 0 {
		return cat.SaveAsMaxRows
	}
	return DefaultSaveAsMaxRows
}

// checkSource returns an EINVALID error the model can act on when source
// is not attached to the conversation (when the call knows which are), or
// when there are no sources at all (without says what to do instead).
func (cat *Catalog) checkSource(c Call, source, without string) error {
	if c.Attached != nil {
		if err := checkAttached(c.Attached, source); err != nil {
			return err
		}
	}
	if cat.Sources == nil || c.User == nil {
		return datachat.Errorf(datachat.EINVALID, "No database sources on this server: %s", without)
	}
	return nil
}

// checkAttached returns an EINVALID error the model can act on when source
// is not one of the attached sources' names.
func checkAttached(attached []string, source string) error {
	if slices.Contains(attached, source) {
		return nil
	}
	if len(attached) == 0 {
		return datachat.Errorf(datachat.EINVALID, "no database named %q is attached to this conversation, and none is: omit source to query the conversation's datasets with DuckDB.", source)
	}
	return datachat.Errorf(datachat.EINVALID, "no database named %q is attached to this conversation; the attached databases are %s. Omit source to query the conversation's datasets with DuckDB.", source, strings.Join(attached, ", "))
}

// query runs SQL on the conversation's datasets, reporting its duration.
func (cat *Catalog) query(ctx context.Context, conv, sql string) (*datachat.QueryResult, error) {
	start := time.Now()
	r, err := cat.Workspace.Query(ctx, conv, sql)
	cat.observe(err, start)
	return r, err
}

func (cat *Catalog) observe(err error, start time.Time) {
	if cat.Observer != nil {
		cat.Observer.SQLQueried(err == nil, time.Since(start))
	}
}

// savedText tells the model what save_as saved and how to use it.
func (cat *Catalog) savedText(ds *datachat.Dataset, source string, res datachat.StreamResult, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Saved %d row%s of the query on %s as the table %s in this conversation.", ds.RowCount, plural(int(ds.RowCount)), source, ds.Name)
	if res.Truncated {
		fmt.Fprintf(&b, " The result was cut: only the first %d rows were saved (DATACHAT_SAVE_AS_MAX_ROWS), or a value longer than 1 MiB was shortened; say so in the answer if it matters.", min(int64(limit), ds.RowCount))
	}
	b.WriteString(" Query it, or join it with the datasets, with execute_sql without source (DuckDB SQL).\n")
	b.WriteString(cat.schemaText([]*datachat.Dataset{ds}))
	return b.String()
}

// schemaText is the tables' columns as the model reads them.
func (cat *Catalog) schemaText(ds []*datachat.Dataset) string {
	if cat.SchemaText == nil {
		return ""
	}
	return strings.TrimSpace(cat.SchemaText(ds))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
