package datachat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Tool names: the tools a chat turn gives the model and MCP's tools/list
// carries, as a [ToolCall] stores them. The SQL console keeps a user's own
// query as an execute_sql call too.
const (
	ToolExecuteSQL          = "execute_sql"
	ToolLoadDataset         = "load_dataset"
	ToolSearchDocuments     = "search_documents"
	ToolRequestConfirmation = "request_confirmation" // the chat's only
	ToolListTables          = "list_tables"
	ToolDescribeTable       = "describe_table"
	ToolListDatasets        = "list_datasets"
	ToolDescribeDataset     = "describe_dataset"
)

// DescribeDatasetRows is how many of a dataset's first rows describe_dataset
// shows.
const DescribeDatasetRows = 5

// The data tools' declarations: for each tool the one name, description
// and JSON Schema of its arguments that both the chat gives the model
// (internal/chat) and MCP's tools/list carries (internal/mcpserver). MCP adds
// a required conversation_id over HTTP, where one server serves every
// conversation; the chat narrows execute_sql's source to the names of the
// databases attached to the conversation. Treat them as constants.
var (
	// ExecuteSQLSpec is execute_sql's when no database source is attached.
	ExecuteSQLSpec = ToolSpec{
		Name:        ToolExecuteSQL,
		Description: "Run one read-only DuckDB SQL query over the conversation's datasets, in a sandbox, and return the result rows (at most 1000 come back: aggregate in SQL).",
		Parameters: toolArgs(map[string]any{
			"query": stringArg("One DuckDB SQL statement, naming the tables as given."),
		}, "query"),
	}
	// ExecuteSQLSourcesSpec is execute_sql's when database sources are
	// attached: it takes the source, and save_as.
	ExecuteSQLSourcesSpec = ToolSpec{
		Name:        ToolExecuteSQL,
		Description: "Run one read-only SQL query and return the result rows (at most 1000): over the conversation's datasets with DuckDB, or, with source, in that attached database. With source and save_as, the result is saved into the conversation as a new table instead, to be joined with the datasets by a later query without source.",
		Parameters: toolArgs(map[string]any{
			"query":   stringArg("One SQL statement: DuckDB SQL over the datasets, or, with source, the database's own SQL over its tables, naming the tables as given."),
			"source":  stringArg("The name of the attached database to run the query in. Omit it to query the conversation's datasets with DuckDB."),
			"save_as": stringArg("With source only: the name of a new table to save the query's whole result in (up to DATACHAT_SAVE_AS_MAX_ROWS rows, not just 1000), in this conversation beside its datasets, so that a later execute_sql without source can join it with them. It must not be the name of an existing table."),
		}, "query"),
	}
	LoadDatasetSpec = ToolSpec{
		Name:        ToolLoadDataset,
		Description: "Download a data file from an http(s) URL into the conversation as a new table, and return its table name and columns. It reads CSV and TSV, Parquet, JSON and NDJSON, and Excel workbooks (XLSX), gzip-, zstd- or bzip2-compressed or not; a workbook's sheets, or a JSON object's arrays of records, may give more than one table.",
		Parameters: toolArgs(map[string]any{
			"url":  stringArg("The http(s) URL of the file."),
			"name": stringArg("Optional table name (default: from the file name)."),
		}, "url"),
	}
	SearchDocumentsSpec = ToolSpec{
		Name:        ToolSearchDocuments,
		Description: "Search the conversation's documents and return the most relevant excerpts with their document and page (none when nothing matches).",
		Parameters: toolArgs(map[string]any{
			"query": stringArg("What to look for."),
			"top_k": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxToolTopK,
				"description": fmt.Sprintf("How many excerpts, 1 to %d (default %d).", MaxToolTopK, DefaultTopK)},
		}, "query"),
	}
	ListTablesSpec = ToolSpec{
		Name:        ToolListTables,
		Description: "List the conversation's tables — its datasets and the tables of its databases — by name, with row counts and descriptions; use it to find the tables a question needs when the prompt does not describe them all.",
		Parameters: toolArgs(map[string]any{
			"source":  stringArg("Only the tables of this attached database (or \"datasets\" for the conversation's files); omit it for all."),
			"pattern": stringArg("Only the tables whose name matches: * and ? wildcards (\"*invoice*\", \"sales.*\"), or a part of the name; omit it for all."),
		}),
	}
	DescribeTableSpec = ToolSpec{
		Name:        ToolDescribeTable,
		Description: "Describe one table: its columns with their types, descriptions and sample values, its row count, its joins to other tables (foreign keys), and how to query it.",
		Parameters: toolArgs(map[string]any{
			"name": stringArg("The table's name as list_tables or the prompt gives it: a dataset's name, SCHEMA.TABLE, or SOURCE.SCHEMA.TABLE when two databases have it."),
		}, "name"),
	}
	ListDatasetsSpec = ToolSpec{
		Name:        ToolListDatasets,
		Description: "List the conversation's datasets: table name, source, row count and columns (name, type, DuckDB type).",
		Parameters:  toolArgs(map[string]any{}),
	}
	DescribeDatasetSpec = ToolSpec{
		Name:        ToolDescribeDataset,
		Description: fmt.Sprintf("Describe one dataset: its description and its columns with types and descriptions (the user's data dictionary), its first %d rows, and the conversation's business rules (notes).", DescribeDatasetRows),
		Parameters: toolArgs(map[string]any{
			"name": stringArg("The dataset's table name (or its id)."),
		}, "name"),
	}
)

// toolArgs is the JSON Schema of a tool's arguments: an object of props.
func toolArgs(props map[string]any, required ...string) json.RawMessage {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

func stringArg(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

// ToolTopK is how many excerpts a search_documents call gets for the top_k it
// asked for: DefaultTopK when it did not ask, at most MaxToolTopK.
func ToolTopK(k int) int {
	if k <= 0 {
		return DefaultTopK
	}
	return min(k, MaxToolTopK)
}

// maxResultRowsForModel caps how many rows of a result the model reads back.
const maxResultRowsForModel = 200

// ResultText renders a query result compactly for the model: a header of
// column names, one line per row with | between values, and a note when rows
// were left out. It is the Result an execute_sql [ToolCall] keeps.
func ResultText(r *QueryResult) string {
	var b strings.Builder
	names := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		names[i] = c.Name
	}
	b.WriteString(strings.Join(names, " | "))
	b.WriteByte('\n')
	shown := min(len(r.Rows), maxResultRowsForModel)
	for _, row := range r.Rows[:shown] {
		for i, v := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(cellText(v))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "(%d row%s", r.RowCount, plural(r.RowCount))
	if r.Truncated {
		fmt.Fprintf(&b, "; more rows exist: the result was cut at %d", r.RowCount)
	}
	if shown < len(r.Rows) {
		fmt.Fprintf(&b, "; only the first %d are shown here: aggregate in SQL instead of reading rows", shown)
	}
	b.WriteString(")")
	return b.String()
}

func cellText(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
