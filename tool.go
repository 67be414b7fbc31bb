package datachat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Tool names: the tools a chat turn gives the model, as a [ToolCall] stores
// them. The SQL console keeps a user's own query as an execute_sql call too.
const (
	ToolExecuteSQL          = "execute_sql"
	ToolLoadDataset         = "load_dataset"
	ToolSearchDocuments     = "search_documents"
	ToolRequestConfirmation = "request_confirmation"
)

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
