package tools

import (
	"context"
	"fmt"
	"strings"

	"datachat"
)

// list_tables and describe_table: the tables a chat's prompt leaves out,
// and every table for MCP.

// maxListedText caps the tables list_tables' text names.
const maxListedText = 200

// Tables are the conversation's tables: c.Tables when the caller has them,
// otherwise its datasets, then its databases' (datachat.Catalog).
func (cat *Catalog) Tables(ctx context.Context, c Call) ([]datachat.CatalogTable, error) {
	if c.Tables != nil {
		return c.Tables, nil
	}
	ds, dbs, err := cat.data(ctx, c)
	if err != nil {
		return nil, err
	}
	return datachat.Catalog(ds, dbs), nil
}

// listTables finds the tables of a.Source whose name matches a.Pattern
// (datachat.MatchTables): at most MaxListed of them, and a text naming
// at most maxListedText with their row counts and descriptions.
func (cat *Catalog) listTables(ctx context.Context, c Call, a Args) (*Result, error) {
	all, err := cat.Tables(ctx, c)
	if err != nil {
		return nil, err
	}
	found, err := datachat.MatchTables(all, a.Source, a.Pattern)
	if err != nil {
		return nil, err
	}
	out := &Result{Text: tablesText(found), Tables: found}
	if len(found) > MaxListed {
		out.Tables, out.More = found[:MaxListed], len(found)-MaxListed
	}
	return out, nil
}

func tablesText(found []datachat.CatalogTable) string {
	if len(found) == 0 {
		return "No table matches. Try a shorter pattern, or none to list every table."
	}
	var b strings.Builder
	for i, t := range found {
		if i == maxListedText {
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
		if d := strings.Join(strings.Fields(t.Description()), " "); d != "" {
			fmt.Fprintf(&b, ": %s", clipRunes(d, 120))
		}
		b.WriteByte('\n')
	}
	b.WriteString("describe_table gives a table's columns.")
	return b.String()
}

func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// describeTable finds the table a names (datachat.FindTable): its text
// gives its columns, types, descriptions, samples, row count and joins
// (Catalog.TableText), and how to query it.
func (cat *Catalog) describeTable(ctx context.Context, c Call, a Args) (*Result, error) {
	all, err := cat.Tables(ctx, c)
	if err != nil {
		return nil, err
	}
	t, err := datachat.FindTable(all, a.Name)
	if err != nil {
		return nil, err
	}
	block := t.Name()
	if cat.TableText != nil {
		block = strings.TrimSpace(cat.TableText(*t))
	}
	text := block + "\nQuery it with execute_sql without source (DuckDB SQL)."
	if t.Table != nil {
		text = fmt.Sprintf("In database %s:\n%s\nQuery it with execute_sql and \"source\": %q, in that database's SQL, naming it %s.",
			t.Source, block, t.Source, t.Table.Name)
	}
	return &Result{Text: text, Tables: []datachat.CatalogTable{*t}}, nil
}
