package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"datachat"
	"datachat/internal/duckdb/wire"

	"github.com/duckdb/duckdb-go/v2/mapping"
)

// The sandbox's checks on a statement, before DuckDB binds or runs it. They
// add to what DuckDB's own settings enforce (see [instance]) and to what the
// worker's OS limits contain: a statement must be one SELECT (or a plain
// EXPLAIN of one), and may name only what [policy] allows. Both checks read
// DuckDB's own parse tree (json_serialize_sql), never the text.

// allowedTableFunctions are the table functions a query may call in FROM:
// generators, and the catalog's read-only descriptions of itself. Every other
// table function, pragma and table macro of the catalog is refused — those
// read files, run SQL given as a string (query, query_table,
// json_execute_serialized_sql), change the instance's state (logging,
// profiling, checkpoints), read raw memory (arrow_scan) or show server paths
// (duckdb_databases, duckdb_settings). A function DuckDB adds in a later
// version is refused until it is listed here.
var allowedTableFunctions = []string{
	"range", "generate_series", "unnest", "repeat", "repeat_row", "json_each", "json_tree",
	"duckdb_columns", "duckdb_tables", "duckdb_views", "duckdb_schemas", "duckdb_types",
	"duckdb_functions", "duckdb_keywords", "duckdb_constraints", "duckdb_indexes",
	"duckdb_sequences", "duckdb_dependencies", "duckdb_optimizers", "pragma_table_info",
	"pragma_show", "summary", "pg_timezone_names", "icu_calendar_names", "pragma_version",
	"test_all_types",
}

// deniedFunctions are scalar functions refused wherever they appear: they
// write to DuckDB's log, or show the instance's settings (which name server
// paths).
var deniedFunctions = []string{"write_log", "current_setting", "getenv"}

// AllowedTableFunctions returns the table functions a query may call in
// FROM (allowedTableFunctions), for the sandbox's tests.
func AllowedTableFunctions() []string { return slices.Clone(allowedTableFunctions) }

// DeniedRelations returns the catalog's views a query may not read
// (deniedRelations), for the sandbox's tests.
func DeniedRelations() []string { return slices.Clone(deniedRelations) }

// deniedRelations are the catalog's own views that show server paths or
// settings.
var deniedRelations = []string{"duckdb_databases", "pragma_database_list", "pg_settings", "duckdb_logs", "databases", "duckdb_settings"}

// policy is what a statement may name, read from the instance's own catalog
// when it opens.
type policy struct {
	tableFunctions map[string]bool // may be called in FROM
	denied         map[string]bool // functions refused anywhere: table functions not allowed, denied scalars, macros that call either
	relations      map[string]bool // refused relation names
	own            map[string]bool // the conversation's own tables, which may share a name with a refused relation
}

// newPolicy is the policy for an instance over tables, given the functions
// the catalog denies (see catalogDenied).
func newPolicy(denied []string, tables []wire.Table) *policy {
	p := &policy{tableFunctions: map[string]bool{}, denied: map[string]bool{}, relations: map[string]bool{}, own: map[string]bool{}}
	for _, f := range allowedTableFunctions {
		p.tableFunctions[f] = true
	}
	for _, f := range deniedFunctions {
		p.denied[f] = true
	}
	for _, f := range denied {
		if !p.tableFunctions[f] {
			p.denied[f] = true
		}
	}
	for _, r := range deniedRelations {
		p.relations[r] = true
	}
	for name := range p.denied {
		p.relations[name] = true
	}
	// A conversation's own table may share a name with one of those: it is
	// allowed by that name where the name can only mean the table (see
	// ownTable), never where it reaches the catalog's view.
	for _, t := range tables {
		p.own[strings.ToLower(t.Name)] = true
	}
	return p
}

