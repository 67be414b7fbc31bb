package dbsource

import (
	"context"
	"datachat"
	"fmt"
	"slices"
	"strings"
)

// The sandbox's check of a PostgreSQL statement reads PostgreSQL's own plan
// of it, EXPLAIN (FORMAT JSON, VERBOSE), made in the read-only transaction the
// statement then runs in:
//
//   - a ModifyTable node (INSERT, UPDATE, DELETE, MERGE, a data-modifying
//     WITH) is a write: refused, though read-only would stop it too;
//   - a LockRows node (FOR UPDATE, FOR SHARE…) is a locking read: refused;
//   - every relation the plan reads (Relation Name with its Schema) must be
//     an allowed table, or a partition of one. Views are expanded in plans,
//     so a view is read through its tables: each must be allowed. The
//     catalogs (pg_catalog, information_schema) are not allowed tables;
//   - every function the plan calls (Function Scan nodes, and the calls in
//     the deparsed expressions VERBOSE prints) must be one of PostgreSQL's
//     built-ins (schema pg_catalog, not shadowed by a function of another
//     schema) and not one that reads files, signals other sessions, changes
//     settings, takes advisory locks or runs SQL of its own (denied below).

// pgAllowedAdmin are pg_* functions a query may call: harmless ones.
var pgAllowedAdmin = []string{
	"pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_typeof", "pg_column_size", "pg_column_compression",
	"pg_size_pretty", "pg_size_bytes", "pg_client_encoding", "pg_backend_pid", "pg_postmaster_start_time",
	"pg_conf_load_time", "pg_is_in_recovery", "pg_input_is_valid", "pg_input_error_info", "pg_jit_available",
	"pg_collation_for", "pg_encoding_to_char", "pg_char_to_encoding", "pg_trigger_depth", "pg_has_role",
	"pg_my_temp_schema", "pg_is_other_temp_schema", "pg_current_xact_id_if_assigned", "pg_xact_status",
	"pg_visible_in_snapshot", "pg_lsn", "pg_split_walfile_name",
}

// pgDeniedFunction says why a pg_catalog function may not be called, or "".
func pgDeniedFunction(name string) string {
	switch {
	case strings.HasPrefix(name, "pg_read_"), strings.HasPrefix(name, "pg_ls_"), name == "pg_stat_file",
		strings.HasPrefix(name, "pg_file_"), strings.HasPrefix(name, "lo_"), name == "loread", name == "lowrite",
		strings.HasPrefix(name, "pg_current_logfile"), name == "pg_logdir_ls":
		return "it reads or writes the server's files or large objects"
	case strings.HasPrefix(name, "dblink"), strings.HasPrefix(name, "postgres_fdw"):
		return "it connects to other servers"
	case name == "set_config", name == "current_setting", name == "pg_reload_conf":
		return "it reads or changes the server's settings"
	case name == "pg_terminate_backend", name == "pg_cancel_backend", strings.HasPrefix(name, "pg_signal"):
		return "it signals other sessions"
	case strings.Contains(name, "advisory"):
		return "it takes advisory locks"
	case strings.HasSuffix(name, "_to_xml"), strings.HasSuffix(name, "_to_xmlschema"),
		strings.HasSuffix(name, "_to_xml_and_xmlschema"), name == "ts_stat", name == "ts_rewrite":
		return "it runs SQL given as text, which the sandbox cannot check"
	case name == "nextval", name == "setval", name == "currval", name == "lastval", name == "txid_current",
		strings.HasPrefix(name, "brin_"), name == "gin_clean_pending_list", strings.HasPrefix(name, "binary_upgrade_"):
		return "it changes the database"
	case strings.HasPrefix(name, "pg_") && !slices.Contains(pgAllowedAdmin, name):
		return "it is one of PostgreSQL's administration functions"
	}
	return ""
}

// pgCatalogSchemas are PostgreSQL's own schemas: never allowed tables.
func pgCatalogSchema(s string) bool {
	return s == "pg_catalog" || s == "information_schema" || strings.HasPrefix(s, "pg_toast") || strings.HasPrefix(s, "pg_temp")
}

// pgRawKeys are plan keys whose values are names, not deparsed expressions.
var pgRawKeys = map[string]bool{
	"Node Type": true, "Relation Name": true, "Alias": true, "Schema": true, "Index Name": true,
	"CTE Name": true, "Function Name": true, "Subplan Name": true, "Parent Relationship": true,
	"Strategy": true, "Partial Mode": true, "Join Type": true, "Scan Direction": true, "Command": true,
	"Operation": true, "Tuplestore Name": true, "Table Function Name": true,
}

type pgFunc struct {
	schema, name string // schema "" when printed unqualified
}

type pgPlanFacts struct {
	relations [][2]string
	funcs     []pgFunc
	modify    bool
	lock      bool
	noSchema  string // a relation printed without its schema
}

