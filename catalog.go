package datachat

import (
	"path"
	"slices"
	"strings"
)

// CatalogTable is one table a conversation can query: a dataset, or an
// allowed table of one of its database sources. list_tables and
// describe_table (the chat's and MCP's) find tables among them.
type CatalogTable struct {
	Source  string // the database's name; "" for a dataset
	Kind    string // the database's kind
	Dataset *Dataset
	Table   *DBSourceTable
}

// Catalog is the conversation's tables: its datasets, then each source's
// tables (those of a source that cannot be listed now are missing).
func Catalog(datasets []*Dataset, sources []DBSourceInfo) []CatalogTable {
	var out []CatalogTable
	for _, d := range datasets {
		out = append(out, CatalogTable{Dataset: d})
	}
	for si := range sources {
		s := &sources[si]
		for ti := range s.Tables {
			out = append(out, CatalogTable{Source: s.Name, Kind: s.Kind, Table: &s.Tables[ti]})
		}
	}
	return out
}

// Name is the table's name as its SQL writes it.
func (t CatalogTable) Name() string {
	if t.Dataset != nil {
		return t.Dataset.Name
	}
	return t.Table.Name
}

// Key names the table across the conversation: a dataset's name, or
// SOURCE.SCHEMA.TABLE unquoted.
func (t CatalogTable) Key() string {
	if t.Dataset != nil {
		return t.Dataset.Name
	}
	return t.Source + "." + strings.Join(SplitQualified(t.Table.Name), ".")
}

// Rows is the table's row count (a source's estimate), or nil.
func (t CatalogTable) Rows() *int64 {
	if t.Dataset != nil {
		n := t.Dataset.RowCount
		return &n
	}
	return t.Table.Rows
}

// Description is the data dictionary's description of the table.
func (t CatalogTable) Description() string {
	if t.Dataset != nil {
		return t.Dataset.Description
	}
	return t.Table.Description
}

// Columns are the table's columns.
func (t CatalogTable) Columns() []Column {
	if t.Dataset != nil {
		return t.Dataset.Columns
	}
	return t.Table.Columns
}

// SplitQualified splits a qualified name as a source's SQL writes it
// (schema."Table", `db`.`t`) into its unquoted parts.
func SplitQualified(name string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' || c == '`':
			for i++; i < len(name); i++ {
				if name[i] == c {
					if i+1 < len(name) && name[i+1] == c {
						cur.WriteByte(c)
						i++
						continue
					}
					break
				}
				cur.WriteByte(name[i])
			}
		case c == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, cur.String())
}

// FindTable resolves a table's name as a model writes it: a dataset's name,
// SCHEMA.TABLE or TABLE of a source's table, or SOURCE.SCHEMA.TABLE, quoted
// or not, in any case — the whole name before a table's own, an exact
// match before one in another case. EINVALID naming what to give when no
// table or several have that name.
func FindTable(tables []CatalogTable, name string) (*CatalogTable, error) {
	want := strings.Join(SplitQualified(strings.TrimSpace(name)), ".")
	lw := strings.ToLower(want)
	var tiers [4][]int
	for i, t := range tables {
		whole := []string{strings.Join(SplitQualified(t.Name()), "."), t.Key()}
		var last string
		if t.Table != nil {
			parts := SplitQualified(t.Table.Name)
			last = parts[len(parts)-1]
		}
		switch {
		case slices.Contains(whole, want):
			tiers[0] = append(tiers[0], i)
		case last != "" && last == want:
			tiers[1] = append(tiers[1], i)
		case slices.ContainsFunc(whole, func(w string) bool { return strings.ToLower(w) == lw }):
			tiers[2] = append(tiers[2], i)
		case last != "" && strings.ToLower(last) == lw:
			tiers[3] = append(tiers[3], i)
		}
	}
	var found []int
	for _, tier := range tiers {
		if len(tier) > 0 {
			found = tier
			break
		}
	}
	switch len(found) {
	case 1:
		return &tables[found[0]], nil
	case 0:
		return nil, Errorf(EINVALID, "no table named %q in this conversation; list_tables lists them (with a pattern, the names that contain it).", name)
	}
	keys := make([]string, len(found))
	for i, j := range found {
		keys[i] = tables[j].Key()
	}
	return nil, Errorf(EINVALID, "%q names several tables: %s; give the one meant with its database (SOURCE.SCHEMA.TABLE).", name, strings.Join(keys, ", "))
}

// MatchTables returns the tables of source ("" for all, "datasets" for the
// datasets) whose unquoted name matches pattern: with * or ?, a glob over
// the whole name or over its last parts (so "*invoice*" finds
// billing.invoices); without, a part of the name; "" for every table.
// Case is ignored. EINVALID, naming the databases there are, for a source
// that is not one.
func MatchTables(tables []CatalogTable, source, pattern string) ([]CatalogTable, error) {
	source = strings.ToLower(strings.TrimSpace(source))
	pattern = strings.ToLower(strings.TrimSpace(pattern))
	match := func(name string) bool {
		name = strings.ToLower(name)
		if pattern == "" {
			return true
		}
		if !strings.ContainsAny(pattern, "*?") {
			return strings.Contains(name, pattern)
		}
		for rest := name; ; {
			if ok, err := path.Match(pattern, rest); err == nil && ok {
				return true
			}
			var found bool
			if _, rest, found = strings.Cut(rest, "."); !found {
				return false
			}
		}
	}
	var names []string
	seen := map[string]bool{}
	var out []CatalogTable
	for _, t := range tables {
		if t.Source != "" && !seen[t.Source] {
			seen[t.Source] = true
			names = append(names, t.Source)
		}
		switch {
		case source == "datasets" && t.Dataset == nil, source != "" && source != "datasets" && t.Source != source:
			continue
		}
		if match(strings.Join(SplitQualified(t.Name()), ".")) {
			out = append(out, t)
		}
	}
	if source != "" && source != "datasets" && !seen[source] {
		slices.Sort(names)
		return nil, Errorf(EINVALID, "no database named %q is attached; give one of %s, or omit source.", source, strings.Join(append(names, `"datasets"`), ", "))
	}
	return out, nil
}
