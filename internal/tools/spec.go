package tools

import (
	"encoding/json"
	"slices"

	"datachat"
)

// specs are the data tools' declarations, by name: the root package's.
var specs = map[string]datachat.ToolSpec{
	datachat.ToolExecuteSQL:      datachat.ExecuteSQLSpec,
	datachat.ToolLoadDataset:     datachat.LoadDatasetSpec,
	datachat.ToolSearchDocuments: datachat.SearchDocumentsSpec,
	datachat.ToolListDatasets:    datachat.ListDatasetsSpec,
	datachat.ToolDescribeDataset: datachat.DescribeDatasetSpec,
	datachat.ToolListTables:      datachat.ListTablesSpec,
	datachat.ToolDescribeTable:   datachat.DescribeTableSpec,
}

// Spec is tool's declaration, as the chat's model and MCP's agents receive
// it; ok is false for a tool the catalog does not have. execute_sql's is the
// one choice between its two: with a source argument when the catalog has
// database sources — its values narrowed to the attached ones' names when
// attached is known (not nil) — and without one when there are none or none
// is attached.
func (cat *Catalog) Spec(tool string, attached []string) (spec datachat.ToolSpec, ok bool) {
	spec, ok = specs[tool]
	if tool != datachat.ToolExecuteSQL || cat.Sources == nil || attached != nil && len(attached) == 0 {
		return spec, ok
	}
	spec = datachat.ExecuteSQLSourcesSpec
	if attached == nil {
		return spec, true
	}
	var params map[string]any
	if err := json.Unmarshal(spec.Parameters, &params); err != nil {
		panic(err) // the root package's own JSON
	}
	params["properties"].(map[string]any)["source"].(map[string]any)["enum"] = slices.Clone(attached)
	spec.Parameters, _ = json.Marshal(params)
	return spec, true
}
