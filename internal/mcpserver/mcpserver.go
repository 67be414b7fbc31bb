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
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"datachat"
	"datachat/internal/tools"
)

// Observer is told about tool calls, for metrics (tools.Observer). Its
// methods must not block.
type Observer = tools.Observer

// Options configure a server.
type Options struct {
	// Workspace is the conversation data the tools work on
	// (*workspace.Workspace).
	Workspace tools.Workspace
	// Store finds the conversation a call names, and its notes.
	Store tools.Conversations
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
	// Budgets, if set, are charged for each tool call (tools.Catalog.Run);
	// an error (the user is over a rate limit) is the call's answer instead.
	Budgets tools.Budgets
	// Sources, if set, are the database sources attached to conversations:
	// execute_sql takes a source, and list_datasets lists the databases.
	Sources datachat.DBSourceService
	// SaveAsMaxRows caps the rows execute_sql's save_as saves
	// (DATACHAT_SAVE_AS_MAX_ROWS); 0: 1,000,000.
	SaveAsMaxRows int
}

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
	t := &server{o: o, cat: &tools.Catalog{
		Workspace:     o.Workspace,
		Sources:       o.Sources,
		Conversations: o.Store,
		Observer:      o.Observer,
		Budgets:       o.Budgets,
		SaveAsMaxRows: o.SaveAsMaxRows,
	}}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	add(srv, t, datachat.ToolListDatasets, readOnly, datasetList)
	add(srv, t, datachat.ToolDescribeDataset, readOnly, datasetDescription)
	add(srv, t, datachat.ToolLoadDataset, &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}, loaded)
	add(srv, t, datachat.ToolExecuteSQL, readOnly, queryResult)
	add(srv, t, datachat.ToolSearchDocuments, readOnly, searchResults)
	add(srv, t, datachat.ToolListTables, readOnly, tableList)
	add(srv, t, datachat.ToolDescribeTable, readOnly, tableDescription)
	return srv
}

// add registers the catalog's tool with MCP, declared as the catalog
// declares it (the attached sources are not known: each call names its
// own), its result given the shape shape makes of it.
func add[Out any](srv *mcp.Server, t *server, tool string, ann *mcp.ToolAnnotations, shape func(*tools.Result) Out) {
	spec, ok := t.cat.Spec(tool, nil)
	if !ok {
		panic("mcpserver: the catalog has no tool " + tool)
	}
	mcp.AddTool(srv, declare(spec, t.o.Conversation != "", ann), handle(t, tool, shape))
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

// server holds a server's tools: the catalog's, run for o.User.
type server struct {
	o   Options
	cat *tools.Catalog
}

// handle is the MCP handler of one of the catalog's tools: it runs the tool
// (tools.Catalog.Run, which charges the budget and tells the observer) on
// the server's conversation, or the one the call names, and shapes its
// result as MCP returns it. It turns errors into messages safe to show,
// logging internal ones.
func handle[Out any](t *server, tool string, shape func(*tools.Result) Out) mcp.ToolHandlerFor[json.RawMessage, Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in json.RawMessage) (*mcp.CallToolResult, Out, error) {
		var out Out
		res, err := t.cat.Run(ctx, tools.Call{User: t.o.User, Conversation: t.o.Conversation}, tool, in)
		if err != nil {
			if datachat.ErrorCode(err) == datachat.EINTERNAL && ctx.Err() == nil {
				t.o.Logger.Error("mcp tool failed", slog.String("tool", tool), slog.String("error", err.Error()))
			}
			return nil, out, errors.New(datachat.ErrorMessage(err))
		}
		return nil, shape(res), nil
	}
}
