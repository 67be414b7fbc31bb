package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"datachat"
)

var (
	specExecuteSQL = datachat.ToolSpec{
		Name:        datachat.ToolExecuteSQL,
		Description: "Run one read-only DuckDB SQL query over the conversation's datasets and return the result rows (at most 1000).",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"One DuckDB SQL statement, using the table names as given."}},"required":["query"]}`),
	}
	specLoadDataset = datachat.ToolSpec{
		Name:        datachat.ToolLoadDataset,
		Description: "Load a Parquet or CSV file from an http(s) URL into the conversation as a new table, and return its table name and columns.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"The http(s) URL of a Parquet or CSV file."}},"required":["url"]}`),
	}
	specSearchDocuments = datachat.ToolSpec{
		Name:        datachat.ToolSearchDocuments,
		Description: "Search the conversation's documents and return the most relevant excerpts with their document and page.",
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"top_k":{"type":"integer","description":"How many excerpts, 1 to %d (default %d)."}},"required":["query"]}`,
			datachat.MaxToolTopK, datachat.DefaultTopK)),
	}
	specRequestConfirmation = datachat.ToolSpec{
		Name:        datachat.ToolRequestConfirmation,
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
		fmt.Fprintf(&b, "[%d] %s\n%s\n\n", first+i, s.Citation(), strings.TrimSpace(s.Text))
	}
	return strings.TrimSpace(b.String())
}
