package dbsource_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
)

// cleanups run after every test of the package: the fixtures are shared.
var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupMu.Lock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanupMu.Unlock()
	os.Exit(code)
}

func atEnd(f func()) {
	cleanupMu.Lock()
	cleanups = append(cleanups, f)
	cleanupMu.Unlock()
}

// shared is a fixture made by the first test that needs it and shared by
// the others: when making it failed, every test that needs it fails.
type shared[F any] struct {
	once sync.Once
	f    *F
	err  error
}

// get returns the fixture, made by newFixture the first time; what names it in
// the failure.
func (s *shared[F]) get(t *testing.T, what string, newFixture func() (*F, error)) *F {
	t.Helper()
	s.once.Do(func() { s.f, s.err = newFixture() })
	if s.err != nil {
		t.Fatalf("%s fixture: %v", what, s.err)
	}
	return s.f
}

// csvNames are the CSVs of ../shared/data/csv both fixtures load, each as
// the table dbsourcetest names (cabinet-turnover as cabinet_turnover).
var csvNames = []string{"avengers", "cabinet-turnover", "diamonds", "flights", "penguins", "test_mskanji", "tips", "titanic"}

// cell is a value of a CSV as a source returns it: nil, int64, float64 or
// string by the column's kind.
func cell(c *dbsourcetest.CSV, row []*string, col int) any {
	v := row[col]
	if v == nil {
		return nil
	}
	switch c.Kinds[col] {
	case "int":
		n, _ := strconv.ParseInt(*v, 10, 64)
		return n
	case "float":
		x, _ := strconv.ParseFloat(*v, 64)
		return x
	}
	return *v
}

// checkCSVTables asserts that each CSV's table holds the file's rows, and
// that a query on each table the first three did not have answers what the
// file itself says. kind is the source's, for quoting names.
func checkCSVTables(t *testing.T, db *dbsource.DB, kind string) {
	ctx := context.Background()
	q := func(name string) string { return dbsource.QuoteIdent(kind, name) }
	check := func(what, sql string, want ...[]any) {
		t.Helper()
		res, err := db.Query(ctx, sql)
		if err != nil {
			t.Errorf("%s: %s: %v", what, sql, err)
			return
		}
		if got, w := fmt.Sprint(res.Rows), fmt.Sprint(want); got != w {
			t.Errorf("%s: %s: got %s, want %s", what, sql, got, w)
		}
	}
	for _, name := range csvNames {
		c := dbsourcetest.Read(t, name)
		check(c.File+" row count", "SELECT count(*) FROM "+q(c.Name), []any{int64(len(c.Rows))})
	}

	// diamonds: 53,940 rows, a column named table (a keyword).
	d := dbsourcetest.Read(t, "diamonds")
	cut, price, table := d.Col(t, "cut"), d.Col(t, "price"), d.Col(t, "table")
	var ideal, top int64
	var widest float64
	for _, row := range d.Rows {
		if *row[cut] == "Ideal" {
			ideal++
			top = max(top, cell(d, row, price).(int64))
			widest = max(widest, cell(d, row, table).(float64))
		}
	}
	check("diamonds", "SELECT count(*), max(price), max("+q("table")+") FROM diamonds WHERE cut = 'Ideal'", []any{ideal, top, widest})

	// flights: the passengers of 1960, and its busiest month.
	f := dbsourcetest.Read(t, "flights")
	year, month, pass := f.Col(t, "year"), f.Col(t, "month"), f.Col(t, "passengers")
	var total, most int64
	var busiest string
	for _, row := range f.Rows {
		if *row[year] == "1960" {
			n := cell(f, row, pass).(int64)
			total += n
			if n > most {
				most, busiest = n, *row[month]
			}
		}
	}
	check("flights", "SELECT sum(passengers) FROM flights WHERE year = 1960", []any{total})
	check("flights", "SELECT month FROM flights WHERE year = 1960 ORDER BY passengers DESC LIMIT 1", []any{busiest})

	// avengers: names with /, ? and spaces, and the note with the
	// Windows-1252 byte read back whole, as æ (MariaDB's accent-insensitive
	// collation matches more than the bytes: the value returned is what is
	// checked).
	a := dbsourcetest.Read(t, "avengers")
	name, apps, current, notes := a.Col(t, "Name/Alias"), a.Col(t, "Appearances"), a.Col(t, "Current?"), a.Col(t, "Notes")
	var want [][]any
	for _, row := range a.Rows {
		if row[notes] != nil && strings.Contains(*row[notes], "theæM'Kraan") {
			want = append(want, []any{cell(a, row, name), cell(a, row, apps), cell(a, row, current), cell(a, row, notes)})
		}
	}
	if len(want) != 1 {
		t.Fatalf("avengers.csv: %d notes with æ, want 1", len(want))
	}
	check("avengers", fmt.Sprintf("SELECT %s, %s, %s, %s FROM avengers WHERE %s LIKE '%%theæM''Kraan%%'", q("Name/Alias"), q("Appearances"), q("Current?"), q("Notes"), q("Notes")), want...)

	// test_mskanji: CP932 text, 髙 (a CP932 extension) included, read back.
	k := dbsourcetest.Read(t, "test_mskanji")
	last := k.Rows[len(k.Rows)-1]
	who := k.Col(t, "名前")
	check("test_mskanji", fmt.Sprintf("SELECT %s, %s, %s FROM test_mskanji WHERE %s = '%s'", q("名前"), q("住所"), q("年齢"), q("名前"), *last[who]),
		[]any{cell(k, last, who), cell(k, last, k.Col(t, "住所")), cell(k, last, k.Col(t, "年齢"))})

	// cabinet-turnover: a BOM before president, two empty column names, and
	// the appointee read back with its á.
	ct := dbsourcetest.Read(t, "cabinet-turnover")
	var lujan [][]any
	for _, row := range ct.Rows {
		if *row[ct.Col(t, "appointee")] == "Manuel Luján Jr." {
			lujan = append(lujan, []any{cell(ct, row, ct.Col(t, "appointee")), cell(ct, row, ct.Col(t, "president")), cell(ct, row, ct.Col(t, "position")), cell(ct, row, ct.Col(t, "start_date"))})
		}
	}
	if len(lujan) != 1 {
		t.Fatalf("cabinet-turnover.csv: %d rows of Manuel Luján Jr., want 1", len(lujan))
	}
	check("cabinet-turnover", "SELECT appointee, president, position, start_date FROM cabinet_turnover WHERE appointee = 'Manuel Luján Jr.'", lujan...)
	check("cabinet-turnover", "SELECT count(*), count(column8), count(column9) FROM cabinet_turnover", []any{int64(len(ct.Rows)), int64(0), int64(0)})
}

