// Package mcpserver exposes a conversation's data to agents as Model Context
// Protocol tools — list_datasets, describe_dataset, load_dataset, execute_sql
// and search_documents — over the same workspace (and so the same SQL sandbox)
// the chat uses. [New] builds a server for one user; `datachat mcp` serves it
// over stdio and the HTTP server at /mcp (streamable HTTP).
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
)

// Workspace is the conversation data the tools work on; *workspace.Workspace
// implements it. Errors are *datachat.Error: EINVALID for a query or URL the
// caller can correct, ENOTFOUND, EBUSY.
type Workspace interface {
	Datasets(ctx context.Context, conversationID string) ([]*datachat.Dataset, error)
	Query(ctx context.Context, conversationID, sql string) (*datachat.QueryResult, error)
	AddURL(ctx context.Context, conversationID, url, name string) ([]*datachat.Dataset, error)
	// Search answers an empty result when documents are not configured.
	Search(ctx context.Context, conversationID string, q datachat.SearchQuery) (*datachat.SearchResult, error)
	// SaveQuery stores the rows run streams as a new dataset named name, from
	// the database source (execute_sql's save_as).
	SaveQuery(ctx context.Context, conversationID, name, source string, run func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error)
}

// Observer is told about tool calls, for metrics. Its methods must not block.
type Observer interface {
	ToolCalled(tool string, ok bool, d time.Duration)
	SQLQueried(ok bool, d time.Duration)
}

// Conversations finds a user's conversation, for its notes, as
// [datachat.Store] does: ENOTFOUND for none, or another user's.
type Conversations interface {
	Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error)
}

// Options configure a server.
type Options struct {
	Workspace Workspace
	Store     Conversations
	// User is whom the tools act for: they reach only this user's
	// conversations.
	User *datachat.User
	// Conversation, if set, is the one conversation every tool acts on, and
	// the tools take no conversation_id argument (stdio). Otherwise each tool
	// takes a required conversation_id (HTTP).
	Conversation string
	Version      string
	Logger       *slog.Logger // tool failures
	SDKLogger    *slog.Logger // the SDK's own messages; default Logger
	Observer     Observer     // may be nil
	// SchemaCache, shared by servers built per request, saves re-resolving
	// the tools' schemas.
	SchemaCache *mcp.SchemaCache
	// Budget, if set, is asked before each tool call runs; an error (the
	// user is over a rate limit) is the call's answer instead.
	Budget func(tool string) error
	// Sources, if set, are the database sources attached to conversations:
	// execute_sql takes a source, and list_datasets lists the databases.
	Sources datachat.DBSourceService
	// SaveAsMaxRows caps the rows execute_sql's save_as saves
	// (DATACHAT_SAVE_AS_MAX_ROWS); 0: 1,000,000.
	SaveAsMaxRows int
}

// sampleRows is how many rows describe_dataset shows.
const sampleRows = datachat.DescribeDatasetRows

// maxNameChars caps a table name given to load_dataset, as the HTTP API does.
const maxNameChars = 255

