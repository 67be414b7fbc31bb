// Package tools runs the data tools — execute_sql, load_dataset,
// search_documents, list_datasets, describe_dataset, list_tables and
// describe_table — for both the chat turn (internal/chat) and MCP
// (internal/mcpserver): per tool one place ([Catalog.Run]) that parses its
// arguments ([Parse]), finds the conversation, charges the user's budget,
// picks the dataset engine or a database source, checks that the source is
// attached, runs it, observes it for metrics and renders the result text the
// model reads. Their declarations (names, descriptions, argument schemas)
// are the root package's, chosen for a call by [Catalog.Spec].
//
// It imports only the root package: the chat turn builds on it without
// building on an implementation.
package tools

import (
	"context"
	"encoding/json"
	"time"

	"datachat"
)

// Workspace is a conversation's datasets and documents, as the tools use
// them; *workspace.Workspace implements it. Errors are *datachat.Error:
// EINVALID for a query or URL the caller can correct (its message says what
// is wrong), ENOTFOUND, EBUSY.
type Workspace interface {
	Datasets(ctx context.Context, conversationID string) ([]*datachat.Dataset, error)
	Query(ctx context.Context, conversationID, sql string) (*datachat.QueryResult, error)
	// LoadURL loads the file at url as the conversation's new tables,
	// named from name ("": from the file name).
	LoadURL(ctx context.Context, conversationID, url, name string) ([]*datachat.Dataset, error)
	// Search answers an empty result when documents are not configured.
	Search(ctx context.Context, conversationID string, q datachat.SearchQuery) (*datachat.SearchResult, error)
	// SaveQuery stores the rows run streams as a new dataset named name, from
	// the database source (execute_sql's save_as). EINVALID for a name a
	// dataset has; run's errors as they are.
	SaveQuery(ctx context.Context, conversationID, name, source string, run func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error)
}

// Conversations finds a user's conversation, for its notes (its business
// rules), as [datachat.Store] does: ENOTFOUND for none, or another user's.
type Conversations interface {
	Conversation(ctx context.Context, userID, id string) (*datachat.Conversation, error)
}

// Observer is told about each tool call [Catalog.Run] answers and how long
// each SQL query took, for metrics: one observer per caller (the chat, MCP).
// Its methods must not block.
type Observer interface {
	ToolCalled(tool string, ok bool, d time.Duration)
	SQLQueried(ok bool, d time.Duration)
}

// Budgets charges a user's per-user allowances (the server's
// DATACHAT_SQL_RPM and the others). Charge spends one call of b
// ([BudgetOf]) or returns an ERATELIMIT error saying the limit and when to
// try again, which is the call's answer instead.
type Budgets interface {
	Charge(userID string, b Budget) error
}

// DefaultSaveAsMaxRows is the rows save_as saves when
// [Catalog.SaveAsMaxRows] is not set (DATACHAT_SAVE_AS_MAX_ROWS).
const DefaultSaveAsMaxRows = 1_000_000

// Catalog runs the data tools over a workspace and the database sources.
// Its fields are set once, before the first call.
type Catalog struct {
	Workspace Workspace
	// Sources are the database sources attached to conversations; nil:
	// none, and execute_sql refuses a source.
	Sources datachat.DBSourceService
	// Conversations gives describe_dataset the conversation's notes; nil:
	// none.
	Conversations Conversations
	Observer      Observer // may be nil
	// Budgets are charged for each call a user makes; nil: none.
	Budgets Budgets
	// Estimator estimates the rows of a query on the datasets
	// ([Catalog.EstimateRows]); nil: none.
	Estimator RowEstimator
	// SaveAsMaxRows caps the rows save_as saves; 0: DefaultSaveAsMaxRows.
	SaveAsMaxRows int
	// SchemaText renders tables' columns for the model, as the chat's
	// prompt does, in the text of load_dataset and save_as; nil: the text
	// names the tables only.
	SchemaText func([]*datachat.Dataset) string
	// TableText renders one table's columns, types, descriptions, samples,
	// row count and joins for the model, as the chat's prompt does, in
	// describe_table's text; nil: its name only.
	TableText func(datachat.CatalogTable) string
}

// Call is what one tool call acts on.
type Call struct {
	// User is whom the call acts for: the database sources are queried as
	// theirs, and their budgets charged. nil: no database source can be.
	User *datachat.User
	// Conversation is the conversation the call acts on; "": the one its
	// arguments' conversation_id names, which must be User's (MCP over
	// HTTP).
	Conversation string
	// Attached are the names of the conversation's database sources, when
	// the caller has read them (a chat turn has): a source not among them
	// is refused with the names it could give. nil: the sources decide.
	Attached []string
	// Filters are search_documents' metadata filters (a chat request's).
	Filters map[string]any
	// Tables are the conversation's tables as the caller sees them (a chat
	// turn: the databases it read for its prompt, without the dictionary
	// when it leaves it out), for list_tables and describe_table; nil: the
	// catalog reads them ([Catalog.Tables]).
	Tables []datachat.CatalogTable
	// FirstExcerpt numbers the excerpts search_documents' text cites
	// (the chat numbers them across its turn); 0: from 1.
	FirstExcerpt int
}

