package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/dataset"
)

// SavedSource is what a table saved from a database source says it came
// from: the database and when, as the page's data panel shows a dataset's
// source.
func SavedSource(database string, at time.Time) string {
	return fmt.Sprintf("database %s, saved %s", database, at.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// SaveName is the table name save_as asks for, as datasets are named
// (datachat.TableName: lower case, [a-z0-9_]); EINVALID for an empty or
// overlong one.
func SaveName(name string) (string, error) {
	name = strings.TrimSpace(name)
	switch n := utf8.RuneCountInString(name); {
	case name == "":
		return "", datachat.Errorf(datachat.EINVALID, "save_as needs the name of the new table.")
	case n > dataset.MaxNameLength:
		return "", datachat.Errorf(datachat.EINVALID, "save_as is %d characters long; at most %d are accepted.", n, dataset.MaxNameLength)
	}
	return datachat.TableName(name, nil), nil
}

// SaveQuery stores the rows of a query on a database source as a new
// dataset of the conversation, named name (as [SaveName] makes it): run
// streams them into the sink it is given, and they are stored as Parquet as
// an upload is, within the same size limit (DATACHAT_MAX_DATASET_BYTES). The
// dataset's Source names the database and when; its Format is
// dataset.FormatDatabase. It is then queried with the conversation's other
// datasets, and stays with them (a restart, the data panel) as any does.
//
// A name a dataset of the conversation already has is refused (EINVALID,
// saying which names are taken), before run and again when the table is
// recorded. run's errors come back as they are; nothing is left behind on
// an error.
func (w *Workspace) SaveQuery(ctx context.Context, conversationID, name, database string, run func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error) {
	var res datachat.StreamResult
	table, err := SaveName(name)
	if err != nil {
		return nil, res, err
	}
	existing, err := w.Store.Datasets(ctx, conversationID)
	if err != nil {
		return nil, res, err
	}
	if err := nameFree(table, existing); err != nil {
		return nil, res, err
	}
	source := SavedSource(database, time.Now())
	st, err := w.Loader.Save(ctx, table, source, func(sink datachat.RowSink) error {
		var err error
		res, err = run(ctx, sink)
		return err
	})
	if err != nil {
		return nil, res, err
	}
	unlock := w.lock(conversationID)
	defer unlock()
	fail := func(err error) (*datachat.Dataset, datachat.StreamResult, error) {
		if rerr := w.Loader.Remove(st.Path); rerr != nil {
			w.Logger.Warn("remove saved table file", slog.String("path", st.Path), slog.String("error", rerr.Error()))
		}
		return nil, res, err
	}
	if existing, err = w.Store.Datasets(ctx, conversationID); err != nil {
		return fail(err)
	}
	if err := nameFree(table, existing); err != nil {
		return fail(err) // taken while the query ran
	}
	d := &datachat.Dataset{
		ConversationID: conversationID, Name: table, Source: st.Source, Format: st.SourceFormat,
		Path: st.Path, Columns: st.Columns, RowCount: st.RowCount, Bytes: st.Bytes, Notes: st.Notes,
	}
	if err := w.Store.CreateDataset(ctx, d); err != nil {
		return fail(err)
	}
	w.Logger.Info("query saved as a dataset", slog.String("conversation_id", conversationID), slog.String("dataset_id", d.ID),
		slog.String("table", d.Name), slog.String("database", database), slog.Int64("rows", d.RowCount), slog.Int64("bytes", d.Bytes))
	w.prepare(conversationID)
	return d, res, nil
}

// nameFree refuses a table name a dataset of the conversation has.
func nameFree(table string, existing []*datachat.Dataset) error {
	names := make([]string, len(existing))
	taken := false
	for i, d := range existing {
		names[i] = d.Name
		taken = taken || strings.EqualFold(d.Name, table)
	}
	if !taken {
		return nil
	}
	return datachat.Errorf(datachat.EINVALID, "This conversation already has a table named %s (its tables are %s): save_as must name a new table, such as %s; nothing was saved.",
		table, strings.Join(names, ", "), datachat.TableName(table, names))
}
