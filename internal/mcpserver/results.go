package mcpserver

import (
	"fmt"

	"datachat"
	"datachat/internal/tools"
)

// The tools' results as MCP returns them (their output schemas), shaped
// from the catalog's [tools.Result].

// list_tables' and describe_table's outputs.
type (
	// TableList is list_tables' answer: at most tools.MaxListed tables, and how
	// many more matched.
	TableList struct {
		Tables []TableEntry `json:"tables"`
		More   int          `json:"more,omitempty"`
	}
	// TableEntry is a table as list_tables names it: its name as its SQL
	// writes it, the database it is in ("" for a dataset), its row count
	// (a database's estimate) and description.
	TableEntry struct {
		Name        string `json:"name"`
		Source      string `json:"source,omitempty"`
		Rows        *int64 `json:"rows,omitempty"`
		Description string `json:"description,omitempty"`
	}
	// TableDescription is describe_table's answer.
	TableDescription struct {
		TableEntry
		Kind        string                `json:"kind,omitempty"` // the database's: postgres or mysql
		Columns     []datachat.Column     `json:"columns"`
		ForeignKeys []datachat.ForeignKey `json:"foreign_keys,omitempty"`
		// How tells how to query it: execute_sql with or without source.
		How string `json:"how"`
	}
)

// Tool outputs.
type (
	// DatasetInfo is a dataset as the tools show it.
	DatasetInfo struct {
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		Source   string            `json:"source"`
		Format   string            `json:"format"`
		RowCount int64             `json:"row_count"`
		Bytes    int64             `json:"bytes"`
		Columns  []datachat.Column `json:"columns"`
		// OtherTables names the other tables the same file gave (a JSON
		// object's arrays of records each become one), for load_dataset.
		OtherTables []string `json:"other_tables,omitempty"`
		// Description is the user's, from the data dictionary; the
		// columns' are on Columns.
		Description string `json:"description,omitempty"`
	}
	DatasetList struct {
		Datasets []DatasetInfo `json:"datasets"`
		// Databases are the database sources attached to the conversation,
		// which execute_sql queries with their name as source.
		Databases []DatabaseInfo `json:"databases,omitempty"`
	}
	// DatabaseInfo is a database source as the tools show it: its SQL
	// dialect and the tables queries may read.
	DatabaseInfo struct {
		Name        string          `json:"name"`
		Kind        string          `json:"kind"`
		Dialect     string          `json:"dialect,omitempty"`
		Tables      []DatabaseTable `json:"tables"`
		Unavailable string          `json:"unavailable,omitempty"`
	}
	DatabaseTable struct {
		Name    string            `json:"name"`
		View    bool              `json:"view,omitempty"`
		Rows    *int64            `json:"rows,omitempty"`
		Columns []datachat.Column `json:"columns"`
	}
	DatasetDescription struct {
		DatasetInfo
		SampleRows [][]any `json:"sample_rows"`
		// Notes are the conversation's business rules, from the data
		// dictionary.
		Notes string `json:"notes,omitempty"`
	}
	SearchResults struct {
		Results []datachat.Source `json:"results"`
	}
)

func info(d *datachat.Dataset) DatasetInfo {
	cols := make([]datachat.Column, len(d.Columns))
	for i, c := range d.Columns {
		cols[i] = datachat.Column{Name: c.Name, Type: c.Type, SQLType: c.SQLType, Description: c.Description}
	}
	return DatasetInfo{ID: d.ID, Name: d.Name, Source: d.Source, Format: d.Format, RowCount: d.RowCount, Bytes: d.Bytes, Columns: cols,
		Description: d.Description}
}

func datasetList(r *tools.Result) DatasetList {
	out := DatasetList{Datasets: make([]DatasetInfo, len(r.Datasets))}
	for i, d := range r.Datasets {
		out.Datasets[i] = info(d)
	}
	for _, s := range r.Databases {
		db := DatabaseInfo{Name: s.Name, Kind: s.Kind, Dialect: s.Dialect, Unavailable: s.Unavailable, Tables: []DatabaseTable{}}
		for _, tb := range s.Tables {
			db.Tables = append(db.Tables, DatabaseTable{Name: tb.Name, View: tb.View, Rows: tb.Rows, Columns: tb.Columns})
		}
		out.Databases = append(out.Databases, db)
	}
	return out
}

func datasetDescription(r *tools.Result) DatasetDescription {
	out := DatasetDescription{DatasetInfo: info(r.Datasets[0]), SampleRows: r.Rows.Rows, Notes: r.Notes}
	if out.SampleRows == nil {
		out.SampleRows = [][]any{}
	}
	return out
}

// loaded is load_dataset's answer: the first table, naming the others.
func loaded(r *tools.Result) DatasetInfo {
	out := info(r.Datasets[0])
	for _, d := range r.Datasets[1:] {
		out.OtherTables = append(out.OtherTables, d.Name)
	}
	return out
}

// queryResult is execute_sql's answer: its rows, or for save_as one row
// saying what was saved.
func queryResult(r *tools.Result) *datachat.QueryResult {
	if r.Rows == nil {
		ds := r.Datasets[0]
		return &datachat.QueryResult{
			Columns: []datachat.Column{
				{Name: "table", Type: datachat.TypeText, SQLType: "VARCHAR"},
				{Name: "rows", Type: datachat.TypeInteger, SQLType: "BIGINT"},
				{Name: "source", Type: datachat.TypeText, SQLType: "VARCHAR"},
			},
			Rows:     [][]any{{ds.Name, ds.RowCount, ds.Source}},
			RowCount: 1, Truncated: r.Saved.Truncated, ElapsedMS: float64(r.Elapsed.Microseconds()) / 1000,
		}
	}
	if r.Rows.Rows == nil {
		r.Rows.Rows = [][]any{}
	}
	return r.Rows
}

func searchResults(r *tools.Result) SearchResults {
	out := SearchResults{Results: r.Excerpts}
	if out.Results == nil {
		out.Results = []datachat.Source{}
	}
	return out
}

func entry(c datachat.CatalogTable) TableEntry {
	return TableEntry{Name: c.Name(), Source: c.Source, Rows: c.Rows(), Description: c.Description()}
}

func tableList(r *tools.Result) TableList {
	out := TableList{Tables: []TableEntry{}, More: r.More}
	for _, c := range r.Tables {
		out.Tables = append(out.Tables, entry(c))
	}
	return out
}

func tableDescription(r *tools.Result) TableDescription {
	c := r.Tables[0]
	out := TableDescription{TableEntry: entry(c), Kind: c.Kind, Columns: c.Columns()}
	if out.Columns == nil {
		out.Columns = []datachat.Column{}
	}
	if c.Table != nil {
		out.ForeignKeys = c.Table.ForeignKeys
		out.How = fmt.Sprintf("execute_sql with source %q, in that database's SQL, naming the table %s", c.Source, c.Table.Name)
	} else {
		out.How = "execute_sql without source (DuckDB SQL)"
	}
	return out
}
