package dbsource

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/reflect/protoreflect"

	"datachat"
)

// The sandbox's check of a PostgreSQL statement reads the statement's parse
// tree, made by PostgreSQL's own parser (libpg_query), before anything of it
// reaches the database:
//
//   - exactly one statement, a query (SELECT, VALUES, TABLE, set operations,
//     WITH whose every CTE is a query), without INTO or a locking clause;
//   - every node of the tree is of a kind known to be harmless in a query
//     (pgNodes); any other kind is refused, so that syntax the check does not
//     know cannot carry anything past it;
//   - every relation is an allowed table (or a CTE in scope), named as the
//     session will resolve it (search_path is pg_catalog, then the default
//     schema, set by the sandbox); the catalogs are never allowed;
//   - every function called is one of pgFunctions, every type cast to one of
//     pgTypes, every TABLESAMPLE method built in, no $n parameter;
//   - then, in the sandbox's transaction and before the statement runs, the
//     names the statement uses are resolved against the catalog
//     ([pgEngine.resolve]): no function, operator or field-style call of the
//     same name outside pg_catalog that PostgreSQL could pick instead, every
//     relation existing where the check assumed.
//
// What runs is not the text the model wrote but the checked tree printed
// back by the deparser, parsed and checked again (it must print the same),
// inside our own fixed text for the row cap.

// pgMaxStatement is the longest statement the parser is given, in bytes,
// and pgMaxTokens the most tokens (words, numbers, strings, operators,
// punctuation) as PostgreSQL's own lexer counts them, which it reads first:
// the parser's time and memory grow with the input, and its C code (the
// grammar, then the parse tree's serialization) recurses once per level of
// nesting, up to a level per token, with no stack-depth check of its own:
// 200 bytes of C stack a level at worst (a subquery nested in a subquery,
// measured), so 4,000 tokens need less than 1 MiB of the 2 MiB a thread
// gets at the least (8 MiB usually). TestPgParserStack runs the deepest
// statements the caps let through on a 2 MiB stack.
const (
	pgMaxStatement = 100_000
	pgMaxTokens    = 4_000
)

// pgRel is a relation a statement reads, as the session will resolve it:
// Schema is "" for an unqualified name (the catalog's, if pg_catalog holds
// it, else the default schema's).
type pgRel struct {
	Schema, Name string
}

// pgChecked is a statement that passed the parse-tree check: SQL is the
// deparsed statement (the only text of it that will run), with the names it
// uses, to resolve against the catalog.
type pgChecked struct {
	SQL       string
	Relations []pgRel
	Functions []string // called functions (all in pgFunctions)
	Fields    []string // names a.b or (x).b may call as b(a): field selections
	Operators []string // operator names, unqualified
}

// pgCheck checks a statement's parse tree for the sandbox of a source whose
// allowed tables are allow, unqualified names resolving to defSchema. It
// returns the deparsed statement and the names to resolve, or a
// *datachat.QueryError saying what is refused and why.
func pgCheck(sql string, allow allowList, defSchema string) (*pgChecked, error) {
	if len(sql) > pgMaxStatement {
		return nil, refusedf("the statement is %d bytes long; the sandbox takes at most %d: write a shorter query", len(sql), pgMaxStatement)
	}
	if !utf8.ValidString(sql) || strings.ContainsRune(sql, 0) {
		return nil, &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the statement is not valid UTF-8 text (or holds a NUL character); write it again as plain text"}
	}
	first, err := pgCheckText(sql, allow, defSchema)
	if err != nil {
		return nil, err
	}
	// What will run is the deparsed text: check it as PostgreSQL will parse
	// it, and that printing it again changes nothing.
	again, err := pgCheckText(first.SQL, allow, defSchema)
	if err != nil || again.SQL != first.SQL {
		return nil, refusedf("the sandbox cannot rewrite this statement faithfully; write it more plainly")
	}
	return again, nil
}