// wantRefused asserts err is a *datachat.QueryError of the sandbox's refusal (or of
// kind, if given) whose message contains each of want.
func wantKind(t *testing.T, err error, kind string, want ...string) {
	t.Helper()
	var qe *datachat.QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("got error %v (%T), want a datachat.QueryError of kind %q", err, err, kind)
	}
	if qe.Kind != kind {
		t.Fatalf("got kind %q (%s), want %q", qe.Kind, qe.Message, kind)
	}
	if datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("got code %q, want %q", datachat.ErrorCode(err), datachat.EINVALID)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(qe.Message), strings.ToLower(w)) {
			t.Errorf("message %q does not say %q", qe.Message, w)
		}
	}
}

// wantRole asserts err is a *RoleError naming privilege.
func wantRole(t *testing.T, err error, privilege string) {
	t.Helper()
	var re *dbsource.RoleError
	if !errors.As(err, &re) {
		t.Fatalf("got error %v (%T), want a RoleError naming %s", err, err, privilege)
	}
	if !strings.Contains(re.Error(), privilege) {
		t.Errorf("role error %q does not name %s", re.Error(), privilege)
	}
	if strings.Contains(re.Error(), "pw-") {
		t.Errorf("role error %q shows a password", re.Error())
	}
}

// openSource opens a source named name over the tables at url for all
// users, closed when the test ends.
func openSource(t *testing.T, name, url string, tables []string, opts dbsource.Options) *dbsource.DB {
	t.Helper()
	db, err := dbsource.Open(dbsource.Source{Name: name, URL: url, Tables: tables, AllUsers: true}, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// refusal is a statement a source must not run: it fails with a datachat.QueryError
// of kind whose message holds each of want, or, kind "", with any
// datachat.QueryError.
type refusal struct {
	name, sql, kind string
	want            []string
}

// checkRefusals runs each case as a subtest: the statement fails as the case
// says, its error shows none of secrets, and the source then answers the
// fixture's count of penguins (344) right.
func checkRefusals(t *testing.T, db *dbsource.DB, cases []refusal, secrets ...string) {
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := db.Query(ctx, c.sql)
			if err == nil {
				t.Fatalf("%s: ran (%v), want refused", c.sql, res.Rows)
			}
			if c.kind != "" {
				wantKind(t, err, c.kind, c.want...)
			} else {
				var qe *datachat.QueryError
				if !errors.As(err, &qe) {
					t.Fatalf("got %v, want a datachat.QueryError", err)
				}
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
			res, err = db.Query(ctx, "SELECT count(*) FROM penguins")
			if err != nil || fmt.Sprint(res.Rows) != "[[344]]" {
				t.Fatalf("the follow-up query: got %v, %v, want [[344]]", res, err)
			}
		})
	}
}

