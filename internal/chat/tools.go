package chat

import (
	"context"
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

// dataTools are the catalog's tools a turn may offer, in the order it
// declares them.
var dataTools = []string{
	datachat.ToolExecuteSQL, datachat.ToolListTables, datachat.ToolDescribeTable, datachat.ToolListDatasets,
	datachat.ToolDescribeDataset, datachat.ToolLoadDataset, datachat.ToolSearchDocuments,
}

// toolSpecs returns the declarations of the turn's tools, the data tools'
// from the catalog: execute_sql until MaxSQLFailures, list_tables and
// describe_table when the prompt leaves tables out, search_documents when
// the conversation has documents.
func (t *turn) toolSpecs(ctx context.Context) []datachat.ToolSpec {
	offered := func(tool string) bool {
		switch tool {
		case datachat.ToolExecuteSQL:
			return t.state.SQLFailures < MaxSQLFailures
		case datachat.ToolListTables, datachat.ToolDescribeTable:
			return t.schema.Partial
		case datachat.ToolSearchDocuments:
			return t.hasDocuments
		}
		return true
	}
	cat, attached := t.tools(ctx), t.sourceNames()
	var ts []datachat.ToolSpec
	for _, tool := range dataTools {
		if spec, ok := cat.Spec(tool, attached); ok && offered(tool) {
			ts = append(ts, spec)
		}
	}
	return append(ts, specRequestConfirmation)
}
