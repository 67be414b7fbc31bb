package datachat

import "strings"

// Ident writes an identifier as SQL text for a reader, a person or a model:
// bare when DuckDB reads it back as the same name (lower-case letters, digits
// and underscores, not starting with a digit, and not a keyword DuckDB
// reserves), else quoted by [QuoteIdent]. SQL datachat runs quotes every
// identifier with QuoteIdent.
func Ident(s string) string {
	plain := s != "" && !identKeywords[s]
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return QuoteIdent(s)
}

// QuoteIdent quotes an SQL identifier (a table, column or schema name) as
// DuckDB and PostgreSQL read it: between double quotes, each inside doubled.
// It is the one way datachat writes a name into SQL it builds; [TableName]
// makes the names of datasets' tables.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteMySQLIdent quotes an identifier as MySQL and MariaDB read it:
// between backticks, each inside doubled. [QuoteIdent] quotes PostgreSQL's.
func QuoteMySQLIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// QuoteLiteral quotes an SQL string literal for DuckDB. With [QuoteIdent], it
// is the one way datachat puts a value into SQL text it builds.
func QuoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// identKeywords are the words DuckDB does not take as a bare column name: its
// reserved and type_function keywords (duckdb_keywords(); internal/duckdb's
// TestKeywords checks them against the linked DuckDB). Most are the words it
// does not take as a table name either ([ReservedWords]); these few only
// fail elsewhere.
var identKeywords = func() map[string]bool {
	m := map[string]bool{"columns": true, "generated": true, "map": true, "struct": true, "try_cast": true}
	for w := range reservedWords {
		m[w] = true
	}
	return m
}()

// IdentKeywords lists the words [Ident] quotes although they are written in
// lower-case letters and underscores, in no order.
func IdentKeywords() []string {
	out := make([]string, 0, len(identKeywords))
	for w := range identKeywords {
		out = append(out, w)
	}
	return out
}
