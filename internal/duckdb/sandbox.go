package duckdb

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// The sandbox's checks on a statement, before it runs. They add to what
// DuckDB's own settings enforce (see [instance]): a statement must be a single
// SELECT (or an EXPLAIN of one), and must not call the few functions that
// change the state of the database from inside a SELECT, which no setting
// turns off. Both checks use DuckDB's parser, not pattern matching on the text.

// deniedFunctions are callable from a SELECT but change instance state or run
// SQL given as a string (which would escape the parse-tree check).
var deniedFunctions = map[string]bool{
	"enable_logging":              true,
	"disable_logging":             true,
	"truncate_duckdb_logs":        true,
	"enable_profiling":            true,
	"disable_profiling":           true,
	"enable_peg_parser":           true,
	"disable_peg_parser":          true,
	"checkpoint":                  true,
	"force_checkpoint":            true,
	"arrow_scan":                  true,
	"arrow_scan_dumb":             true,
	"json_execute_serialized_sql": true,
	"query":                       true,
	"query_table":                 true,
	"write_log":                   true,
}

var statementNames = map[mapping.StatementType]string{
	mapping.StatementTypeInsert:      "INSERT",
	mapping.StatementTypeUpdate:      "UPDATE",
	mapping.StatementTypeDelete:      "DELETE",
	mapping.StatementTypePrepare:     "PREPARE",
	mapping.StatementTypeCreate:      "CREATE",
	mapping.StatementTypeExecute:     "EXECUTE",
	mapping.StatementTypeAlter:       "ALTER",
	mapping.StatementTypeTransaction: "transaction",
	mapping.StatementTypeCopy:        "COPY",
	mapping.StatementTypeAnalyze:     "ANALYZE",
	mapping.StatementTypeVariableSet: "SET VARIABLE",
	mapping.StatementTypeCreateFunc:  "CREATE FUNCTION",
	mapping.StatementTypeDrop:        "DROP",
	mapping.StatementTypeExport:      "EXPORT",
	mapping.StatementTypePragma:      "PRAGMA",
	mapping.StatementTypeVacuum:      "VACUUM",
	mapping.StatementTypeCall:        "CALL",
	mapping.StatementTypeSet:         "SET/RESET/USE",
	mapping.StatementTypeLoad:        "LOAD",
	mapping.StatementTypeExtension:   "INSTALL",
	mapping.StatementTypeAttach:      "ATTACH",
	mapping.StatementTypeDetach:      "DETACH",
}

const onlySelect = "only read-only SELECT queries (and EXPLAIN of one) run here"

// prepared is a checked statement ready to execute.
type prepared struct {
	stmt    mapping.PreparedStatement
	explain bool
}

func (p *prepared) close() { mapping.DestroyPrepare(&p.stmt) }

// prepare checks one query string and prepares it on conn.
func prepare(conn mapping.Connection, sql string) (*prepared, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return nil, &QueryError{Kind: KindSyntax, Message: "the query contains a NUL byte"}
	}
	var ext mapping.ExtractedStatements
	n := mapping.ExtractStatements(conn, sql, &ext)
	defer mapping.DestroyExtracted(&ext)
	switch {
	case n == 0:
		if msg := mapping.ExtractStatementsError(ext); msg != "" {
			return nil, classify(mapping.ErrorTypeInvalid, msg)
		}
		return nil, &QueryError{Kind: KindSyntax, Message: "the query is empty"}
	case n > 1:
		return nil, refused(fmt.Sprintf("only one SQL statement per query is allowed, and this query has %d; send them one at a time (a PIVOT needs an explicit IN list: PIVOT t ON col IN ('a', 'b') USING …)", n))
	}
	p := &prepared{}
	if mapping.PrepareExtractedStatement(conn, ext, 0, &p.stmt) == mapping.StateError {
		msg := mapping.PrepareError(p.stmt)
		mapping.DestroyPrepare(&p.stmt)
		return nil, classify(mapping.ErrorTypeInvalid, msg)
	}
	inner := sql
	switch t := mapping.PreparedStatementType(p.stmt); t {
	case mapping.StatementTypeSelect:
	case mapping.StatementTypeExplain:
		var ok bool
		inner, ok = explainTarget(sql)
		if !ok {
			p.close()
			return nil, refused("EXPLAIN is allowed only as EXPLAIN [ANALYZE] [(options)] SELECT …; " + onlySelect)
		}
		p.explain = true
	default:
		p.close()
		name := statementNames[t]
		if name == "" {
			name = fmt.Sprintf("type %d", t)
		}
		return nil, refused(fmt.Sprintf("%s statements are not allowed: %s; files, settings, extensions and other databases are out of reach", name, onlySelect))
	}
	if err := checkFunctions(conn, inner); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// checkFunctions parses a SELECT with DuckDB's json_serialize_sql and refuses
// it if it calls a denied function anywhere (CTEs and subqueries included).
func checkFunctions(conn mapping.Connection, sql string) error {
	out, err := scalarString(conn, "SELECT json_serialize_sql("+quoteLiteral(sql)+")")
	if err != nil {
		return fmt.Errorf("parse query: %w", err)
	}
	var tree any
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		return fmt.Errorf("parse query tree: %w", err)
	}
	if m, ok := tree.(map[string]any); ok && m["error"] == true {
		msg, _ := m["error_message"].(string)
		if strings.Contains(msg, "Only SELECT") {
			return refused("this form of statement cannot be checked, so it is not run; " + onlySelect + " (use DESCRIBE t or SELECT … FROM duckdb_columns() to see a table's columns)")
		}
		return &QueryError{Kind: KindSyntax, Message: msg}
	}
	var bad string
	walk(tree, func(m map[string]any) {
		if name, ok := m["function_name"].(string); ok && bad == "" && deniedFunctions[strings.ToLower(name)] {
			bad = name
		}
	})
	if bad != "" {
		return refused(fmt.Sprintf("function %s() is not allowed: it changes the database's state or runs SQL from a string; %s", bad, onlySelect))
	}
	return nil
}

func walk(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, c := range x {
			walk(c, fn)
		}
	case []any:
		for _, c := range x {
			walk(c, fn)
		}
	}
}

// explainTarget returns the statement an EXPLAIN explains, given a statement
// DuckDB already parsed as EXPLAIN. It accepts only EXPLAIN [ANALYZE|ANALYSE]
// [(option, …)] before it, with comments and spaces anywhere.
func explainTarget(sql string) (string, bool) {
	i := skipBlank(sql, 0)
	word := func() string {
		j := i
		for j < len(sql) && (isIdentByte(sql[j])) {
			j++
		}
		return strings.ToUpper(sql[i:j])
	}
	if word() != "EXPLAIN" {
		return "", false
	}
	i = skipBlank(sql, i+len("EXPLAIN"))
	for {
		switch w := word(); {
		case w == "ANALYZE" || w == "ANALYSE":
			i = skipBlank(sql, i+len(w))
			continue
		case w == "" && i < len(sql) && sql[i] == '(':
			j := i + 1
			for j < len(sql) && sql[j] != ')' {
				c := sql[j]
				if !(isIdentByte(c) || c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'') {
					return "", false
				}
				j++
			}
			if j == len(sql) {
				return "", false
			}
			i = skipBlank(sql, j+1)
			continue
		}
		break
	}
	if i >= len(sql) {
		return "", false
	}
	return sql[i:], true
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skipBlank skips spaces and SQL comments from i.
func skipBlank(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f':
			i++
		case strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return len(s)
			}
			i += j + 1
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return len(s)
			}
			i += j + 4
		default:
			return i
		}
	}
	return i
}