// pgCheckText parses and checks sql and deparses it.
func pgCheckText(sql string, allow allowList, defSchema string) (*pgChecked, error) {
	scan, err := pg_query.Scan(sql)
	if err != nil {
		return nil, pgParseError(err, sql)
	}
	if n := len(scan.Tokens); n > pgMaxTokens {
		return nil, refusedf("the statement has %d tokens (words, numbers, strings, operators); the sandbox takes at most %d: write a shorter query (a long IN list can often be a range or a join)", n, pgMaxTokens)
	}
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return nil, pgParseError(err, sql)
	}
	if len(tree.Stmts) == 0 {
		return nil, &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the statement is empty; write one query (SELECT …)"}
	}
	if len(tree.Stmts) > 1 {
		return nil, refusedf("one statement at a time: the text holds %d statements; send only the query", len(tree.Stmts))
	}
	stmt := tree.Stmts[0].GetStmt()
	sel := stmt.GetSelectStmt()
	if sel == nil {
		return nil, pgNotAQuery(stmt)
	}
	c := &pgChecker{allow: allow, defSchema: defSchema}
	if err := c.walk(sel.ProtoReflect(), nil, 0); err != nil {
		return nil, err
	}
	out, err := pg_query.Deparse(tree)
	if err != nil {
		return nil, refusedf("the sandbox cannot rewrite this statement (%v); write it more plainly", err)
	}
	c.out.SQL = out
	return &c.out, nil
}

// pgParseError is a parse error as the model should read it: PostgreSQL's
// parser's own, with its position in the query, or (the parse tree deeper
// than its decoding allows) a refusal.
func pgParseError(err error, sql string) error {
	var pe *parser.Error
	if !errors.As(err, &pe) {
		return refusedf("the statement nests too deeply for the sandbox; write it more plainly")
	}
	msg := pe.Message
	if pe.Cursorpos > 0 && pe.Cursorpos <= utf8.RuneCountInString(sql) {
		msg += fmt.Sprintf(" (at character %d of the query)", pe.Cursorpos)
	}
	return &datachat.QueryError{Kind: datachat.KindSyntax, Message: msg}
}

// pgNotAQuery refuses a statement that is not a query, saying what it is.
func pgNotAQuery(stmt *pg_query.Node) error {
	switch {
	case stmt.GetInsertStmt() != nil, stmt.GetUpdateStmt() != nil, stmt.GetDeleteStmt() != nil, stmt.GetMergeStmt() != nil:
		return refusedf("the statement writes (INSERT, UPDATE, DELETE or MERGE): sources are read-only; only a query can run")
	}
	kind := "another kind of statement"
	if stmt != nil && stmt.GetNode() != nil {
		kind = "a " + pgNodeName(stmt.ProtoReflect())
	}
	return refusedf("only a query can run (SELECT, WITH … SELECT, VALUES or TABLE); this statement is %s", kind)
}

// pgNodeName is the parse node a Node holds, by its message name.
func pgNodeName(m protoreflect.Message) string {
	if m.Descriptor().Name() == "Node" {
		if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("node")); fd != nil {
			return string(m.Get(fd).Message().Descriptor().Name())
		}
	}
	return string(m.Descriptor().Name())
}

// pgNodes are the parse nodes a query may hold. Each is either a name or a
// constant, or a construct whose calls, operators, types and relations the
// checker sees (by its own rule in pgChecker.visit, or as child nodes).
// Anything else — statements, XML, SQL/JSON, $n parameters, DEFAULT,
// MERGE's functions, nodes the parser makes only for DDL — is refused.
var pgNodes = setOf(
	`SelectStmt ResTarget ColumnRef A_Star A_Const A_Indices A_Indirection A_ArrayExpr A_Expr
	String Integer Float Boolean BitString List Alias RangeVar JoinExpr RangeSubselect RangeFunction
	RangeTableSample ColumnDef FuncCall NamedArgExpr WindowDef SortBy GroupingSet GroupingFunc
	BoolExpr NullTest BooleanTest SubLink CaseExpr CaseWhen CoalesceExpr MinMaxExpr RowExpr
	TypeCast TypeName CollateClause SQLValueFunction WithClause CommonTableExpr CTESearchClause
	CTECycleClause`,
)

