package dbsource_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// The red team's MySQL/MariaDB holes of issue 22, each reproduced as it was
// reported (both failed before the checker and the session per query), and
// the adversarial suite around them: every function class, every place a
// value can hide a call, views, comments, error channels, timing and
// session state, and the grants the source's account may and may not hold.

// TestMySQLRedTeamErrorChannel reproduces issue 22's hole 2: MariaDB
// evaluated a constant subquery while the old check ran EXPLAIN EXTENDED, and
// the XPATH error carried a secret back verbatim, in Query and in the
// confirmation gate's EstimateRows.
func TestMySQLRedTeamErrorChannel(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{})
	ctx := context.Background()
	q := fmt.Sprintf("SELECT * FROM %s.penguins WHERE species=(SELECT EXTRACTVALUE(1,CONCAT(0x7e,(SELECT password FROM %s_secret.creds LIMIT 1))))", f.db, f.db)
	_, err := db.Query(ctx, q)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Query: got %v, want an error without the secret", err)
	}
	_, err = db.EstimateRows(ctx, q)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("EstimateRows: got %v, want an error without the secret", err)
	}
}

// TestMySQLRedTeamUserVariable reproduces issue 22's hole 5: a user variable
// set by one query was read by the next query on the same pooled connection.
func TestMySQLRedTeamUserVariable(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{MaxConns: 1})
	ctx := context.Background()
	db.Query(ctx, "SELECT @dc_leak := 'set by alice'")
	res, err := db.Query(ctx, "SELECT @dc_leak")
	if err == nil && strings.Contains(fmt.Sprint(res.Rows), "alice") {
		t.Errorf("the next query read the variable: %v", res.Rows)
	}
}

// TestMySQLErrorChannels checks that a server message that can carry a value
// goes back as a generic error with its number, in Query and in
// EstimateRows, on data the source may read (so that only the error
// classification stands between the value and the message), and that the
// messages that cannot carry data go back whole.
func TestMySQLErrorChannels(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{})
	ctx := context.Background()
	for _, q := range []string{
		"SELECT EXTRACTVALUE(1, CONCAT(0x7e, species)) FROM penguins",
		"SELECT * FROM penguins WHERE species = (SELECT EXTRACTVALUE(1, CONCAT(0x7e, (SELECT species FROM penguins LIMIT 1))))",
		"SELECT UPDATEXML(1, CONCAT(0x7e, (SELECT island FROM penguins LIMIT 1)), 1)",
	} {
		_, err := db.Query(ctx, q)
		wantKind(t, err, datachat.KindOther, "error 1105", "not repeated")
		for _, v := range []string{"Adelie", "Torgersen", "Gentoo", "Chinstrap", "Biscoe", "Dream"} {
			if strings.Contains(err.Error(), v) {
				t.Errorf("%s: the error shows %s: %v", q, v, err)
			}
		}
	}
	_, err := db.EstimateRows(ctx, "SELECT * FROM penguins WHERE species = (SELECT EXTRACTVALUE(1, CONCAT(0x7e, (SELECT species FROM penguins LIMIT 1))))")
	wantKind(t, err, datachat.KindOther, "error 1105")
	if strings.Contains(err.Error(), "Adelie") {
		t.Errorf("EstimateRows shows the value: %v", err)
	}
	// Messages that name only the statement's own words come back.
	_, err = db.Query(ctx, "SELECT (SELECT species FROM penguins)")
	wantKind(t, err, datachat.KindTypeMismatch, "more than 1 row")
	_, err = db.Query(ctx, "SELECT nope FROM penguins")
	wantKind(t, err, datachat.KindUnknownColumn, "nope")
	_, err = db.Query(ctx, "SELECT CAST(1 AS JSON)") // the parser reads it, MariaDB does not
	wantKind(t, err, datachat.KindSyntax, "syntax")
}

