// Package workspace is a conversation's data — its datasets and documents —
// and the operations over them: adding and removing files, running sandboxed
// SQL, searching documents. The HTTP API, the chat turn, the command line and
// the MCP server all go through it.
package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"datachat"
	"datachat/internal/dataset"
	"datachat/internal/duckdb"
	"datachat/internal/extract"
	"datachat/internal/retrieval"
	"datachat/internal/scratch"

	"github.com/google/uuid"
)

// Workspace coordinates the store, the dataset loader and the SQL engine.
type Workspace struct {
	Store  datachat.Store
	Loader *dataset.Loader
	Engine *duckdb.Engine
	Index  retrieval.Backend // nil: documents are not available
	Logger *slog.Logger

	MaxDocumentBytes int64 // largest document accepted; 0: no cap

	// Extractor reads documents (nil: extract.Extract's, which spools
	// uploads in the system's temporary directory).
	Extractor *extract.Extractor
	// Reserve, if set, is disk space held back for deletes: it is given back
	// to the disk while a dataset, document or conversation is deleted, so
	// that deleting to free space works on a full disk.
	Reserve *scratch.Reserve

	mu      sync.Mutex
	locks   map[string]*convLock // per conversation, so table names don't race; only while held or waited for
	indexed map[string]bool      // conversations whose documents were checked to be in the index
}

// convLock is a conversation's lock and how many hold or wait for it: the
// last to let go removes it, so the map holds only the conversations in use.
type convLock struct {
	sync.Mutex
	users int
}

func (w *Workspace) lock(conversationID string) func() {
	w.mu.Lock()
	if w.locks == nil {
		w.locks = map[string]*convLock{}
	}
	l := w.locks[conversationID]
	if l == nil {
		l = &convLock{}
		w.locks[conversationID] = l
	}
	l.users++
	w.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		w.mu.Lock()
		if l.users--; l.users == 0 {
			delete(w.locks, conversationID)
		}
		w.mu.Unlock()
	}
}

// AddFromPath adds a dataset given on a command line or in a suite: an
// http(s) URL, loaded as load_dataset loads one, or the path of a local file.
func (w *Workspace) AddFromPath(ctx context.Context, conversationID, src string) ([]*datachat.Dataset, error) {
	if IsURL(src) {
		return w.AddURL(ctx, conversationID, src, "")
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "%s", strings.TrimPrefix(err.Error(), "open "))
	}
	defer f.Close()
	return w.AddUpload(ctx, conversationID, f, filepath.Base(src), "")
}

// IsURL reports whether a dataset's source names an http(s) URL rather than
// a file.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// AddUpload stores an uploaded file as datasets of the conversation: one, or
// one per part of the file (a JSON object's arrays of records). name, if not
// empty, is the table name wanted (made valid and unique).
func (w *Workspace) AddUpload(ctx context.Context, conversationID string, r io.Reader, filename, name string) ([]*datachat.Dataset, error) {
	sts, err := w.Loader.Ingest(ctx, r, filename)
	if err != nil {
		return nil, err
	}
	return w.register(ctx, conversationID, sts, name)
}

// AddURL downloads a dataset file as datasets of the conversation, as
// AddUpload stores an upload.
func (w *Workspace) AddURL(ctx context.Context, conversationID, url, name string) ([]*datachat.Dataset, error) {
	sts, err := w.Loader.Fetch(ctx, url)
	if err != nil {
		return nil, err
	}
	return w.register(ctx, conversationID, sts, name)
}

