package dbsource

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver" // the parser's literal values

	"datachat"
)

// The sandbox's check of a MySQL/MariaDB statement reads the statement's
// parse tree, made by TiDB's MySQL parser in our process, before anything of
// it reaches the server; then the server runs only SQL our code built: the
// checked tree written back out (restored). Nothing the server prints about
// the statement (EXPLAIN, its rewritten query) is read to decide anything.
//
//   - exactly one statement, a query: SELECT, UNION/INTERSECT/EXCEPT of them,
//     WITH … SELECT, and on MySQL also TABLE t and VALUES ROW(…);
//   - every node of the tree is one the checker knows (default-deny: a node
//     type it does not know refuses the statement), and on the way:
//   - no INTO (OUTFILE, DUMPFILE, variables), no locking clause (FOR UPDATE,
//     FOR SHARE, LOCK IN SHARE MODE) at any level, no optimizer hints (they
//     can lift the statement timeout), no user or system variables, no
//     placeholders;
//   - every table an allowed table of the source (a name without a database
//     is in the URL's database, and is written out qualified, so that the
//     server cannot read it as anything else); a CTE name counts only where
//     both MySQL and MariaDB see it (inside a CTE's definition, only the
//     CTEs of its own WITH: MariaDB reads an outer one's name as a table
//     there), and a name the checker is not sure is a CTE is treated as a
//     table; the catalogs (information_schema, mysql,
//     performance_schema, sys) are never allowed; a view that reads with its
//     definer's rights must be named in --tables, not only matched by a
//     wildcard;
//   - every function an allowed built-in (myfuncs.go), written out under its
//     built-in spelling, never as a quoted name a server could resolve to a
//     stored function.
//
// Versioned comments cannot give the server a second reading: comments are
// not part of the tree, so the restored text has none; /*! … */ is read as
// code by the parser whatever its version (and so is checked), MariaDB's
// /*M! … */ is a plain comment to it and is dropped.
//
// The parser runs on hostile text in the server's process: the statement is
// capped (myMaxStatementBytes: at the cap a statement takes at most ~0.1 s
// and ~30 MB to refuse), the tree's depth is capped while it is walked
// (myMaxDepth, before the recursive restore runs), and a panic in the parser
// is recovered, refuses the statement, and drops that parser.

const (
	myMaxStatementBytes = 64 << 10
	myMaxDepth          = 1000
)

// myCatalogSchemas are the server's catalogs, never allowed.
var myCatalogSchemas = map[string]bool{"information_schema": true, "mysql": true, "performance_schema": true, "sys": true}

// myChecker checks statements for one source.
type myChecker struct {
	defaultDB string // the URL's database: where a name without a database is
	allow     allowList
	mariadb   bool
	foldNames bool                     // lower_case_table_names ≠ 0: the server compares table names in lower case
	definer   map[[2]string]bool       // views that read with their definer's rights (SQL SECURITY DEFINER)
	exact     func(s, t string) bool   // whether --tables names s.t without a wildcard
	hint      func(name string) string // the closest allowed tables, for a refused name
}

// myRestoreFlags write the tree back as the session reads it: keywords
// upper case, names in backquotes, strings in single quotes with
// backslashes escaped (the session has neither ANSI_QUOTES nor
// NO_BACKSLASH_ESCAPES), utf8mb4 literals without an introducer (the
// connection's character set).
const myRestoreFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash |
	format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes | format.RestoreStringWithoutDefaultCharset

var myParsers = sync.Pool{New: func() any { return parser.New() }}