// TestMySQLSessionState plants state in a session of the pool as a query
// that got past the checker would, and checks that the next session (on a
// pool of one) starts clean.
func TestMySQLSessionState(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{MaxConns: 1})
	ctx := context.Background()
	plant := func(q string) {
		t.Helper()
		if err := dbsource.MyPoolExec(ctx, db, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	read := func(q string) (string, error) {
		t.Helper()
		return dbsource.MyPoolQuery(ctx, db, q)
	}

	plant("SET @dc_state = 'left by alice'")
	if v, err := read("SELECT @dc_state"); err != nil || v != "NULL" {
		t.Errorf("user variable: got %q, %v, want NULL", v, err)
	}
	plant("SET SESSION div_precision_increment = 0")
	if v, err := read("SELECT @@SESSION.div_precision_increment"); err != nil || v != "4" {
		t.Errorf("session setting: got %q, %v, want the default 4", v, err)
	}
	plant("CREATE TEMPORARY TABLE " + f.db + ".dc_tmp (x INT)")
	if _, err := read("SELECT count(*) FROM " + f.db + ".dc_tmp"); err == nil {
		t.Errorf("a temporary table outlived its session")
	}
	plant("PREPARE dc_p FROM 'SELECT 1'")
	if err := dbsource.MyPoolExec(ctx, db, "EXECUTE dc_p"); err == nil {
		t.Errorf("a prepared statement outlived its session")
	}
	// A lock taken in one session is released when it ends: another
	// session gets it (waiting up to 10 s for the first to close).
	lock := "dc_lock_" + f.suffix
	plant("DO GET_LOCK('" + lock + "', 0)")
	a := f.adminDB(t)
	var got int
	if err := a.QueryRowContext(ctx, "SELECT GET_LOCK(?, 10)", lock).Scan(&got); err != nil || got != 1 {
		t.Errorf("the lock was still held after its session: GET_LOCK = %d, %v", got, err)
	}
	a.ExecContext(ctx, "DO RELEASE_LOCK(?)", lock)
	// And through the checker: nothing of the kind runs.
	for _, q := range []string{
		"SET @x = 1", "SELECT @x := 1", "SELECT @x", "SELECT 1 INTO @x", "CREATE TEMPORARY TABLE t (x INT)",
		"SELECT GET_LOCK('a', 0)", "DO GET_LOCK('a', 0)", "SET SESSION sql_mode = ''", "SET NAMES latin1",
		"SET CHARACTER SET latin1", "PREPARE p FROM 'SELECT 1'", "USE mysql", "LOCK TABLES penguins READ",
		"SELECT @@SESSION.sql_mode", "SET autocommit = 1", "START TRANSACTION", "ROLLBACK", "SAVEPOINT a",
	} {
		if _, err := db.Query(ctx, q); err == nil {
			t.Errorf("%s: ran, want refused", q)
		}
	}
}

// TestMySQLAdversarialFunctions refuses every function class that reaches
// past a value: locks, time, files, replication, the session and server,
// UUIDs and sequences, stored and loadable functions, and MySQL-only or
// TiDB-only names on MariaDB.
func TestMySQLAdversarialFunctions(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{Timeout: 2 * time.Second, MaxConns: 2})
	const refused = datachat.KindRefused
	lock := "dc_adv_" + f.suffix
	var cases []refusal
	add := func(want string, sqls ...string) {
		for _, q := range sqls {
			cases = append(cases, refusal{q, q, refused, []string{want}})
		}
	}
	add("lock", "SELECT GET_LOCK('"+lock+"', 0)", "SELECT RELEASE_LOCK('"+lock+"')", "SELECT RELEASE_ALL_LOCKS()",
		"SELECT IS_FREE_LOCK('"+lock+"')", "SELECT IS_USED_LOCK('"+lock+"')", "SELECT species FROM penguins WHERE GET_LOCK('"+lock+"', 0) = 1")
	add("time", "SELECT SLEEP(1)", "SELECT BENCHMARK(100000000, MD5('x'))", "SELECT species FROM penguins ORDER BY SLEEP(0.01)")
	add("files", "SELECT LOAD_FILE('/etc/passwd')", "SELECT LENGTH(LOAD_FILE('/etc/hostname')) FROM penguins")
	add("replication", "SELECT MASTER_POS_WAIT('log', 4, 1)", "SELECT MASTER_GTID_WAIT('0-1-1', 1)", "SELECT SOURCE_POS_WAIT('log', 4, 1)")
	add("session or the server", "SELECT USER()", "SELECT CURRENT_USER()", "SELECT CURRENT_USER", "SELECT SESSION_USER()", "SELECT SYSTEM_USER()",
		"SELECT DATABASE()", "SELECT SCHEMA()", "SELECT VERSION()", "SELECT CONNECTION_ID()", "SELECT CURRENT_ROLE()")
	add("session's state", "SELECT LAST_INSERT_ID()", "SELECT LAST_INSERT_ID(5)", "SELECT ROW_COUNT()", "SELECT FOUND_ROWS()")
	add("server state", "SELECT UUID()", "SELECT UUID_SHORT()", "SELECT SYS_GUID()")
	add("sequence", "SELECT NEXTVAL(seq)", "SELECT LASTVAL(seq)", "SELECT SETVAL(seq, 5)")
	add("column name from text", "SELECT NAME_CONST('a', 1)")
	add("not a function of the data", "SELECT PASSWORD('x')", "SELECT ENCRYPT('x')", "SELECT AES_ENCRYPT('x', 'k')",
		"SELECT RANDOM_BYTES(8)", "SELECT COMPRESS('x')")
	add("runs programs", "SELECT SYS_EXEC('id')", "SELECT SYS_EVAL('id')")
	add("not a built-in of MariaDB", "SELECT REGEXP_LIKE('a', 'a')", "SELECT JSON_STORAGE_SIZE('[]')", "SELECT ANY_VALUE(species) FROM penguins",
		"SELECT BIN_TO_UUID(0x00)", "SELECT 1 MEMBER OF ('[1]')")
	add("may call", "SELECT TIDB_VERSION()", "SELECT WEIGHT_STRING('a')", "SELECT ST_ASTEXT(POINT(1, 1))", "SELECT SOME_UDF(1)",
		"SELECT evil()", "SELECT `evil`()", "SELECT EVIL()", "SELECT `e``vil`()")
	add("APPROX_COUNT_DISTINCT", "SELECT APPROX_COUNT_DISTINCT(species) FROM penguins")
	add("stored function", "SELECT "+f.db+".evil()", "SELECT `"+f.db+"`.`evil`()", "SELECT "+f.db+".`substring`('abc', 2)")
	add("DEFAULT", "SELECT DEFAULT(species) FROM penguins")
	cases = append(cases, refusal{"next value for", "SELECT NEXT VALUE FOR seq", "", nil})
	checkRefusals(t, db, cases, "hunter2", f.password)

	// A built-in whose name a stored function of the database also has
	// runs as the built-in, however the statement spells it.
	ctx := context.Background()
	for _, q := range []string{"SELECT SUBSTRING('abc', 2)", "SELECT `substring`('abc', 2)", "SELECT substring('abc' FROM 2)"} {
		res, err := db.Query(ctx, q)
		if err != nil || fmt.Sprint(res.Rows) != "[[bc]]" {
			t.Errorf("%s: got %v, %v, want [[bc]]", q, res, err)
		}
	}
	// None of the lock functions ran: the lock is free.
	a := f.adminDB(t)
	var free int
	if err := a.QueryRow("SELECT IS_FREE_LOCK(?)", lock).Scan(&free); err != nil || free != 1 {
		t.Errorf("IS_FREE_LOCK after the suite: %d, %v", free, err)
	}
}