// New returns an MCP server whose tools act for o.User.
func New(o Options) *mcp.Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sdkLog := o.SDKLogger
	if sdkLog == nil {
		sdkLog = o.Logger
	}
	version := o.Version
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "datachat", Title: "datachat", Version: version}, &mcp.ServerOptions{
		Instructions: "Tools over a datachat conversation's data: datasets (data files: CSV, TSV, Parquet, JSON, XLSX; one SQL table each) and documents. " +
			"Start with list_datasets; execute_sql runs one read-only DuckDB SQL statement over the tables (at most 1000 rows returned).",
		Logger:      sdkLog,
		SchemaCache: o.SchemaCache,
	})
	t := &tools{o: o}
	fixed := o.Conversation != ""
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}

	mcp.AddTool(srv, declare(datachat.ListDatasetsSpec, fixed, readOnly), observed(t, datachat.ToolListDatasets, t.listDatasets))
	mcp.AddTool(srv, declare(datachat.DescribeDatasetSpec, fixed, readOnly), observed(t, datachat.ToolDescribeDataset, t.describeDataset))
	mcp.AddTool(srv, declare(datachat.LoadDatasetSpec, fixed, &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}), observed(t, datachat.ToolLoadDataset, t.loadDataset))
	sqlSpec := datachat.ExecuteSQLSpec
	if o.Sources != nil {
		sqlSpec = datachat.ExecuteSQLSourcesSpec
	}
	mcp.AddTool(srv, declare(sqlSpec, fixed, readOnly), observed(t, datachat.ToolExecuteSQL, t.executeSQL))
	mcp.AddTool(srv, declare(datachat.SearchDocumentsSpec, fixed, readOnly), observed(t, datachat.ToolSearchDocuments, t.searchDocuments))
	mcp.AddTool(srv, declare(datachat.ListTablesSpec, fixed, readOnly), observed(t, datachat.ToolListTables, t.listTables))
	mcp.AddTool(srv, declare(datachat.DescribeTableSpec, fixed, readOnly), observed(t, datachat.ToolDescribeTable, t.describeTable))
	return srv
}

func ptr[T any](v T) *T { return &v }

// declare is spec's tool for MCP: the name, description and arguments the
// chat declares too, plus a required conversation_id unless the conversation
// is fixed.
func declare(spec datachat.ToolSpec, fixed bool, ann *mcp.ToolAnnotations) *mcp.Tool {
	return &mcp.Tool{Name: spec.Name, Description: spec.Description, InputSchema: inputSchema(spec, fixed), Annotations: ann}
}

// schemas holds each tool's input schema, made once: the SDK resolves a
// schema once per pointer, and the HTTP server builds a server per request.
var schemas sync.Map // "fixed parameters" → *jsonschema.Schema

func inputSchema(spec datachat.ToolSpec, fixed bool) *jsonschema.Schema {
	key := fmt.Sprint(fixed, " ", string(spec.Parameters))
	if s, ok := schemas.Load(key); ok {
		return s.(*jsonschema.Schema)
	}
	s := &jsonschema.Schema{}
	if err := json.Unmarshal(spec.Parameters, s); err != nil {
		panic(fmt.Sprintf("%s's arguments: %v", spec.Name, err)) // the root package's own JSON
	}
	if !fixed {
		if s.Properties == nil {
			s.Properties = map[string]*jsonschema.Schema{}
		}
		s.Properties["conversation_id"] = &jsonschema.Schema{Type: "string", Description: "The id of the datachat conversation whose data to use."}
		s.Required = append([]string{"conversation_id"}, s.Required...)
	}
	v, _ := schemas.LoadOrStore(key, s)
	return v.(*jsonschema.Schema)
}

// Tool inputs. ConversationID is empty when the conversation is fixed.
type (
	conversationArgs struct {
		ConversationID string `json:"conversation_id"`
	}
	describeArgs struct {
		ConversationID string `json:"conversation_id"`
		Name           string `json:"name"`
	}
	loadArgs struct {
		ConversationID string `json:"conversation_id"`
		URL            string `json:"url"`
		Name           string `json:"name"`
	}
	sqlArgs struct {
		ConversationID string `json:"conversation_id"`
		Query          string `json:"query"`
		Source         string `json:"source,omitempty"`
		SaveAs         string `json:"save_as,omitempty"`
	}
	searchArgs struct {
		ConversationID string `json:"conversation_id"`
		Query          string `json:"query"`
		TopK           int    `json:"top_k"`
	}
)

