package chat

import (
	"encoding/json"

	"datachat"
)

// specRequestConfirmation is the chat's own tool; the data tools'
// declarations are the root package's, which MCP declares too.
var specRequestConfirmation = datachat.ToolSpec{
	Name:        datachat.ToolRequestConfirmation,
	Description: "Ask the user to confirm an action before it runs, when their intent or the action's parameters are ambiguous. The action runs only if they approve.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["execute_sql","load_dataset"],"description":"The tool to run once approved."},"parameters":{"type":"object","description":"The tool's arguments, e.g. {\"query\": \"SELECT …\"}."},"explanation":{"type":"string","description":"What you assumed and what you are asking the user to confirm."}},"required":["action","parameters","explanation"]}`),
}

// toolSpecs returns the declarations of a turn's tools: list_tables and
// describe_table when the prompt leaves tables out (partialSchema).
func toolSpecs(noSQL, hasDocuments, partialSchema bool) []datachat.ToolSpec {
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