// myHidingPlaces are the places of a statement where an expression can
// stand; %s is the expression.
var myHidingPlaces = []string{
	"SELECT %s",
	"SELECT species, %s FROM penguins",
	"SELECT species, %s AS x FROM penguins",
	"SELECT species FROM penguins WHERE species = %s",
	"SELECT species FROM penguins GROUP BY species, %s",
	"SELECT species FROM penguins GROUP BY species HAVING max(species) = %s",
	"SELECT species FROM penguins ORDER BY %s",
	"SELECT a.species FROM penguins a JOIN penguins b ON a.species = %s",
	"SELECT a.species FROM penguins a LEFT JOIN penguins b ON b.island = %s",
	"SELECT * FROM (SELECT %s AS x) d",
	"SELECT * FROM (SELECT * FROM (SELECT %s AS x) d1) d2",
	"WITH c AS (SELECT %s AS x) SELECT * FROM c",
	"WITH c AS (SELECT 1 AS x) SELECT * FROM c WHERE x = %s",
	"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < LENGTH(%s)) SELECT * FROM c",
	"SELECT species FROM penguins UNION SELECT %s",
	"SELECT species FROM penguins UNION ALL (SELECT %s)",
	"SELECT species FROM penguins INTERSECT SELECT %s",
	"SELECT species FROM penguins EXCEPT SELECT %s",
	"SELECT species FROM penguins WHERE species IN ('x', %s)",
	"SELECT species FROM penguins WHERE species NOT IN (SELECT %s)",
	"SELECT species FROM penguins WHERE EXISTS (SELECT %s)",
	"SELECT species FROM penguins WHERE species = ANY (SELECT %s)",
	"SELECT species FROM penguins WHERE species > ALL (SELECT %s)",
	"SELECT species FROM penguins WHERE (species, island) IN (SELECT %s, 'x')",
	"SELECT species FROM penguins p WHERE species = (SELECT MAX(species) FROM penguins q WHERE q.island = p.island AND %s IS NOT NULL)",
	"SELECT (SELECT (SELECT %s))",
	"SELECT CASE WHEN %s THEN 1 ELSE 0 END",
	"SELECT CASE WHEN 1 THEN %s END",
	"SELECT CASE %s WHEN 1 THEN 2 END",
	"SELECT CASE 1 WHEN 2 THEN 3 ELSE %s END",
	"SELECT CAST(%s AS CHAR)",
	"SELECT CAST(%s AS DECIMAL(10, 2))",
	"SELECT CONVERT(%s USING latin1)",
	"SELECT CONVERT(%s, CHAR)",
	"SELECT BINARY %s",
	"SELECT %s COLLATE utf8mb4_bin",
	"SELECT ROW_NUMBER() OVER (PARTITION BY %s) FROM penguins",
	"SELECT ROW_NUMBER() OVER (ORDER BY %s) FROM penguins",
	"SELECT ROW_NUMBER() OVER w FROM penguins WINDOW w AS (ORDER BY %s)",
	"SELECT LAG(species, 1, %s) OVER (ORDER BY species) FROM penguins",
	"SELECT SUM(body_mass_g) OVER (ORDER BY %s) FROM penguins",
	"SELECT count(%s) FROM penguins",
	"SELECT MAX(%s) FROM penguins",
	"SELECT GROUP_CONCAT(species ORDER BY %s) FROM penguins",
	"SELECT GROUP_CONCAT(%s SEPARATOR ',') FROM penguins",
	"SELECT JSON_ARRAYAGG(%s) FROM penguins",
	"SELECT species, count(*) FROM penguins GROUP BY species, %s WITH ROLLUP",
	"SELECT ROW(1, %s) = ROW(1, 2)",
	"SELECT (1, %s) IN ((1, 2))",
	"SELECT JSON_EXTRACT('{}', %s)",
	"SELECT JSON_OBJECT('k', %s)",
	"SELECT DATE_ADD('2020-01-01', INTERVAL %s DAY)",
	"SELECT '2020-01-01' + INTERVAL %s DAY",
	"SELECT TIMESTAMPADD(DAY, %s, '2020-01-01')",
	"SELECT 1 BETWEEN %s AND 2",
	"SELECT 'a' LIKE %s",
	"SELECT 'a' REGEXP %s",
	"SELECT TRIM(LEADING %s FROM 'x')",
	"SELECT SUBSTRING('abc' FROM %s)",
	"SELECT EXTRACTVALUE('<a/>', %s)",
	"SELECT CHAR(%s USING latin1)",
	"SELECT CONCAT('a', CONCAT('b', CONCAT('c', %s)))",
	"SELECT IF(%s, 1, 2)",
	"SELECT COALESCE(NULL, %s)",
	"SELECT NOT %s",
	"SELECT -%s",
	"SELECT %s IS NULL",
	"SELECT %s IS TRUE",
	"SELECT 1 FROM DUAL WHERE %s",
	"SELECT a.x FROM (SELECT 1 AS x UNION SELECT %s) a",
	"SELECT species FROM penguins LIMIT 1 UNION SELECT %s",
}