// list_tables' and describe_table's inputs and outputs.
type (
	listTablesArgs struct {
		ConversationID string `json:"conversation_id"`
		Source         string `json:"source,omitempty"`
		Pattern        string `json:"pattern,omitempty"`
	}
	// TableList is list_tables' answer: at most maxListed tables, and how
	// many more matched.
	TableList struct {
		Tables []TableEntry `json:"tables"`
		More   int          `json:"more,omitempty"`
	}
	// TableEntry is a table as list_tables names it: its name as its SQL
	// writes it, the database it is in ("" for a dataset), its row count
	// (a database's estimate) and description.
	TableEntry struct {
		Name        string `json:"name"`
		Source      string `json:"source,omitempty"`
		Rows        *int64 `json:"rows,omitempty"`
		Description string `json:"description,omitempty"`
	}
	// TableDescription is describe_table's answer.
	TableDescription struct {
		TableEntry
		Kind        string                `json:"kind,omitempty"` // the database's: postgres or mysql
		Columns     []datachat.Column     `json:"columns"`
		ForeignKeys []datachat.ForeignKey `json:"foreign_keys,omitempty"`
		// How tells how to query it: execute_sql with or without source.
		How string `json:"how"`
	}
)

// maxListed caps the tables one list_tables answer lists.
const maxListed = 500

// Tool outputs.
type (
	// DatasetInfo is a dataset as the tools show it.
	DatasetInfo struct {
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		Source   string            `json:"source"`
		Format   string            `json:"format"`
		RowCount int64             `json:"row_count"`
		Bytes    int64             `json:"bytes"`
		Columns  []datachat.Column `json:"columns"`
		// OtherTables names the other tables the same file gave (a JSON
		// object's arrays of records each become one), for load_dataset.
		OtherTables []string `json:"other_tables,omitempty"`
		// Description is the user's, from the data dictionary; the
		// columns' are on Columns.
		Description string `json:"description,omitempty"`
	}
	DatasetList struct {
		Datasets []DatasetInfo `json:"datasets"`
		// Databases are the database sources attached to the conversation,
		// which execute_sql queries with their name as source.
		Databases []DatabaseInfo `json:"databases,omitempty"`
	}
	// DatabaseInfo is a database source as the tools show it: its SQL
	// dialect and the tables queries may read.
	DatabaseInfo struct {
		Name        string          `json:"name"`
		Kind        string          `json:"kind"`
		Dialect     string          `json:"dialect,omitempty"`
		Tables      []DatabaseTable `json:"tables"`
		Unavailable string          `json:"unavailable,omitempty"`
	}
	DatabaseTable struct {
		Name    string            `json:"name"`
		View    bool              `json:"view,omitempty"`
		Rows    *int64            `json:"rows,omitempty"`
		Columns []datachat.Column `json:"columns"`
	}
	DatasetDescription struct {
		DatasetInfo
		SampleRows [][]any `json:"sample_rows"`
		// Notes are the conversation's business rules, from the data
		// dictionary.
		Notes string `json:"notes,omitempty"`
	}
	SearchResults struct {
		Results []datachat.Source `json:"results"`
	}
)

func info(d *datachat.Dataset) DatasetInfo {
	cols := make([]datachat.Column, len(d.Columns))
	for i, c := range d.Columns {
		cols[i] = datachat.Column{Name: c.Name, Type: c.Type, SQLType: c.SQLType, Description: c.Description}
	}
	return DatasetInfo{ID: d.ID, Name: d.Name, Source: d.Source, Format: d.Format, RowCount: d.RowCount, Bytes: d.Bytes, Columns: cols,
		Description: d.Description}
}

type tools struct{ o Options }

// observed wraps a tool handler: it reports the call to the observer and
// turns errors into messages safe to show, logging internal ones.
func observed[In, Out any](t *tools, name string, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		start := time.Now()
		var (
			res *mcp.CallToolResult
			out Out
			err error
		)
		if t.o.Budget != nil {
			err = t.o.Budget(name)
		}
		if err == nil {
			res, out, err = h(ctx, req, in)
		}
		if t.o.Observer != nil {
			t.o.Observer.ToolCalled(name, err == nil, time.Since(start))
		}
		if err != nil {
			if datachat.ErrorCode(err) == datachat.EINTERNAL && ctx.Err() == nil {
				t.o.Logger.Error("mcp tool failed", slog.String("tool", name), slog.String("error", err.Error()))
			}
			return nil, out, errors.New(datachat.ErrorMessage(err))
		}
		return res, out, nil
	}
}

