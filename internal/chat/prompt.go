package chat

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"datachat"
)

// PromptData is what the system prompt is built from, fresh every turn.
type PromptData struct {
	Datasets      []*datachat.Dataset // this conversation's only
	Excerpts      []datachat.Source   // relevant document chunks, cited as [n]
	HasDocuments  bool
	ConfirmAlways bool // DATACHAT_CONFIRM_SQL=always
	// The data dictionary's notes (business rules), and the verified
	// examples chosen for the question.
	Notes    string
	Examples []PromptExample
	// Sources are the database sources attached to the conversation (and
	// granted to its user), with their dialect and allowed tables.
	Sources []datachat.DBSourceInfo
	// When the tables do not fit the schema budget (Runner.SchemaBudget),
	// Datasets and Sources hold only the tables most relevant to the
	// question, PartialSchema is set, OtherTables names the others, and
	// HiddenDatasets says some datasets are among them.
	PartialSchema  bool
	OtherTables    []OtherTables
	HiddenDatasets bool
}

// DefaultTemplate is the built-in system prompt. A file at
// CHAT_DEFAULT_SYSTEM_PROMPT_PATH replaces it; it is a text/template over
// PromptData with the functions schema, excerpts, notes, examples,
// databases and others.
const DefaultTemplate = `You are a data analyst assistant. Help users understand and explore their data.

{{if .Datasets -}}
## Datasets
{{if .HiddenDatasets}}These tables of this conversation's files are the ones most relevant here; the others are named under "Other tables" below:{{else}}These tables are loaded in this conversation (and only these):{{end}}
{{schema .Datasets}}
{{- else if .HiddenDatasets -}}
## Datasets
This conversation's files are named under "Other tables" below.
{{- else if .Sources -}}
## Datasets
No files are loaded in this conversation: its data is in the databases below.
{{- else -}}
## Datasets
No datasets are loaded yet. If the user's message contains a URL of a data file (CSV, TSV, Parquet, Excel, JSON or NDJSON, compressed or not), load it with the load_dataset tool before answering. Otherwise, tell the user to add a dataset (upload such a file, or paste its URL) and answer what you can without data.
{{- end}}
{{- notes .Notes}}{{examples .Examples}}
{{- if .Sources}}

## Databases
These databases are attached to this conversation (and only these). To query one, call execute_sql with its name as "source" and write the query in that database's own SQL dialect, not DuckDB's; only the tables listed here can be read, named as given. Without "source", execute_sql queries the datasets with DuckDB. One query runs in one place: it cannot join a database's tables with the datasets or with another database's. To combine them, first bring the rows needed from the database into the conversation: execute_sql with "source" and "save_as" (the name of a new table), selecting and filtering in that query only what the question needs; the saved table then joins with the datasets in an execute_sql without "source". Save only when a join with the datasets (or another database) needs it.
{{databases .Sources .OtherTables}}
{{- end}}
{{- if .OtherTables}}

## Other tables
The conversation has more tables than this prompt describes; these are named only. Before querying one of them, call describe_table with its name to see its columns, and never guess a column. list_tables lists the tables whose name matches a pattern (e.g. "*invoice*").
{{others .OtherTables}}
{{- end}}

## How to query
- Use the execute_sql tool. The SQL dialect is DuckDB: standard SQL plus DuckDB functions (date_trunc, strftime, regexp_matches, list and struct functions, QUALIFY, PIVOT, GROUP BY ALL). Quote identifiers that are not lower-case words with double quotes, strings with single quotes.
- Use the table names exactly as given above.
- When unsure about the data (column values, types, spelling of categories), explore it first with a small query before answering.
- Always put LIMIT 1000 (or less) on queries that return rows.
- One statement per query; queries are read-only.
- If a query fails, read the error, fix the query and try again; after 3 failed attempts, explain the error to the user instead.
- If the user's message contains a URL of a data file (CSV, TSV, Parquet, Excel, JSON) that is not loaded, load it with load_dataset before answering.
- Base every number in your answer on a query result; never guess values.
- If no table or document here holds what the question needs, say so plainly: name what is missing (the measure, the period, the column or table) and what the data does hold, instead of guessing, inventing a value, or silently answering a nearby question with a proxy.{{if .PartialSchema}} The prompt describes only some of the tables: search the others with list_tables (and describe_table) before saying something is missing.{{end}}

## When to ask first
If the user's intent or an action's parameters are ambiguous (which column, which period, which filter, whether to include or exclude something), do not guess: call request_confirmation with the action (execute_sql or load_dataset), the parameters you would use, and an explanation of your assumption, and wait for the answer.
{{- if .ConfirmAlways}} Every execute_sql call is shown to the user for approval before it runs.{{end}}
{{if .HasDocuments}}
## Documents
Relevant excerpts from the user's documents are below, numbered. Cite them in your answer as [n] where you use them. Use the search_documents tool to look for more.
{{excerpts .Excerpts}}
{{- end}}

Answer concisely and helpfully, in Markdown.`

