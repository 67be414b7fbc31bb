package chat

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"datachat"
)

// sourceNames are the names of the turn's sources.
func (t *turn) sourceNames() []string {
	names := make([]string, len(t.sources))
	for i, s := range t.sources {
		names[i] = s.Name
	}
	return names
}

// describeSources reads the conversation's sources for the prompt.
func (t *turn) describeSources(ctx context.Context) error {
	if t.r.Sources == nil {
		return nil
	}
	var err error
	t.sources, err = t.r.Sources.Describe(ctx, t.user, t.conv.ID)
	return err
}

// databasesText describes each source for the system prompt: its name and
// dialect, then each allowed table with its row estimate and columns. With
// the tables the prompt only names (others), a source whose tables are all
// among them says so.
func databasesText(sources []datachat.DBSourceInfo, others ...[]OtherTables) string {
	var b strings.Builder
	for _, s := range sources {
		dialect := s.Dialect
		if dialect == "" {
			dialect = map[string]string{"postgres": "PostgreSQL", "mysql": "MySQL/MariaDB"}[s.Kind]
		}
		fmt.Fprintf(&b, "\nDatabase %s (%s): execute_sql with \"source\": %q, in %s SQL.\n", s.Name, dialect, s.Name, dialect)
		if s.Unavailable != "" {
			fmt.Fprintf(&b, "Its tables cannot be listed right now: %s\n", s.Unavailable)
			continue
		}
		if len(s.Tables) == 0 {
			if slices.ContainsFunc(others, func(o []OtherTables) bool {
				return slices.ContainsFunc(o, func(o OtherTables) bool { return o.Source == s.Name })
			}) {
				b.WriteString("Its tables are named under \"Other tables\" below.\n")
			} else {
				b.WriteString("No tables can be read in it.\n")
			}
			continue
		}
		for _, tb := range s.Tables {
			b.WriteString(sourceTableBlock(s.Kind, &tb))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// sourceTableBlock is one table of a source as the prompt describes it:
// its name, row estimate and description, its columns (with the
// descriptions and samples they have), and its foreign keys as joins.
func sourceTableBlock(kind string, tb *datachat.DBSourceTable) string {
	var b strings.Builder
	what := "Table"
	if tb.View {
		what = "View"
	}
	rows := ""
	if tb.Rows != nil {
		rows = fmt.Sprintf(" (about %d rows)", *tb.Rows)
	}
	fmt.Fprintf(&b, "%s %s%s:", what, tb.Name, rows)
	if tb.Description != "" {
		fmt.Fprintf(&b, " %s", oneLine(tb.Description))
	}
	b.WriteByte('\n')
	for _, c := range tb.Columns {
		fmt.Fprintf(&b, "- %s: %s", quoteIdentFor(kind, c.Name), c.Type)
		if c.Description != "" {
			fmt.Fprintf(&b, " — %s", oneLine(c.Description))
		}
		if len(c.Samples) > 0 {
			fmt.Fprintf(&b, " (e.g. %s)", strings.Join(c.Samples, ", "))
		}
		b.WriteByte('\n')
	}
	b.WriteString(semanticsText(kind, tb.Metrics, tb.Synonyms, tb.ForeignKeys, tb.Relationships))
	return b.String()
}

// joinText writes a foreign key as a join hint: (a, b) → schema.t (x, y).
func joinText(kind string, fk datachat.ForeignKey) string {
	q := func(cols []string) string {
		out := make([]string, len(cols))
		for i, c := range cols {
			out[i] = quoteIdentFor(kind, c)
		}
		if len(out) == 1 {
			return out[0]
		}
		return "(" + strings.Join(out, ", ") + ")"
	}
	if len(fk.Columns) == 1 {
		return fmt.Sprintf("%s → %s.%s", q(fk.Columns), fk.RefTable, q(fk.RefColumns))
	}
	return fmt.Sprintf("%s → %s %s", q(fk.Columns), fk.RefTable, q(fk.RefColumns))
}

// quoteIdentFor quotes a column name as a source's SQL needs it: double
// quotes for PostgreSQL, backticks for MySQL, when it is not a plain
// lower-case identifier or is a reserved word (DuckDB's list, which covers
// the SQL standard's that both engines reserve).
func quoteIdentFor(kind, name string) string {
	if kind != "mysql" {
		return datachat.Ident(name)
	}
	if datachat.Ident(name) == name {
		return name
	}
	return datachat.QuoteMySQLIdent(name)
}
