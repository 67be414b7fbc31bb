package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/dataset"
	"datachat/internal/duckdb"
	"datachat/internal/retrieval"
)

// newTestWorkspace is a workspace over st with a real SQL engine and dataset
// loader in a temporary directory; maxBytes caps a dataset (0: 2 GiB).
func newTestWorkspace(t *testing.T, st datachat.Store, maxBytes int64) *Workspace {
	t.Helper()
	dir := t.TempDir()
	engine, err := duckdb.New(duckdb.Options{TempDir: t.TempDir(), MemoryLimit: 256 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	loader, err := dataset.New(dataset.Options{Dir: filepath.Join(dir, "datasets"), Engine: engine, MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	return &Workspace{Store: st, Loader: loader, Engine: engine, Logger: slog.New(slog.DiscardHandler)}
}

// newIndexedWorkspace is a workspace over st with a real SQL engine, dataset
// loader and document index in a temporary directory.
func newIndexedWorkspace(t *testing.T, st datachat.Store) *Workspace {
	t.Helper()
	dir := t.TempDir()
	engine, err := duckdb.New(duckdb.Options{Timeout: 10 * time.Second, MemoryLimit: 256 << 20, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	loader, err := dataset.New(dataset.Options{Dir: filepath.Join(dir, "datasets"), Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	index, err := retrieval.Open(context.Background(), retrieval.Options{Path: filepath.Join(dir, "index.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { index.Close() })
	return &Workspace{Store: st, Loader: loader, Engine: engine, Index: index, Logger: slog.New(slog.DiscardHandler)}
}

// datasetFiles lists the files of the workspace's dataset directory (its
// work directory aside).
func datasetFiles(t *testing.T, w *Workspace) []string {
	t.Helper()
	ents, err := os.ReadDir(w.Loader.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != ".tmp" {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestSaveQueryJoinsWithAnUpload: a query on a PostgreSQL source saved as a
// table (save_as) is a dataset of the conversation — from the database, when
// — that one DuckDB query joins with an uploaded CSV; its query is in the
// audit log with its row count. A name a dataset has is refused before the
// source is asked; a save whose record cannot be written, or that is larger
// than a dataset may be, leaves nothing behind.
func TestSaveQueryJoinsWithAnUpload(t *testing.T) {
	f := newAuditFixture(t, nil)
	ctx := context.Background()
	w := newTestWorkspace(t, f.st, 0)
	csv := "item,price\ntea,2.5\ncoffee,3\nwater,1\n"
	if _, err := w.AddUpload(ctx, f.conv, strings.NewReader(csv), "prices.csv", ""); err != nil {
		t.Fatal(err)
	}
	stream := func(sql string) func(context.Context, datachat.RowSink) (datachat.StreamResult, error) {
		return func(ctx context.Context, sink datachat.RowSink) (datachat.StreamResult, error) {
			return f.sources.Stream(ctx, f.alice, f.conv, "warehouse", sql, 1_000_000, sink)
		}
	}
	before := len(f.events(t))
	d, res, err := w.SaveQuery(ctx, f.conv, "Orders", "warehouse", stream("SELECT id, item FROM orders"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "orders" || d.RowCount != 3 || res.Rows != 3 || res.Truncated || d.Format != dataset.FormatDatabase ||
		!strings.HasPrefix(d.Source, "database warehouse, saved 20") || !strings.HasSuffix(d.Source, " UTC") {
		t.Errorf("saved %+v, %+v", d, res)
	}
	evs := f.events(t)
	if len(evs) != before+1 || evs[0].Outcome != datachat.AuditOK || evs[0].RowCount == nil || *evs[0].RowCount != 3 || evs[0].SQL != "SELECT id, item FROM orders" {
		t.Errorf("audit: %d new events, newest %+v", len(evs)-before, evs[0])
	}
	list, err := w.Datasets(ctx, f.conv)
	if err != nil || len(list) != 2 || list[1].Name != "orders" || list[1].Source != d.Source {
		t.Errorf("datasets %v %v", list, err)
	}
	r, err := w.Query(ctx, f.conv, "SELECT o.id, o.item, p.price FROM orders o JOIN prices p USING (item) ORDER BY o.id")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Rows); got != "[[1 tea 2.5] [2 coffee 3] [3 water 1]]" {
		t.Errorf("the join: %s", got)
	}

	// A name taken (in any case): refused, the source not asked.
	before = len(f.events(t))
	if _, _, err := w.SaveQuery(ctx, f.conv, "PRICES", "warehouse", stream("SELECT id FROM orders")); datachat.ErrorCode(err) != datachat.EINVALID ||
		!strings.Contains(err.Error(), "already has a table named prices") || !strings.Contains(err.Error(), "nothing was saved") {
		t.Errorf("save_as into a dataset's name: %v", err)
	}
	if n := len(f.events(t)) - before; n != 0 {
		t.Errorf("the source was asked %d times for a name that is taken", n)
	}
	// A query the sandbox refuses: recorded as refused, nothing saved.
	files := datasetFiles(t, w)
	if _, _, err := w.SaveQuery(ctx, f.conv, "gone", "warehouse", stream("DELETE FROM orders")); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("a write saved as a table: %v", err)
	}
	if evs := f.events(t); evs[0].Outcome != datachat.AuditRefused {
		t.Errorf("the refused save's record: %+v", evs[0])
	}
	if got := datasetFiles(t, w); len(got) != len(files) {
		t.Errorf("files after a refused save: %v, want %v", got, files)
	}
}

// TestSaveQueryNoRecordNoTable: when the audit record of a save's query
// cannot be written, no table is saved and no file is left.
func TestSaveQueryNoRecordNoTable(t *testing.T) {
	f := newAuditFixture(t, func(st datachat.Store) SourceStore { return failingAudit{st, errors.New("disk I/O error")} })
	w := newTestWorkspace(t, f.st, 0)
	_, _, err := w.SaveQuery(context.Background(), f.conv, "orders", "warehouse", func(ctx context.Context, sink datachat.RowSink) (datachat.StreamResult, error) {
		return f.sources.Stream(ctx, f.alice, f.conv, "warehouse", "SELECT id, item FROM orders", 1_000_000, sink)
	})
	if datachat.ErrorCode(err) != datachat.EBUSY || !strings.Contains(err.Error(), "audit log") {
		t.Errorf("err %v, want EBUSY naming the audit log", err)
	}
	if list, _ := w.Datasets(context.Background(), f.conv); len(list) != 0 {
		t.Errorf("datasets %v, want none", list)
	}
	if got := datasetFiles(t, w); len(got) != 0 {
		t.Errorf("files left: %v", got)
	}
}

// TestSaveQueryCountsAgainstTheDatasetLimit: a saved table is a dataset, held
// to DATACHAT_MAX_DATASET_BYTES as an upload is: past it the save stops,
// saying so, and leaves nothing.
func TestSaveQueryCountsAgainstTheDatasetLimit(t *testing.T) {
	f := newAuditFixture(t, nil)
	w := newTestWorkspace(t, f.st, 100)
	_, _, err := w.SaveQuery(context.Background(), f.conv, "orders", "warehouse", func(ctx context.Context, sink datachat.RowSink) (datachat.StreamResult, error) {
		return f.sources.Stream(ctx, f.alice, f.conv, "warehouse", "SELECT id, item, repeat(item, 20) AS long FROM orders", 1_000_000, sink)
	})
	if datachat.ErrorCode(err) != datachat.EINVALID || !strings.Contains(err.Error(), "DATACHAT_MAX_DATASET_BYTES") {
		t.Errorf("err %v, want EINVALID naming DATACHAT_MAX_DATASET_BYTES", err)
	}
	if got := datasetFiles(t, w); len(got) != 0 {
		t.Errorf("files left: %v", got)
	}
	if evs := f.events(t); evs[0].Outcome != datachat.AuditFailed || !strings.Contains(evs[0].Error, "DATACHAT_MAX_DATASET_BYTES") {
		t.Errorf("the record of the stopped save: %+v", evs[0])
	}
}