// Result is what a call gave: Text for the model, and the values each tool
// returns, for callers that show them in their own shape (MCP).
type Result struct {
	// Text is what the model reads: set by execute_sql, load_dataset,
	// search_documents, list_tables and describe_table.
	Text string
	// Rows are execute_sql's result rows (none for save_as) and
	// describe_dataset's first rows.
	Rows *datachat.QueryResult
	// Datasets are the tables load_dataset and save_as added (the first is
	// the one named), list_datasets' datasets and describe_dataset's one.
	Datasets []*datachat.Dataset
	// Saved is how save_as's query ended, and Elapsed how long it took.
	Saved   datachat.StreamResult
	Elapsed time.Duration
	// Databases are list_datasets' database sources.
	Databases []datachat.DBSourceInfo
	// Notes are describe_dataset's conversation's business rules.
	Notes string
	// Excerpts are search_documents' excerpts, best first.
	Excerpts []datachat.Source
	// Tables are list_tables' matches (at most MaxListed; More is how many
	// more matched) and describe_table's one table.
	Tables []datachat.CatalogTable
	More   int
}

// MaxListed caps the tables one list_tables answer holds.
const MaxListed = 500

// Run runs tool with the arguments args (a JSON object) for c: it parses
// them, finds the conversation, charges the user's budget for the tool,
// runs it and tells the Observer. Errors are *datachat.Error with a message
// the model can act on (EINVALID for arguments and queries it can correct,
// ENOTFOUND, ERATELIMIT from the budgets), or the workspace's and the
// sources' own.
func (cat *Catalog) Run(ctx context.Context, c Call, tool string, args json.RawMessage) (*Result, error) {
	start := time.Now()
	res, err := cat.charged(ctx, c, tool, args)
	if cat.Observer != nil {
		cat.Observer.ToolCalled(tool, err == nil, time.Since(start))
	}
	return res, err
}

func (cat *Catalog) charged(ctx context.Context, c Call, tool string, args json.RawMessage) (*Result, error) {
	a, perr := Parse(tool, args)
	if c.Conversation == "" {
		var err error
		if c.Conversation, err = cat.conversation(ctx, c.User, a.ConversationID); err != nil {
			return nil, err
		}
	}
	if perr != nil {
		return nil, perr
	}
	if cat.Budgets != nil && c.User != nil {
		if err := cat.Budgets.Charge(c.User.ID, BudgetOf(tool)); err != nil {
			return nil, err
		}
	}
	if c.User != nil {
		ctx = datachat.WithUserID(ctx, c.User.ID)
	}
	return cat.run(ctx, c, a)
}

// conversation is the conversation id names, checking it is u's.
func (cat *Catalog) conversation(ctx context.Context, u *datachat.User, id string) (string, error) {
	if id == "" {
		return "", datachat.Errorf(datachat.EINVALID, "conversation_id is required.")
	}
	// The id is the caller's, of any length: it is named clipped.
	notFound := datachat.Errorf(datachat.ENOTFOUND, "Conversation %q not found.", clipRunes(id, 64))
	if cat.Conversations == nil || u == nil {
		return "", notFound
	}
	conv, err := cat.Conversations.Conversation(ctx, u.ID, id)
	if err != nil {
		if datachat.ErrorCode(err) == datachat.ENOTFOUND {
			return "", notFound
		}
		return "", err
	}
	return conv.ID, nil
}

// run runs the tool a names.
func (cat *Catalog) run(ctx context.Context, c Call, a Args) (*Result, error) {
	switch a.Tool {
	case datachat.ToolExecuteSQL:
		if a.SaveAs != "" {
			return cat.saveAs(ctx, c, a)
		}
		return cat.executeSQL(ctx, c, a)
	case datachat.ToolLoadDataset:
		return cat.loadDataset(ctx, c, a)
	case datachat.ToolSearchDocuments:
		return cat.searchDocuments(ctx, c, a)
	case datachat.ToolListDatasets:
		return cat.listDatasets(ctx, c)
	case datachat.ToolDescribeDataset:
		return cat.describeDataset(ctx, c, a)
	case datachat.ToolListTables:
		return cat.listTables(ctx, c, a)
	case datachat.ToolDescribeTable:
		return cat.describeTable(ctx, c, a)
	}
	return nil, datachat.Errorf(datachat.EINVALID, "unknown tool %q.", a.Tool)
}

// Budget is the per-user allowance a tool's call spends.
type Budget int

const (
	NoBudget     Budget = iota
	SQLBudget           // execute_sql
	SearchBudget        // search_documents
	UploadBudget        // load_dataset
)

// BudgetOf is the budget a call of tool spends.
func BudgetOf(tool string) Budget {
	switch tool {
	case datachat.ToolExecuteSQL:
		return SQLBudget
	case datachat.ToolSearchDocuments:
		return SearchBudget
	case datachat.ToolLoadDataset:
		return UploadBudget
	}
	return NoBudget
}
