package duckdb

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"datachat"
)

// Relations returns the names of the tables, among tables, that sql reads,
// in the order of tables. It reads DuckDB's own parse tree of the query
// (json_serialize_sql, run in the conversation's sandboxed worker like any
// query), never its text: a table name in a string, a comment or an alias is
// not a read, and a common table expression of the same name hides the
// table. Names compare without regard to case, as DuckDB's do.
//
// Errors: *QueryError (EINVALID) when sql is not one SELECT that parses;
// datachat.EINVALID when its parse tree is too large to read back; the
// errors of [Engine.Query] otherwise.
func (e *Engine) Relations(ctx context.Context, conversationID string, tables []Table, sql string) ([]string, error) {
	res, err := e.Query(ctx, conversationID, tables, "SELECT json_serialize_sql("+QuoteLiteral(sql)+")")
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
// (json_serialize_sql's output) reads, leaving out the names its common table
// expressions define.
func relationsOf(text string) (map[string]bool, error) {
	var tree any
	if err := json.Unmarshal([]byte(text), &tree); err != nil {
		return nil, errors.New("read parse tree: " + err.Error())
	}
	if m, ok := tree.(map[string]any); ok && m["error"] == true {
		msg, _ := m["error_message"].(string)
		if strings.Contains(msg, "Only SELECT") {
			return nil, refused(onlySelect)
		}
		return nil, &QueryError{Kind: KindSyntax, Message: msg}
	}
	read := map[string]bool{}
	ctes := map[string]bool{}
	walk(tree, func(m map[string]any) {
		if typ, _ := m["type"].(string); typ == "BASE_TABLE" {
			if name, _ := m["table_name"].(string); name != "" {
				read[strings.ToLower(name)] = true
			}
		}
		if cm, ok := m["cte_map"].(map[string]any); ok {
			entries, _ := cm["map"].([]any)
			for _, en := range entries {
				if e, ok := en.(map[string]any); ok {
					if k, _ := e["key"].(string); k != "" {
						ctes[strings.ToLower(k)] = true
					}
				}
			}
		}
	})
	for name := range ctes {
		delete(read, name)
	}
	return read, nil
}
