package datachat

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// The semantic layer: what the data dictionary says of a table beyond its
// description and its columns' — its metrics, the synonyms of its columns
// and values, its relationships to other tables — for the datasets and for
// the tables of database sources (whose descriptions it holds too). It is
// part of the dictionary file ([Dictionary], [DatasetDictionary]), goes into
// the prompt beside each table's columns, and the number checker counts a
// metric's value as evidence.

// Limits of the semantic layer.
const (
	MaxMetricName     = 64   // characters of a metric's name
	MaxMetricSQL      = 4000 // characters of a metric's SQL or filter
	MaxSynonymTerm    = 200  // characters of a synonym's term
	MaxSemanticsItems = 200  // metrics, synonyms or relationships of one table
)

// Metric is a measure of a table: SQL, an aggregate expression over its
// rows in the SQL of where the table is (DuckDB's for a dataset, the
// database's for a source's table), over the rows Filter keeps (a
// condition; "" for all), and what it means. "revenue = sum(amount) where
// status = 'paid'" is {SQL: "sum(amount)", Filter: "status = 'paid'"}.
type Metric struct {
	SQL         string `json:"sql" yaml:"sql"`
	Filter      string `json:"filter,omitempty" yaml:"filter,omitempty"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
}

// Query is the statement computing the metric over a table named as its
// SQL writes it: the metric's own text, the one way it runs (in the same
// sandbox as any query).
func (m Metric) Query(table string) string {
	q := "SELECT " + strings.TrimSpace(m.SQL) + " AS metric FROM " + table
	if f := strings.TrimSpace(m.Filter); f != "" {
		q += " WHERE " + f
	}
	return q
}

// TableSemantics is what the semantic layer holds of one table.
type TableSemantics struct {
	// Description and Columns are a source table's description and its
	// columns' (a dataset keeps its own on the dataset).
	Description string            `json:"description,omitempty"`
	Columns     map[string]string `json:"columns,omitempty"`
	Metrics     map[string]Metric `json:"metrics,omitempty"`
	// Synonyms map a word the user may use to what it means in this
	// table: a column, a metric, or a condition ("EMEA": "region IN
	// ('DE', 'FR')").
	Synonyms map[string]string `json:"synonyms,omitempty"`
	// Relationships are join keys to other tables of the same place (the
	// datasets, or the same source), as the user states them.
	Relationships []ForeignKey `json:"relationships,omitempty"`
}

// Empty reports whether s holds nothing.
func (s TableSemantics) Empty() bool {
	return s.Description == "" && len(s.Columns) == 0 && len(s.Metrics) == 0 && len(s.Synonyms) == 0 && len(s.Relationships) == 0
}

// SemanticLayer is the part of a conversation's dictionary that its
// datasets' rows do not hold: the datasets' metrics, synonyms and
// relationships, by dataset ID, and everything of its sources' tables, by
// source and table (SCHEMA.TABLE, unquoted).
type SemanticLayer struct {
	Datasets map[string]TableSemantics            `json:"datasets,omitempty"`
	Sources  map[string]map[string]TableSemantics `json:"sources,omitempty"`
}

// Apply returns the semantics with dd's changes: a description and column
// descriptions as [DatasetDictionary.Apply] changes a dataset's (when
// source is set: only a source's table keeps them here), each metric and
// synonym given replacing the one of its name (an empty SQL or meaning
// removing it), and the relationships replaced when dd gives them.
func (s TableSemantics) Apply(dd DatasetDictionary, source bool) TableSemantics {
	out := TableSemantics{Description: s.Description, Columns: maps.Clone(s.Columns), Metrics: maps.Clone(s.Metrics),
		Synonyms: maps.Clone(s.Synonyms), Relationships: slices.Clone(s.Relationships)}
	if source {
		out.Description, out.Columns = dd.Apply(s.Description, s.Columns)
	}
	for name, m := range dd.Metrics {
		if strings.TrimSpace(m.SQL) == "" {
			delete(out.Metrics, name)
			continue
		}
		if out.Metrics == nil {
			out.Metrics = map[string]Metric{}
		}
		out.Metrics[name] = Metric{SQL: strings.TrimSpace(m.SQL), Filter: strings.TrimSpace(m.Filter), Description: strings.TrimSpace(m.Description)}
	}
	for term, meaning := range dd.Synonyms {
		if meaning = strings.TrimSpace(meaning); meaning == "" {
			delete(out.Synonyms, term)
			continue
		}
		if out.Synonyms == nil {
			out.Synonyms = map[string]string{}
		}
		out.Synonyms[term] = meaning
	}
	if dd.Relationships != nil {
		out.Relationships = slices.Clone(*dd.Relationships)
	}
	if len(out.Columns) == 0 {
		out.Columns = nil
	}
	if len(out.Metrics) == 0 {
		out.Metrics = nil
	}
	if len(out.Synonyms) == 0 {
		out.Synonyms = nil
	}
	if len(out.Relationships) == 0 {
		out.Relationships = nil
	}
	return out
}

var metricNameRE = regexp.MustCompile(`^[\p{L}_][\p{L}\p{N}_ ]*$`)

// Problem is one thing wrong with a table's part of a dictionary. Field
// says which part, as the page's editor names its fields: "description",
// "columns.COLUMN", "metrics.NAME.name" (or .sql, .filter, .description),
// "synonyms.TERM.term" (or .meaning), "relationships.N.columns" (or
// .ref_table, .ref_columns; N counts from 0); "" for the table as a whole.
// Message says what is wrong, naming the table.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// problemMessages are the messages of problems, in order.
func problemMessages(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Message
	}
	return out
}

// checkSemantics returns what is wrong with a table's semantics in a
// dictionary file: its metrics' names and texts, its synonyms, its
// relationships' columns (cols are the table's columns; others finds
// another table of the same place and its columns, or false).
func checkSemantics(table string, dd DatasetDictionary, cols []Column, others func(name string) (string, []Column, bool)) (DatasetDictionary, []Problem) {
	var problems []Problem
	add := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	out := dd
	if n := len(dd.Metrics) + len(dd.Synonyms); n > MaxSemanticsItems*2 {
		add("", "%s has %d metrics and synonyms; at most %d of each are accepted", table, n, MaxSemanticsItems)
	}
	for _, name := range slices.Sorted(maps.Keys(dd.Metrics)) {
		m := dd.Metrics[name]
		field := "metrics." + name
		switch {
		case len([]rune(name)) > MaxMetricName || !metricNameRE.MatchString(name):
			add(field+".name", "metric %q of %s: a name is letters, digits, _ and spaces, at most %d characters", name, table, MaxMetricName)
		case len([]rune(m.SQL)) > MaxMetricSQL:
			add(field+".sql", "metric %s of %s: its sql or filter is longer than %d characters", name, table, MaxMetricSQL)
		case len([]rune(m.Filter)) > MaxMetricSQL:
			add(field+".filter", "metric %s of %s: its sql or filter is longer than %d characters", name, table, MaxMetricSQL)
		case strings.ContainsRune(m.SQL, ';'):
			add(field+".sql", "metric %s of %s: give one expression (sql) and one condition (filter), without ;", name, table)
		case strings.ContainsRune(m.Filter, ';'):
			add(field+".filter", "metric %s of %s: give one expression (sql) and one condition (filter), without ;", name, table)
		}
		if p := checkText(fmt.Sprintf("the description of metric %s of %s", name, table), m.Description, MaxDescriptionChars); p != "" {
			add(field+".description", "%s", p)
		}
	}
	for _, term := range slices.Sorted(maps.Keys(dd.Synonyms)) {
		if strings.TrimSpace(term) == "" || len([]rune(term)) > MaxSynonymTerm || strings.ContainsAny(term, "\r\n") {
			add("synonyms."+term+".term", "synonym %q of %s: a term is 1 to %d characters on one line", term, table, MaxSynonymTerm)
		}
		if p := checkText(fmt.Sprintf("the meaning of synonym %q of %s", term, table), dd.Synonyms[term], MaxDescriptionChars); p != "" {
			add("synonyms."+term+".meaning", "%s", p)
		}
	}
	if dd.Relationships != nil {
		rels := make([]ForeignKey, 0, len(*dd.Relationships))
		if len(*dd.Relationships) > MaxSemanticsItems {
			add("", "%s has %d relationships; at most %d are accepted", table, len(*dd.Relationships), MaxSemanticsItems)
		}
		for i, r := range *dd.Relationships {
			what := fmt.Sprintf("relationship %d of %s", i+1, table)
			field := fmt.Sprintf("relationships.%d.", i)
			if len(r.Columns) == 0 || len(r.Columns) != len(r.RefColumns) {
				add(field+"columns", "%s: give columns and ref_columns, as many of each", what)
				continue
			}
			refName, refCols, ok := others(r.RefTable)
			if !ok {
				add(field+"ref_table", "%s: ref_table %q is not a table here", what, r.RefTable)
				continue
			}
			res := ForeignKey{RefTable: refName}
			for _, c := range r.Columns {
				real, ok := findColumn(cols, c)
				if !ok {
					add(field+"columns", "%s: %s has no column %q", what, table, c)
				}
				res.Columns = append(res.Columns, real)
			}
			for _, c := range r.RefColumns {
				real, ok := findColumn(refCols, c)
				if !ok {
					add(field+"ref_columns", "%s: %s has no column %q", what, refName, c)
				}
				res.RefColumns = append(res.RefColumns, real)
			}
			rels = append(rels, res)
		}
		out.Relationships = &rels
	}
	return out, problems
}

// ResolveSources checks the sources' part of d against the conversation's
// sources and returns d with each source's tables named as the semantic
// layer keys them (SCHEMA.TABLE, unquoted) and their columns as the tables
// name them (a table is found as describe_table finds one). EINVALID naming
// every problem: a source not attached or not available now, a table it
// does not have, a column the table lacks, a text too long.
func (d Dictionary) ResolveSources(sources []DBSourceInfo) (Dictionary, error) {
	if len(d.Sources) == 0 {
		return d, nil
	}
	var problems []string
	out := d
	out.Sources = map[string]map[string]DatasetDictionary{}
	for _, sname := range slices.Sorted(maps.Keys(d.Sources)) {
		i := slices.IndexFunc(sources, func(s DBSourceInfo) bool { return strings.EqualFold(s.Name, sname) })
		if i < 0 {
			names := make([]string, len(sources))
			for j, s := range sources {
				names[j] = s.Name
			}
			if len(names) == 0 {
				problems = append(problems, fmt.Sprintf("unknown database %q: no database is attached to the conversation", sname))
			} else {
				problems = append(problems, fmt.Sprintf("unknown database %q (the attached ones are %s)", sname, strings.Join(names, ", ")))
			}
			continue
		}
		src := sources[i]
		if src.Unavailable != "" {
			problems = append(problems, fmt.Sprintf("database %s cannot be read now (%s): its tables cannot be checked", src.Name, src.Unavailable))
			continue
		}
		cat := Catalog(nil, []DBSourceInfo{src})
		tables := map[string]DatasetDictionary{}
		for _, tname := range slices.Sorted(maps.Keys(d.Sources[sname])) {
			key, res, ps := checkSourceTable(src, cat, tname, d.Sources[sname][tname])
			problems = append(problems, problemMessages(ps)...)
			if key == "" {
				continue
			}
			if _, dup := tables[key]; dup {
				problems = append(problems, fmt.Sprintf("table %s of %s is named twice", key, src.Name))
			}
			tables[key] = res
		}
		out.Sources[src.Name] = tables
	}
	if len(problems) > 0 {
		return Dictionary{}, Errorf(EINVALID, "The data dictionary does not fit this conversation's databases: %s.", strings.Join(problems, "; "))
	}
	return out, nil
}

// CheckSourceTable checks one table's part of a dictionary against the
// catalog of src, an available source: it returns the table's key in the
// semantic layer (SCHEMA.TABLE, unquoted; "" when src has no such table),
// dd with the columns named as the table names them, and what is wrong, by
// field ([Problem]).
func CheckSourceTable(src DBSourceInfo, table string, dd DatasetDictionary) (string, DatasetDictionary, []Problem) {
	return checkSourceTable(src, Catalog(nil, []DBSourceInfo{src}), table, dd)
}

func checkSourceTable(src DBSourceInfo, cat []CatalogTable, table string, dd DatasetDictionary) (string, DatasetDictionary, []Problem) {
	var problems []Problem
	add := func(field, format string, args ...any) {
		problems = append(problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	find := func(name string) (*CatalogTable, bool) {
		t, err := FindTable(cat, name)
		return t, err == nil
	}
	t, ok := find(table)
	if !ok {
		add("", "database %s has no table %q that the conversation may read (list_tables lists them)", src.Name, table)
		return "", dd, problems
	}
	key := strings.Join(SplitQualified(t.Table.Name), ".")
	if dd.Description != nil {
		if p := checkText("the description of "+key, *dd.Description, MaxDescriptionChars); p != "" {
			add("description", "%s", p)
		}
	}
	res := dd
	res.Columns = nil
	for _, c := range slices.Sorted(maps.Keys(dd.Columns)) {
		real, ok := findColumn(t.Table.Columns, c)
		if !ok {
			add("columns."+c, "table %s of %s has no column %q", key, src.Name, c)
			continue
		}
		if p := checkText(fmt.Sprintf("the description of %s.%s", key, real), dd.Columns[c], MaxDescriptionChars); p != "" {
			add("columns."+c, "%s", p)
		}
		if res.Columns == nil {
			res.Columns = map[string]string{}
		}
		res.Columns[real] = dd.Columns[c]
	}
	res, ps := checkSemantics(key, res, t.Table.Columns, func(name string) (string, []Column, bool) {
		o, ok := find(name)
		if !ok {
			return "", nil, false
		}
		return o.Table.Name, o.Table.Columns, true
	})
	return key, res, append(problems, ps...)
}

// WithSemantics returns copies of the datasets with the layer's metrics,
// synonyms and relationships.
func (l *SemanticLayer) WithSemantics(datasets []*Dataset) []*Dataset {
	if l == nil || len(l.Datasets) == 0 {
		return datasets
	}
	out := make([]*Dataset, len(datasets))
	for i, d := range datasets {
		s, ok := l.Datasets[d.ID]
		if !ok {
			out[i] = d
			continue
		}
		c := *d
		c.Metrics, c.Synonyms, c.Relationships = s.Metrics, s.Synonyms, s.Relationships
		out[i] = &c
	}
	return out
}

// Describe gives a source's tables the layer's descriptions, metrics,
// synonyms and relationships (the tables are changed in place).
func (l *SemanticLayer) Describe(source string, tables []DBSourceTable) {
	if l == nil || len(l.Sources[source]) == 0 {
		return
	}
	for i := range tables {
		t := &tables[i]
		s, ok := l.Sources[source][strings.Join(SplitQualified(t.Name), ".")]
		if !ok {
			continue
		}
		t.Description = s.Description
		t.Columns = slices.Clone(t.Columns)
		for j := range t.Columns {
			t.Columns[j].Description = s.Columns[t.Columns[j].Name]
		}
		t.Metrics, t.Synonyms, t.Relationships = s.Metrics, s.Synonyms, s.Relationships
	}
}
