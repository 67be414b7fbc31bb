package chat

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"datachat"
	"datachat/internal/tools"
)

// The prompt's tables within a budget. A conversation's tables — its
// datasets and its databases' allowed tables — are described in the system
// prompt (columns, types, samples, descriptions, joins) while they fit
// Runner.SchemaBudget. When they do not (a database of hundreds of tables),
// the prompt holds the tables most relevant to the question and the
// conversation, and the names of the others, which the model reaches with
// list_tables and describe_table.
//
// Relevance: first the tables earlier queries of the conversation used
// (most recent first), then the tables ranked for the question and the
// user's previous messages by BM25 (Data's Ranker: the workspace's) over each
// table's name, columns, descriptions and sample values — fused by
// reciprocal rank with the cosine of their embeddings when an embedding
// model is configured — each followed by the tables its foreign keys
// reference. A table neither ranks is only named, however much of the
// budget is left: the budget is a bound, not a target.

// DefaultSchemaBudget is Runner.SchemaBudget's default, in tokens
// (characters / 4).
const DefaultSchemaBudget = 8000

func (r *Runner) schemaBudget() int {
	if r.SchemaBudget > 0 {
		return r.SchemaBudget
	}
	return DefaultSchemaBudget
}

// schemaTable is one table a turn may describe, with its description in
// the prompt.
type schemaTable struct {
	datachat.CatalogTable
	block string
}

func (s *schemaTable) name() string { return s.Name() }
func (s *schemaTable) key() string  { return s.Key() }

// doc is what the table is ranked by: its names, split into words, its
// description, its columns' names, descriptions and samples.
func (s *schemaTable) doc() string {
	var b strings.Builder
	words := func(x string) { b.WriteString(splitWords(x)); b.WriteByte('\n') }
	var cols []datachat.Column
	if s.Dataset != nil {
		words(s.Dataset.Name)
	} else {
		words(s.Source)
		for _, p := range datachat.SplitQualified(s.Table.Name) {
			words(p)
		}
	}
	words(s.Description())
	cols = s.Columns()
	var metrics map[string]datachat.Metric
	var synonyms map[string]string
	if s.Dataset != nil {
		metrics, synonyms = s.Dataset.Metrics, s.Dataset.Synonyms
	} else {
		metrics, synonyms = s.Table.Metrics, s.Table.Synonyms
	}
	for name, m := range metrics {
		words(name)
		words(m.Description)
	}
	for term := range synonyms {
		words(term)
	}
	for _, c := range cols {
		words(c.Name)
		words(c.Description)
		for _, v := range c.Samples {
			words(v)
		}
	}
	return b.String()
}

