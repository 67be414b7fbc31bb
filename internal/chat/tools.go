package chat

import (
	"context"
	"encoding/json"
	"slices"

	"datachat"
)

// specRequestConfirmation is the chat's own tool; the data tools'
// declarations are the root package's, which MCP declares too.
var specRequestConfirmation = datachat.ToolSpec{
	Name:        datachat.ToolRequestConfirmation,
	Description: "Ask the user to confirm an action before it runs, when their intent or the action's parameters are ambiguous. The action runs only if they approve.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["execute_sql","load_dataset"],"description":"The tool to run once approved."},"parameters":{"type":"object","description":"The tool's arguments, e.g. {\"query\": \"SELECT …\"}."},"explanation":{"type":"string","description":"What you assumed and what you are asking the user to confirm."}},"required":["action","parameters","explanation"]}`),
}

// toolSpecs returns the declarations of the turn's tools, the data tools'
// from the catalog: without execute_sql after MaxSQLFailures, list_tables and
// describe_table when the prompt leaves tables out, search_documents when
// the conversation has documents.
func (t *turn) toolSpecs(ctx context.Context) []datachat.ToolSpec {
	names := []string{datachat.ToolExecuteSQL, datachat.ToolListTables, datachat.ToolDescribeTable,
		datachat.ToolListDatasets, datachat.ToolDescribeDataset, datachat.ToolLoadDataset, datachat.ToolSearchDocuments}
	if t.state.SQLFailures >= MaxSQLFailures {
		names = slices.DeleteFunc(names, func(n string) bool { return n == datachat.ToolExecuteSQL })
	}
	if !t.schema.Partial {
		names = slices.DeleteFunc(names, func(n string) bool { return n == datachat.ToolListTables || n == datachat.ToolDescribeTable })
	}
	if !t.hasDocuments {
		names = slices.DeleteFunc(names, func(n string) bool { return n == datachat.ToolSearchDocuments })
	}
	cat, attached := t.tools(ctx), t.sourceNames()
	var ts []datachat.ToolSpec
	for _, n := range names {
		if spec, ok := cat.Spec(n, attached); ok {
			ts = append(ts, spec)
		}
	}
	return append(ts, specRequestConfirmation)
}
