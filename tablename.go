package datachat

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// TableName derives a dataset's table name from its file name:
// drop the format extension (one of DatasetFormats', with any compression
// suffix after it), lower-case, replace each run of characters outside [a-z0-9_] with
// _, trim _, prefix t_ if it starts with a digit; "dataset" if nothing is left,
// _data appended to a DuckDB reserved word; then _2, _3… on a clash with taken
// (compared case-insensitively). Names are cut to 60 characters. A URL's path or a path with directories uses
// its last element.
func TableName(filename string, taken []string) string {
	base := filename
	if i := strings.IndexAny(base, "?#"); i >= 0 && strings.Contains(base, "://") {
		base = base[:i]
	}
	base = path.Base(strings.ReplaceAll(base, `\`, "/"))
	if base == "." || base == "/" {
		base = ""
	}
	name := strings.ToLower(base)
	name = formatSuffix.ReplaceAllString(name, "")
	name = strings.Trim(nonIdent.ReplaceAllString(name, "_"), "_")
	if len(name) > maxTableName {
		name = strings.TrimRight(name[:maxTableName], "_")
	}
	switch {
	case name == "":
		name = "dataset"
	case name[0] >= '0' && name[0] <= '9':
		name = "t_" + name
	}
	if reservedWords[name] {
		name += "_data"
	}
	used := make(map[string]bool, len(taken))
	for _, t := range taken {
		used[strings.ToLower(t)] = true
	}
	if !used[name] {
		return name
	}
	for i := 2; ; i++ {
		if c := fmt.Sprintf("%s_%d", name, i); !used[c] {
			return c
		}
	}
}

// maxTableName is the longest table name made from a file name, in
// characters (all ASCII): a long file name would otherwise become a long
// name in every prompt.
const maxTableName = 60

var (
	nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)
)

// reservedWords are the keywords DuckDB cannot parse as an unquoted table name:
// every keyword of category 'reserved' in duckdb_keywords() (DuckDB 1.5.5), and
// the 'type_function' keywords that fail the same way (join, left, …).
// internal/dataset's TestReservedWords regenerates the list from DuckDB and compares.
var reservedWords = toSet(`all analyse analyze and anti any array as asc asof asymmetric at
authorization binary both by case cast check collate collation column concurrently constraint
create cross default deferrable desc describe distinct do else end except false fetch for
foreign freeze from full glob group having ilike in initially inner intersect into is isnull
join lambda lateral leading left like limit natural not notnull null offset on only or order
outer overlaps pivot pivot_longer pivot_wider placing positional primary qualify references
returning right select semi show similar some summarize symmetric table tablesample then to
trailing true union unique unpack unpivot using variadic verbose when where window with`)

// IsReservedWord reports whether DuckDB cannot parse name as an unquoted
// table name (TableName never returns one).
func IsReservedWord(name string) bool { return reservedWords[name] }

// ReservedWords lists the words IsReservedWord reports, in no order.
func ReservedWords() []string {
	out := make([]string, 0, len(reservedWords))
	for w := range reservedWords {
		out = append(out, w)
	}
	return out
}

func toSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