// conversation returns the conversation a call acts on, checking it is the
// user's.
func (t *tools) conversation(ctx context.Context, id string) (string, error) {
	if t.o.Conversation != "" {
		return t.o.Conversation, nil
	}
	id = strings.TrimSpace(id)
	if id == "" {
		return "", datachat.Errorf(datachat.EINVALID, "conversation_id is required.")
	}
	c, err := t.o.Store.Conversation(ctx, t.o.User.ID, id)
	if err != nil {
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return "", datachat.Errorf(datachat.ENOTFOUND, "Conversation %q not found.", id)
		}
		return "", err
	}
	return c.ID, nil
}

func (t *tools) listDatasets(ctx context.Context, _ *mcp.CallToolRequest, in conversationArgs) (*mcp.CallToolResult, DatasetList, error) {
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, DatasetList{}, err
	}
	ds, err := t.o.Workspace.Datasets(ctx, conv)
	if err != nil {
		return nil, DatasetList{}, err
	}
	out := DatasetList{Datasets: make([]DatasetInfo, len(ds))}
	for i, d := range ds {
		out.Datasets[i] = info(d)
	}
	if t.o.Sources != nil && t.o.User != nil {
		srcs, err := t.o.Sources.Describe(ctx, t.o.User, conv)
		if err != nil {
			return nil, DatasetList{}, err
		}
		for _, s := range srcs {
			db := DatabaseInfo{Name: s.Name, Kind: s.Kind, Dialect: s.Dialect, Unavailable: s.Unavailable, Tables: []DatabaseTable{}}
			for _, tb := range s.Tables {
				db.Tables = append(db.Tables, DatabaseTable{Name: tb.Name, View: tb.View, Rows: tb.Rows, Columns: tb.Columns})
			}
			out.Databases = append(out.Databases, db)
		}
	}
	return nil, out, nil
}

func (t *tools) describeDataset(ctx context.Context, _ *mcp.CallToolRequest, in describeArgs) (*mcp.CallToolResult, DatasetDescription, error) {
	var out DatasetDescription
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, out, err
	}
	ds, err := t.o.Workspace.Datasets(ctx, conv)
	if err != nil {
		return nil, out, err
	}
	want := strings.TrimSpace(in.Name)
	var d *datachat.Dataset
	names := make([]string, len(ds))
	for i, x := range ds {
		names[i] = x.Name
		if strings.EqualFold(x.Name, want) || x.ID == want {
			d = x
		}
	}
	if d == nil {
		if len(ds) == 0 {
			return nil, out, datachat.Errorf(datachat.ENOTFOUND, "No dataset named %q: the conversation has no datasets; add one with load_dataset.", want)
		}
		return nil, out, datachat.Errorf(datachat.ENOTFOUND, "No dataset named %q; the tables are: %s.", want, strings.Join(names, ", "))
	}
	out.DatasetInfo = info(d)
	sample, err := t.query(ctx, conv, fmt.Sprintf(`SELECT * FROM %s LIMIT %d`, datachat.QuoteIdent(d.Name), sampleRows))
	if err != nil {
		return nil, out, err
	}
	out.SampleRows = sample.Rows
	if out.SampleRows == nil {
		out.SampleRows = [][]any{}
	}
	if out.Notes, err = t.notes(ctx, conv); err != nil {
		return nil, out, err
	}
	return nil, out, nil
}

func (t *tools) loadDataset(ctx context.Context, _ *mcp.CallToolRequest, in loadArgs) (*mcp.CallToolResult, DatasetInfo, error) {
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, DatasetInfo{}, err
	}
	url := strings.TrimSpace(in.URL)
	if url == "" {
		return nil, DatasetInfo{}, datachat.Errorf(datachat.EINVALID, "url is required: the http(s) URL of a data file (CSV, TSV, Parquet, JSON or XLSX).")
	}
	if n := utf8.RuneCountInString(in.Name); n > maxNameChars {
		return nil, DatasetInfo{}, datachat.Errorf(datachat.EINVALID, "name is %d characters long; at most %d are accepted. Use a shorter one.", n, maxNameChars)
	}
	ds, err := t.o.Workspace.AddURL(ctx, conv, url, strings.TrimSpace(in.Name))
	if err != nil {
		return nil, DatasetInfo{}, err
	}
	out := info(ds[0])
	for _, d := range ds[1:] {
		out.OtherTables = append(out.OtherTables, d.Name)
	}
	return nil, out, nil
}