// check parses stmt, checks it and returns the SQL to run: the checked tree
// restored. Errors are *datachat.QueryError: KindSyntax when the parser
// cannot read the statement, KindRefused when the sandbox refuses it.
func (c *myChecker) check(stmt string) (sql string, err error) {
	if len(stmt) > myMaxStatementBytes {
		return "", refusedf("the statement is %d bytes long; a source query may have at most %d", len(stmt), myMaxStatementBytes)
	}
	if !utf8.ValidString(stmt) {
		return "", &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the statement is not valid UTF-8 text"}
	}
	defer func() {
		if r := recover(); r != nil {
			sql, err = "", refusedf("the sandbox's MySQL parser failed on this statement (%v); write it more simply", r)
		}
	}()
	p := myParsers.Get().(*parser.Parser)
	stmts, _, perr := p.Parse(stmt, "", "")
	myParsers.Put(p)
	if perr != nil {
		return "", &datachat.QueryError{Kind: datachat.KindSyntax, Message: fmt.Sprintf(
			"the sandbox's MySQL parser cannot read the statement: %s; write one SELECT in standard MySQL syntax (MariaDB-only syntax such as VALUES (…) without ROW, JSON_TABLE, SOUNDS LIKE or a MariaDB-only collation is not read)",
			strings.TrimSpace(perr.Error()))}
	}
	switch len(stmts) {
	case 0:
		return "", &datachat.QueryError{Kind: datachat.KindSyntax, Message: "the statement is empty"}
	case 1:
	default:
		return "", refusedf("one statement at a time: this text holds %d", len(stmts))
	}
	switch s := stmts[0].(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt, *ast.LoadDataStmt:
		return "", refusedf("the statement writes (%s): sources are read-only; only a query can run (SELECT, WITH … SELECT, UNION …)", myStmtKind(s))
	default:
		return "", refusedf("only a query can run (SELECT, WITH … SELECT, UNION …); this statement is of another kind (%s)", myStmtKind(s))
	}
	v := &myVisitor{c: c, src: stmt}
	stmts[0].Accept(v)
	if v.err != nil {
		return "", v.err
	}
	var b strings.Builder
	if err := stmts[0].Restore(format.NewRestoreCtx(myRestoreFlags, &b)); err != nil {
		return "", refusedf("the sandbox cannot write this statement back as SQL (%v); write it more simply", err)
	}
	return b.String(), nil
}

// myStmtKind names a statement's kind for messages: SelectStmt → SELECT.
func myStmtKind(n ast.Node) string {
	k := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", n), "*ast."), "Stmt")
	return strings.ToUpper(k)
}

// myVisitor walks a statement's tree once: it refuses what the sandbox does
// not run, qualifies table names and rewrites function names to their
// built-in spelling.
type myVisitor struct {
	c     *myChecker
	src   string // the statement's text, for how its literals were spelt
	err   error
	depth int
	// scopes are the WITHs around the node walked, innermost last; owners
	// the statements that hold them.
	scopes []myScope
	owners []ast.Node
}

// myScope is a WITH being walked: the CTE names visible so far, and
// whether the walk is inside the definition of one of its CTEs.
type myScope struct {
	names    []string
	defining bool
}

// refuse records why the statement is refused and stops the walk.
func (v *myVisitor) refuse(n ast.Node, format string, args ...any) (ast.Node, bool) {
	if v.err == nil {
		v.err = refusedf(format, args...)
	}
	return n, true
}

