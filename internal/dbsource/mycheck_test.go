package dbsource

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"datachat"
)

// testMyChecker checks statements for a source of database shop allowing
// shop.orders, shop.items, shop.v (a definer view, named exactly) and the
// tables of sales matching t* (sales.tv is a definer view matched only by
// that wildcard).
func testMyChecker(mariadb bool) *myChecker {
	allow := newAllowList([]string{"orders", "items", "v", "sales.t*"}, "shop")
	return &myChecker{
		defaultDB: "shop",
		allow:     allow,
		mariadb:   mariadb,
		definer:   map[[2]string]bool{{"shop", "v"}: true, {"sales", "tv"}: true},
		exact: func(s, t string) bool {
			for _, p := range allow.patterns {
				if p[0] == s && p[1] == t {
					return true
				}
			}
			return false
		},
	}
}

func TestMyCheckRestores(t *testing.T) {
	c := testMyChecker(true)
	for _, tc := range []struct{ sql, want string }{
		{"select * from orders", "SELECT * FROM `shop`.`orders`"},
		{"SELECT o.id FROM orders o JOIN sales.t1 ON o.id = t1.id;", "SELECT `o`.`id` FROM `shop`.`orders` AS `o` JOIN `sales`.`t1` ON `o`.`id`=`t1`.`id`"},
		{"SELECT count(*) FROM orders", "SELECT COUNT(1) AS `count(*)` FROM `shop`.`orders`"},
		{"SELECT a + 1, a+1, 'text', x FROM orders", "SELECT `a`+1 AS `a + 1`,`a`+1 AS `a+1`,'text',`x` FROM `shop`.`orders`"},
		{"SELECT `concat`('a'), CoNcAt('b'), substring('abc', 2)", "SELECT CONCAT('a') AS ```concat``('a')`,CONCAT('b') AS `CoNcAt('b')`,SUBSTRING('abc', 2) AS `substring('abc', 2)`"},
		{"SELECT CHAR(65, 66 USING latin1) AS c, CHAR(67) AS d", "SELECT CHAR(65, 66 USING latin1) AS `c`,CHAR(67) AS `d`"},
		{"SELECT INSERT('abc', 1, 1, 'x') AS i", "SELECT INSERT('abc', 1, 1, 'x') AS `i`"},
		{"SELECT 0x41 AS a, X'41' AS b, b'101' AS c", "SELECT 0x41 AS `a`,x'41' AS `b`,b'101' AS `c`"},
		{"SELECT 'it\\'s' AS a, 'back\\\\slash' AS b", "SELECT 'it''s' AS `a`,'back\\\\slash' AS `b`"},
		{"WITH c AS (SELECT * FROM orders) SELECT * FROM c", "WITH `c` AS (SELECT * FROM `shop`.`orders`) SELECT * FROM `c`"},
		{"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) SELECT n FROM c", "WITH RECURSIVE `c` (`n`) AS (SELECT 1 UNION ALL SELECT `n`+1 AS `n + 1` FROM `c` WHERE `n`<3) SELECT `n` FROM `c`"},
		{"WITH orders AS (SELECT 1 AS x) SELECT * FROM orders, shop.orders", "WITH `orders` AS (SELECT 1 AS `x`) SELECT * FROM (`orders`) JOIN `shop`.`orders`"},
		{"WITH c AS (SELECT 1 AS x), b AS (WITH d AS (SELECT 2 AS z) SELECT x FROM c, d) SELECT x FROM b", "WITH `c` AS (SELECT 1 AS `x`), `b` AS (WITH `d` AS (SELECT 2 AS `z`) SELECT `x` FROM (`c`) JOIN `d`) SELECT `x` FROM `b`"},
		{"WITH c AS (SELECT 1 AS x) SELECT (SELECT x FROM (SELECT x FROM c) t)", "WITH `c` AS (SELECT 1 AS `x`) SELECT (SELECT `x` FROM (SELECT `x` FROM `c`) AS `t`) AS `(SELECT x FROM (SELECT x FROM c) t)`"},
		{"SELECT * FROM v", "SELECT * FROM `shop`.`v`"},
		{"SELECT 1 /*M! , (SELECT secret FROM hidden) */", "SELECT 1"},
		{"SELECT 1 # , (SELECT secret FROM hidden)", "SELECT 1"},
		{"SELECT * FROM orders /* for update */", "SELECT * FROM `shop`.`orders`"},
		{"SELECT 'for update' AS x FROM orders", "SELECT 'for update' AS `x` FROM `shop`.`orders`"},
		{"SELECT \"x\\\" for update\" AS x FROM orders", "SELECT 'x\" for update' AS `x` FROM `shop`.`orders`"},
		{"SELECT `for` FROM orders", "SELECT `for` FROM `shop`.`orders`"},
		{"SELECT d + INTERVAL 1 DAY AS d FROM orders", "SELECT DATE_ADD(`d`, INTERVAL 1 DAY) AS `d` FROM `shop`.`orders`"},
		{"SELECT std(x) AS s FROM orders", "SELECT STDDEV_POP(`x`) AS `s` FROM `shop`.`orders`"},
	} {
		got, err := c.check(tc.sql)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.sql, got, tc.want)
		}
	}
}

func TestMyCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		mariadb bool
		kind    string
		want    string
	}{
		{"SELECT * FROM orders FOR UPDATE", true, datachat.KindRefused, "locking"},
		{"SELECT * FROM orders /*!50000 lock in share mode */", true, datachat.KindRefused, "locking"},
		{"SELECT * FROM orders /*!99999 FOR UPDATE */", true, datachat.KindRefused, "locking"},
		{"SELECT 'it\\'s' FROM orders -- '\nLOCK IN SHARE MODE", true, datachat.KindRefused, "locking"},
		{"SELECT 'it''s' FROM orders # '\nFOR/**/UPDATE", true, datachat.KindRefused, "locking"},
		{"SELECT 1--1 FROM orders FOR UPDATE", true, datachat.KindRefused, "locking"},
		{"SELECT * FROM orders INTO OUTFILE '/x'", true, datachat.KindRefused, "INTO"},
		{"SELECT 'open", true, datachat.KindSyntax, "cannot read"},
		{"SELECT * FROM hidden", true, datachat.KindRefused, "shop.hidden"},
		{"SELECT * FROM sales.x1", true, datachat.KindRefused, "sales.x1"},
		{"SELECT * FROM sales.tv", true, datachat.KindRefused, "definer"},
		{"SELECT * FROM Orders", true, datachat.KindRefused, "shop.Orders"},
		{"SELECT * FROM mysql.user", true, datachat.KindRefused, "catalog"},
		{"WITH c AS (SELECT * FROM c) SELECT * FROM c", true, datachat.KindRefused, "shop.c"},
		{"SELECT (SELECT 1 FROM c) FROM (WITH c AS (SELECT 1) SELECT * FROM c) d", true, datachat.KindRefused, "shop.c"},
		// From inside a CTE's definition only that WITH's CTEs count (MariaDB
		// reads the table there).
		{"WITH hidden AS (SELECT 1 AS note) SELECT (WITH d AS (SELECT note FROM hidden) SELECT note FROM d)", true, datachat.KindRefused, "shop.hidden"},
		{"WITH hidden AS (SELECT 1 AS x) SELECT * FROM (WITH hidden AS (SELECT x FROM hidden) SELECT * FROM hidden) d", true, datachat.KindRefused, "shop.hidden"},
		// A WITH inside a parenthesised set operation is scoped to it, not to
		// the statement's own WITH.
		{"WITH x AS (SELECT 1) (WITH hidden AS (SELECT 1) SELECT * FROM hidden UNION SELECT 2) UNION SELECT * FROM hidden", true, datachat.KindRefused, "shop.hidden"},
		{"WITH x AS (SELECT 1) SELECT * FROM x UNION (WITH hidden AS (SELECT 1) SELECT * FROM hidden UNION SELECT 2) UNION SELECT * FROM hidden", true, datachat.KindRefused, "shop.hidden"},
		{"WITH x AS (SELECT 1) SELECT * FROM ((WITH hidden AS (SELECT 1) SELECT * FROM hidden UNION SELECT 2) UNION SELECT 3) d, hidden", true, datachat.KindRefused, "shop.hidden"},
		{"SELECT sleep(1)", true, datachat.KindRefused, "SLEEP"},
		{"SELECT shop.f()", true, datachat.KindRefused, "stored function shop.f"},
		{"SELECT f()", true, datachat.KindRefused, "F is not one"},
		{"SELECT @a", true, datachat.KindRefused, "@a"},
		{"SELECT @@version", true, datachat.KindRefused, "@@version"},
		{"SELECT ?", true, datachat.KindRefused, "placeholder"},
		{"SELECT /*+ SET_VAR(sql_mode='') */ 1", true, datachat.KindRefused, "hints"},
		{"TABLE orders", true, datachat.KindRefused, "TABLE"},
		{"VALUES ROW(1)", true, datachat.KindRefused, "VALUES"},
		{"SELECT * FROM orders o, LATERAL (SELECT o.id) d", true, datachat.KindRefused, "LATERAL"},
		{"SELECT REGEXP_LIKE('a', 'a')", true, datachat.KindRefused, "not a built-in of MariaDB"},
		{"SELECT NVL(1, 2)", false, datachat.KindRefused, "not a built-in of MySQL"},
		{"SELECT 1; SELECT 2", true, datachat.KindRefused, "one statement"},
		{"UPDATE orders SET a = 1", true, datachat.KindRefused, "writes"},
		{"SHOW TABLES", true, datachat.KindRefused, "only a query"},
		{"", true, datachat.KindSyntax, "empty"},
		{"SELECT " + strings.Repeat("(", 1100) + "1" + strings.Repeat(")", 1100), true, datachat.KindRefused, "nests deeper"},
		{"SELECT " + strings.Repeat("-", 30000) + "1", true, datachat.KindRefused, "nests deeper"},
		{"SELECT '" + strings.Repeat("x", myMaxStatementBytes) + "'", true, datachat.KindRefused, "at most"},
	} {
		_, err := testMyChecker(tc.mariadb).check(tc.sql)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("%.60s: got %v, want a %s", tc.sql, err, tc.kind)
			continue
		}
		if qe.Kind != tc.kind || !strings.Contains(qe.Message, tc.want) {
			t.Errorf("%.60s: got %s: %s, want %s naming %q", tc.sql, qe.Kind, qe.Message, tc.kind, tc.want)
		}
	}
}