// TestMySQLAdversarialHidingPlaces puts a secret table, a lock function, a
// variable and a stored function in every place an expression can stand;
// each is refused before anything reaches the server, naming what it
// refused.
func TestMySQLAdversarialHidingPlaces(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{Timeout: 2 * time.Second, MaxConns: 2})
	s := f.db + "_secret"
	lock := "dc_hide_" + f.suffix
	payloads := []struct{ name, expr, want string }{
		{"secret table", "(SELECT password FROM " + s + ".creds LIMIT 1)", "creds"},
		{"view over it", "(SELECT password FROM leaky LIMIT 1)", "leaky"},
		{"lock", "GET_LOCK('" + lock + "', 0)", "GET_LOCK"},
		{"user variable", "@dc_x", "@dc_x"},
		{"assignment", "(@dc_x := 1)", "@dc_x"},
		{"system variable", "@@datadir", "@@datadir"},
		{"stored function", "evil()", "EVIL"},
		{"catalog", "(SELECT max(TABLE_NAME) FROM information_schema.TABLES)", "catalog"},
	}
	ctx := context.Background()
	for _, place := range myHidingPlaces {
		for _, p := range payloads {
			q := fmt.Sprintf(place, p.expr)
			res, err := db.Query(ctx, q)
			var qe *datachat.QueryError
			switch {
			case err == nil:
				t.Errorf("%s: ran (%v), want refused", q, res.Rows)
			case !errors.As(err, &qe):
				t.Errorf("%s: got %v, want a refusal", q, err)
			case strings.Contains(qe.Message, "hunter2"):
				t.Errorf("%s: the error shows the secret: %v", q, err)
			case qe.Kind == datachat.KindSyntax:
				// The parser does not read the expression there (INTERVAL
				// (SELECT …) DAY): refused all the same, before the server.
			case qe.Kind != datachat.KindRefused || !strings.Contains(qe.Message, p.want):
				t.Errorf("%s: got %v, want a refusal naming %s", q, err, p.want)
			}
		}
	}
	a := f.adminDB(t)
	var free int
	if err := a.QueryRow("SELECT IS_FREE_LOCK(?)", lock).Scan(&free); err != nil || free != 1 {
		t.Errorf("IS_FREE_LOCK after the suite: %d, %v", free, err)
	}
}