func (v *myVisitor) Enter(n ast.Node) (ast.Node, bool) {
	if v.err != nil {
		return n, true
	}
	v.depth++
	if v.depth > myMaxDepth {
		return v.refuse(n, "the statement nests deeper than %d levels; write it more simply", myMaxDepth)
	}
	switch n := n.(type) {
	case *ast.SelectStmt:
		if err := v.selectStmt(n); err != nil {
			v.err = err
			return n, true
		}
		if n.With != nil {
			v.openScope(n)
		}
	case *ast.SetOprStmt:
		if n.With != nil {
			v.openScope(n)
		}
	case *ast.SetOprSelectList:
		if n.With != nil {
			v.openScope(n)
		}
	case *ast.WithClause:
		// Its CTEs are declared in the scope of the statement holding it:
		// a WITH held by anything else would put them in a wider scope.
		if len(v.owners) == 0 || myWithOf(v.owners[len(v.owners)-1]) != n {
			return v.refuse(n, "this statement uses a WITH the sandbox cannot scope; move the WITH to the start of the statement")
		}
	case *ast.FieldList, *ast.WildCardField, *ast.TableRefsClause, *ast.Join,
		*ast.OnCondition, *ast.GroupByClause, *ast.HavingClause, *ast.OrderByClause, *ast.ByItem, *ast.Limit,
		*ast.WindowSpec, *ast.PartitionByClause, *ast.FrameClause, *ast.FrameBound,
		*ast.SubqueryExpr, *ast.CompareSubqueryExpr, *ast.ExistsSubqueryExpr, *ast.BetweenExpr,
		*ast.BinaryOperationExpr, *ast.CaseExpr, *ast.WhenClause, *ast.ColumnNameExpr, *ast.ColumnName,
		*ast.PatternInExpr, *ast.IsNullExpr, *ast.IsTruthExpr, *ast.ParenthesesExpr, *ast.PatternRegexpExpr,
		*ast.RowExpr, *ast.TimeUnitExpr, *ast.GetFormatSelectorExpr, *ast.TrimDirectionExpr, *ast.MatchAgainst,
		*ast.SelectField: // its column name is kept on Leave
	case *ast.CommonTableExpression:
		if len(v.scopes) > 0 {
			v.scopes[len(v.scopes)-1].defining = true
		}
		if n.IsRecursive { // visible in its own definition
			v.declare(n.Name.O)
		}
	case *ast.TableSource:
		if n.Lateral && v.c.mariadb {
			return v.refuse(n, "MariaDB has no LATERAL derived tables; join the table and filter instead")
		}
	case *ast.TableName:
		if err := v.table(n); err != nil {
			v.err = err
			return n, true
		}
	case *ast.UnaryOperationExpr:
		switch n.Op {
		case opcode.Not, opcode.Not2, opcode.BitNeg, opcode.Minus, opcode.Plus:
		default:
			return v.refuse(n, "the operator %s is not accepted", n.Op)
		}
	case *ast.PatternLikeOrIlikeExpr:
		if !n.IsLike {
			return v.refuse(n, "ILIKE is not MySQL: compare LOWER(x) LIKE LOWER(pattern)")
		}
	case *ast.PositionExpr:
		if n.P != nil {
			return v.refuse(n, "placeholders (?) are not accepted: write the value")
		}
	case *ast.SetCollationExpr:
		if !myWord(n.Collate) {
			return v.refuse(n, "collation %q is not accepted", n.Collate)
		}
	case *ast.FuncCastExpr:
		if n.Tp == nil || n.Tp.IsArray() {
			return v.refuse(n, "CAST … ARRAY is not accepted")
		}
	case *ast.FuncCallExpr:
		if err := v.call(n); err != nil {
			v.err = err
			return n, true
		}
	case *ast.AggregateFuncExpr:
		f, ok := myAggregates[strings.ToLower(n.F)]
		if !ok || f.servers&v.server() == 0 {
			return v.refuse(n, "aggregate function %s is not one a source query may call on %s", strings.ToUpper(n.F), myServerName(v.c.mariadb))
		}
		n.F = f.name
	case *ast.WindowFuncExpr:
		f, ok := myWindowFuncs[strings.ToLower(n.Name)]
		if !ok || f.servers&v.server() == 0 {
			return v.refuse(n, "window function %s is not one a source query may call on %s", strings.ToUpper(n.Name), myServerName(v.c.mariadb))
		}
		n.Name = f.name
	case ast.ParamMarkerExpr:
		return v.refuse(n, "placeholders (?) are not accepted: write the value")
	case ast.ValueExpr:
	case *ast.VariableExpr:
		if n.IsSystem {
			return v.refuse(n, "server variables (@@%s) may not be read or set", n.Name)
		}
		return v.refuse(n, "user variables (@%s) are not accepted: nothing may outlive the query", n.Name)
	case *ast.DefaultExpr:
		return v.refuse(n, "DEFAULT(…) is not accepted in a source query")
	case *ast.ValuesExpr:
		return v.refuse(n, "VALUES(column) is not accepted in a source query")
	default:
		return v.refuse(n, "this statement uses a construct the sandbox does not accept (%s)", strings.TrimPrefix(fmt.Sprintf("%T", n), "*ast."))
	}
	return n, false
}

func (v *myVisitor) Leave(n ast.Node) (ast.Node, bool) {
	if v.err != nil {
		return n, false
	}
	v.depth--
	switch n := n.(type) {
	case *ast.CommonTableExpression:
		if len(v.scopes) > 0 {
			v.scopes[len(v.scopes)-1].defining = false
		}
		if !n.IsRecursive { // visible only after its definition
			v.declare(n.Name.O)
		}
	case *ast.FuncCallExpr:
		if n.FnName.L == "char" {
			return &myCharFunc{n}, true
		}
	case *ast.SelectField:
		if err := v.nameField(n); err != nil {
			v.err = err
			return n, false
		}
	case ast.ValueExpr:
		if hex := v.hexLiteral(n); hex != nil {
			return hex, true
		}
	}
	if len(v.owners) > 0 && v.owners[len(v.owners)-1] == n {
		v.owners = v.owners[:len(v.owners)-1]
		v.scopes = v.scopes[:len(v.scopes)-1]
	}
	return n, true
}

func (v *myVisitor) server() uint8 {
	if v.c.mariadb {
		return myOnMariaDB
	}
	return myOnMySQL
}

// myWithOf is the WITH a statement holds.
func myWithOf(n ast.Node) *ast.WithClause {
	switch n := n.(type) {
	case *ast.SelectStmt:
		return n.With
	case *ast.SetOprStmt:
		return n.With
	case *ast.SetOprSelectList:
		return n.With
	}
	return nil
}

func (v *myVisitor) openScope(owner ast.Node) {
	v.scopes = append(v.scopes, myScope{})
	v.owners = append(v.owners, owner)
}