// pgChecker walks one statement's parse tree.
type pgChecker struct {
	allow     allowList
	defSchema string
	out       pgChecked
}

// pgScope is the CTE names visible where a node is: a query's WITH
// clause's names, within the query and what it nests, over the names of
// the queries around it.
type pgScope struct {
	names []string
	up    *pgScope
}

func (s *pgScope) has(name string) bool {
	for ; s != nil; s = s.up {
		if slices.Contains(s.names, name) {
			return true
		}
	}
	return false
}

// pgMaxDepth is the deepest parse tree the checker lets through, in nodes
// from the statement down (an operand of a + b + c is a level deeper than
// the sum): PostgreSQL's deparser, C like its parser, takes about 1 KiB of
// stack a level, so 1,000 need less than half of a 2 MiB thread stack. No
// query a person writes comes near it.
const pgMaxDepth = 1_000

// walk checks m and everything under it.
func (c *pgChecker) walk(m protoreflect.Message, sc *pgScope, depth int) error {
	if depth > pgMaxDepth {
		return refusedf("the statement nests too deeply; write it more plainly")
	}
	name := string(m.Descriptor().Name())
	if name == "Node" {
		fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("node"))
		if fd == nil {
			return nil // an empty node: DISTINCT's marker, a list's NULL
		}
		return c.walk(m.Get(fd).Message(), sc, depth+1)
	}
	if !pgNodes[name] {
		return pgNodeRefusal(name)
	}
	if sel, ok := m.Interface().(*pg_query.SelectStmt); ok {
		return c.selectStmt(sel, sc, depth)
	}
	if err := c.visit(m.Interface(), sc); err != nil {
		return err
	}
	return c.children(m, sc, depth, "")
}

// children walks every message field of m but skip.
func (c *pgChecker) children(m protoreflect.Message, sc *pgScope, depth int, skip protoreflect.Name) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Name() == skip || fd.Kind() != protoreflect.MessageKind {
			return true
		}
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = c.walk(l.Get(i).Message(), sc, depth+1)
			}
		} else {
			err = c.walk(v.Message(), sc, depth+1)
		}
		return err == nil
	})
	return err
}

// pgNodeRefusal refuses a node kind a query may not hold.
func pgNodeRefusal(name string) error {
	switch {
	case name == "ParamRef":
		return &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the query has $n parameters; write the values in the query instead"}
	case strings.HasPrefix(name, "Xml"), name == "RangeTableFunc", name == "RangeTableFuncCol":
		return refusedf("XML functions and XMLTABLE are not supported in queries of a source")
	case strings.HasPrefix(name, "Json"):
		return refusedf("SQL/JSON syntax (JSON_TABLE, JSON_VALUE, JSON_OBJECT, IS JSON …) is not supported; use the json and jsonb functions and operators (->, ->>, jsonb_path_query …)")
	case name == "SetToDefault":
		return refusedf("DEFAULT is not a value a query can use")
	case name == "InsertStmt", name == "UpdateStmt", name == "DeleteStmt", name == "MergeStmt":
		return refusedf("the statement writes (a data-modifying WITH): sources are read-only; only a query can run")
	case strings.HasSuffix(name, "Stmt"):
		return refusedf("only a query can run; a %s cannot be part of one", name)
	}
	return refusedf("the query uses syntax the sandbox does not allow (%s); write it with plain SELECT, joins, subqueries, WITH, functions and operators", name)
}