func (t *tools) executeSQL(ctx context.Context, _ *mcp.CallToolRequest, in sqlArgs) (*mcp.CallToolResult, *datachat.QueryResult, error) {
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(in.Query) == "" {
		return nil, nil, datachat.Errorf(datachat.EINVALID, "query is required: one DuckDB SQL statement.")
	}
	var r *datachat.QueryResult
	source := strings.ToLower(strings.TrimSpace(in.Source))
	if saveAs := strings.TrimSpace(in.SaveAs); saveAs != "" {
		if source == "" {
			return nil, nil, datachat.Errorf(datachat.EINVALID, "save_as saves the result of a query on a database: give source too.")
		}
		return t.saveAs(ctx, conv, source, saveAs, in.Query)
	}
	if source != "" {
		r, err = t.querySource(ctx, conv, source, in.Query)
	} else {
		r, err = t.query(ctx, conv, in.Query)
	}
	if err != nil {
		return nil, nil, err
	}
	if r.Rows == nil {
		r.Rows = [][]any{}
	}
	return nil, r, nil
}

// saveAs runs SQL on a database source and saves its result as a new
// table of the conversation (execute_sql's save_as); the result is one row
// saying what was saved.
func (t *tools) saveAs(ctx context.Context, conv, source, name, sql string) (*mcp.CallToolResult, *datachat.QueryResult, error) {
	if t.o.Sources == nil || t.o.User == nil {
		return nil, nil, datachat.Errorf(datachat.EINVALID, "No database sources on this server: save_as needs one.")
	}
	limit := t.o.SaveAsMaxRows
	if limit <= 0 {
		limit = 1_000_000
	}
	start := time.Now()
	ctx = datachat.WithUserID(ctx, t.o.User.ID)
	ds, res, err := t.o.Workspace.SaveQuery(ctx, conv, name, source, func(ctx context.Context, sink datachat.RowSink) (datachat.StreamResult, error) {
		return t.o.Sources.Stream(ctx, t.o.User, conv, source, sql, limit, sink)
	})
	if t.o.Observer != nil {
		t.o.Observer.SQLQueried(err == nil, time.Since(start))
	}
	if err != nil {
		return nil, nil, err
	}
	r := &datachat.QueryResult{
		Columns: []datachat.Column{
			{Name: "table", Type: datachat.TypeText, SQLType: "VARCHAR"},
			{Name: "rows", Type: datachat.TypeInteger, SQLType: "BIGINT"},
			{Name: "source", Type: datachat.TypeText, SQLType: "VARCHAR"},
		},
		Rows:     [][]any{{ds.Name, ds.RowCount, ds.Source}},
		RowCount: 1, Truncated: res.Truncated, ElapsedMS: float64(time.Since(start).Microseconds()) / 1000,
	}
	return nil, r, nil
}

// querySource runs SQL on a database source attached to the conversation,
// reporting its duration.
func (t *tools) querySource(ctx context.Context, conv, source, sql string) (*datachat.QueryResult, error) {
	if t.o.Sources == nil || t.o.User == nil {
		return nil, datachat.Errorf(datachat.EINVALID, "No database sources on this server: omit source to query the datasets.")
	}
	start := time.Now()
	ctx = datachat.WithUserID(ctx, t.o.User.ID)
	r, err := t.o.Sources.Query(ctx, t.o.User, conv, source, sql)
	if t.o.Observer != nil {
		t.o.Observer.SQLQueried(err == nil, time.Since(start))
	}
	return r, err
}

