package chat

import (
	"context"
	"fmt"
	"strings"

	"datachat"
)

// The tools that reach the tables the prompt leaves out.

// maxListedTables caps the tables one list_tables call lists.
const maxListedTables = 200

// listTables answers list_tables: the conversation's tables of one source
// (or all, or the datasets) whose name matches pattern
// (datachat.MatchTables), with row counts and descriptions.
func listTables(tables []*schemaTable, source, pattern string) (string, error) {
	cat := make([]datachat.CatalogTable, len(tables))
	for i, t := range tables {
		cat[i] = t.CatalogTable
	}
	found, err := datachat.MatchTables(cat, source, pattern)
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "No table matches. Try a shorter pattern, or none to list every table.", nil
	}
	var b strings.Builder
	for i, t := range found {
		if i == maxListedTables {
			fmt.Fprintf(&b, "…and %d more: narrow the pattern to see them.\n", len(found)-i)
			break
		}
		if t.Dataset != nil {
			fmt.Fprintf(&b, "dataset %s (%d rows)", t.Dataset.Name, t.Dataset.RowCount)
		} else {
			fmt.Fprintf(&b, "%s: %s", t.Source, t.Table.Name)
			if t.Table.Rows != nil {
				fmt.Fprintf(&b, " (about %d rows)", *t.Table.Rows)
			}
		}
		if d := oneLine(t.Description()); d != "" {
			fmt.Fprintf(&b, ": %s", clipRunes(d, 120))
		}
		b.WriteByte('\n')
	}
	b.WriteString("describe_table gives a table's columns.")
	return b.String(), nil
}

func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// findTable resolves describe_table's name (datachat.FindTable).
func findTable(tables []*schemaTable, name string) (*schemaTable, error) {
	cat := make([]datachat.CatalogTable, len(tables))
	for i, t := range tables {
		cat[i] = t.CatalogTable
	}
	found, err := datachat.FindTable(cat, name)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if t.Dataset == found.Dataset && t.Table == found.Table {
			return t, nil
		}
	}
	return nil, datachat.Errorf(datachat.EINTERNAL, "table %q found and lost", name)
}

// describeTable answers describe_table: the table's columns, types,
// descriptions, samples, row count and joins, and how to query it.
func describeTable(t *schemaTable) string {
	if t.Dataset != nil {
		return strings.TrimSpace(t.block) + "\nQuery it with execute_sql without source (DuckDB SQL)."
	}
	return fmt.Sprintf("In database %s:\n%s\nQuery it with execute_sql and \"source\": %q, in that database's SQL, naming it %s.",
		t.Source, strings.TrimSpace(t.block), t.Source, t.Table.Name)
}

// allTables are the conversation's tables as they are now, for list_tables
// and describe_table.
func (t *turn) allTables(ctx context.Context) ([]*schemaTable, error) {
	datasets, err := t.r.Data.Datasets(ctx, t.conv.ID)
	if err != nil {
		return nil, err
	}
	sources := t.sources
	if t.r.NoDictionary {
		datasets, sources = withoutDescriptions(datasets), sourcesWithoutDictionary(sources)
	}
	return schemaTables(datasets, sources), nil
}