// selectStmt checks a query: its WITH clause with each CTE seeing the CTEs
// PostgreSQL lets it see (the ones before it, or all of them under
// RECURSIVE), then the rest with all of them in scope.
func (c *pgChecker) selectStmt(s *pg_query.SelectStmt, sc *pgScope, depth int) error {
	if s.IntoClause != nil {
		return refusedf("SELECT … INTO creates a table: only a query can run; drop INTO")
	}
	if len(s.LockingClause) > 0 {
		return refusedf("locking reads (FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE) are refused: sources are read-only; drop the locking clause")
	}
	inner := sc
	if w := s.WithClause; w != nil {
		all := &pgScope{up: sc}
		for _, n := range w.Ctes {
			if cte := n.GetCommonTableExpr(); cte != nil {
				all.names = append(all.names, cte.Ctename)
			}
		}
		for i, n := range w.Ctes {
			cte := n.GetCommonTableExpr()
			if cte == nil {
				return pgNodeRefusal(pgNodeName(n.ProtoReflect()))
			}
			if q := cte.Ctequery; q == nil || q.GetSelectStmt() == nil {
				return pgNodeRefusal(pgNodeName(q.ProtoReflect()))
			}
			seen := all
			if !w.Recursive {
				seen = &pgScope{names: all.names[:i], up: sc}
			}
			if err := c.walk(cte.ProtoReflect(), seen, depth+1); err != nil {
				return err
			}
		}
		inner = all
	}
	return c.children(s.ProtoReflect(), inner, depth, "with_clause")
}

// visit applies a node's own rule.
func (c *pgChecker) visit(n any, sc *pgScope) error {
	switch x := n.(type) {
	case *pg_query.RangeVar:
		return c.relation(x, sc)
	case *pg_query.FuncCall:
		name, err := pgBuiltinName(x.Funcname, "function")
		if err != nil {
			return err
		}
		if !pgFunctions[name] {
			return refusedf("function %s is not allowed: %s", name, pgFunctionRefusal(name))
		}
		c.addFunction(name)
	case *pg_query.A_Expr:
		return c.aExpr(x)
	case *pg_query.SubLink:
		switch x.SubLinkType {
		case pg_query.SubLinkType_EXISTS_SUBLINK, pg_query.SubLinkType_ALL_SUBLINK, pg_query.SubLinkType_ANY_SUBLINK,
			pg_query.SubLinkType_ROWCOMPARE_SUBLINK, pg_query.SubLinkType_EXPR_SUBLINK, pg_query.SubLinkType_ARRAY_SUBLINK:
		default:
			return refusedf("the query uses a kind of subquery the sandbox does not allow (%s)", x.SubLinkType)
		}
		if len(x.OperName) > 0 {
			return c.operator(x.OperName)
		}
		if x.SubLinkType == pg_query.SubLinkType_ANY_SUBLINK {
			c.addOperator("=") // x IN (SELECT …)
		}
	case *pg_query.SortBy:
		if len(x.UseOp) > 0 {
			return c.operator(x.UseOp)
		}
	case *pg_query.TypeName:
		return c.typeName(x)
	case *pg_query.RangeTableSample:
		name, err := pgBuiltinName(x.Method, "TABLESAMPLE method")
		if err != nil {
			return err
		}
		if name != "bernoulli" && name != "system" {
			return refusedf("TABLESAMPLE %s is not allowed: only PostgreSQL's BERNOULLI and SYSTEM methods", name)
		}
		c.addFunction(name)
	case *pg_query.ColumnRef:
		for _, f := range x.Fields[min(1, len(x.Fields)):] {
			if s := f.GetString_(); s != nil {
				c.addField(s.Sval)
			}
		}
	case *pg_query.A_Indirection:
		for _, f := range x.Indirection {
			if s := f.GetString_(); s != nil {
				c.addField(s.Sval)
			}
		}
	case *pg_query.CaseExpr:
		if x.Arg != nil {
			c.addOperator("=") // CASE x WHEN y: x = y
		}
	case *pg_query.JoinExpr:
		if x.IsNatural || len(x.UsingClause) > 0 {
			c.addOperator("=")
		}
	case *pg_query.CTECycleClause:
		c.addOperator("=")
		c.addOperator("<>")
	}
	return nil
}

// relation checks a relation the query reads.
func (c *pgChecker) relation(r *pg_query.RangeVar, sc *pgScope) error {
	if r.Catalogname != "" {
		return refusedf("%s.%s.%s names a database: name tables as SCHEMA.TABLE or TABLE", r.Catalogname, r.Schemaname, r.Relname)
	}
	if r.Schemaname == "" && sc.has(r.Relname) {
		return nil // a CTE of the query
	}
	if pgSystemSchema(r.Schemaname) || r.Schemaname == "" && strings.HasPrefix(r.Relname, "pg_") {
		schema := r.Schemaname
		if schema == "" {
			schema = "pg_catalog"
		}
		return pgCatalogRefusal(schema, r.Relname)
	}
	c.out.Relations = append(c.out.Relations, pgRel{Schema: r.Schemaname, Name: r.Relname})
	return nil
}

