package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"datachat"
)

// Tool names.
const (
	ToolExecuteSQL          = "execute_sql"
	ToolLoadDataset         = "load_dataset"
	ToolSearchDocuments     = "search_documents"
	ToolRequestConfirmation = "request_confirmation"
)

var (
	specExecuteSQL = datachat.ToolSpec{
		Name:        ToolExecuteSQL,
		Description: "Run one read-only DuckDB SQL query over the conversation's datasets and return the result rows (at most 1000).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"One DuckDB SQL statement, using the table names as given."}},"required":["query"]}`),
	}
	specLoadDataset = datachat.ToolSpec{
		Name:        ToolLoadDataset,
		Description: "Load a Parquet or CSV file from an http(s) URL into the conversation as a new table, and return its table name and columns.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"The http(s) URL of a Parquet or CSV file."}},"required":["url"]}`),
	}
	specSearchDocuments = datachat.ToolSpec{
		Name:        ToolSearchDocuments,
		Description: "Search the conversation's documents and return the most relevant excerpts with their document and page.",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"top_k":{"type":"integer","description":"How many excerpts, 1 to %d (default %d)."}},"required":["query"]}`,
			datachat.MaxToolTopK, datachat.DefaultTopK)),
	}
	specRequestConfirmation = datachat.ToolSpec{
		Name:        ToolRequestConfirmation,
		Description: "Ask the user to confirm an action before it runs, when their intent or the action's parameters are ambiguous. The action runs only if they approve.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["execute_sql","load_dataset"],"description":"The tool to run once approved."},"parameters":{"type":"object","description":"The tool's arguments, e.g. {\"query\": \"SELECT …\"}."},"explanation":{"type":"string","description":"What you assumed and what you are asking the user to confirm."}},"required":["action","parameters","explanation"]}`),
	}
)

// tools returns the declarations of a turn's tools.
func tools(noSQL, hasDocuments bool) []datachat.ToolSpec {
	var ts []datachat.ToolSpec
	if !noSQL {
		ts = append(ts, specExecuteSQL)
	}
	ts = append(ts, specLoadDataset)
	if hasDocuments {
		ts = append(ts, specSearchDocuments)
	}
	return append(ts, specRequestConfirmation)
}

// maxResultRowsForModel caps how many rows of a result the model reads back.
const maxResultRowsForModel = 200

// ResultText renders a query result compactly for the model: a header of
// column names, one line per row with | between values, and a note when rows
// were left out.
func ResultText(r *datachat.QueryResult) string {
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

// datasetText describes a loaded dataset for the model.
func datasetText(ds []*datachat.Dataset) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Name
	}
	what := "table " + names[0]
	if len(ds) > 1 {
		what = "tables " + strings.Join(names, ", ")
	}
	text := fmt.Sprintf("Loaded %s as %s.\n%s", ds[0].Source, what, strings.TrimSpace(schemaText(ds)))
	for _, d := range ds {
		for _, n := range d.Notes {
			text += fmt.Sprintf("\nNote on %s: %s", d.Name, n)
		}
	}
	return text
}

// sourcesText renders search results for the model, numbered from first.
func sourcesText(sources []datachat.Source, first int) string {
	if len(sources) == 0 {
		return "No matching excerpts."
	}
	var b strings.Builder
	for i, s := range sources {
		fmt.Fprintf(&b, "[%d] %s\n%s\n\n", first+i, citation(s), strings.TrimSpace(s.Text))
	}
	return strings.TrimSpace(b.String())
}

// ToolTopK is how many excerpts a search_documents call gets for the top_k it
// asked for: datachat.DefaultTopK when it did not ask, at most
// datachat.MaxToolTopK.
func ToolTopK(k int) int {
	if k <= 0 {
		return datachat.DefaultTopK
	}
	return min(k, datachat.MaxToolTopK)
}