// splitWords writes identifiers as words: _ . - and case changes
// (orderItems) become spaces.
func splitWords(s string) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range s {
		switch {
		case r == '_' || r == '.' || r == '-':
			r = ' '
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

// schemaTables are the conversation's tables (datachat.Catalog), each with
// its description in the prompt.
func schemaTables(datasets []*datachat.Dataset, sources []datachat.DBSourceInfo) []*schemaTable {
	cat := datachat.Catalog(datasets, sources)
	out := make([]*schemaTable, len(cat))
	for i, t := range cat {
		st := &schemaTable{CatalogTable: t}
		if t.Dataset != nil {
			st.block = datasetBlock(t.Dataset)
		} else {
			st.block = sourceTableBlock(t.Kind, t.Table)
		}
		out[i] = st
	}
	return out
}

// schemaChoice is what the prompt describes of the tables.
type schemaChoice struct {
	Datasets []*datachat.Dataset
	Sources  []datachat.DBSourceInfo // each with only its tables shown
	Others   []OtherTables           // the tables left out, by name
	Shown    []string                // keys of the tables shown ([schemaTable.key])
	Partial  bool                    // some tables are left out
}

// OtherTables are the tables of a schema of a database (or the datasets,
// Source "") the prompt names without describing them.
type OtherTables struct {
	Source string
	Schema string   // the schema of a source's tables ("" for the datasets)
	Names  []string // the tables' names within their schema, quoted as their SQL needs
	More   int      // how many more were left out of the list itself
}

// partialOverhead is what the prompt's schema sections take beside the
// tables when some are left out (their instructions, the databases' lines),
// in characters.
const partialOverhead = 1600

// maxSchemaTableShare caps one table's description, as a share of the
// budget: a table wider than this is named only (describe_table gives it).
const maxSchemaTableShare = 4

// chooseSchema picks the tables the prompt describes, within budget tokens
// (all of them when they fit). queries gives the SQL of the conversation's
// earlier execute_sql calls, newest first, each with its source; question
// is what the tables are ranked for; vec ranks them by embeddings (nil:
// none). A table with the same columns as one described before it in the
// ranking (the copies a warehouse keeps beside a table: its archive, its
// staging table…) is described in one line, naming that one.
func chooseSchema(rank Ranker, datasets []*datachat.Dataset, sources []datachat.DBSourceInfo, budget int, question string, queries func() []tools.Args, vec func([]*schemaTable) []int) schemaChoice {
	all := schemaTables(datasets, sources)
	limit := budget * 4
	total := 0
	for _, t := range all {
		total += len(t.block)
	}
	if total <= limit {
		c := schemaChoice{Datasets: datasets, Sources: sources}
		for _, t := range all {
			c.Shown = append(c.Shown, t.key())
		}
		return c
	}
	// The sections' own instructions come out of the budget too.
	limit -= partialOverhead
	order := rankTables(rank, all, question, queries(), vec)
	// The names of what is left out take room too: reserve what naming all
	// would take (at most a third of the budget; the list is cut past it).
	groups := otherGroups(all)
	namesCost := 0
	for _, g := range groups {
		namesCost += g.cost
	}
	reserve := min(namesCost+200, limit/3)
	order = bestCopiesFirst(all, order)
	used := 0
	shown := make([]bool, len(all))
	copyOf := make([]int, len(all)) // a table of the same columns shown before it, +1
	firstOf := map[string]int{}     // by columns, the first table shown
	for _, i := range order {
		t := all[i]
		sig := columnsKey(t)
		block := len(t.block)
		if j, ok := firstOf[sig]; ok {
			block = len(copyBlock(t, all[j]))
		}
		if block > limit/maxSchemaTableShare || used+block > limit-reserve {
			continue
		}
		used += block
		shown[i] = true
		if j, ok := firstOf[sig]; ok {
			copyOf[i] = j + 1
		} else if sig != "" {
			firstOf[sig] = i
		}
	}
	c := schemaChoice{Partial: true}
	srcIndex := map[string]int{}
	for si, s := range sources {
		info := s
		info.Tables = nil
		srcIndex[s.Name] = si
		c.Sources = append(c.Sources, info)
	}
	for i, t := range all {
		if !shown[i] {
			continue
		}
		c.Shown = append(c.Shown, t.key())
		switch {
		case t.Dataset != nil:
			c.Datasets = append(c.Datasets, t.Dataset)
		case copyOf[i] > 0:
			si := srcIndex[t.Source]
			c.Sources[si].Tables = append(c.Sources[si].Tables, copyTable(t, all[copyOf[i]-1]))
		default:
			si := srcIndex[t.Source]
			c.Sources[si].Tables = append(c.Sources[si].Tables, *t.Table)
		}
	}
	listBudget := limit - used
	for _, g := range groups {
		o := OtherTables{Source: g.source, Schema: g.schema}
		for _, i := range g.tables {
			if shown[i] {
				continue
			}
			if cost := len(g.names[i]) + 2; listBudget-cost > len(g.header) {
				o.Names = append(o.Names, g.names[i])
				listBudget -= cost
			} else {
				o.More++
			}
		}
		if len(o.Names) > 0 || o.More > 0 {
			listBudget -= len(g.header)
			c.Others = append(c.Others, o)
		}
	}
	return c
}

// bestCopiesFirst reorders a ranking so that, of the tables with the same
// columns, the one with the most rows (the table itself, not its empty
// archive) comes where the first of them was: it is the one described in
// full, the others naming it.
func bestCopiesFirst(all []*schemaTable, order []int) []int {
	best := map[string]int{}
	rows := func(t *schemaTable) int64 {
		if r := t.Rows(); r != nil {
			return *r
		}
		return -1
	}
	for i, t := range all {
		sig := columnsKey(t)
		if sig == "" {
			continue
		}
		j, ok := best[sig]
		if !ok || rows(t) > rows(all[j]) || rows(t) == rows(all[j]) && len(t.name()) < len(all[j].name()) {
			best[sig] = i
		}
	}
	out := make([]int, 0, len(order))
	placed := make([]bool, len(all))
	for _, i := range order {
		if b, ok := best[columnsKey(all[i])]; ok && !placed[b] {
			placed[b] = true
			out = append(out, b)
		}
		if !placed[i] {
			placed[i] = true
			out = append(out, i)
		}
	}
	return out
}

// columnsKey is what tells copies of a table: its source and its columns'
// names and types ("" for a dataset, which has no copies).
func columnsKey(t *schemaTable) string {
	if t.Table == nil || len(t.Table.Columns) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(t.Source)
	for _, c := range t.Table.Columns {
		b.WriteString("\x00" + c.Name + "\x01" + c.SQLType + c.Type)
	}
	return b.String()
}

// copyTable is a table described as a copy of another: no columns, its
// description naming the other.
func copyTable(t, of *schemaTable) datachat.DBSourceTable {
	c := *t.Table
	c.Columns, c.ForeignKeys = nil, nil
	c.Description = strings.TrimSpace("The same columns as " + of.Table.Name + ". " + oneLine(t.Table.Description))
	return c
}

func copyBlock(t, of *schemaTable) string {
	c := copyTable(t, of)
	return sourceTableBlock(t.Kind, &c)
}

// otherGroup is the tables of one schema of a source (or the datasets), as
// the list of the tables the prompt does not describe names them.
type otherGroup struct {
	source, schema string
	header         string
	tables         []int
	names          map[int]string
	cost           int
}

// otherGroups groups the tables by source and schema, each table named as
// its SQL writes it within its schema.
func otherGroups(all []*schemaTable) []*otherGroup {
	var groups []*otherGroup
	byKey := map[string]*otherGroup{}
	for i, t := range all {
		schema, name := "", t.name()
		if t.Table != nil {
			parts := datachat.SplitQualified(t.Table.Name)
			if len(parts) > 1 {
				schema = strings.Join(parts[:len(parts)-1], ".")
				name = quoteIdentFor(t.Kind, parts[len(parts)-1])
			}
		}
		k := t.Source + "\x00" + schema
		g := byKey[k]
		if g == nil {
			g = &otherGroup{source: t.Source, schema: schema, names: map[int]string{}}
			g.header = othersHeader(OtherTables{Source: t.Source, Schema: schema}, t.Kind)
			g.cost = len(g.header)
			byKey[k] = g
			groups = append(groups, g)
		}
		g.tables = append(g.tables, i)
		g.names[i] = name
		g.cost += len(name) + 2
	}
	return groups
}

// othersText is the prompt's list of the tables it does not describe, a
// line per schema.
func othersText(others []OtherTables) string {
	var b strings.Builder
	for _, o := range others {
		b.WriteString(othersHeader(o, ""))
		b.WriteString(strings.Join(o.Names, ", "))
		if o.More > 0 {
			if len(o.Names) > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "and %d more (list_tables finds them)", o.More)
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// othersHeader begins a line of the list of other tables.
func othersHeader(o OtherTables, kind string) string {
	switch {
	case o.Source == "":
		return "- Datasets: "
	case o.Schema == "":
		return fmt.Sprintf("- Database %s: ", o.Source)
	}
	return fmt.Sprintf("- Database %s, schema %s: ", o.Source, o.Schema)
}

// chooseSchema picks the tables the turn's prompt describes (t.schema).
func (t *turn) chooseSchema(ctx context.Context, datasets []*datachat.Dataset) {
	sources := t.sources
	if t.r.NoDictionary {
		datasets, sources = withoutDescriptions(datasets), sourcesWithoutDictionary(sources)
	}
	question := rankingText(t.history)
	var vec func([]*schemaTable) []int
	if t.r.Embedder != nil {
		vec = func(all []*schemaTable) []int {
			return t.r.tableVecs.rank(ctx, t.r.Embedder, t.r.Logger, question, all)
		}
	}
	t.schema = chooseSchema(t.r.Data, datasets, sources, t.r.schemaBudget(), question, func() []tools.Args { return earlierQueries(t.history) }, vec)
}