// TestMySQLAdversarialStatements refuses statement shapes beyond one plain
// query: locking, INTO, hints, MySQL-only and TiDB-only forms on MariaDB,
// names that try to escape the allowed tables, and CTE names that try to
// pass for tables.
func TestMySQLAdversarialStatements(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{Timeout: 2 * time.Second, MaxConns: 2})
	const refused = datachat.KindRefused
	s := f.db + "_secret"
	cases := []refusal{
		{"for update in a derived table", "SELECT * FROM (SELECT * FROM penguins FOR UPDATE) d", refused, []string{"locking"}},
		{"for share in a cte", "WITH c AS (SELECT * FROM penguins FOR SHARE) SELECT * FROM c", refused, []string{"locking"}},
		{"lock in a union branch", "SELECT species FROM penguins UNION (SELECT species FROM penguins LOCK IN SHARE MODE)", refused, []string{"locking"}},
		{"skip locked", "SELECT * FROM penguins FOR UPDATE SKIP LOCKED", refused, []string{"locking"}},
		{"nowait", "SELECT * FROM penguins FOR UPDATE NOWAIT", refused, []string{"locking"}},
		{"for update of", "SELECT * FROM penguins p FOR UPDATE OF p", refused, []string{"locking"}},
		{"into outfile in a union", "SELECT species FROM penguins UNION SELECT island FROM penguins INTO OUTFILE '/tmp/x'", "", nil},
		{"hint in a subquery", "SELECT (SELECT /*+ MAX_EXECUTION_TIME(0) */ 1)", refused, []string{"hints"}},
		{"table statement", "TABLE penguins", refused, []string{"TABLE statement"}},
		{"values row", "VALUES ROW(1, 2)", refused, []string{"VALUES"}},
		{"values in a union", "SELECT 1, 2 UNION VALUES ROW((SELECT password FROM " + s + ".creds), 2)", refused, nil},
		{"lateral", "SELECT * FROM penguins p, LATERAL (SELECT p.species) d", refused, []string{"LATERAL"}},
		{"json_table", "SELECT * FROM JSON_TABLE('[1]', '$[*]' COLUMNS (x INT PATH '$')) jt", datachat.KindSyntax, []string{"cannot read"}},
		{"as of", "SELECT * FROM penguins AS OF TIMESTAMP NOW()", refused, []string{"AS OF"}},
		{"tablesample", "SELECT * FROM penguins TABLESAMPLE REGIONS()", refused, []string{"TABLESAMPLE"}},
		{"ilike", "SELECT species FROM penguins WHERE species ILIKE 'a%'", refused, []string{"ILIKE"}},
		{"cast array", "SELECT CAST('[1]' AS UNSIGNED ARRAY)", "", nil},
		{"placeholder", "SELECT * FROM penguins WHERE species = ?", refused, []string{"placeholder"}},
		{"placeholder in limit", "SELECT * FROM penguins LIMIT ?", refused, []string{"placeholder"}},
		{"explain", "EXPLAIN SELECT * FROM penguins", refused, []string{"only a query"}},
		{"explain a secret", "EXPLAIN SELECT * FROM " + s + ".creds", refused, []string{"only a query"}},
		{"analyze", "ANALYZE TABLE penguins", refused, []string{"only a query"}},
		{"show create", "SHOW CREATE VIEW leaky", refused, []string{"only a query"}},
		{"describe", "DESCRIBE " + s + ".creds", refused, []string{"only a query"}},
		{"insert select secret", "INSERT INTO penguins (species) SELECT password FROM " + s + ".creds", refused, []string{"writes"}},
		{"empty", "", datachat.KindSyntax, []string{"empty"}},
		{"only a comment", "/* nothing */", datachat.KindSyntax, []string{"empty"}},
		{"three statements", "SELECT 1; SELECT 2; SELECT 3", refused, []string{"one statement"}},
		{"a statement after a comment", "SELECT 1; -- \nSELECT password FROM " + s + ".creds", refused, []string{"one statement"}},
		{"catalog in capitals", "SELECT * FROM INFORMATION_SCHEMA.TABLES", refused, []string{"catalog"}},
		{"mysql in mixed case", "SELECT * FROM MySQL.user", refused, []string{"catalog"}},
		{"sys schema", "SELECT * FROM sys.version", refused, []string{"catalog"}},
		{"table in capitals", "SELECT * FROM PENGUINS", refused, []string{"PENGUINS"}},
		{"lookalike letter", "SELECT * FROM penguіns", refused, []string{"not one of the source's allowed tables"}},
		{"dot inside a quoted name", "SELECT * FROM `" + f.db + ".penguins`", refused, []string{"not one of the source's allowed tables"}},
		{"secret behind an alias of an allowed name", "SELECT penguins.password FROM " + s + ".creds penguins", refused, []string{"creds"}},
		{"cte over a secret named like an allowed table", "WITH penguins AS (SELECT password FROM " + s + ".creds) SELECT * FROM penguins", refused, []string{"creds"}},
		{"cte referring to itself without recursive", "WITH creds AS (SELECT * FROM creds) SELECT * FROM creds", refused, []string{"creds"}},
		{"cte used before it is defined", "SELECT * FROM creds UNION (WITH creds AS (SELECT 1) SELECT * FROM creds)", refused, []string{"creds"}},
		{"cte of a subquery used outside it", "SELECT * FROM (WITH creds AS (SELECT 1 AS x) SELECT x FROM creds) d, creds", refused, []string{"creds"}},
		{"cte forward reference", "WITH a AS (SELECT * FROM creds), creds AS (SELECT 1) SELECT * FROM a", refused, []string{"creds"}},
		{"qualified name is never a cte", "WITH creds AS (SELECT 1) SELECT * FROM " + s + ".creds", refused, []string{"creds"}},
		{"a WITH of a set operation in parentheses is not the statement's", "WITH x AS (SELECT 1) (WITH hidden AS (SELECT 1) SELECT * FROM hidden UNION SELECT 2) UNION SELECT * FROM hidden", refused, []string{"hidden", "not one of the source's allowed tables"}},
		// MariaDB does not see an outer WITH's CTEs from inside the definition
		// of a CTE of an inner WITH in a subquery: it reads the table of that
		// name. The checker treats such a name as a table too.
		{"an outer cte seen from an inner cte's definition", "WITH hidden AS (SELECT 1 AS note) SELECT * FROM (WITH hidden AS (SELECT note FROM hidden) SELECT * FROM hidden) d", refused, []string{"hidden", "not one of the source's allowed tables"}},
		{"an outer cte seen from a scalar subquery's cte", "WITH hidden AS (SELECT 1 AS note) SELECT (WITH d AS (SELECT note FROM hidden) SELECT note FROM d)", refused, []string{"hidden", "not one of the source's allowed tables"}},
		{"an outer recursive cte seen from a scalar subquery's cte", "WITH RECURSIVE hidden AS (SELECT 1 AS note UNION ALL SELECT note + 1 FROM hidden WHERE note < 3) SELECT (WITH d AS (SELECT max(note) AS m FROM hidden) SELECT m FROM d)", refused, []string{"hidden", "not one of the source's allowed tables"}},
		{"a WITH in a derived set operation is not the statement's", "WITH x AS (SELECT 1) SELECT * FROM ((WITH hidden AS (SELECT 1) SELECT * FROM hidden UNION SELECT 2) UNION SELECT 3) d, hidden", refused, []string{"hidden", "not one of the source's allowed tables"}},
		{"deep nesting", strings.Repeat("SELECT (", 500) + "1" + strings.Repeat(")", 500), refused, []string{"nests deeper"}},
		{"a long chain of ORs", "SELECT count(*) FROM penguins WHERE body_mass_g = 0" + strings.Repeat(" OR body_mass_g = 1", 1200), refused, []string{"nests deeper"}},
		{"huge statement", "SELECT '" + strings.Repeat("x", 70000) + "'", refused, []string{"at most"}},
		{"invalid utf-8", "SELECT '\xff\xfe'", datachat.KindSyntax, []string{"UTF-8"}},
	}
	checkRefusals(t, db, cases, "hunter2", f.password)

	// A CTE that takes a secret table's name is the CTE, as the server
	// reads it.
	for _, q := range []string{
		"WITH creds AS (SELECT species AS password FROM penguins LIMIT 1) SELECT * FROM creds",
		// A table of the database has the CTE's name; the server reads the
		// CTE, also as one side of a comma join, which is restored (hidden)
		// JOIN ….
		"WITH hidden AS (SELECT species AS note FROM penguins LIMIT 1) SELECT note FROM hidden, penguin_species LIMIT 1",
		"WITH RECURSIVE hidden(note) AS (SELECT 'Adelie' UNION ALL SELECT note FROM hidden WHERE 0) SELECT * FROM hidden",
		// CTEs the server does see: in the body, through subqueries, derived
		// tables and inner WITHs, and from a definition of the same WITH.
		"SELECT (WITH hidden AS (SELECT 'Adelie' AS note) SELECT (SELECT note FROM hidden))",
		"WITH hidden AS (SELECT 'Adelie' AS note) SELECT (SELECT note FROM (SELECT note FROM hidden) t)",
		"WITH hidden AS (SELECT 'Adelie' AS note) SELECT (WITH d AS (SELECT 5 AS y) SELECT note FROM hidden, d)",
		"WITH hidden AS (SELECT 'Adelie' AS note) SELECT t.note FROM (WITH d AS (SELECT 5 AS y) SELECT note FROM hidden, d) t",
		"WITH hidden AS (SELECT 'Adelie' AS note), b AS (SELECT * FROM (SELECT * FROM hidden) t) SELECT note FROM b",
		"WITH hidden AS (SELECT 'Adelie' AS note), b AS (SELECT (SELECT note FROM hidden) AS note) SELECT note FROM b",
		"WITH hidden AS (SELECT 'Adelie' AS note), b AS (WITH c AS (SELECT 2 AS z) SELECT note FROM hidden, c) SELECT note FROM b",
		"WITH hidden AS (SELECT 'Adelie' AS note) SELECT note FROM hidden WHERE note IN (WITH d AS (SELECT 'Adelie' AS y) SELECT y FROM d WHERE y IN (SELECT note FROM hidden))",
	} {
		res, err := db.Query(context.Background(), q)
		if err != nil || fmt.Sprint(res.Rows) != "[[Adelie]]" {
			t.Errorf("%s: got %v, %v, want the CTE's [[Adelie]]", q, res, err)
		}
	}
}

