package dbsource_test

import (
	"context"
	"database/sql"
	"datachat"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// myFixture is a database of the test server with the CSVs loaded, a second
// database of secrets, and a reader granted SELECT on the allowed tables only
// (and writes and EXECUTE on its database, which the sandbox must keep
// from use): the database decides what a source may read, and the checker
// refuses the rest before the server sees it.
type myFixture struct {
	adminDSN   string
	base       *url.URL
	db         string
	reader     string // the reader's URL
	readerName string // its user name, at 127.0.0.1
	password   string
	suffix     string
}

var myShared shared[myFixture]

func mySetup(t *testing.T) *myFixture {
	t.Helper()
	raw := dbsourcetest.MySQLURL(t)
	return myShared.get(t, "MariaDB", func() (*myFixture, error) { return newMyFixture(t, raw) })
}

func newMyFixture(t testing.TB, raw string) (*myFixture, error) {
	ctx := context.Background()
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	f := &myFixture{base: u, suffix: dbsourcetest.Suffix(), adminDSN: dbsourcetest.MySQLAdminDSN(u)}
	f.password = "pw-" + f.suffix
	f.db = "dcsrc_" + f.suffix
	secret := f.db + "_secret"
	reader := "dcsrc_reader_" + f.suffix
	admin, err := sql.Open("mysql", f.adminDSN)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	atEnd(func() {
		a, err := sql.Open("mysql", f.adminDSN)
		if err != nil {
			return
		}
		defer a.Close()
		a.Exec("DROP DATABASE IF EXISTS " + f.db)
		a.Exec("DROP DATABASE IF EXISTS " + secret)
		a.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", reader))
	})
	exec := func(q string, args ...any) error {
		if _, err := admin.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		return nil
	}
	for _, q := range []string{
		"CREATE DATABASE " + f.db + " CHARACTER SET utf8mb4",
		"CREATE DATABASE " + secret,
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", reader, f.password),
	} {
		if err := exec(q); err != nil {
			return nil, err
		}
	}
	for _, name := range csvNames {
		if err := dbsourcetest.Read(t, name).LoadMySQL(ctx, admin, f.db); err != nil {
			return nil, err
		}
	}
	d, s := f.db, secret
	for _, q := range []string{
		"CREATE TABLE " + s + ".creds (id INT PRIMARY KEY, password VARCHAR(50))",
		"INSERT INTO " + s + ".creds VALUES (1, 'hunter2')",
		"CREATE TABLE " + d + ".hidden (id INT PRIMARY KEY, note TEXT)",
		"INSERT INTO " + d + ".hidden VALUES (1, 'not for the model')",
		"CREATE VIEW " + d + ".leaky AS SELECT * FROM " + s + ".creds",
		"CREATE ALGORITHM=TEMPTABLE VIEW " + d + ".leaky_agg AS SELECT count(*) AS n, max(password) AS p FROM " + s + ".creds",
		"CREATE VIEW " + d + ".penguin_species AS SELECT species FROM " + d + ".penguins WHERE species IS NOT NULL",
		"CREATE TABLE " + d + ".big (id INT PRIMARY KEY, h CHAR(32))",
		"INSERT INTO " + d + ".big SELECT seq, MD5(seq) FROM " + d + ".seq_1_to_5000",
		`CREATE TABLE ` + d + `.alltypes (i8 BIGINT, big BIGINT, ub BIGINT UNSIGNED, dec1 DECIMAL(20,4), f FLOAT, dbl DOUBLE,
			b TINYINT(1), t TEXT, vc VARCHAR(10), dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, y YEAR,
			bl BLOB, bits BIT(12), j JSON, e ENUM('sad','ok','happy'), long_text TEXT)`,
		`INSERT INTO ` + d + `.alltypes VALUES (-8, 9007199254740993, 18446744073709551615, 12345.6789, 1.5, 0.1,
			1, 'héllo', 'abc', '2024-02-29', '2024-02-29 13:14:15.123456', '2024-02-29 13:14:15.5', '-838:59:59', 2024,
			X'DEADBEEF', b'101', '{"b": 1, "a": 12345678901234567890}', 'happy', REPEAT('é', 100))`,
		"ALTER TABLE " + d + ".alltypes ADD FULLTEXT INDEX ft (t)",
		"CREATE FUNCTION " + d + ".evil() RETURNS VARCHAR(50) SQL SECURITY DEFINER RETURN (SELECT password FROM " + s + ".creds LIMIT 1)",
		// A stored function named like a built-in: a query calling the
		// built-in must never reach it.
		"CREATE FUNCTION " + d + ".`substring`(x TEXT, n INT) RETURNS VARCHAR(50) SQL SECURITY DEFINER RETURN (SELECT password FROM " + s + ".creds LIMIT 1)",
		"CREATE FUNCTION " + d + ".regexp_like(x TEXT, y TEXT) RETURNS VARCHAR(50) SQL SECURITY DEFINER RETURN (SELECT password FROM " + s + ".creds LIMIT 1)",
		"CREATE SQL SECURITY INVOKER VIEW " + d + ".invoker_leak AS SELECT * FROM " + s + ".creds",
		"CREATE SEQUENCE " + d + ".seq",
		"CREATE PROCEDURE " + d + ".wipe() DELETE FROM " + d + ".penguins",
		"ANALYZE TABLE " + d + "." + strings.Join(dbsourcetest.Tables(t, csvNames), ", "+d+"."),
		// The account may write and run routines: the sandbox keeps it read-only.
		fmt.Sprintf("GRANT EXECUTE, SHOW VIEW, INSERT, UPDATE, DELETE, DROP, CREATE, LOCK TABLES, CREATE TEMPORARY TABLES ON %s.* TO '%s'@'127.0.0.1'", d, reader),
	} {
		if err := exec(q); err != nil {
			return nil, err
		}
	}
	for _, table := range f.allowed(t) {
		if err := exec(fmt.Sprintf("GRANT SELECT ON %s TO '%s'@'127.0.0.1'", table, reader)); err != nil {
			return nil, err
		}
	}
	f.readerName = reader
	f.reader = dbsourcetest.WithDB(raw, d, reader, f.password)
	return f, nil
}

// allowed are the tables the source may read: the CSVs' and a few more.
func (f *myFixture) allowed(t testing.TB) []string {
	var out []string
	for _, name := range append(dbsourcetest.Tables(t, csvNames), "alltypes", "big", "penguin_species") {
		out = append(out, f.db+"."+name)
	}
	return out
}

// adminDB is a pool of the server's administrator, for the rest of the
// test: closed after the test's own cleanups registered later.
func (f *myFixture) adminDB(t *testing.T) *sql.DB {
	t.Helper()
	a, err := sql.Open("mysql", f.adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func openMy(t *testing.T, f *myFixture, opts dbsource.Options) *dbsource.DB {
	t.Helper()
	return openSource(t, "shop", f.reader, f.allowed(t), opts)
}

func TestMySQLQueries(t *testing.T) {
	f := mySetup(t)
	ctx := context.Background()
	db := openMy(t, f, dbsource.Options{})
	if err := db.Check(ctx); err != nil {
		t.Fatalf("Check of a read-only account: %v", err)
	}
	if d, err := db.Dialect(ctx); err != nil || !strings.HasPrefix(d, "MariaDB ") && !strings.HasPrefix(d, "MySQL ") {
		t.Errorf("Dialect: got %q, %v", d, err)
	}

	t.Run("csv values", func(t *testing.T) {
		res := checkCSVAnswers(t, db,
			"SELECT count(*) AS n, round(avg(body_mass_g), 2) AS mass FROM penguins WHERE species = 'Gentoo';",
			"SELECT day, round(sum(tip), 2) AS tips FROM tips GROUP BY day ORDER BY tips DESC LIMIT 1",
			"SELECT sex, sum(survived = 1) AS survived, count(*) AS n FROM titanic GROUP BY sex ORDER BY sex")
		if res.Columns[0].Type != "integer" {
			t.Errorf("columns: got %+v", res.Columns)
		}
		res, err := db.Query(ctx, "SELECT p.species, q.species FROM penguins p JOIN penguins q ON p.island = q.island LIMIT 1")
		if err != nil || len(res.Columns) != 2 {
			t.Errorf("two columns of one name: %v, %v", res, err)
		}
	})

	t.Run("every csv", func(t *testing.T) { checkCSVTables(t, db, dbsource.KindMySQL) })

	t.Run("value shapes", func(t *testing.T) {
		res, err := db.Query(ctx, "SELECT * FROM alltypes")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Rows[0])
		want := `[-8,"9007199254740993","18446744073709551615","12345.6789",1.5,0.1,1,"héllo","abc","2024-02-29","2024-02-29T13:14:15.123456","2024-02-29T13:14:15.500Z","-838:59:59",2024,"3q2+7w==",5,"{\"b\": 1, \"a\": 12345678901234567890}","happy"`
		if !strings.HasPrefix(string(b), want) {
			t.Errorf("row %s\nwant it to start %s", b, want)
		}
		checkColumnTypes(t, res, map[string]string{"i8": "integer", "ub": "integer", "dec1": "decimal", "f": "float", "t": "text",
			"dt": "date", "dtm": "timestamp", "ts": "timestamp", "tm": "time", "bl": "blob", "j": "text", "e": "text"})
	})

	t.Run("row cap", func(t *testing.T) {
		checkRowCap(t, db)
		// A LIMIT of its own beyond the cap: the server is stopped, the
		// connection dropped, and the next query gets another.
		res, err := db.Query(ctx, "SELECT a.id FROM big a, big b LIMIT 10000000")
		if err != nil || res.RowCount != 1000 || !res.Truncated {
			t.Fatalf("own LIMIT: got %v, %v", res, err)
		}
		res, err = db.Query(ctx, "SELECT * FROM big LIMIT 1000")
		if err != nil || res.RowCount != 1000 || res.Truncated {
			t.Errorf("exactly 1000 rows: got %v, %v", res, err)
		}
	})

	t.Run("merged view over an allowed table", func(t *testing.T) {
		res, err := db.Query(ctx, "SELECT count(DISTINCT species) FROM penguin_species")
		if err != nil || fmt.Sprint(res.Rows) != "[[3]]" {
			t.Errorf("got %v, %v", res, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := db.Query(ctx, "SELECT * FROM penguin")
		wantKind(t, err, datachat.KindRefused, "not one of the source's allowed tables", f.db+".penguins")
		_, err = db.Query(ctx, "SELECT bill_len FROM penguins")
		wantKind(t, err, datachat.KindUnknownColumn, "bill_len")
		_, err = db.Query(ctx, "SELECT FROM WHERE")
		wantKind(t, err, datachat.KindSyntax, "syntax")
		one := openMy(t, f, dbsource.Options{MaxConns: 1})
		_, err = one.Query(ctx, "SELECT * FROM "+f.db+"_secret.creds")
		wantKind(t, err, datachat.KindRefused, "creds")
		_, err = one.Query(ctx, "SELECT * FROM nowhere")
		wantKind(t, err, datachat.KindRefused, "nowhere")
		_, err = db.Query(ctx, "SELEC 1")
		wantKind(t, err, datachat.KindSyntax, `near "SELEC 1"`)
		// A table the allow list matches but the account may not read (here:
		// one that does not exist): the server's own refusal.
		wild := openSource(t, "wild", f.reader, []string{f.db + ".*"}, dbsource.Options{})
		_, err = wild.Query(ctx, "SELECT * FROM penguin")
		wantKind(t, err, datachat.KindRefused, "SELECT command denied", "penguin")
	})

	t.Run("estimate", func(t *testing.T) { checkEstimate(t, db, 300, 400, f.db+"_secret.creds") })

	t.Run("catalog", func(t *testing.T) {
		var want []string
		for _, name := range []string{"alltypes", "avengers", "big", "cabinet_turnover", "diamonds", "flights", "penguin_species", "penguins", "test_mskanji", "tips", "titanic"} {
			want = append(want, f.db+"."+name)
		}
		checkCatalog(t, db, want, 300, 400)
	})
}

func TestMySQLAdversarial(t *testing.T) {
	f := mySetup(t)
	db := openMy(t, f, dbsource.Options{Timeout: 500 * time.Millisecond, MaxConns: 2})
	const refused = datachat.KindRefused
	s := f.db + "_secret"
	cases := []refusal{
		{"insert", "INSERT INTO penguins (species) VALUES ('x')", refused, []string{"read-only"}},
		{"insert select", "INSERT INTO penguins SELECT * FROM penguins", refused, []string{"read-only"}},
		{"replace", "REPLACE INTO big VALUES (1, 'x')", refused, []string{"read-only"}},
		{"update", "UPDATE penguins SET species = 'x'", refused, []string{"read-only"}},
		{"delete", "DELETE FROM penguins", refused, []string{"read-only"}},
		{"upsert", "INSERT INTO big VALUES (1, 'x') ON DUPLICATE KEY UPDATE h = 'y'", refused, []string{"read-only"}},
		{"create", "CREATE TABLE x (a INT)", refused, nil},
		{"create table as", "CREATE TABLE stolen AS SELECT * FROM penguins", refused, nil},
		{"drop", "DROP TABLE penguins", refused, []string{"only a query"}},
		{"alter", "ALTER TABLE penguins ADD COLUMN x INT", refused, []string{"only a query"}},
		{"truncate", "TRUNCATE penguins", refused, []string{"only a query"}},
		{"grant", "GRANT SELECT ON *.* TO PUBLIC", refused, []string{"only a query"}},
		{"into outfile", "SELECT * FROM penguins INTO OUTFILE '/tmp/stolen.csv'", refused, []string{"OUTFILE"}},
		{"into outfile first", "SELECT * INTO OUTFILE '/tmp/stolen2.csv' FROM penguins", datachat.KindSyntax, []string{"cannot read"}},
		{"into dumpfile", "SELECT species FROM penguins LIMIT 1 INTO DUMPFILE '/tmp/stolen.bin'", datachat.KindSyntax, []string{"cannot read"}},
		{"into outfile in an executable comment", "SELECT * FROM penguins /*!50000 INTO OUTFILE '/tmp/stolen3.csv' */", refused, []string{"OUTFILE"}},
		{"into variable", "SELECT species INTO @x FROM penguins LIMIT 1", datachat.KindSyntax, []string{"cannot read"}},
		{"into variable at the end", "SELECT species FROM penguins LIMIT 1 INTO @x", datachat.KindSyntax, []string{"cannot read"}},
		{"load data", "LOAD DATA INFILE '/etc/passwd' INTO TABLE penguins", refused, nil},
		{"load data local", "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE penguins", refused, nil},
		{"load_file", "SELECT LOAD_FILE('/etc/passwd')", refused, []string{"LOAD_FILE"}},
		{"load_file in a where", "SELECT species FROM penguins WHERE species = load_file('/etc/hostname')", refused, []string{"LOAD_FILE"}},
		{"get_lock", "SELECT GET_LOCK('x', 0)", refused, []string{"GET_LOCK"}},
		{"server variable", "SELECT @@datadir", refused, []string{"@@datadir"}},
		{"stored function", "SELECT evil()", refused, []string{"EVIL", "never stored"}},
		{"quoted stored function", "SELECT `evil`()", refused, []string{"EVIL", "never stored"}},
		{"qualified stored function", "SELECT " + f.db + ".evil()", refused, []string{"stored function"}},
		{"call", "CALL wipe()", refused, []string{"only a query"}},
		{"sleep", "SELECT SLEEP(5) FROM penguins LIMIT 1", refused, []string{"SLEEP"}},
		{"slow cross join past the timeout", "SELECT count(*) FROM big a, big b, big c", datachat.KindTimeout, []string{"statement timeout"}},
		{"two statements", "SELECT 1; DROP TABLE penguins", refused, []string{"one statement"}},
		{"commit then delete", "COMMIT; DELETE FROM penguins", refused, nil},
		{"commit", "COMMIT", refused, []string{"only a query"}},
		{"read write", "SET TRANSACTION READ WRITE", refused, []string{"only a query"}},
		{"set session", "SET SESSION max_statement_time = 0", refused, []string{"only a query"}},
		{"set statement timeout", "SET STATEMENT max_statement_time = 0 FOR SELECT SLEEP(5)", datachat.KindSyntax, []string{"cannot read"}},
		{"hint lifting the timeout", "SELECT /*+ MAX_EXECUTION_TIME(0) */ SLEEP(5)", refused, []string{"hints"}},
		{"hint setting a variable", "SELECT /*+ SET_VAR(sql_select_limit = 100000) */ * FROM big", refused, []string{"hints"}},
		{"set role", "SET ROLE NONE", refused, []string{"only a query"}},
		{"prepare", "PREPARE p FROM 'DELETE FROM penguins'", refused, []string{"only a query"}},
		{"execute", "EXECUTE p", refused, []string{"only a query"}},
		{"do", "DO SLEEP(1)", refused, []string{"only a query"}},
		{"handler", "HANDLER penguins OPEN", datachat.KindSyntax, []string{"cannot read"}},
		{"kill", "KILL CONNECTION_ID()", refused, []string{"only a query"}},
		{"show", "SHOW GRANTS", refused, []string{"only a query"}},
		{"other database", "SELECT * FROM " + s + ".creds", refused, []string{"creds", "not one of the source's allowed tables"}},
		{"disallowed table", "SELECT * FROM hidden", refused, []string{"hidden"}},
		{"merged view over a disallowed table", "SELECT * FROM leaky", refused, []string{"leaky", "not one of the source's allowed tables"}},
		{"temptable view over a disallowed table", "SELECT * FROM leaky_agg", refused, nil},
		{"subquery", "SELECT species FROM penguins WHERE EXISTS (SELECT 1 FROM " + s + ".creds)", refused, []string{"creds"}},
		{"constant subquery", "SELECT (SELECT password FROM " + s + ".creds WHERE id = 1)", refused, []string{"creds"}},
		{"cte", "WITH c AS (SELECT * FROM " + s + ".creds) SELECT * FROM c", refused, []string{"creds"}},
		{"join", "SELECT p.species, c.password FROM penguins p JOIN " + s + ".creds c", refused, []string{"creds"}},
		{"union", "SELECT species FROM penguins UNION SELECT password FROM " + s + ".creds", refused, []string{"creds"}},
		{"derived table", "SELECT * FROM (SELECT password FROM " + s + ".creds) d", refused, []string{"creds"}},
		{"alias hiding", "SELECT penguins.password FROM " + s + ".creds AS penguins", refused, []string{"creds"}},
		{"information_schema", "SELECT TABLE_NAME FROM information_schema.TABLES", refused, []string{"catalog"}},
		{"mysql schema", "SELECT user, password FROM mysql.user", "", nil},
		{"performance_schema", "SELECT * FROM performance_schema.threads", "", nil},
		{"for update", "SELECT * FROM penguins FOR UPDATE", refused, []string{"locking"}},
		{"lock in share mode", "SELECT * FROM penguins LOCK IN SHARE MODE", refused, []string{"locking"}},
		{"locking subquery", "SELECT * FROM big WHERE id IN (SELECT id FROM big LOCK IN SHARE MODE)", refused, []string{"locking"}},
		{"locking in an executable comment", "SELECT * FROM penguins /*!50000 LOCK IN SHARE MODE */", refused, []string{"locking"}},
		{"locking behind a string trick", "SELECT 'it\\'s' AS x FROM penguins -- '\nLOCK IN SHARE MODE", refused, []string{"locking"}},
		{"lock tables", "LOCK TABLES penguins WRITE", refused, []string{"only a query"}},
		{"string hiding a table", "SELECT 'x`.`y', p.* FROM penguins p, " + s + ".creds", refused, []string{"creds"}},
	}
	checkRefusals(t, db, cases, "hunter2", f.password)
	// Nothing was written, and the file was not made.
	a := f.adminDB(t)
	var n int
	if err := a.QueryRow("SELECT count(*) FROM " + f.db + ".penguins").Scan(&n); err != nil || n != 344 {
		t.Errorf("penguins after the suite: %d rows, %v", n, err)
	}
}

func TestMySQLRoles(t *testing.T) {
	f := mySetup(t)
	a := f.adminDB(t)                               // after the accounts are dropped
	s := f.suffix + "_" + dbsourcetest.Suffix()[:4] // each run its own accounts
	t.Cleanup(func() {
		for _, u := range []string{"dcsrc_file_" + s, "dcsrc_super_" + s, "dcsrc_byrole_" + s} {
			a.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", u))
		}
		a.Exec("DROP ROLE IF EXISTS dcsrc_filerole_" + s)
	})
	for _, q := range []string{
		fmt.Sprintf("CREATE USER 'dcsrc_file_%s'@'127.0.0.1' IDENTIFIED BY '%s'", s, f.password),
		fmt.Sprintf("GRANT SELECT, FILE ON *.* TO 'dcsrc_file_%s'@'127.0.0.1'", s),
		fmt.Sprintf("CREATE USER 'dcsrc_super_%s'@'127.0.0.1' IDENTIFIED BY '%s'", s, f.password),
		fmt.Sprintf("GRANT SELECT, SUPER ON *.* TO 'dcsrc_super_%s'@'127.0.0.1'", s),
		fmt.Sprintf("CREATE ROLE dcsrc_filerole_%s", s),
		fmt.Sprintf("GRANT FILE ON *.* TO dcsrc_filerole_%s", s),
		fmt.Sprintf("CREATE USER 'dcsrc_byrole_%s'@'127.0.0.1' IDENTIFIED BY '%s'", s, f.password),
		fmt.Sprintf("GRANT dcsrc_filerole_%s TO 'dcsrc_byrole_%s'@'127.0.0.1'", s, s),
		fmt.Sprintf("GRANT SELECT ON %s.* TO 'dcsrc_byrole_%s'@'127.0.0.1'", f.db, s),
	} {
		if _, err := a.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, tc := range []struct{ user, privilege string }{
		{"dcsrc_file_" + s, "FILE"},
		{"dcsrc_super_" + s, "SUPER"},
		{"dcsrc_byrole_" + s, "FILE"},
	} {
		t.Run(tc.user, func(t *testing.T) {
			checkRoleRefused(t, dbsourcetest.WithDB(f.base.String(), f.db, tc.user, f.password), tc.privilege)
		})
	}
}