func (f *pgPlanFacts) walk(v any, key string) {
	switch x := v.(type) {
	case map[string]any:
		if nt, _ := x["Node Type"].(string); nt != "" {
			switch nt {
			case "ModifyTable":
				f.modify = true
			case "LockRows":
				f.lock = true
			}
		}
		if rel, ok := x["Relation Name"].(string); ok {
			schema, ok := x["Schema"].(string)
			if !ok {
				f.noSchema = rel
			}
			f.relations = append(f.relations, [2]string{schema, rel})
		}
		if fn, ok := x["Function Name"].(string); ok {
			schema, _ := x["Schema"].(string)
			f.funcs = append(f.funcs, pgFunc{schema: schema, name: fn})
		}
		for k, val := range x {
			f.walk(val, k)
		}
	case []any:
		for _, el := range x {
			f.walk(el, key)
		}
	case string:
		if !pgRawKeys[key] {
			f.funcs = append(f.funcs, pgCalls(x)...)
		}
	}
}

// checkPlan applies the sandbox's rules to a plan.
func (e *pgEngine) checkPlan(ctx context.Context, t *pgTx, plan any) error {
	var f pgPlanFacts
	f.walk(plan, "")
	if f.modify {
		return refusedf("the statement writes (INSERT, UPDATE, DELETE, MERGE or a data-modifying WITH): sources are read-only")
	}
	if f.lock {
		return refusedf("locking reads (FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE) are refused: sources are read-only; drop the locking clause")
	}
	if f.noSchema != "" {
		return refusedf("the plan reads %s without naming its schema; the sandbox cannot check it", f.noSchema)
	}
	if err := e.checkRelations(ctx, t, f.relations); err != nil {
		return err
	}
	return e.checkFunctions(ctx, t, f.funcs)
}

