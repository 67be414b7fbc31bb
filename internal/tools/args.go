package tools

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"datachat"
)

// Args are a data tool call's arguments, as [Parse] reads them: each tool
// sets the fields its declaration has. The JSON names are the
// declarations'; conversation_id is MCP's over HTTP.
type Args struct {
	Tool string `json:"-"`

	Query  string `json:"query,omitempty"`   // execute_sql, search_documents
	Source string `json:"source,omitempty"`  // execute_sql (lower case), list_tables
	SaveAs string `json:"save_as,omitempty"` // execute_sql

	URL     string `json:"url,omitempty"`     // load_dataset
	Name    string `json:"name,omitempty"`    // load_dataset, describe_dataset, describe_table
	TopK    int    `json:"top_k,omitempty"`   // search_documents
	Pattern string `json:"pattern,omitempty"` // list_tables

	ConversationID string `json:"conversation_id,omitempty"`
}

// maxNameChars caps a table name given to load_dataset, as the HTTP API
// does.
const maxNameChars = 255

// usage is what each tool needs, for the error about bad arguments: the
// argument it cannot go without, and an example of it.
var usage = map[string]struct{ required, example string }{
	datachat.ToolExecuteSQL:      {"query", `{"query": "SELECT …"}`},
	datachat.ToolLoadDataset:     {"url", `{"url": "https://…"}`},
	datachat.ToolSearchDocuments: {"query", `{"query": "…"}`},
	datachat.ToolDescribeTable:   {"name", `{"name": "…"}, a table's name as list_tables gives it`},
	datachat.ToolDescribeDataset: {"name", `{"name": "…"}, a dataset's table name as list_datasets gives it`},
}

// Parse reads tool's arguments, trimmed but for the query, which goes as
// it was written (execute_sql's source in lower case). EINVALID, saying what the tool needs, for arguments that are not
// a JSON object or lack what the tool cannot go without.
func Parse(tool string, args json.RawMessage) (Args, error) {
	a := Args{Tool: tool}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`) // no arguments at all
	}
	err := json.Unmarshal(args, &a)
	a.Tool = tool
	u, required := usage[tool]
	if err != nil && !required {
		return a, datachat.Errorf(datachat.EINVALID, "%s needs a JSON object of its arguments.", tool)
	}
	a.Source, a.SaveAs = strings.TrimSpace(a.Source), strings.TrimSpace(a.SaveAs)
	a.URL, a.Pattern, a.ConversationID = strings.TrimSpace(a.URL), strings.TrimSpace(a.Pattern), strings.TrimSpace(a.ConversationID)
	if tool == datachat.ToolLoadDataset {
		if n := utf8.RuneCountInString(a.Name); n > maxNameChars {
			return a, datachat.Errorf(datachat.EINVALID, "name is %d characters long; at most %d are accepted. Use a shorter one.", n, maxNameChars)
		}
	}
	a.Name = strings.TrimSpace(a.Name)
	if tool == datachat.ToolExecuteSQL {
		a.Source = strings.ToLower(a.Source)
	}
	if required {
		missing := map[string]string{"query": strings.TrimSpace(a.Query), "url": a.URL, "name": a.Name}[u.required] == ""
		if err != nil || missing {
			return a, datachat.Errorf(datachat.EINVALID, "%s is required: %s needs %s.", u.required, tool, u.example)
		}
	}
	return a, nil
}