// checkCSVAnswers asks three questions whose answers the CSVs hold, each in
// the source's dialect: the Gentoo penguins' count and mean body mass, the
// best tipping day and its tips, and the titanic's survivors by sex. It
// returns the Gentoo answer, whose columns each dialect types its own way.
func checkCSVAnswers(t *testing.T, db *dbsource.DB, gentoo, tips, titanic string) *datachat.QueryResult {
	t.Helper()
	ctx := context.Background()
	res, err := db.Query(ctx, gentoo)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Rows); got != "[[124 5076.02]]" {
		t.Errorf("Gentoo count and mean mass: got %s, want [[124 5076.02]]", got)
	}
	for _, q := range []struct{ what, sql, want string }{
		{"best tipping day", tips, "[[Sat 260.4]]"},
		{"titanic survivors by sex", titanic, "[[female 233 314] [male 109 577]]"},
	} {
		res, err := db.Query(ctx, q.sql)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(res.Rows); got != q.want {
			t.Errorf("%s: got %s", q.what, got)
		}
	}
	return res
}

// checkRowCap checks that a query of the fixture's table big (5,000 rows)
// answers its first 1,000, truncated.
func checkRowCap(t *testing.T, db *dbsource.DB) {
	t.Helper()
	res, err := db.Query(context.Background(), "SELECT * FROM big ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if res.RowCount != 1000 || !res.Truncated || res.Rows[999][0] != int64(1000) {
		t.Errorf("got %d rows, truncated=%v, want 1000 and truncated", res.RowCount, res.Truncated)
	}
}

// checkColumnTypes checks the friendly type of each column of res named in
// want.
func checkColumnTypes(t *testing.T, res *datachat.QueryResult, want map[string]string) {
	t.Helper()
	types := map[string]string{}
	for _, c := range res.Columns {
		types[c.Name] = c.Type
	}
	for col, w := range want {
		if types[col] != w {
			t.Errorf("column %s: got type %q, want %q", col, types[col], w)
		}
	}
}

// checkEstimate checks that the engine estimates penguins (344 rows) at lo
// to hi rows, and refuses to estimate a query of the disallowed table
// secret, naming it.
func checkEstimate(t *testing.T, db *dbsource.DB, lo, hi int64, secret string) {
	t.Helper()
	ctx := context.Background()
	n, err := db.EstimateRows(ctx, "SELECT * FROM penguins")
	if err != nil || n < lo || n > hi {
		t.Errorf("EstimateRows: got %d, %v, want %d to %d", n, err, lo, hi)
	}
	_, err = db.EstimateRows(ctx, "SELECT * FROM "+secret)
	wantKind(t, err, datachat.KindRefused, secret)
}

// checkCatalog checks that the catalog lists the tables want (SCHEMA.TABLE,
// in order), penguins with a row estimate of lo to hi and samples of its
// first column, species, and no sample longer than 40 characters.
func checkCatalog(t *testing.T, db *dbsource.DB, want []string, lo, hi int64) {
	t.Helper()
	tables, err := db.Catalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Schema+"."+tb.Name)
		if tb.Name == "penguins" {
			if tb.Rows == nil {
				t.Errorf("penguins row estimate: got none, want %d to %d", lo, hi)
			} else if *tb.Rows < lo || *tb.Rows > hi {
				t.Errorf("penguins row estimate: got %d, want %d to %d", *tb.Rows, lo, hi)
			}
			if c := tb.Columns[0]; c.Name != "species" || c.Type != "text" || len(c.Samples) == 0 || c.Samples[0] != "Adelie" {
				t.Errorf("penguins.species: got %+v", c)
			}
		}
	}
	if got, w := strings.Join(names, ","), strings.Join(want, ","); got != w {
		t.Errorf("tables: got %s, want %s", got, w)
	}
	checkSamples(t, tables)
}

// checkSamples checks that no column sample of the catalog's tables is
// longer than 40 characters.
func checkSamples(t *testing.T, tables []dbsource.Table) {
	t.Helper()
	for _, tb := range tables {
		for _, c := range tb.Columns {
			for _, s := range c.Samples {
				if n := len([]rune(s)); n > 40 {
					t.Errorf("%s.%s sample %q has %d characters", tb.Name, c.Name, s, n)
				}
			}
		}
	}
}

// checkRoleRefused checks that a source connecting as a role (at url) with
// privilege is refused, naming it, on its check and on its first query.
func checkRoleRefused(t *testing.T, url, privilege string) {
	t.Helper()
	ctx := context.Background()
	db, err := dbsource.Open(dbsource.Source{Name: "bad", URL: url, AllUsers: true}, dbsource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wantRole(t, db.Check(ctx), privilege)
	_, err = db.Query(ctx, "SELECT 1")
	wantRole(t, err, privilege) // and on every connect
}
