package datachat

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of the data dictionary, in characters.
const (
	MaxDescriptionChars = 2000  // a dataset's or a column's description
	MaxNotesChars       = 20000 // a conversation's notes
)

// Dictionary is a change to a conversation's data dictionary: the notes
// (business rules in the user's words) and the descriptions of its datasets
// and their columns. It is also the shape of a dictionary file:
//
//	notes: Fiscal year starts in April. Revenue excludes refunds.
//	datasets:
//	  penguins:
//	    description: One row per penguin seen on the Palmer islands.
//	    columns:
//	      bill_length_mm: Bill length in millimetres.
//
// Nil fields leave what is stored; an empty description removes one.
type Dictionary struct {
	Notes    *string                      `json:"notes,omitempty" yaml:"notes,omitempty"`
	Datasets map[string]DatasetDictionary `json:"datasets,omitempty" yaml:"datasets,omitempty"` // by table name
	// Sources describe the tables of the conversation's database sources:
	// by source name, then by table (SCHEMA.TABLE, or as describe_table
	// finds it).
	Sources map[string]map[string]DatasetDictionary `json:"sources,omitempty" yaml:"sources,omitempty"`
}

// DatasetDictionary describes one table (a dataset, or a source's table)
// and some of its columns, and gives its semantic layer: metrics, synonyms
// and relationships ([TableSemantics]).
type DatasetDictionary struct {
	Description *string           `json:"description,omitempty" yaml:"description,omitempty"`
	Columns     map[string]string `json:"columns,omitempty" yaml:"columns,omitempty"` // column name → description
	// Metrics by name: each replaces the one of its name; one with an
	// empty sql removes it.
	Metrics map[string]Metric `json:"metrics,omitempty" yaml:"metrics,omitempty"`
	// Synonyms: term → what it means; an empty meaning removes one.
	Synonyms map[string]string `json:"synonyms,omitempty" yaml:"synonyms,omitempty"`
	// Relationships replace the table's when given (an empty list removes
	// them); nil leaves them.
	Relationships *[]ForeignKey `json:"relationships,omitempty" yaml:"relationships,omitempty"`
}

// Resolve checks d against a conversation's datasets and returns it with
// every table and column named exactly as the datasets name them (a name
// differing only in case is taken for the dataset's). EINVALID when a
// description or the notes are too long or not valid UTF-8, when d names
// tables or columns the datasets lack, or when a metric, synonym or
// relationship is not well formed (a relationship's ref_table must be a
// dataset): the message names all of them, with the names there are. The
// sources' part is left as it is: [Dictionary.ResolveSources] checks it
// against the sources' catalogs.
func (d Dictionary) Resolve(datasets []*Dataset) (Dictionary, error) {
	var problems []string
	if d.Notes != nil {
		if p := checkText("notes", *d.Notes, MaxNotesChars); p != "" {
			problems = append(problems, p)
		}
	}
	out := Dictionary{Notes: d.Notes, Sources: d.Sources}
	if len(d.Datasets) > 0 {
		out.Datasets = make(map[string]DatasetDictionary, len(d.Datasets))
	}
	tableNames := make([]string, len(datasets))
	for i, ds := range datasets {
		tableNames[i] = ds.Name
	}
	for _, name := range slices.Sorted(maps.Keys(d.Datasets)) {
		dd := d.Datasets[name]
		ds := findDataset(datasets, name)
		if ds == nil {
			if len(datasets) == 0 {
				problems = append(problems, fmt.Sprintf("unknown table %q: the conversation has no datasets", name))
			} else {
				problems = append(problems, fmt.Sprintf("unknown table %q (the tables are %s)", name, strings.Join(tableNames, ", ")))
			}
			continue
		}
		res, ps := CheckDataset(datasets, ds, dd)
		problems = append(problems, problemMessages(ps)...)
		if prev, dup := out.Datasets[ds.Name]; dup {
			// "Penguins" and "penguins": one table named twice.
			problems = append(problems, fmt.Sprintf("table %s is named twice", ds.Name))
			res = prev
		}
		out.Datasets[ds.Name] = res
	}
	if len(problems) > 0 {
		return Dictionary{}, Errorf(EINVALID, "The data dictionary does not fit this conversation: %s.", strings.Join(problems, "; "))
	}
	return out, nil
}

// CheckDataset checks one dataset's part of a dictionary, dd, against ds,
// one of the conversation's datasets: it returns dd with the columns named
// as ds names them (and relationships as the datasets name them), and
// what is wrong, by field ([Problem]).
func CheckDataset(datasets []*Dataset, ds *Dataset, dd DatasetDictionary) (DatasetDictionary, []Problem) {
	var problems []Problem
	if dd.Description != nil {
		if p := checkText(fmt.Sprintf("the description of %s", ds.Name), *dd.Description, MaxDescriptionChars); p != "" {
			problems = append(problems, Problem{Field: "description", Message: p})
		}
	}
	res := DatasetDictionary{Description: dd.Description, Metrics: dd.Metrics, Synonyms: dd.Synonyms, Relationships: dd.Relationships}
	if len(dd.Columns) > 0 {
		res.Columns = make(map[string]string, len(dd.Columns))
	}
	var unknown []string
	for _, col := range slices.Sorted(maps.Keys(dd.Columns)) {
		real, ok := findColumn(ds.Columns, col)
		if !ok {
			unknown = append(unknown, col)
			continue
		}
		if p := checkText(fmt.Sprintf("the description of %s.%s", ds.Name, real), dd.Columns[col], MaxDescriptionChars); p != "" {
			problems = append(problems, Problem{Field: "columns." + col, Message: p})
		}
		res.Columns[real] = dd.Columns[col]
	}
	if len(unknown) > 0 {
		names := make([]string, len(ds.Columns))
		for i, c := range ds.Columns {
			names[i] = c.Name
		}
		quoted := make([]string, len(unknown))
		for i, c := range unknown {
			quoted[i] = fmt.Sprintf("%q", c)
		}
		// One message for all of them, given to the first's field.
		problems = append(problems, Problem{Field: "columns." + unknown[0], Message: fmt.Sprintf("table %s has no column %s (its columns are %s)",
			ds.Name, strings.Join(quoted, ", "), strings.Join(names, ", "))})
	}
	res, ps := checkSemantics(ds.Name, res, ds.Columns, func(name string) (string, []Column, bool) {
		o := findDataset(datasets, name)
		if o == nil {
			return "", nil, false
		}
		return o.Name, o.Columns, true
	})
	return res, append(problems, ps...)
}