// ParseTemplate parses a system prompt template.
func ParseTemplate(text string) (*template.Template, error) {
	return template.New("system").Funcs(template.FuncMap{
		"schema":    schemaText,
		"excerpts":  excerptsText,
		"notes":     notesText,
		"examples":  examplesText,
		"databases": databasesText,
		"others":    othersText,
	}).Option("missingkey=error").Parse(text)
}

var defaultTemplate = template.Must(ParseTemplate(DefaultTemplate))

// SystemPrompt renders the system prompt; a nil t means DefaultTemplate.
func SystemPrompt(t *template.Template, d PromptData) (string, error) {
	if t == nil {
		t = defaultTemplate
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("system prompt template: %w", err)
	}
	return strings.TrimSpace(b.String()), nil
}

// schemaText describes each dataset: table name, source, row count, and each
// column with its friendly type and a few sample values, with the
// descriptions the user gave them.
func schemaText(datasets []*datachat.Dataset) string {
	var b strings.Builder
	for _, d := range datasets {
		b.WriteString(datasetBlock(d))
	}
	return b.String()
}

// datasetBlock is one dataset as the prompt describes it.
func datasetBlock(d *datachat.Dataset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nTable %s (from %s, %d rows):", d.Name, d.Source, d.RowCount)
	if d.Description != "" {
		fmt.Fprintf(&b, " %s", oneLine(d.Description))
	}
	b.WriteByte('\n')
	for _, c := range d.Columns {
		fmt.Fprintf(&b, "- %s: %s", datachat.Ident(c.Name), c.Type)
		if c.Description != "" {
			fmt.Fprintf(&b, " — %s", oneLine(c.Description))
		}
		if len(c.Samples) > 0 {
			fmt.Fprintf(&b, " (e.g. %s)", strings.Join(c.Samples, ", "))
		}
		b.WriteByte('\n')
	}
	b.WriteString(semanticsText("duckdb", d.Metrics, d.Synonyms, nil, d.Relationships))
	return b.String()
}

// semanticsText writes a table's semantic layer for the prompt: its metrics
// (to compute as defined), its synonyms, and its joins — foreign keys from
// the engine's catalog, then the relationships the user gave.
func semanticsText(kind string, metrics map[string]datachat.Metric, synonyms map[string]string, fks, rels []datachat.ForeignKey) string {
	var b strings.Builder
	if len(metrics) > 0 {
		var ms []string
		for _, name := range slices.Sorted(maps.Keys(metrics)) {
			m := metrics[name]
			t := fmt.Sprintf("%s = %s", name, oneLine(m.SQL))
			if m.Filter != "" {
				t += " WHERE " + oneLine(m.Filter)
			}
			if m.Description != "" {
				t += " (" + oneLine(m.Description) + ")"
			}
			ms = append(ms, t)
		}
		fmt.Fprintf(&b, "Metrics (compute each exactly as defined): %s\n", strings.Join(ms, "; "))
	}
	if len(synonyms) > 0 {
		var ss []string
		for _, term := range slices.Sorted(maps.Keys(synonyms)) {
			ss = append(ss, fmt.Sprintf("%q means %s", term, oneLine(synonyms[term])))
		}
		fmt.Fprintf(&b, "Synonyms: %s\n", strings.Join(ss, "; "))
	}
	if joins := append(slices.Clone(fks), rels...); len(joins) > 0 {
		out := make([]string, len(joins))
		for i, fk := range joins {
			out[i] = joinText(kind, fk)
		}
		fmt.Fprintf(&b, "Joins: %s\n", strings.Join(out, "; "))
	}
	return b.String()
}

func excerptsText(sources []datachat.Source) string {
	var b strings.Builder
	for i, s := range sources {
		fmt.Fprintf(&b, "\n[%d] %s\n%s\n", i+1, s.Citation(), strings.TrimSpace(s.Text))
	}
	return b.String()
}