// TestMySQLVersionedComments shows that a comment cannot give the server a
// second reading of a statement: the parser reads /*! … */ as code (and
// checks it), drops MariaDB's /*M! … */ as a comment, and the server runs
// the restored text, which has no comments.
func TestMySQLVersionedComments(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{})
	ctx := context.Background()
	s := f.db + "_secret"
	for _, q := range []string{
		"SELECT 1 /*!99999 , (SELECT password FROM " + s + ".creds LIMIT 1) */",
		"SELECT 1 /*!50000 , (SELECT password FROM " + s + ".creds LIMIT 1) */",
		"SELECT 1 /*!, (SELECT password FROM " + s + ".creds LIMIT 1) */",
		"SELECT 1 /*T! , (SELECT password FROM " + s + ".creds LIMIT 1) */",
		"SELECT * FROM penguins /*!50000 FOR UPDATE */",
		"SELECT 1 -- a comment\n, (SELECT password FROM " + s + ".creds LIMIT 1)",
		"SELECT 1 /* a comment */ , (SELECT password FROM " + s + ".creds LIMIT 1)",
		"SELECT '/*', (SELECT password FROM " + s + ".creds LIMIT 1), '*/'",
		"SELECT 1 /* /* */ , (SELECT password FROM " + s + ".creds LIMIT 1) /* */",
	} {
		if res, err := db.Query(ctx, q); err == nil {
			t.Errorf("%s: ran (%v), want refused", q, res.Rows)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the secret: %v", q, err)
		}
	}
	// MariaDB would run the content of /*M! … */; the parser does not read
	// it, and the server never sees it: one column, 1.
	for _, q := range []string{
		"SELECT 1 /*M! , (SELECT password FROM " + s + ".creds LIMIT 1) */",
		"SELECT 1 /*M!100000 , (SELECT password FROM " + s + ".creds LIMIT 1) */",
		"SELECT 1 /*M! ; DROP TABLE penguins */",
		"SELECT 1 # , (SELECT password FROM " + s + ".creds LIMIT 1)",
		"SELECT 1 -- , (SELECT password FROM " + s + ".creds LIMIT 1)",
		"SELECT 1 /*M! FOR UPDATE */",
	} {
		restored, err := dbsource.MyRestored(ctx, db, q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		if strings.Contains(restored, "/*") || strings.Contains(restored, "creds") || strings.Contains(restored, "#") || strings.Contains(restored, "--") {
			t.Errorf("%s: restored %s, want no comment", q, restored)
		}
		res, err := db.Query(ctx, q)
		if err != nil || len(res.Columns) != 1 || fmt.Sprint(res.Rows) != "[[1]]" {
			t.Errorf("%s: got %v, %v, want one column, [[1]]", q, res, err)
		}
	}
	var n int
	a := f.adminDB(t)
	if err := a.QueryRow("SELECT count(*) FROM " + f.db + ".penguins").Scan(&n); err != nil || n != 344 {
		t.Errorf("penguins: %d rows, %v", n, err)
	}
}

// TestMySQLDefinerViews: a view reads with its definer's rights, so
// --tables must name it; a wildcard does not admit it, nor list it in the
// catalog. A view reading with the invoker's rights runs under the
// account's own grants, which refuse what it may not read.
func TestMySQLDefinerViews(t *testing.T) {
	f := mySetup(t)
	ctx := context.Background()
	url := myTestAccount(t, f, "views", "SELECT ON %D.penguins", "SELECT ON %D.leaky", "SELECT ON %D.invoker_leak")
	wild := openSource(t, "wild", url, []string{f.db + ".*"}, dbsource.Options{})
	if err := wild.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	_, err := wild.Query(ctx, "SELECT * FROM leaky")
	wantKind(t, err, datachat.KindRefused, "definer", "name it in --tables")
	tables, err := wild.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == "leaky" {
			t.Errorf("the catalog lists the definer view leaky")
		}
	}
	_, err = wild.Query(ctx, "SELECT * FROM invoker_leak")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an invoker view over a table the account may not read: got %v", err)
	}
	// Named: the operator means it, and the view reads what its definer may.
	named := openSource(t, "named", url, []string{f.db + ".penguins", f.db + ".leaky", f.db + ".invoker_leak"}, dbsource.Options{})
	res, err := named.Query(ctx, "SELECT password FROM leaky")
	if err != nil || fmt.Sprint(res.Rows) != "[[hunter2]]" {
		t.Errorf("a view named in --tables: got %v, %v", res, err)
	}
}