func (v *myVisitor) declare(name string) {
	if len(v.scopes) > 0 {
		s := &v.scopes[len(v.scopes)-1]
		s.names = append(s.names, name)
	}
}

// isCTE reports whether an unqualified name is a CTE in scope, looking from
// the innermost WITH outward. Inside the definition of a CTE, only the CTEs
// of that same WITH count: MariaDB does not see an outer WITH's CTEs from
// there (it reads the table of that name), so the checker stops too. Names
// compare byte for byte. A name the server might read as a CTE but the
// checker does not is qualified and checked as a table, which is safe; the
// reverse is what must never happen.
func (v *myVisitor) isCTE(name string) bool {
	for i := len(v.scopes) - 1; i >= 0; i-- {
		for _, n := range v.scopes[i].names {
			if n == name {
				return true
			}
		}
		if v.scopes[i].defining {
			return false
		}
	}
	return false
}

// selectStmt refuses what a SELECT's own fields hold beyond its children.
func (v *myVisitor) selectStmt(n *ast.SelectStmt) error {
	if n.LockInfo != nil && n.LockInfo.LockType != ast.SelectLockNone {
		return refusedf("locking reads (%s) are refused: sources are read-only; drop the locking clause", strings.ToUpper(n.LockInfo.LockType.String()))
	}
	if n.SelectIntoOpt != nil {
		return refusedf("SELECT … INTO is refused: return the rows instead (INTO OUTFILE/DUMPFILE would write the server's files)")
	}
	if len(n.TableHints) > 0 {
		return refusedf("optimizer hints (/*+ … */) are refused: they can change the statement timeout and settings; drop the hint")
	}
	switch n.Kind {
	case ast.SelectStmtKindTable:
		if v.c.mariadb {
			return refusedf("MariaDB has no TABLE statement: write SELECT * FROM the table")
		}
	case ast.SelectStmtKindValues:
		if v.c.mariadb {
			return refusedf("VALUES as a statement is not accepted on MariaDB (the sandbox's parser reads only MySQL's VALUES ROW(…), which MariaDB does not): write SELECT … UNION ALL SELECT …")
		}
	}
	return nil
}

// table checks a table name and writes its database into it.
func (v *myVisitor) table(n *ast.TableName) error {
	if n.AsOf != nil || n.TableSample != nil {
		return refusedf("AS OF and TABLESAMPLE are TiDB's, not MySQL's: drop them")
	}
	if n.Schema.O == "" && v.isCTE(n.Name.O) {
		return nil
	}
	schema, name := n.Schema.O, n.Name.O
	if schema == "" {
		schema = v.c.defaultDB
	}
	if schema == "" {
		return refusedf("table %s names no database, and the source's URL names none: write DATABASE.%s", name, name)
	}
	if v.c.foldNames {
		schema, name = strings.ToLower(schema), strings.ToLower(name)
	}
	if myCatalogSchemas[strings.ToLower(schema)] {
		return refusedf("%s.%s is the server's catalog, which queries may not read; the allowed tables and their columns are listed in your instructions", schema, name)
	}
	if !v.c.allow.allowed(schema, name) {
		hint := ""
		if v.c.hint != nil {
			hint = v.c.hint(name)
		}
		return refusedf("table %s.%s is not one of the source's allowed tables%s", schema, name, hint)
	}
	if v.c.definer[[2]string{schema, name}] && !v.c.exact(schema, name) {
		return refusedf("view %s.%s reads with its definer's rights, and the source's --tables matches it only by a wildcard: the operator must name it in --tables to allow it", schema, name)
	}
	n.Schema, n.Name = ast.NewCIStr(schema), ast.NewCIStr(name)
	return nil
}

// call checks a function call and rewrites its name to the built-in's
// spelling (never a quoted name, which a server resolves to a stored
// function of the same name).
func (v *myVisitor) call(n *ast.FuncCallExpr) error {
	if n.Schema.O != "" {
		return refusedf("stored function %s.%s is not allowed: queries may call only the server's built-in functions", n.Schema.O, n.FnName.O)
	}
	f, ok := myScalarFuncs[n.FnName.L]
	if !ok {
		if why, ok := myDeniedWhy[n.FnName.L]; ok {
			return refusedf("function %s is not allowed: %s", strings.ToUpper(n.FnName.O), why)
		}
		return refusedf("function %s is not one a source query may call: only built-ins that compute a value from their arguments are allowed, never stored or loadable functions", strings.ToUpper(n.FnName.O))
	}
	if f.servers&v.server() == 0 {
		return refusedf("function %s is not a built-in of %s", strings.ToUpper(n.FnName.O), myServerName(v.c.mariadb))
	}
	n.FnName = ast.NewCIStr(f.name)
	n.Tp = ast.FuncCallExprTypeKeyword
	return nil
}