// query runs SQL through the workspace, reporting its duration.
func (t *tools) query(ctx context.Context, conv, sql string) (*datachat.QueryResult, error) {
	start := time.Now()
	if t.o.User != nil {
		ctx = datachat.WithUserID(ctx, t.o.User.ID)
	}
	r, err := t.o.Workspace.Query(ctx, conv, sql)
	if t.o.Observer != nil {
		t.o.Observer.SQLQueried(err == nil, time.Since(start))
	}
	return r, err
}

func (t *tools) searchDocuments(ctx context.Context, _ *mcp.CallToolRequest, in searchArgs) (*mcp.CallToolResult, SearchResults, error) {
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, SearchResults{}, err
	}
	if strings.TrimSpace(in.Query) == "" {
		return nil, SearchResults{}, datachat.Errorf(datachat.EINVALID, "query is required.")
	}
	res, err := t.o.Workspace.Search(ctx, conv, datachat.SearchQuery{Text: in.Query, TopK: datachat.ToolTopK(in.TopK)})
	if err != nil {
		return nil, SearchResults{}, err
	}
	out := SearchResults{Results: res.Sources}
	if out.Results == nil {
		out.Results = []datachat.Source{}
	}
	return nil, out, nil
}

// notes returns the conversation's notes (its business rules); none
// without a Store (a fixed conversation needs none for the other tools).
func (t *tools) notes(ctx context.Context, conversationID string) (string, error) {
	if t.o.Store == nil {
		return "", nil
	}
	c, err := t.o.Store.Conversation(ctx, t.o.User.ID, conversationID)
	if err != nil {
		return "", err
	}
	return c.Notes, nil
}

// catalog is the conversation's tables: its datasets and its databases'.
func (t *tools) catalog(ctx context.Context, conv string) ([]datachat.CatalogTable, error) {
	ds, err := t.o.Workspace.Datasets(ctx, conv)
	if err != nil {
		return nil, err
	}
	var srcs []datachat.DBSourceInfo
	if t.o.Sources != nil && t.o.User != nil {
		if srcs, err = t.o.Sources.Describe(ctx, t.o.User, conv); err != nil {
			return nil, err
		}
	}
	return datachat.Catalog(ds, srcs), nil
}

func entry(c datachat.CatalogTable) TableEntry {
	return TableEntry{Name: c.Name(), Source: c.Source, Rows: c.Rows(), Description: c.Description()}
}

func (t *tools) listTables(ctx context.Context, _ *mcp.CallToolRequest, in listTablesArgs) (*mcp.CallToolResult, TableList, error) {
	out := TableList{Tables: []TableEntry{}}
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, out, err
	}
	cat, err := t.catalog(ctx, conv)
	if err != nil {
		return nil, out, err
	}
	found, err := datachat.MatchTables(cat, in.Source, in.Pattern)
	if err != nil {
		return nil, out, err
	}
	for i, c := range found {
		if i == maxListed {
			out.More = len(found) - i
			break
		}
		out.Tables = append(out.Tables, entry(c))
	}
	return nil, out, nil
}

func (t *tools) describeTable(ctx context.Context, _ *mcp.CallToolRequest, in describeArgs) (*mcp.CallToolResult, TableDescription, error) {
	var out TableDescription
	conv, err := t.conversation(ctx, in.ConversationID)
	if err != nil {
		return nil, out, err
	}
	if strings.TrimSpace(in.Name) == "" {
		return nil, out, datachat.Errorf(datachat.EINVALID, "name is required: a table's name as list_tables gives it.")
	}
	cat, err := t.catalog(ctx, conv)
	if err != nil {
		return nil, out, err
	}
	c, err := datachat.FindTable(cat, in.Name)
	if err != nil {
		return nil, out, err
	}
	out = TableDescription{TableEntry: entry(*c), Kind: c.Kind, Columns: c.Columns()}
	if out.Columns == nil {
		out.Columns = []datachat.Column{}
	}
	if c.Table != nil {
		out.ForeignKeys = c.Table.ForeignKeys
		out.How = fmt.Sprintf("execute_sql with source %q, in that database's SQL, naming the table %s", c.Source, c.Table.Name)
	} else {
		out.How = "execute_sql without source (DuckDB SQL)"
	}
	return nil, out, nil
}