// myTestAccount creates an account for one test, granted what grants say
// (PRIV ON OBJECT, %D for the fixture's database, %S for the secret one) or
// the statements themselves when they start with GRANT, SET or CREATE
// (%U for the account); it returns the account's URL.
func myTestAccount(t *testing.T, f *myFixture, name string, grants ...string) string {
	t.Helper()
	a := f.adminDB(t)
	user := fmt.Sprintf("dcsrc_%s_%s", name, dbsourcetest.Suffix())
	account := fmt.Sprintf("'%s'@'127.0.0.1'", user)
	t.Cleanup(func() { a.Exec("DROP USER IF EXISTS " + account) })
	if _, err := a.Exec(fmt.Sprintf("CREATE USER %s IDENTIFIED BY '%s'", account, f.password)); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("%D", "`"+f.db+"`", "%S", "`"+f.db+"_secret`", "%U", account)
	for _, g := range grants {
		g = r.Replace(g)
		q := g
		if !strings.HasPrefix(g, "GRANT") && !strings.HasPrefix(g, "SET") && !strings.HasPrefix(g, "CREATE") {
			q = "GRANT " + g + " TO " + account
		}
		if _, err := a.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dbsourcetest.WithDB(f.base.String(), f.db, user, f.password)
}

// myRole creates a role for one test and returns its name.
func myRole(t *testing.T, f *myFixture, name string, grants ...string) string {
	t.Helper()
	a := f.adminDB(t)
	role := fmt.Sprintf("dcsrc_%s_%s", name, dbsourcetest.Suffix())
	t.Cleanup(func() { a.Exec("DROP ROLE IF EXISTS " + role) })
	if _, err := a.Exec("CREATE ROLE " + role); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("%D", "`"+f.db+"`", "%S", "`"+f.db+"_secret`")
	for _, g := range grants {
		if _, err := a.Exec("GRANT " + r.Replace(g) + " TO " + role); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	return role
}

// readerGrants are the grants of an account that may read the fixture's
// allowed tables and nothing else.
func readerGrants(t *testing.T, f *myFixture) []string {
	var out []string
	for _, tb := range f.allowed(t) {
		out = append(out, "SELECT ON "+tb)
	}
	return out
}

// TestMySQLGrants proves the source's account from the server's grants: an
// account that may SELECT anything outside --tables (globally, a database,
// a table, a column, through a role, a nested role or a database pattern)
// is refused when the source is added, naming the grant and the REVOKE to
// run; an account granted only the allowed tables (or a whole database that
// --tables covers, or columns of an allowed table) is accepted.
func TestMySQLGrants(t *testing.T) {
	f := mySetup(t)
	ctx := context.Background()
	reader := readerGrants(t, f)
	with := func(extra ...string) []string { return append(append([]string{}, reader...), extra...) }
	secretRole := myRole(t, f, "secretrole", "SELECT ON %S.creds")
	outer := myRole(t, f, "outer")
	a := f.adminDB(t)
	if _, err := a.Exec("GRANT " + secretRole + " TO " + outer); err != nil {
		t.Fatal(err)
	}
	pattern := strings.ReplaceAll(f.db, "_", "\\_") + "\\_secre_"
	for _, tc := range []struct {
		name   string
		grants []string
		want   []string // in the RoleError
	}{
		{"global select", with("SELECT ON *.*"), []string{"ON *.*", "REVOKE SELECT ON *.* FROM"}},
		{"database of secrets", with("SELECT ON %S.*"), []string{"creds", "REVOKE SELECT ON `" + f.db + "_secret`.* FROM"}},
		{"the source's database, holding other tables", with("SELECT ON %D.*"), []string{"hidden", "REVOKE SELECT ON `" + f.db + "`.* FROM", "GRANT SELECT ON `" + f.db + "`.`alltypes` TO"}},
		{"a database pattern", with("SELECT ON `" + pattern + "`.*"), []string{"creds", "REVOKE SELECT ON `" + pattern + "`.* FROM"}},
		{"a table", with("SELECT ON %S.creds"), []string{"`creds`", "REVOKE SELECT ON `" + f.db + "_secret`.`creds` FROM"}},
		{"a column", with("SELECT (password) ON %S.creds"), []string{"columns", "REVOKE SELECT (`password`) ON `" + f.db + "_secret`.`creds` FROM"}},
		{"another table of the database", with("SELECT ON %D.hidden"), []string{"`hidden`", "REVOKE SELECT ON"}},
		{"the grant tables", with("SELECT ON mysql.user"), []string{"`mysql`.`user`"}},
		{"all privileges on a table", with("ALL PRIVILEGES ON %S.creds"), []string{"creds"}},
		{"a role", with(secretRole+"", "SET DEFAULT ROLE "+secretRole+" FOR %U"), []string{"(through role " + secretRole, "REVOKE SELECT ON `" + f.db + "_secret`.`creds` FROM `" + secretRole + "`"}},
		{"a role not enabled by default", with(secretRole), []string{"(through role " + secretRole}},
		{"a nested role", with(outer, "SET DEFAULT ROLE "+outer+" FOR %U"), []string{"(through role " + secretRole}},
		{"a file privilege", with("FILE ON *.*"), []string{"FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grants := make([]string, len(tc.grants))
			for i, g := range tc.grants {
				if g == secretRole || g == outer { // a role: GRANT role TO account
					g = "GRANT " + g + " TO %U"
				}
				grants[i] = g
			}
			url := myTestAccount(t, f, "g", grants...)
			db := openSource(t, "shop", url, f.allowed(t), dbsource.Options{})
			err := db.Check(ctx)
			wantRole(t, err, tc.want[0])
			for _, w := range tc.want[1:] {
				if err != nil && !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %s", err, w)
				}
			}
			if err != nil && strings.Contains(err.Error(), "PASSWORD") {
				t.Errorf("the error shows a grant line: %v", err)
			}
			_, err = db.Query(ctx, "SELECT count(*) FROM penguins")
			wantRole(t, err, tc.want[0])
			_, err = db.EstimateRows(ctx, "SELECT * FROM penguins")
			wantRole(t, err, tc.want[0])
		})
	}

	t.Run("accepted", func(t *testing.T) {
		a.Exec("CREATE DATABASE IF NOT EXISTS " + f.db + "_open")
		t.Cleanup(func() { a.Exec("DROP DATABASE IF EXISTS " + f.db + "_open") })
		if _, err := a.Exec("CREATE TABLE " + f.db + "_open.t (x INT)"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			grants []string
			tables []string
		}{
			{"the allowed tables", reader, f.allowed(t)},
			{"a database --tables covers", []string{"SELECT ON `" + f.db + "_open`.*"}, []string{f.db + "_open.*"}},
			{"columns of an allowed table", []string{"SELECT (species, island) ON %D.penguins"}, []string{f.db + ".penguins"}},
			{"writes and routines besides", with("INSERT, UPDATE, DELETE, EXECUTE ON %D.*"), f.allowed(t)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				url := myTestAccount(t, f, "ok", tc.grants...)
				if strings.HasSuffix(tc.tables[0], "_open.*") {
					url = dbsourcetest.WithDB(url, f.db+"_open", "", "")
				}
				db := openSource(t, "ok", url, tc.tables, dbsource.Options{})
				if err := db.Check(ctx); err != nil {
					t.Fatalf("Check: %v", err)
				}
			})
		}
	})
}