// TestMyCheckMySQL: what only MySQL reads is accepted for a MySQL server.
func TestMyCheckMySQL(t *testing.T) {
	c := testMyChecker(false)
	for _, sql := range []string{"TABLE orders", "VALUES ROW(1, 2), ROW(3, 4)", "SELECT * FROM orders o, LATERAL (SELECT o.id) d", "SELECT REGEXP_LIKE('a', 'a')", "SELECT 1 MEMBER OF ('[1]')"} {
		if got, err := c.check(sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		} else {
			myInvariant(t, c, got)
		}
	}
}

// TestMyCheckFoldNames: with lower_case_table_names the server reads names
// in lower case, and so does the check.
func TestMyCheckFoldNames(t *testing.T) {
	c := testMyChecker(true)
	c.foldNames = true
	got, err := c.check("SELECT * FROM ORDERS JOIN Shop.Items")
	if err != nil || got != "SELECT * FROM `shop`.`orders` JOIN `shop`.`items`" {
		t.Errorf("got %s, %v", got, err)
	}
}

// myInvariant asserts what a checked statement's restored text must be,
// read again by an independent walk: one query; every table qualified and
// allowed, or a CTE of the statement; every function an allowed built-in of
// the server, unqualified; no variable, placeholder, locking clause, INTO or
// hint; and checking it again gives the same text.
func myInvariant(t *testing.T, c *myChecker, restored string) {
	t.Helper()
	stmts, _, err := parser.New().Parse(restored, "", "")
	if err != nil || len(stmts) != 1 {
		t.Fatalf("restored %q: %d statements, %v", restored, len(stmts), err)
	}
	switch stmts[0].(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
	default:
		t.Fatalf("restored %q: a %T", restored, stmts[0])
	}
	w := &myInvariantWalk{}
	stmts[0].Accept(w)
	server := myOnMySQL
	if c.mariadb {
		server = myOnMariaDB
	}
	for _, tn := range w.tables {
		switch {
		case tn.Schema.O == "" && w.inScope[tn]:
		case tn.Schema.O == "":
			t.Errorf("restored %q: table %s without a database, and no CTE of that name around it", restored, tn.Name.O)
		case myCatalogSchemas[strings.ToLower(tn.Schema.O)] || !c.allow.allowed(tn.Schema.O, tn.Name.O):
			t.Errorf("restored %q: reads %s.%s", restored, tn.Schema.O, tn.Name.O)
		}
	}
	for _, f := range w.calls {
		if f.Schema.O != "" {
			t.Errorf("restored %q: calls %s.%s", restored, f.Schema.O, f.FnName.O)
		}
		if m, ok := myScalarFuncs[f.FnName.L]; !ok || m.servers&server == 0 {
			t.Errorf("restored %q: calls %s", restored, f.FnName.O)
		}
	}
	for _, f := range w.aggs {
		if m, ok := myAggregates[strings.ToLower(f)]; !ok || m.servers&server == 0 {
			t.Errorf("restored %q: aggregates with %s", restored, f)
		}
	}
	for _, f := range w.windows {
		if m, ok := myWindowFuncs[strings.ToLower(f)]; !ok || m.servers&server == 0 {
			t.Errorf("restored %q: windows with %s", restored, f)
		}
	}
	if w.bad != "" {
		t.Errorf("restored %q: has %s", restored, w.bad)
	}
	again, err := c.check(restored)
	if err != nil {
		t.Errorf("restored %q is refused when checked again: %v", restored, err)
	} else if again != restored {
		t.Errorf("restored %q is checked again as %q", restored, again)
	}
}

