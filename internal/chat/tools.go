package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"datachat"
)

// specRequestConfirmation is the chat's own tool; the data tools'
// declarations are the root package's, which MCP declares too.
var specRequestConfirmation = datachat.ToolSpec{
	Name:        datachat.ToolRequestConfirmation,
	Description: "Ask the user to confirm an action before it runs, when their intent or the action's parameters are ambiguous. The action runs only if they approve.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["execute_sql","load_dataset"],"description":"The tool to run once approved."},"parameters":{"type":"object","description":"The tool's arguments, e.g. {\"query\": \"SELECT …\"}."},"explanation":{"type":"string","description":"What you assumed and what you are asking the user to confirm."}},"required":["action","parameters","explanation"]}`),
}

// loadArgs are load_dataset's arguments.
type loadArgs struct {
	URL  string `json:"url"`
	Name string `json:"name,omitempty"`
}

// tools returns the declarations of a turn's tools: list_tables and
// describe_table when the prompt leaves tables out (partialSchema).
func tools(noSQL, hasDocuments, partialSchema bool) []datachat.ToolSpec {
	var ts []datachat.ToolSpec
	if !noSQL {
		ts = append(ts, datachat.ExecuteSQLSpec)
	}
	if partialSchema {
		ts = append(ts, datachat.ListTablesSpec, datachat.DescribeTableSpec)
	}
	ts = append(ts, datachat.LoadDatasetSpec)
	if hasDocuments {
		ts = append(ts, datachat.SearchDocumentsSpec)
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