// TestMySQLGrantGainedLater: an account that gains a grant reaching past
// --tables after the source was opened is refused at its next query once
// the role proof's TTL has passed (the test moves the source's clock), and
// works again once the grant is revoked.
func TestMySQLGrantGainedLater(t *testing.T) {
	f := mySetup(t)
	ctx := context.Background()
	url := myTestAccount(t, f, "later", readerGrants(t, f)...)
	user := strings.TrimPrefix(strings.Split(url, ":")[1], "//")
	account := "'" + user + "'@'127.0.0.1'"
	db := openSource(t, "shop", url, f.allowed(t), dbsource.Options{MaxConns: 1})
	if err := db.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(ctx, "SELECT count(*) FROM penguins"); err != nil {
		t.Fatal(err)
	}
	a := f.adminDB(t)
	role := myRole(t, f, "laterrole", "FILE ON *.*")
	clock := time.Duration(0)
	for _, tc := range []struct{ grant, revoke, want string }{
		{"GRANT SELECT ON `" + f.db + "_secret`.creds TO " + account, "REVOKE SELECT ON `" + f.db + "_secret`.creds FROM " + account, "creds"},
		{"GRANT SELECT ON `" + f.db + "`.* TO " + account, "REVOKE SELECT ON `" + f.db + "`.* FROM " + account, "hidden"},
		{"GRANT " + role + " TO " + account, "REVOKE " + role + " FROM " + account, "FILE"},
	} {
		if _, err := a.Exec(tc.grant); err != nil {
			t.Fatal(err)
		}
		clock += 6 * time.Second
		dbsource.MyAdvanceClock(db, clock)
		_, err := db.Query(ctx, "SELECT count(*) FROM penguins")
		wantRole(t, err, tc.want)
		_, err = db.EstimateRows(ctx, "SELECT * FROM penguins")
		wantRole(t, err, tc.want)
		_, err = db.Catalog(ctx)
		wantRole(t, err, tc.want)
		if _, err := a.Exec(tc.revoke); err != nil {
			t.Fatal(err)
		}
		clock += 6 * time.Second
		dbsource.MyAdvanceClock(db, clock)
		if _, err := db.Query(ctx, "SELECT count(*) FROM penguins"); err != nil {
			t.Errorf("after %s: %v", tc.revoke, err)
		}
	}
}

// TestMySQLUnreadableRoleGrant: a role whose grants hold MariaDB-only syntax
// the parser cannot read (a role granted WITH ADMIN OPTION to a role) cannot
// be proven, and is refused, without showing the grant's line.
func TestMySQLUnreadableRoleGrant(t *testing.T) {
	f := mySetup(t)
	inner := myRole(t, f, "inner", "SELECT ON %D.penguins")
	outer := myRole(t, f, "outer")
	a := f.adminDB(t)
	if _, err := a.Exec("GRANT " + inner + " TO " + outer + " WITH ADMIN OPTION"); err != nil {
		t.Fatal(err)
	}
	url := myTestAccount(t, f, "unread", append(readerGrants(t, f), "GRANT "+outer+" TO %U")...)
	db := openSource(t, "shop", url, f.allowed(t), dbsource.Options{})
	err := db.Check(context.Background())
	wantRole(t, err, outer)
	var re *dbsource.RoleError
	if errors.As(err, &re) && strings.Contains(re.Error(), "GRANT `") {
		t.Errorf("the error shows a grant line: %v", err)
	}
}