// myInvariantWalk collects what a restored statement reads and calls. A
// table without a database must be named by a WITH of a statement around it
// (a wider scope than the server's, which is enough to catch a CTE name
// leaking out of its statement).
type myInvariantWalk struct {
	tables  []*ast.TableName
	inScope map[*ast.TableName]bool
	withs   []ast.Node // the statements around the node walked that hold a WITH
	calls   []*ast.FuncCallExpr
	aggs    []string
	windows []string
	bad     string
}

func (w *myInvariantWalk) Enter(n ast.Node) (ast.Node, bool) {
	if myWithOf(n) != nil {
		w.withs = append(w.withs, n)
	}
	switch n := n.(type) {
	case *ast.TableName:
		w.tables = append(w.tables, n)
		for _, o := range w.withs {
			for _, c := range myWithOf(o).CTEs {
				if c.Name.O == n.Name.O {
					if w.inScope == nil {
						w.inScope = map[*ast.TableName]bool{}
					}
					w.inScope[n] = true
				}
			}
		}
	case *ast.FuncCallExpr:
		w.calls = append(w.calls, n)
	case *ast.AggregateFuncExpr:
		w.aggs = append(w.aggs, n.F)
	case *ast.WindowFuncExpr:
		w.windows = append(w.windows, n.Name)
	case *ast.VariableExpr:
		w.bad = "a variable"
	case ast.ParamMarkerExpr:
		w.bad = "a placeholder"
	case *ast.SelectStmt:
		switch {
		case n.LockInfo != nil && n.LockInfo.LockType != ast.SelectLockNone:
			w.bad = "a locking clause"
		case n.SelectIntoOpt != nil:
			w.bad = "INTO"
		case len(n.TableHints) > 0:
			w.bad = "a hint"
		}
	}
	return n, false
}

func (w *myInvariantWalk) Leave(n ast.Node) (ast.Node, bool) {
	if len(w.withs) > 0 && w.withs[len(w.withs)-1] == n {
		w.withs = w.withs[:len(w.withs)-1]
	}
	return n, true
}

// FuzzMyCheck: whatever the statement, the checker refuses it (without
// panicking) or restores it to text that myInvariant accepts.
func FuzzMyCheck(f *testing.F) {
	for _, s := range []string{
		"SELECT * FROM orders WHERE id = (SELECT EXTRACTVALUE(1, CONCAT(0x7e, (SELECT ssn FROM secret LIMIT 1))))",
		"SELECT count(*), species FROM orders o JOIN items i USING (id) GROUP BY 2 WITH ROLLUP HAVING count(*) > 1 ORDER BY 1 DESC LIMIT 3",
		"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5) SELECT * FROM c, orders",
		"WITH orders AS (SELECT * FROM hidden) SELECT * FROM orders",
		"WITH x AS (SELECT 1) (WITH hidden AS (SELECT 1) SELECT * FROM hidden UNION SELECT 2) UNION SELECT * FROM hidden",
		"WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM (WITH c AS (SELECT * FROM b) SELECT * FROM c) d, a",
		"SELECT 1 /*!99999 , (SELECT x FROM hidden) */ /*M! , (SELECT y FROM hidden) */",
		"SELECT CHAR(65 USING latin1), 0x41, X'41', b'1', _latin1'é', N'x', 'a\\'b', \"dq\", 1e3, -2, 1.5",
		"SELECT ROW_NUMBER() OVER (PARTITION BY a ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), LAG(a) OVER w FROM orders WINDOW w AS (ORDER BY a)",
		"SELECT CAST(a AS CHAR(3) CHARACTER SET latin1), CONVERT(a USING latin1), a COLLATE utf8mb4_bin, DATE '2020-01-01' FROM orders",
		"SELECT a FROM orders UNION SELECT b FROM items INTERSECT SELECT c FROM sales.t1 EXCEPT SELECT d FROM orders",
		"SELECT * FROM orders FOR UPDATE", "SELECT @x := 1", "SELECT sleep(1)", "TABLE orders", "VALUES ROW(1)",
		"SELECT GROUP_CONCAT(DISTINCT a ORDER BY b SEPARATOR ';'), JSON_ARRAYAGG(a) FROM orders",
		"SELECT TRIM(LEADING 'x' FROM a), d + INTERVAL 1 DAY, EXTRACT(YEAR FROM d), GET_FORMAT(DATE, 'ISO'), TIMESTAMPDIFF(DAY, d, e) FROM orders",
		"SELECT CASE WHEN a IN (1, 2) THEN 'x' WHEN a BETWEEN 3 AND 4 THEN 'y' ELSE NULL END FROM orders WHERE EXISTS (SELECT 1 FROM items) AND a > ANY (SELECT b FROM items)",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, sql string, mariadb bool) {
		c := testMyChecker(mariadb)
		restored, err := c.check(sql)
		if err != nil {
			var qe *datachat.QueryError
			if !errors.As(err, &qe) {
				t.Fatalf("%q: got %v, want a *datachat.QueryError", sql, err)
			}
			return
		}
		myInvariant(t, c, restored)
	})
}

