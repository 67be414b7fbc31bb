package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"datachat"
	sqlworker "datachat/internal/duckdb/worker"
)

// Relations returns the names of the tables, among tables, that sql reads,
// in the order of tables. It reads DuckDB's own parse tree of the query
// (json_serialize_sql, run in the conversation's sandboxed worker like any
// query), never its text: a table name in a string, a comment or an alias is
// not a read, and where a common table expression of the same name is in
// scope it hides the table. Names compare without regard to case, as
// DuckDB's do.
//
// Errors: *datachat.QueryError (EINVALID) when sql is not one SELECT that parses;
// datachat.EINVALID when its parse tree is too large to read back; the
// errors of [Engine.Query] otherwise.
func (e *Engine) Relations(ctx context.Context, conversationID string, tables []Table, sql string) ([]string, error) {
	res, err := e.Query(ctx, conversationID, tables, "SELECT json_serialize_sql("+datachat.QuoteLiteral(sql)+")")
	if err != nil {
		return nil, err
	}
	if res.Truncated || len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return nil, datachat.Errorf(datachat.EINVALID, "The query is too long to tell which tables it reads.")
	}
	text, _ := res.Rows[0][0].(string)
	read, err := relationsOf(text)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tables {
		if read[strings.ToLower(t.Name)] {
			out = append(out, t.Name)
		}
	}
	return out, nil
}

// relationsOf returns the lower-cased names of the base tables a parse tree
// (json_serialize_sql's output) reads. A name a common table expression
// defines is that expression where it is in scope: in the query of its WITH
// and in the expressions after it (in its own, when recursive); a reference
// to the same name in an earlier expression, or outside, is the table.
func relationsOf(text string) (map[string]bool, error) {
	var tree any
	if err := json.Unmarshal([]byte(text), &tree); err != nil {
		return nil, errors.New("read parse tree: " + err.Error())
	}
	if m, ok := tree.(map[string]any); ok && m["error"] == true {
		msg, _ := m["error_message"].(string)
		if strings.Contains(msg, "Only SELECT") {
			return nil, &datachat.QueryError{Kind: datachat.KindRefused, Message: sqlworker.OnlySelect}
		}
		return nil, &datachat.QueryError{Kind: datachat.KindSyntax, Message: msg}
	}
	read := map[string]bool{}
	collectRelations(tree, map[string]bool{}, read)
	return read, nil
}

// collectRelations adds to read the base tables v reads that are not a
// common table expression in scope.
func collectRelations(v any, scope, read map[string]bool) {
	switch x := v.(type) {
	case []any:
		for _, c := range x {
			collectRelations(c, scope, read)
		}
	case map[string]any:
		typ, _ := x["type"].(string)
		if typ == "RECURSIVE_CTE_NODE" {
			if name, _ := x["cte_name"].(string); name != "" {
				scope = with(scope, name)
			}
		}
		if cm, ok := x["cte_map"].(map[string]any); ok {
			entries, _ := cm["map"].([]any)
			for _, en := range entries {
				e, _ := en.(map[string]any)
				key, _ := e["key"].(string)
				collectRelations(e["value"], scope, read) // sees the expressions before it
				if key != "" {
					scope = with(scope, key)
				}
			}
		}
		if typ == "BASE_TABLE" {
			if name, _ := x["table_name"].(string); name != "" && !scope[strings.ToLower(name)] {
				read[strings.ToLower(name)] = true
			}
		}
		for k, c := range x {
			if k != "cte_map" {
				collectRelations(c, scope, read)
			}
		}
	}
}

// with returns scope and name, leaving scope as it was.
func with(scope map[string]bool, name string) map[string]bool {
	out := make(map[string]bool, len(scope)+1)
	for k := range scope {
		out[k] = true
	}
	out[strings.ToLower(name)] = true
	return out
}