// pgCatalogRefusal refuses a relation of PostgreSQL's own schemas.
func pgCatalogRefusal(schema, name string) error {
	return refusedf("%s.%s is PostgreSQL's catalog, which queries may not read; the allowed tables and their columns are listed in your instructions", schema, name)
}

// pgSystemSchema reports whether schema is one of PostgreSQL's own.
func pgSystemSchema(s string) bool {
	return s == "pg_catalog" || s == "information_schema" || strings.HasPrefix(s, "pg_toast") || strings.HasPrefix(s, "pg_temp")
}

// aExpr checks an operator expression: its operator, or the operators
// PostgreSQL applies for it (BETWEEN's <= and >=).
func (c *pgChecker) aExpr(x *pg_query.A_Expr) error {
	switch x.Kind {
	case pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		c.addOperator("<=")
		c.addOperator(">=")
		return nil
	case pg_query.A_Expr_Kind_AEXPR_OP, pg_query.A_Expr_Kind_AEXPR_OP_ANY, pg_query.A_Expr_Kind_AEXPR_OP_ALL,
		pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NULLIF,
		pg_query.A_Expr_Kind_AEXPR_IN, pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE,
		pg_query.A_Expr_Kind_AEXPR_SIMILAR:
		return c.operator(x.Name)
	}
	return refusedf("the query uses an expression the sandbox does not allow (%s)", x.Kind)
}

// operator checks an operator's name: PostgreSQL's own (OPERATOR(pg_catalog.op)
// or unqualified), resolved later.
func (c *pgChecker) operator(name []*pg_query.Node) error {
	op, err := pgBuiltinName(name, "operator")
	if err != nil {
		return err
	}
	c.addOperator(op)
	return nil
}

// typeName checks a type a value is cast or declared to: one of pgTypes.
func (c *pgChecker) typeName(t *pg_query.TypeName) error {
	if t.Setof || t.PctType {
		return refusedf("SETOF and %%TYPE are not types a query can use")
	}
	name, err := pgBuiltinName(t.Names, "type")
	if err != nil {
		return err
	}
	if !pgTypes[name] {
		return refusedf("type %s is not allowed: a query may cast only to PostgreSQL's built-in types (numbers, text, dates and times, boolean, uuid, json, jsonb, bytea, network and range types); a domain or a type of the database may run code of its own", name)
	}
	return nil
}

// pgBuiltinName returns the name of a function, operator, type or method as
// the query names it: unqualified or in pg_catalog, never in another
// schema or database.
func pgBuiltinName(parts []*pg_query.Node, what string) (string, error) {
	names := make([]string, len(parts))
	for i, p := range parts {
		s := p.GetString_()
		if s == nil {
			return "", refusedf("the query names a %s in a way the sandbox does not allow", what)
		}
		names[i] = s.Sval
	}
	switch {
	case len(names) == 1:
		return names[0], nil
	case len(names) == 2 && names[0] == "pg_catalog":
		return names[1], nil
	case len(names) == 0:
		return "", refusedf("the query names a %s without a name", what)
	}
	return "", refusedf("%s %s is not allowed: queries may use only PostgreSQL's built-in ones (schema pg_catalog)", what, strings.Join(names, "."))
}

func (c *pgChecker) addFunction(name string) {
	if !slices.Contains(c.out.Functions, name) {
		c.out.Functions = append(c.out.Functions, name)
	}
}

func (c *pgChecker) addField(name string) {
	if !slices.Contains(c.out.Fields, name) {
		c.out.Fields = append(c.out.Fields, name)
	}
}

func (c *pgChecker) addOperator(name string) {
	if !slices.Contains(c.out.Operators, name) {
		c.out.Operators = append(c.out.Operators, name)
	}
}