func (e *pgEngine) checkRelations(ctx context.Context, t *pgTx, rels [][2]string) error {
	seen := map[[2]string]bool{}
	for _, r := range rels {
		if seen[r] || e.allow.allowed(r[0], r[1]) {
			continue
		}
		seen[r] = true
		if pgCatalogSchema(r[0]) {
			return refusedf("%s.%s is PostgreSQL's catalog, which queries may not read; the allowed tables and their columns are listed in your instructions", r[0], r[1])
		}
		// A partition of an allowed table is read as that table.
		rows, err := t.c.Query(ctx, `SELECT n.nspname, c.relname
			FROM pg_catalog.pg_partition_ancestors(pg_catalog.to_regclass($1)) a
			JOIN pg_catalog.pg_class c ON c.oid = a.relid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace`,
			pgIdent(r[0])+"."+pgIdent(r[1]))
		if err != nil {
			return e.classify(ctx, err, -1, "")
		}
		ok := false
		for rows.Next() {
			var s, n string
			if rows.Scan(&s, &n) == nil && e.allow.allowed(s, n) {
				ok = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return e.classify(ctx, err, -1, "")
		}
		if !ok {
			return refusedf("table %s.%s is not one of the source's allowed tables (views count as the tables they read)%s",
				r[0], r[1], candidates(r[1], e.db.allowedTables(ctx)))
		}
	}
	return nil
}

func (e *pgEngine) checkFunctions(ctx context.Context, t *pgTx, funcs []pgFunc) error {
	if len(funcs) == 0 {
		return nil
	}
	var names []string
	for _, f := range funcs {
		if !slices.Contains(names, f.name) {
			names = append(names, f.name)
		}
	}
	rows, err := t.c.Query(ctx, `SELECT p.proname, n.nspname FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = ANY($1)`, names)
	if err != nil {
		return e.classify(ctx, err, -1, "")
	}
	schemas := map[string][]string{}
	for rows.Next() {
		var name, schema string
		if err := rows.Scan(&name, &schema); err != nil {
			rows.Close()
			return err
		}
		schemas[name] = append(schemas[name], schema)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return e.classify(ctx, err, -1, "")
	}
	for _, f := range funcs {
		in := schemas[f.name]
		if len(in) == 0 {
			continue // a keyword written like a call: ROW(, ARRAY(, COALESCE(…
		}
		if f.schema != "" && f.schema != "pg_catalog" {
			return refusedf("function %s.%s is not allowed: queries may call only PostgreSQL's built-in functions", f.schema, f.name)
		}
		if f.schema == "" {
			for _, s := range in {
				if s != "pg_catalog" {
					return refusedf("function %s is not allowed: a function of that name is defined in schema %s, and queries may call only PostgreSQL's built-in functions", f.name, s)
				}
			}
		}
		if why := pgDeniedFunction(f.name); why != "" {
			return refusedf("function %s is not allowed: %s", f.name, why)
		}
	}
	return nil
}

// pgCalls finds the function calls in an expression as PostgreSQL's deparser
// prints it: a name, possibly schema-qualified, directly followed by "(", not
// after "::" (a type modifier). Strings ('…' with ” inside) and quoted names
// ("…" with "" inside) are read as the deparser writes them.
func pgCalls(s string) []pgFunc {
	var out []pgFunc
	var parts []string // the dotted name being read
	afterCast := false
	i := 0
	flush := func() { parts = parts[:0] }
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\'':
			flush()
			i++
			for i < len(s) {
				if s[i] == '\'' {
					if i+1 < len(s) && s[i+1] == '\'' {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			afterCast = false
		case c == '"' || isIdentStart(c):
			var name string
			if c == '"' {
				j := i + 1
				var b strings.Builder
				for j < len(s) {
					if s[j] == '"' {
						if j+1 < len(s) && s[j+1] == '"' {
							b.WriteByte('"')
							j += 2
							continue
						}
						j++
						break
					}
					b.WriteByte(s[j])
					j++
				}
				name, i = b.String(), j
			} else {
				j := i
				for j < len(s) && isIdentPart(s[j]) {
					j++
				}
				name, i = strings.ToLower(s[i:j]), j
			}
			parts = append(parts, name)
			if i < len(s) && s[i] == '.' {
				i++
				continue
			}
			if i < len(s) && s[i] == '(' && !afterCast && len(parts) <= 2 {
				if len(parts) == 2 {
					out = append(out, pgFunc{schema: parts[0], name: parts[1]})
				} else {
					out = append(out, pgFunc{name: parts[0]})
				}
			}
			flush()
			afterCast = false
		case c == ':' && i+1 < len(s) && s[i+1] == ':':
			flush()
			afterCast = true
			i += 2
		case c == ' ':
			i++
		default:
			flush()
			afterCast = false
			i++
		}
	}
	return out
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}

const pgTablesQuery = `SELECT c.oid, n.nspname, c.relname, c.relkind IN ('v', 'm'), c.reltuples::float8
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
		  AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
		ORDER BY n.nspname, c.relname`

func (e *pgEngine) tableNames(ctx context.Context) ([]string, error) {
	t, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer t.end()
	tables, _, err := e.listTables(ctx, t)
	if err != nil {
		return nil, err
	}
	return qualifiedNames(tables), nil
}

// listTables lists the allowed tables with their OIDs, without columns.
func (e *pgEngine) listTables(ctx context.Context, t *pgTx) ([]Table, []uint32, error) {
	rows, err := t.c.Query(ctx, pgTablesQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: list tables: %w", e.db.src.Name, err)
	}
	defer rows.Close()
	var tables []Table
	var oids []uint32
	for rows.Next() {
		var (
			oid      uint32
			tb       Table
			reltuple float64
		)
		if err := rows.Scan(&oid, &tb.Schema, &tb.Name, &tb.View, &reltuple); err != nil {
			return nil, nil, err
		}
		if !e.allow.allowed(tb.Schema, tb.Name) {
			continue
		}
		if reltuple >= 0 && !tb.View {
			n := int64(reltuple)
			tb.Rows = &n
		}
		tables = append(tables, tb)
		oids = append(oids, oid)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("source %s: list tables: %w", e.db.src.Name, err)
	}
	return tables, oids, nil
}

// catalog lists the allowed tables from pg_catalog.
func (e *pgEngine) catalog(ctx context.Context) ([]Table, error) {
	t, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer t.end()
	tables, oids, err := e.listTables(ctx, t)
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return tables, nil
	}
	byOID := map[uint32]int{}
	for i, o := range oids {
		byOID[o] = i
	}
	rows, err := t.c.Query(ctx, `SELECT a.attrelid, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typtype, t.typcategory
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attrelid, a.attnum`, oids)
	if err != nil {
		return nil, fmt.Errorf("source %s: list columns: %w", e.db.src.Name, err)
	}
	for rows.Next() {
		var (
			rel                uint32
			name, typ, tt, cat string
		)
		if err := rows.Scan(&rel, &name, &typ, &tt, &cat); err != nil {
			rows.Close()
			return nil, err
		}
		friendly := pgFriendly(typ)
		switch {
		case cat == "A":
			friendly = datachat.TypeList
		case tt == "c":
			friendly = datachat.TypeStruct
		}
		i := byOID[rel]
		tables[i].Columns = append(tables[i].Columns, dcColumn(name, friendly, typ))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("source %s: list columns: %w", e.db.src.Name, err)
	}
	sortTables(tables)
	for i := range tables {
		if err := e.samples(ctx, t, &tables[i]); err != nil {
			return nil, err
		}
	}
	return tables, nil
}

// samples fills up to 3 distinct values per column from the table's first
// SampleRows rows.
func (e *pgEngine) samples(ctx context.Context, t *pgTx, tb *Table) error {
	if len(tb.Columns) == 0 {
		return nil
	}
	q := e.db.sampleQuery(tb, "NULL::text", func(col string) string { return fmt.Sprintf("left(%s::text, 200)", pgIdent(col)) })
	rows, err := t.c.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("source %s: sample %s.%s: %w", e.db.src.Name, tb.Schema, tb.Name, err)
	}
	defer rows.Close()
	return readSamples(rows, tb)
}