// register names stored files uniquely within the conversation and records
// them; on failure the files are removed and nothing recorded remains, so
// nothing half-loaded is left.
func (w *Workspace) register(ctx context.Context, conversationID string, sts []*dataset.Stored, name string) (_ []*datachat.Dataset, err error) {
	unlock := w.lock(conversationID)
	defer unlock()
	var out []*datachat.Dataset
	defer func() {
		if err == nil {
			return
		}
		for _, d := range out {
			// On a full disk too: the upload may have failed for that.
			if derr := w.freeing(func() error { return w.Store.DeleteDataset(context.WithoutCancel(ctx), conversationID, d.ID) }); derr != nil {
				w.Logger.Error("remove dataset after a failed upload", slog.String("dataset_id", d.ID), slog.String("error", derr.Error()))
			}
		}
		w.Loader.RemoveAll(sts)
	}()
	existing, err := w.Store.Datasets(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	taken := make([]string, len(existing))
	for i, d := range existing {
		taken[i] = d.Name
	}
	for _, st := range sts {
		base := st.Source
		if name != "" {
			base = name
		}
		if st.Part != "" {
			base = datachat.TableName(base, nil) + "_" + st.Part
		}
		d := &datachat.Dataset{
			ConversationID: conversationID,
			Name:           datachat.TableName(base, taken),
			Source:         st.Source,
			Format:         st.SourceFormat,
			Path:           st.Path,
			Columns:        st.Columns,
			RowCount:       st.RowCount,
			Bytes:          st.Bytes,
			Notes:          st.Notes,
		}
		if err := w.Store.CreateDataset(ctx, d); err != nil {
			return nil, err
		}
		taken = append(taken, d.Name)
		out = append(out, d)
		w.Logger.Info("dataset added", slog.String("conversation_id", conversationID), slog.String("dataset_id", d.ID),
			slog.String("table", d.Name), slog.Int64("rows", d.RowCount), slog.Int64("bytes", d.Bytes))
	}
	w.prepare(conversationID)
	return out, nil
}

// prepare starts, in the background, the conversation's SQL worker over its
// tables as they now are, so that the next query finds it ready.
func (w *Workspace) prepare(conversationID string) {
	ts, err := w.tables(context.Background(), conversationID)
	if err != nil {
		w.Engine.Evict(conversationID)
		return
	}
	w.Engine.Prepare(conversationID, ts)
}

// Datasets lists the conversation's datasets, each with its semantic layer
// (metrics, synonyms, relationships) from the data dictionary.
func (w *Workspace) Datasets(ctx context.Context, conversationID string) ([]*datachat.Dataset, error) {
	ds, err := w.Store.Datasets(ctx, conversationID)
	if err != nil || len(ds) == 0 {
		return ds, err
	}
	l, err := w.Store.SemanticLayer(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	return l.WithSemantics(ds), nil
}

// freeing runs a delete with the reserved disk space given back, if there
// is a reserve.
func (w *Workspace) freeing(fn func() error) error {
	if w.Reserve == nil {
		return fn()
	}
	err := w.Reserve.Free(fn)
	if !w.Reserve.Held() {
		w.Logger.Warn("the disk is full: the space held back for deletes could not be held again; it will be once space is freed")
	}
	return err
}

// DeleteDataset removes a dataset and its file. It works on a full disk.
func (w *Workspace) DeleteDataset(ctx context.Context, conversationID, id string) error {
	unlock := w.lock(conversationID)
	defer unlock()
	d, err := w.Store.Dataset(ctx, conversationID, id)
	if err != nil {
		return err
	}
	return w.freeing(func() error {
		if err := w.Store.DeleteDataset(ctx, conversationID, id); err != nil {
			return err
		}
		w.prepare(conversationID)
		if err := w.Loader.Remove(d.Path); err != nil {
			w.Logger.Warn("remove dataset file", slog.String("path", d.Path), slog.String("error", err.Error()))
		}
		return nil
	})
}

// DeleteConversation removes a user's conversation with its files and index.
// It works on a full disk.
func (w *Workspace) DeleteConversation(ctx context.Context, userID, conversationID string) error {
	if _, err := w.Store.Conversation(ctx, userID, conversationID); err != nil {
		return err
	}
	return w.freeing(func() error { return w.deleteConversation(ctx, userID, conversationID) })
}

func (w *Workspace) deleteConversation(ctx context.Context, userID, conversationID string) error {
	datasets, err := w.Store.Datasets(ctx, conversationID)
	if err != nil {
		return err
	}
	if err := w.Store.DeleteConversation(ctx, userID, conversationID); err != nil {
		return err
	}
	w.Engine.Evict(conversationID)
	w.mu.Lock()
	delete(w.indexed, conversationID)
	w.mu.Unlock()
	for _, d := range datasets {
		if err := w.Loader.Remove(d.Path); err != nil {
			w.Logger.Warn("remove dataset file", slog.String("path", d.Path), slog.String("error", err.Error()))
		}
	}
	if w.Index != nil {
		if err := w.Index.DeleteConversation(ctx, conversationID); err != nil {
			w.Logger.Warn("remove document index", slog.String("conversation_id", conversationID), slog.String("error", err.Error()))
		}
	}
	return nil
}

// tables are the engine's view of the conversation's datasets.
func (w *Workspace) tables(ctx context.Context, conversationID string) ([]duckdb.Table, error) {
	ds, err := w.Store.Datasets(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	return w.engineTables(ds), nil
}

// engineTables are datasets as the engine reads them: each by its name, from
// its file.
func (w *Workspace) engineTables(ds []*datachat.Dataset) []duckdb.Table {
	ts := make([]duckdb.Table, len(ds))
	for i, d := range ds {
		ts[i] = duckdb.Table{Name: d.Name, Path: filepath.Join(w.Loader.Dir(), d.Path)}
	}
	return ts
}

// Query runs one SQL statement over the conversation's datasets. A query the
// user or model can correct answers EINVALID with the engine's explanation.
func (w *Workspace) Query(ctx context.Context, conversationID, sql string) (*datachat.QueryResult, error) {
	ts, err := w.tables(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	return w.Engine.Query(ctx, conversationID, ts, sql)
}

// QueryKept runs SQL the user typed and keeps it in the conversation: a user
// message whose tool call holds the query and its result (or its error),
// shown again when the conversation is reopened, and whose text tells the
// model what the user ran and saw. A query that fails is kept too, with its
// error (then res is nil). ECONFLICT while an answer is being written in the
// conversation.
func (w *Workspace) QueryKept(ctx context.Context, conversationID, sql string) (res *datachat.QueryResult, m *datachat.Message, err error) {
	recent, err := w.Store.RecentMessages(ctx, conversationID, 1)
	if err != nil {
		return nil, nil, err
	}
	if len(recent) == 1 && (recent[0].Status == datachat.StatusStreaming || recent[0].Status == datachat.StatusAwaitingConfirmation) {
		return nil, nil, datachat.Errorf(datachat.ECONFLICT, "An answer is being written in this conversation; run the query once it ends.")
	}
	started := time.Now()
	res, qerr := w.Query(ctx, conversationID, sql)
	if qerr != nil && datachat.ErrorCode(qerr) != datachat.EINVALID {
		return nil, nil, qerr // not the query's fault: nothing to keep
	}
	args, _ := json.Marshal(map[string]string{"query": sql})
	tc := datachat.ToolCall{
		CallID: "user-" + uuid.NewString(), Seq: 1, Tool: datachat.ToolExecuteSQL, Args: args,
		OK: qerr == nil, StartedAt: started, DurationMS: time.Since(started).Milliseconds(),
	}
	var text strings.Builder
	fmt.Fprintf(&text, "I ran this SQL query myself:\n```sql\n%s\n```\n", strings.TrimSpace(sql))
	if qerr != nil {
		tc.Error = datachat.ErrorMessage(qerr)
		tc.Result = "Error: " + tc.Error
		fmt.Fprintf(&text, "It failed: %s", tc.Error)
	} else {
		tc.Result = datachat.ResultText(res)
		for _, c := range res.Columns {
			tc.Columns = append(tc.Columns, datachat.Column{Name: c.Name, Type: c.Type, SQLType: c.SQLType})
		}
		fmt.Fprintf(&text, "It returned:\n%s", tc.Result)
	}
	m = &datachat.Message{ConversationID: conversationID, Role: datachat.RoleUser, Content: text.String(), Status: datachat.StatusComplete}
	if err := w.Store.CreateMessage(ctx, m); err != nil {
		return nil, nil, err
	}
	tc.MessageID = m.ID
	if err := w.Store.CreateToolCall(ctx, &tc); err != nil {
		return nil, nil, err
	}
	m.ToolCalls = []datachat.ToolCall{tc}
	return res, m, nil
}

// EstimateRows asks DuckDB's planner how many rows sql would return.
func (w *Workspace) EstimateRows(ctx context.Context, conversationID, sql string) (int64, error) {
	ts, err := w.tables(ctx, conversationID)
	if err != nil {
		return 0, err
	}
	return w.Engine.EstimateRows(ctx, conversationID, ts, sql)
}

// LoadURL is the chat's load_dataset tool: [Workspace.AddURL].
func (w *Workspace) LoadURL(ctx context.Context, conversationID, url, name string) ([]*datachat.Dataset, error) {
	return w.AddURL(ctx, conversationID, url, name)
}

// errNoDocuments answers document operations when no index is set.
var errNoDocuments = datachat.Errorf(datachat.EINVALID, "Documents are not available on this server.")

// AddDocument extracts the text of a document read from r, splits it into
// chunks, stores both and indexes the chunks. Nothing remains on failure.
func (w *Workspace) AddDocument(ctx context.Context, conversationID string, r io.Reader, filename string, metadata map[string]string) (*datachat.Document, error) {
	if w.Index == nil {
		return nil, errNoDocuments
	}
	extractor := w.Extractor
	if extractor == nil {
		extractor = extract.Default()
	}
	ext, err := extractor.Extract(ctx, r, filename, w.MaxDocumentBytes)
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	d := &datachat.Document{
		ID:             id.String(),
		ConversationID: conversationID,
		Name:           documentName(filename),
		MediaType:      ext.MediaType,
		Pages:          ext.Pages,
		Bytes:          ext.Bytes,
		Metadata:       metadata,
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	chunks := retrieval.Chunk(ext, d.ID, retrieval.ChunkOptions{})
	d.Chunks = len(chunks)
	defer w.lock(docLock(conversationID))()
	if err := w.Store.CreateDocument(ctx, d, chunks); err != nil {
		return nil, err
	}
	if err := w.Index.Add(ctx, conversationID, d, chunks); err != nil {
		// On a full disk too: indexing may have failed for that.
		if derr := w.freeing(func() error { return w.Store.DeleteDocument(context.WithoutCancel(ctx), conversationID, d.ID) }); derr != nil {
			w.Logger.Error("remove document after failed indexing", slog.String("document_id", d.ID), slog.String("error", derr.Error()))
		}
		return nil, fmt.Errorf("index document %q: %w", d.Name, err)
	}
	w.Logger.Info("document added", slog.String("conversation_id", conversationID), slog.String("document_id", d.ID),
		slog.String("name", d.Name), slog.Int("pages", d.Pages), slog.Int("chunks", d.Chunks))
	return d, nil
}

// documentName is a document's name from its file name: the last element,
// at most dataset.MaxNameLength characters.
func documentName(filename string) string {
	name := filepath.Base(strings.ReplaceAll(filename, `\`, "/"))
	if r := []rune(name); len(r) > dataset.MaxNameLength {
		name = string(r[:dataset.MaxNameLength-1]) + "…"
	}
	return name
}

// Documents lists the conversation's documents.
func (w *Workspace) Documents(ctx context.Context, conversationID string) ([]*datachat.Document, error) {
	return w.Store.Documents(ctx, conversationID)
}

// DeleteDocument removes a document from the store and the index. It works
// on a full disk.
func (w *Workspace) DeleteDocument(ctx context.Context, conversationID, id string) error {
	defer w.lock(docLock(conversationID))()
	if _, err := w.Store.Document(ctx, conversationID, id); err != nil {
		return err
	}
	return w.freeing(func() error {
		if err := w.Store.DeleteDocument(ctx, conversationID, id); err != nil {
			return err
		}
		if w.Index != nil {
			return w.Index.DeleteDocument(ctx, conversationID, id)
		}
		return nil
	})
}

// HasDocuments reports whether the conversation has any document.
func (w *Workspace) HasDocuments(ctx context.Context, conversationID string) (bool, error) {
	if w.Index == nil {
		return false, nil
	}
	return w.Store.HasDocuments(ctx, conversationID)
}

// Search retrieves the chunks of the conversation's documents most relevant to q.
func (w *Workspace) Search(ctx context.Context, conversationID string, q datachat.SearchQuery) (*datachat.SearchResult, error) {
	if w.Index == nil {
		return &datachat.SearchResult{}, nil
	}
	w.ensureIndexed(ctx, conversationID)
	res, err := w.Index.Query(ctx, retrieval.Query{ConversationID: conversationID, Text: q.Text, TopK: q.TopK, Filters: q.Filters})
	if err != nil {
		return nil, err
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return &datachat.SearchResult{Sources: res.Sources, EmbeddingMS: ms(res.Embedding), RetrievalMS: ms(res.Retrieval)}, nil
}

// docLock names the lock that orders a conversation's document additions
// with the check of [Workspace.ensureIndexed].
func docLock(conversationID string) string { return "documents:" + conversationID }

// ensureIndexed indexes, once per process and conversation, the documents the
// store holds but the index lacks. The store is the record and the index is
// derived from it: a lost or rebuilt index file, or a switch of
// DATACHAT_RETRIEVAL, would otherwise leave listed documents that no search
// finds. A failure is logged and retried on the next search; the search
// itself goes on with what the index has.
func (w *Workspace) ensureIndexed(ctx context.Context, conversationID string) {
	w.mu.Lock()
	done := w.indexed[conversationID]
	w.mu.Unlock()
	if done {
		return
	}
	defer w.lock(docLock(conversationID))()
	w.mu.Lock()
	done = w.indexed[conversationID]
	w.mu.Unlock()
	if done {
		return
	}
	if err := w.reindexMissing(ctx, conversationID); err != nil {
		w.Logger.WarnContext(ctx, "re-indexing documents failed; will retry on the next search",
			slog.String("conversation_id", conversationID), slog.String("error", err.Error()))
		return
	}
	w.mu.Lock()
	if w.indexed == nil {
		w.indexed = map[string]bool{}
	}
	w.indexed[conversationID] = true
	w.mu.Unlock()
}

func (w *Workspace) reindexMissing(ctx context.Context, conversationID string) error {
	docs, err := w.Store.Documents(ctx, conversationID)
	if err != nil || len(docs) == 0 {
		return err
	}
	have, err := w.Index.Documents(ctx, conversationID)
	if err != nil {
		return err
	}
	var missing []*datachat.Document
	for _, d := range docs {
		if !slices.Contains(have, d.ID) {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	all, err := w.Store.Chunks(ctx, conversationID)
	if err != nil {
		return err
	}
	byDoc := map[string][]*datachat.Chunk{}
	for _, c := range all {
		byDoc[c.DocumentID] = append(byDoc[c.DocumentID], c)
	}
	for _, d := range missing {
		start := time.Now()
		if err := w.Index.Add(ctx, conversationID, d, byDoc[d.ID]); err != nil {
			return fmt.Errorf("re-index %q: %w", d.Name, err)
		}
		w.Logger.InfoContext(ctx, "document re-indexed from the store", slog.String("conversation_id", conversationID),
			slog.String("document_id", d.ID), slog.String("name", d.Name), slog.Int("chunks", len(byDoc[d.ID])),
			slog.Duration("took", time.Since(start)))
	}
	return nil
}