// Apply returns a dataset's description and column descriptions with dd's
// changes: a description that is not nil replaces the old one, each column
// description given replaces the old one, an empty one removes it. cols is
// not modified.
func (dd DatasetDictionary) Apply(description string, cols map[string]string) (string, map[string]string) {
	if dd.Description != nil {
		description = strings.TrimSpace(*dd.Description)
	}
	out := maps.Clone(cols)
	if out == nil {
		out = map[string]string{}
	}
	for c, text := range dd.Columns {
		if text = strings.TrimSpace(text); text == "" {
			delete(out, c)
		} else {
			out[c] = text
		}
	}
	return description, out
}

// ColumnDescriptions returns the descriptions of a dataset's columns, by
// column name.
func (d *Dataset) ColumnDescriptions() map[string]string {
	out := map[string]string{}
	for _, c := range d.Columns {
		if c.Description != "" {
			out[c.Name] = c.Description
		}
	}
	return out
}

// SetColumnDescriptions sets the Description of each of d's columns from a
// map by column name (a column the map lacks gets none).
func (d *Dataset) SetColumnDescriptions(descs map[string]string) {
	for i := range d.Columns {
		d.Columns[i].Description = descs[d.Columns[i].Name]
	}
}

func findDataset(datasets []*Dataset, name string) *Dataset {
	for _, ds := range datasets {
		if ds.Name == name {
			return ds
		}
	}
	for _, ds := range datasets {
		if strings.EqualFold(ds.Name, name) {
			return ds
		}
	}
	return nil
}

func findColumn(cols []Column, name string) (string, bool) {
	for _, c := range cols {
		if c.Name == name {
			return c.Name, true
		}
	}
	found := ""
	for _, c := range cols {
		if strings.EqualFold(c.Name, name) {
			if found != "" {
				return "", false // ambiguous: "A" and "a" both exist
			}
			found = c.Name
		}
	}
	return found, found != ""
}

// checkText returns what is wrong with a dictionary text, or "".
func checkText(what, s string, limit int) string {
	if !utf8.ValidString(s) {
		return what + " is not valid UTF-8"
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(s)); n > limit {
		return fmt.Sprintf("%s is %d characters long; at most %d are accepted", what, n, limit)
	}
	return ""
}

// Example verdicts.
const (
	VerdictCorrect = "correct"
	VerdictWrong   = "wrong"
)

// Example is an SQL query a user marked as a correct (or wrong) answer to a
// question: a verified example. Correct ones are given to the model in later
// turns whose conversation has tables with the same columns as those the
// query reads (Tables).
type Example struct {
	ID       string           `json:"id"`
	UserID   string           `json:"-"`
	Question string           `json:"question"`
	SQL      string           `json:"sql"`
	Verdict  string           `json:"verdict"`
	Tables   []TableSignature `json:"tables"`
	// Where the query was marked, when it was an answer's: the
	// conversation, the assistant message and the tool call's provider id.
	// The conversation may have been deleted since; the example stays.
	ConversationID string    `json:"conversation_id,omitempty"`
	MessageID      string    `json:"message_id,omitempty"`
	CallID         string    `json:"call_id,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// Validate returns EINVALID when Verdict is neither VerdictCorrect nor
// VerdictWrong.
func (e *Example) Validate() error {
	if e.Verdict != VerdictCorrect && e.Verdict != VerdictWrong {
		return Errorf(EINVALID, "verdict must be %q or %q, not %q", VerdictCorrect, VerdictWrong, e.Verdict)
	}
	return nil
}

// TableSignature is a table as an example's query read it: its name then, and
// its columns sorted by name with their DuckDB types.
type TableSignature struct {
	Name    string            `json:"name"`
	Columns []SignatureColumn `json:"columns"`
}

// SignatureColumn is one column of a [TableSignature].
type SignatureColumn struct {
	Name string `json:"name"`
	Type string `json:"type"` // DuckDB's type (Column.SQLType)
}

// Signature returns the dataset's [TableSignature].
func (d *Dataset) Signature() TableSignature {
	cols := make([]SignatureColumn, len(d.Columns))
	for i, c := range d.Columns {
		cols[i] = SignatureColumn{Name: c.Name, Type: c.SQLType}
	}
	slices.SortFunc(cols, func(a, b SignatureColumn) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
	return TableSignature{Name: d.Name, Columns: cols}
}

// SameColumns reports whether s and o have the same columns with the same
// types, whatever the tables are called.
func (s TableSignature) SameColumns(o TableSignature) bool {
	return slices.Equal(s.Columns, o.Columns)
}