// BenchmarkMyCheck measures the check of a typical model statement and of
// a statement at the size cap.
func BenchmarkMyCheck(b *testing.B) {
	c := testMyChecker(true)
	typical := "SELECT o.region, count(*) AS n, round(avg(i.price), 2) AS price FROM orders o JOIN items i ON i.order_id = o.id WHERE o.created >= '2024-01-01' AND i.sku LIKE 'A%' GROUP BY o.region HAVING n > 10 ORDER BY n DESC LIMIT 20"
	big := "SELECT a FROM orders WHERE a IN (" + strings.Repeat("12345, ", (myMaxStatementBytes-60)/7) + "1)"
	for _, s := range []struct{ name, sql string }{{"typical", typical}, {"64KiB", big}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.check(s.sql); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMyJudgeGrants judges grants as SHOW GRANTS lines state them, parsed:
// a grant to PUBLIC (MariaDB 10.11: every account holds it) on a table
// outside --tables is refused naming the REVOKE … FROM PUBLIC; one on an
// allowed table is not.
func TestMyJudgeGrants(t *testing.T) {
	e := &myEngine{db: &DB{src: Source{Name: "shop"}}, allow: newAllowList([]string{"orders"}, "shop"), server: &myServer{mariadb: true}}
	judge := func(line string) error {
		t.Helper()
		st, err := myParseGrant(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return e.judge(context.Background(), nil, "'r'@'h'", myGrantsOf(st.(*ast.GrantStmt), "PUBLIC", "PUBLIC, which every account holds"))
	}
	for _, tc := range []struct{ line, want string }{
		{"GRANT SELECT ON `shop`.`secret` TO PUBLIC", "REVOKE SELECT ON `shop`.`secret` FROM PUBLIC"},
		{"GRANT SELECT (`ssn`) ON `shop`.`secret` TO PUBLIC", "REVOKE SELECT (`ssn`) ON `shop`.`secret` FROM PUBLIC"},
		{"GRANT SELECT ON *.* TO PUBLIC", "REVOKE SELECT ON *.* FROM PUBLIC"},
		{"GRANT FILE ON *.* TO PUBLIC", "REVOKE FILE ON *.* FROM PUBLIC"},
		{"GRANT ALL PRIVILEGES ON `mysql`.`user` TO `r`", "REVOKE ALL PRIVILEGES ON `mysql`.`user` FROM PUBLIC"},
	} {
		err := judge(tc.line)
		var re *RoleError
		if !errors.As(err, &re) || !strings.Contains(re.Error(), tc.want) || !strings.Contains(re.Error(), "through role PUBLIC") {
			t.Errorf("%s: got %v, want a RoleError saying %s", tc.line, err, tc.want)
		}
	}
	for _, line := range []string{"GRANT SELECT ON `shop`.`orders` TO PUBLIC", "GRANT INSERT ON `shop`.`secret` TO PUBLIC", "GRANT USAGE ON *.* TO PUBLIC"} {
		if err := judge(line); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
}