// ownTable reports whether a table reference, as the parse tree names it,
// means one of the conversation's own tables: its name is one of theirs,
// and it is unqualified or qualified by where they are (the in-memory
// database's main schema). Any other qualifier — pg_catalog, system,
// information_schema, temp — reaches another catalog's relation of that
// name, and a catalog's views show server paths.
func (p *policy) ownTable(catalog, schema, name string) bool {
	if !p.own[name] {
		return false
	}
	switch catalog {
	case "":
		return schema == "" || schema == "main" || schema == "memory"
	case "memory":
		return schema == "" || schema == "main"
	}
	return false
}

// catalogDenied reads from the catalog the functions to deny: every table
// function, pragma and table macro not on the allow list, and every macro
// whose definition calls a denied function (histogram calls query_table), to
// a fixed point. It runs only our own SQL, on an instance no user has
// touched; the engine asks one worker for it and gives the answer to the
// others (it is the same for every instance of this DuckDB build).
func catalogDenied(conn mapping.Connection) ([]string, error) {
	p := newPolicy(nil, nil)
	res, err := queryAll(conn, "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro', 'pragma')", -1, nil)
	if err != nil {
		return nil, fmt.Errorf("read table functions: %w", err)
	}
	for _, row := range res.Rows {
		if name, _ := row[0].(string); !p.tableFunctions[name] {
			p.denied[name] = true
			p.relations[name] = true
		}
	}
	res, err = queryAll(conn, "SELECT lower(function_name), function_type, macro_definition FROM duckdb_functions() WHERE function_type IN ('macro', 'table_macro') AND macro_definition IS NOT NULL", -1, nil)
	if err != nil {
		return nil, fmt.Errorf("read macros: %w", err)
	}
	type macro struct {
		name string
		tree any
	}
	var macros []macro
	for _, row := range res.Rows {
		name, _ := row[0].(string)
		kind, _ := row[1].(string)
		def, _ := row[2].(string)
		if kind == "macro" {
			def = "SELECT " + def
		}
		tree, err := parseTree(conn, def)
		if err != nil {
			// A definition the serializer cannot read cannot be checked.
			p.denied[name] = true
			continue
		}
		macros = append(macros, macro{name, tree})
	}
	for changed := true; changed; {
		changed = false
		for _, m := range macros {
			if !p.denied[m.name] && p.violation(m.tree) != "" {
				p.denied[m.name] = true
				changed = true
			}
		}
	}
	out := make([]string, 0, len(p.denied))
	for name := range p.denied {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// parseTree returns DuckDB's parse tree of a SELECT, as json_serialize_sql
// writes it; the text is a bound parameter, never part of the statement.
func parseTree(conn mapping.Connection, sql string) (any, error) {
	res, err := queryAll(conn, "SELECT json_serialize_sql($1::VARCHAR)", 1, []string{sql})
	if err != nil {
		// A query too large to serialise within the memory limit or the
		// time (a 100,000-value IN list) is the user's to make smaller.
		var de *duckError
		if errors.As(err, &de) {
			if qe := classify(de.typ, de.msg); qe.Kind == datachat.KindMemory || qe.Kind == datachat.KindTimeout {
				return nil, qe
			}
		}
		return nil, err
	}
	if len(res.Rows) != 1 {
		return nil, errors.New("json_serialize_sql returned no tree")
	}
	out, _ := res.Rows[0][0].(string)
	var tree any
	if err := json.Unmarshal([]byte(out), &tree); err != nil {
		return nil, fmt.Errorf("read parse tree: %w", err)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, errors.New("unexpected parse tree")
	}
	if m["error"] == true {
		msg, _ := m["error_message"].(string)
		return nil, &treeError{msg: msg}
	}
	return tree, nil
}

// treeError is json_serialize_sql's refusal: a statement that is not a
// SELECT, or one that does not parse.
type treeError struct{ msg string }

func (e *treeError) Error() string   { return e.msg }
func (e *treeError) notSelect() bool { return strings.Contains(e.msg, "Only SELECT") }

// violation returns what the tree names that the policy refuses, or "".
func (p *policy) violation(tree any) string {
	var bad string
	walk(tree, func(m map[string]any) {
		if bad != "" {
			return
		}
		typ, _ := m["type"].(string)
		switch typ {
		case "TABLE_FUNCTION":
			if f, ok := m["function"].(map[string]any); ok {
				if name, _ := f["function_name"].(string); !p.tableFunctions[strings.ToLower(name)] {
					bad = "table function " + name + "()"
					return
				}
			}
		case "BASE_TABLE", "SHOW_REF":
			name, _ := m["table_name"].(string)
			lower := func(key string) string { v, _ := m[key].(string); return strings.ToLower(strings.Trim(v, `"`)) }
			if table := lower("table_name"); p.relations[table] && !p.ownTable(lower("catalog_name"), lower("schema_name"), table) {
				bad = name
				return
			}
		}
		if name, ok := m["function_name"].(string); ok && p.denied[strings.ToLower(name)] {
			bad = "function " + name + "()"
		}
	})
	return bad
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

// OnlySelect is what a refused statement that is not one SELECT is told.
const OnlySelect = "only read-only SELECT queries (and plain EXPLAIN SELECT …) run here"

// checked is a statement that passed the checks, prepared and ready to run.
type checked struct {
	stmt    mapping.PreparedStatement
	explain bool
}

func (c *checked) close() { mapping.DestroyPrepare(&c.stmt) }

// check checks one query string and prepares what will run: the statement
// itself when it is a SELECT; for EXPLAIN SELECT …, an EXPLAIN the sandbox
// builds around the checked SELECT.
func (in *instance) check(conn mapping.Connection, sql string) (*checked, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return nil, &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the query contains a NUL byte"}
	}
	err := in.checkSelect(conn, sql)
	var te *treeError
	switch {
	case err == nil:
		return prepareOne(conn, sql, mapping.StatementTypeSelect)
	case !errors.As(err, &te) || !te.notSelect():
		return nil, err
	}
	// Not a SELECT. The one other form that runs is a plain EXPLAIN of a
	// SELECT: the SELECT after the keyword is checked like any other, and the
	// EXPLAIN that runs is ours.
	rest, ok := cutKeyword(sql, "EXPLAIN")
	if !ok && statementName(sql) == "EXPLAIN" {
		return nil, refused("write EXPLAIN as the query's first word, with nothing before it (not even a comment) and no options: EXPLAIN SELECT …")
	}
	if !ok {
		return nil, refused(fmt.Sprintf("%s statements are not allowed: %s; files, settings, extensions and other databases are out of reach", statementName(sql), OnlySelect))
	}
	if w, _ := firstWord(rest); w == "ANALYZE" || w == "ANALYSE" || w == "VERBOSE" || strings.HasPrefix(rest[skipBlank(rest, 0):], "(") {
		return nil, refused("EXPLAIN takes no options here (no ANALYZE, which runs the query, and no (FORMAT …)): write EXPLAIN SELECT …, or run the SELECT itself")
	}
	if err := in.checkSelect(conn, rest); err != nil {
		if errors.As(err, &te) && te.notSelect() {
			return nil, refused("EXPLAIN is allowed only of a SELECT: " + OnlySelect)
		}
		return nil, err
	}
	c, err := prepareOne(conn, "EXPLAIN "+rest, mapping.StatementTypeExplain)
	if err != nil {
		return nil, err
	}
	c.explain = true
	return c, nil
}

// checkSelect checks that sql is exactly one SELECT naming nothing the policy
// refuses. A statement that is not a SELECT answers a *treeError whose
// notSelect is true.
func (in *instance) checkSelect(conn mapping.Connection, sql string) error {
	if n, err := countStatements(conn, sql); err != nil {
		return err
	} else if n != 1 {
		return refused(fmt.Sprintf("only one SQL statement per query is allowed, and this query has %d; send them one at a time (a PIVOT needs an explicit IN list: PIVOT t ON col IN ('a', 'b') USING …)", n))
	}
	tree, err := parseTree(conn, sql)
	if err != nil {
		var te *treeError
		if errors.As(err, &te) && !te.notSelect() {
			return classify(mapping.ErrorTypeParser, te.msg)
		}
		return err
	}
	if stmts, _ := tree.(map[string]any)["statements"].([]any); len(stmts) != 1 {
		return refused("only one SQL statement per query is allowed")
	}
	if bad := in.policy.violation(tree); bad != "" {
		return refused(fmt.Sprintf("%s is not allowed: it reads files, runs SQL from a string, changes the database's state or shows server settings; %s over the conversation's tables", bad, OnlySelect))
	}
	return nil
}

// countStatements parses sql (without binding it) and counts its statements.
func countStatements(conn mapping.Connection, sql string) (int, error) {
	var ext mapping.ExtractedStatements
	n := mapping.ExtractStatements(conn, sql, &ext)
	defer mapping.DestroyExtracted(&ext)
	if n == 0 {
		if msg := mapping.ExtractStatementsError(ext); msg != "" {
			if strings.Contains(msg, "disabled by configuration") {
				// IMPORT DATABASE reads its files while it is parsed.
				return 0, refused("files outside the conversation's datasets are out of reach: " + msg)
			}
			return 0, classify(mapping.ErrorTypeParser, msg)
		}
		return 0, &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the query is empty"}
	}
	return int(n), nil
}

// prepareOne prepares sql, which must be one statement of type want.
func prepareOne(conn mapping.Connection, sql string, want mapping.StatementType) (*checked, error) {
	var ext mapping.ExtractedStatements
	n := mapping.ExtractStatements(conn, sql, &ext)
	defer mapping.DestroyExtracted(&ext)
	if n != 1 {
		return nil, refused("only one SQL statement per query is allowed")
	}
	c := &checked{}
	if mapping.PrepareExtractedStatement(conn, ext, 0, &c.stmt) == mapping.StateError {
		msg := mapping.PrepareError(c.stmt)
		c.close()
		return nil, classify(mapping.ErrorTypeInvalid, msg)
	}
	if t := mapping.PreparedStatementType(c.stmt); t != want {
		c.close()
		return nil, refused(fmt.Sprintf("%s statements are not allowed: %s", statementNames[t], OnlySelect))
	}
	return c, nil
}

// cutKeyword returns what follows a leading keyword and white space, ignoring
// case and leading white space. It is not a parser: what it returns is
// checked by DuckDB's.
func cutKeyword(s, kw string) (string, bool) {
	s = strings.TrimLeft(s, " \t\r\n\f")
	if len(s) <= len(kw) || !strings.EqualFold(s[:len(kw)], kw) {
		return "", false
	}
	rest := strings.TrimLeft(s[len(kw):], " \t\r\n\f")
	if len(rest) == len(s)-len(kw) {
		return "", false // no white space after the keyword
	}
	return rest, true
}

// firstWord returns the first word of s in upper case, skipping white space
// and comments: only to name a refused statement in its message.
func firstWord(s string) (string, bool) {
	i := skipBlank(s, 0)
	j := i
	for j < len(s) && isIdentByte(s[j]) {
		j++
	}
	return strings.ToUpper(s[i:j]), j > i
}

// statementName names a statement for a refusal message.
func statementName(sql string) string {
	w, ok := firstWord(sql)
	if !ok {
		return "Such"
	}
	if slices.Contains([]string{"CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "COPY", "EXPORT", "IMPORT",
		"ATTACH", "DETACH", "USE", "SET", "RESET", "PRAGMA", "CALL", "LOAD", "INSTALL", "FORCE", "PREPARE", "EXECUTE",
		"DEALLOCATE", "BEGIN", "COMMIT", "ROLLBACK", "ABORT", "START", "END", "CHECKPOINT", "VACUUM", "ANALYZE",
		"TRUNCATE", "MERGE", "UPSERT", "UNPIVOT", "UPDATE", "COMMENT", "EXPLAIN"}, w) {
		return w
	}
	return "Such"
}

var statementNames = map[mapping.StatementType]string{
	mapping.StatementTypeSelect:      "SELECT",
	mapping.StatementTypeExplain:     "EXPLAIN",
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
