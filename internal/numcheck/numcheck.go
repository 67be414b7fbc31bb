package numcheck

import (
	"encoding/json"
	"strconv"

	"datachat"
)

// Check statuses.
const (
	Matched   = "matched"
	Unmatched = "unmatched"
)

// Check is one number of an answer and what it was checked against. Start and
// End are offsets in characters — Unicode code points, as Go's []rune(answer)
// counts them (an invalid UTF-8 byte counts as one) — not bytes and not UTF-16
// units: Text is string([]rune(answer)[Start:End]). Source is the zero Source
// (JSON null) when Status is Unmatched.
type Check struct {
	Text   string `json:"text"`
	Start  int    `json:"start"`
	End    int    `json:"end"`
	Status string `json:"status"`
	Source Source `json:"source"`
}

// Source names the evidence a number matched, in one of four JSON shapes:
//
//	{"tool_call_id":"c1","row":3,"column":2}       a result cell: 0-based row and column
//	{"tool_call_id":"c1","row":null,"column":null} the row count of that result
//	{"question":true}                              the user's question
//	{"source_id":"…"}                              a cited excerpt's id
//
// The zero Source is JSON null.
type Source struct {
	ToolCallID string `json:"tool_call_id,omitempty"`
	Row        *int   `json:"row,omitempty"`
	Column     *int   `json:"column,omitempty"`
	Question   bool   `json:"question,omitempty"`
	SourceID   string `json:"source_id,omitempty"`
	// Metric names a metric of the data dictionary whose value it is.
	Metric string `json:"metric,omitempty"`
}

// IsZero reports whether s names nothing (an unmatched check's source).
func (s Source) IsZero() bool {
	return s.ToolCallID == "" && s.Row == nil && s.Column == nil && !s.Question && s.SourceID == "" && s.Metric == ""
}

// IsRowCount reports whether s is a result's row count.
func (s Source) IsRowCount() bool {
	return s.ToolCallID != "" && s.Row == nil && s.Column == nil
}

// MarshalJSON writes exactly one of the shapes documented on [Source].
func (s Source) MarshalJSON() ([]byte, error) {
	var key, value string
	switch {
	case s.Question:
		return []byte(`{"question":true}`), nil
	case s.Metric != "":
		key, value = "metric", s.Metric
	case s.SourceID != "":
		key, value = "source_id", s.SourceID
	case s.ToolCallID != "":
		key, value = "tool_call_id", s.ToolCallID
	default:
		return []byte("null"), nil
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"`+key+`":`), v...)
	if key == "tool_call_id" {
		b = append(b, `,"row":`...)
		b = appendIntOrNull(b, s.Row)
		b = append(b, `,"column":`...)
		b = appendIntOrNull(b, s.Column)
	}
	return append(b, '}'), nil
}

func appendIntOrNull(b []byte, p *int) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*p), 10)
}

// Evidence is what an answer may take its numbers from.
type Evidence struct {
	// Question is the user's message the answer replies to.
	Question string
	// Results are the turn's SQL results, in the order they ran.
	Results []Result
	// Excerpts are the document excerpts the answer cites.
	Excerpts []Excerpt
}

// Result is one SQL result of the turn.
type Result struct {
	// ToolCallID names the tool call in a matched [Source].
	ToolCallID string
	// Columns are the column names.
	Columns []string
	// Rows hold the JSON-ready values of a query result: nil, bool, int64,
	// json.Number, string, []any and ordered objects (any value JSON
	// marshals); float64 and the other Go integer types are accepted too.
	Rows [][]any
	// RowCount is the row count the model was told (len(Rows) when zero).
	RowCount int
	// Metric, when set, makes the result a metric of the data dictionary
	// (its one row holding the metric's value): a number matched to it has
	// the source {"metric": Metric}.
	Metric string
}

// Excerpt is a document excerpt the answer cites.
type Excerpt struct {
	SourceID string
	Text     string
}

// ResultFromQuery is r as the evidence of tool call toolCallID.
func ResultFromQuery(toolCallID string, r *datachat.QueryResult) Result {
	cols := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		cols[i] = c.Name
	}
	return Result{ToolCallID: toolCallID, Columns: cols, Rows: r.Rows, RowCount: r.RowCount}
}

// ExcerptsFromSources is the excerpts of an answer's cited sources, each
// named by its ID.
func ExcerptsFromSources(srcs []datachat.Source) []Excerpt {
	ex := make([]Excerpt, len(srcs))
	for i, s := range srcs {
		ex[i] = Excerpt{SourceID: s.ID, Text: s.Text}
	}
	return ex
}