// nameField keeps a result column's name as the statement wrote it. The
// server names an expression's column by its text (a column's by its name,
// a string's by its value); where the restored text
// of the expression differs from the statement's (count(*) is restored as
// COUNT(1)), the statement's text becomes the column's alias. It runs when
// the field's children were checked and rewritten.
func (v *myVisitor) nameField(f *ast.SelectField) error {
	if f.Expr == nil || f.AsName.O != "" {
		return nil
	}
	switch e := f.Expr.(type) {
	case *ast.ColumnNameExpr:
		return nil
	case *test_driver.ValueExpr:
		if k := e.Kind(); k == test_driver.KindString || k == test_driver.KindBytes {
			return nil // the server names a string's column by its value, the same restored
		}
	}
	text := strings.TrimSpace(f.OriginalText())
	if text == "" || utf8.RuneCountInString(text) > 256 || strings.Contains(text, "/*") || strings.Contains(text, "--") || strings.Contains(text, "#") {
		return nil // a comment in the text: the server's own name is as good
	}
	for _, r := range text {
		if r < ' ' || r > 0xFFFF { // not in a MySQL identifier
			return nil
		}
	}
	var b strings.Builder
	if err := f.Expr.Restore(format.NewRestoreCtx(myRestoreFlags, &b)); err != nil {
		return refusedf("the sandbox cannot write this statement back as SQL (%v); write it more simply", err)
	}
	if b.String() != text {
		f.AsName = ast.NewCIStr(text)
	}
	return nil
}

// hexLiteral keeps a hexadecimal literal written 0x… as 0x…: the parser
// holds X'…' and 0x… alike and restores X'…', which MariaDB reads as a
// string where it reads 0x… as a number (0x41 + 0 is 65, X'41' + 0 is 0).
func (v *myVisitor) hexLiteral(n ast.ValueExpr) ast.Node {
	ve, ok := n.(*test_driver.ValueExpr)
	if !ok || ve.Kind() != test_driver.KindBinaryLiteral || ve.Type.GetFlag()&mysql.UnsignedFlag == 0 || len(ve.GetBytes()) == 0 {
		return nil // not a hexadecimal literal (a bit literal has no unsigned flag)
	}
	pos := ve.OriginTextPosition()
	if pos < 0 || pos+2 > len(v.src) || !strings.EqualFold(v.src[pos:pos+2], "0x") {
		return nil
	}
	return &myZeroXLiteral{ve}
}

// myZeroXLiteral writes a hexadecimal literal as 0x….
type myZeroXLiteral struct {
	*test_driver.ValueExpr
}

func (n *myZeroXLiteral) Restore(ctx *format.RestoreCtx) error {
	ctx.WritePlainf("0x%x", n.GetBytes())
	return nil
}

// myWord reports whether s is a plain name (a collation, a character set).
func myWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// myCharFunc writes CHAR(n, … [USING charset]) back as MySQL spells it; the
// parser holds it as char_func(n, …, charset or NULL), which no server reads.
type myCharFunc struct {
	*ast.FuncCallExpr
}

func (n *myCharFunc) Restore(ctx *format.RestoreCtx) error {
	args := n.Args
	if len(args) == 0 {
		return fmt.Errorf("CHAR without arguments")
	}
	charset, args := args[len(args)-1], args[:len(args)-1]
	ctx.WriteKeyWord("CHAR")
	ctx.WritePlain("(")
	for i, a := range args {
		if i > 0 {
			ctx.WritePlain(", ")
		}
		if err := a.Restore(ctx); err != nil {
			return err
		}
	}
	if cs, ok := charset.(ast.ValueExpr); !ok {
		return fmt.Errorf("CHAR … USING: an unexpected character set")
	} else if name, ok := cs.GetValue().(string); ok {
		if !myWord(name) {
			return fmt.Errorf("CHAR … USING %q", name)
		}
		ctx.WriteKeyWord(" USING ")
		ctx.WritePlain(name)
	} else if cs.GetValue() != nil {
		return fmt.Errorf("CHAR … USING: an unexpected character set")
	}
	ctx.WritePlain(")")
	return nil
}

func (n *myCharFunc) Accept(v ast.Visitor) (ast.Node, bool) {
	node, ok := n.FuncCallExpr.Accept(v)
	if f, isCall := node.(*ast.FuncCallExpr); isCall {
		return &myCharFunc{f}, ok
	}
	return node, ok
}
