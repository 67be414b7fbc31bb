package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"datachat/internal/testlog"

	"github.com/jackc/pgx/v5"

	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/llmtest"
	"datachat/internal/testnet"
)

// sourceCSVs are the CSVs of ../shared/data/csv a source's database holds as
// tables (test_mskanji.csv is CP932; avengers.csv has a Windows-1252 byte
// and columns named with / and ?), loaded by dbsourcetest.
var sourceCSVs = []string{"penguins", "flights", "avengers", "test_mskanji"}

// sourceServer is a real PostgreSQL or MariaDB server holding a database
// with sourceCSVs as tables, a read-only role that may read them and write
// penguins (the sandbox keeps it read-only), and a role with a privilege that
// could escape read-only.
type sourceServer struct {
	kind      string // postgres or mysql, as dbsource.Source.Kind
	dialect   string // as the prompt names it
	reader    string // the read-only role's URL
	bad       string // the bad role's URL
	privilege string // what the bad role has
	password  string // every role's password: it must never show
	quote     string // around identifiers in the prompt
	count     func(t *testing.T) int

	// penguinsReader is a read-only role granted penguins alone, for the
	// config file's source whose tables are penguins (a role granted more
	// than a source's tables is refused); "": reader.
	penguinsReader string
}

// gentoos counts the Gentoo rows of penguins.csv, as the answer must.
func gentoos(t *testing.T) int {
	p := dbsourcetest.Read(t, "penguins")
	species, n := p.Col(t, "species"), 0
	for _, r := range p.Rows {
		if r[species] != nil && *r[species] == "Gentoo" {
			n++
		}
	}
	return n
}

// onEachSourceServer runs test as a subtest on a PostgreSQL source server,
// then on a MariaDB one.
func onEachSourceServer(t *testing.T, test func(*testing.T, *sourceServer)) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *sourceServer
	}{
		{"PostgreSQL", newPostgresSource},
		{"MariaDB", newMariaDBSource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			test(t, tc.open(t))
		})
	}
}

func newPostgresSource(t *testing.T) *sourceServer {
	base := dbsourcetest.PostgresURL(t)
	ctx := context.Background()
	s := dbsourcetest.Suffix()
	db, reader, bad := "dcsw_"+s, "dcsw_reader_"+s, "dcsw_creator_"+s
	src := &sourceServer{kind: "postgres", dialect: "PostgreSQL", privilege: "CREATEROLE", password: "pw-" + s + "-Zq9", quote: `"`}
	root, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close(ctx)
	for _, q := range []string{
		"CREATE DATABASE " + db,
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", reader, src.password),
		fmt.Sprintf("CREATE ROLE %s LOGIN CREATEROLE PASSWORD '%s'", bad, src.password),
	} {
		if _, err := root.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { dbsourcetest.DropPostgres(base, db, reader, bad) })
	admin := dbsourcetest.WithDB(base, db, "", "")
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, name := range sourceCSVs {
		if err := dbsourcetest.Read(t, name).LoadPostgres(ctx, c, "public"); err != nil {
			t.Fatal(err)
		}
	}
	var tables []string
	for _, name := range dbsourcetest.Tables(t, sourceCSVs) {
		tables = append(tables, pgx.Identifier{"public", name}.Sanitize())
	}
	for _, q := range []string{
		"ANALYZE " + strings.Join(tables, ", "),
		fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s, %s", reader, bad),
		fmt.Sprintf("GRANT SELECT ON %s TO %s, %s", strings.Join(tables, ", "), reader, bad),
		// The role may write: the sandbox, not the grants, keeps it read-only.
		fmt.Sprintf("GRANT INSERT, UPDATE, DELETE, TRUNCATE ON public.penguins TO %s", reader),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src.reader, src.bad = dbsourcetest.WithDB(base, db, reader, src.password), dbsourcetest.WithDB(base, db, bad, src.password)
	src.count = func(t *testing.T) int {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var n int
		if err := c.QueryRow(context.Background(), "SELECT count(*) FROM public.penguins").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return src
}

func newMariaDBSource(t *testing.T) *sourceServer {
	raw := dbsourcetest.MySQLURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := dbsourcetest.Suffix()
	db, reader, bad, penguins := "dcsw_"+s, "dcsw_reader_"+s, "dcsw_file_"+s, "dcsw_penguins_"+s
	src := &sourceServer{kind: "mysql", dialect: "MariaDB", privilege: "FILE", password: "pw-" + s + "-Zq9", quote: "`"}
	admin, err := sql.Open("mysql", dbsourcetest.MySQLAdminDSN(u))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP DATABASE IF EXISTS " + db)
		admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", reader))
		admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", bad))
		admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'127.0.0.1'", penguins))
		admin.Close()
	})
	if _, err := admin.Exec("CREATE DATABASE " + db + " CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, name := range sourceCSVs {
		c := dbsourcetest.Read(t, name)
		if err := c.LoadMySQL(context.Background(), admin, db); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, dbsource.Table{Schema: db, Name: c.Name}.QualifiedName(dbsource.KindMySQL))
	}
	for _, q := range []string{
		"ANALYZE TABLE " + strings.Join(tables, ", "),
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", reader, src.password),
		// The account may write: the sandbox, not the grants, keeps it read-only.
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE, DROP ON %s.* TO '%s'@'127.0.0.1'", db, reader),
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", bad, src.password),
		fmt.Sprintf("GRANT SELECT, FILE ON *.* TO '%s'@'127.0.0.1'", bad),
		fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", penguins, src.password),
		fmt.Sprintf("GRANT SELECT ON %s.penguins TO '%s'@'127.0.0.1'", db, penguins),
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	src.reader, src.bad = dbsourcetest.WithDB(raw, db, reader, src.password), dbsourcetest.WithDB(raw, db, bad, src.password)
	src.penguinsReader = dbsourcetest.WithDB(raw, db, penguins, src.password)
	src.count = func(t *testing.T) int {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM " + db + ".penguins").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	return src
}

// TestDatabaseSources drives database sources end to end, on a real
// PostgreSQL and a real MariaDB loaded with ../shared's penguins.csv,
// flights.csv, avengers.csv and test_mskanji.csv: the operator adds a source
// with a read-only role granted to alice (a role that could escape read-only
// is refused, naming its privilege); alice sees it and attaches it to a
// conversation, and chat turns with the provider fake answer through
// execute_sql with source, on each table, with the CSV's values; bob neither sees nor attaches it
// (404); a write is refused; a source removed while serve runs is no longer
// used; and the password shows in no API answer, prompt, log or store file.
func TestDatabaseSources(t *testing.T) {
	onEachSourceServer(t, testDatabaseSource)
}

// sourceAnswers are questions on the tables sourceCSVs adds to penguins,
// each with the SQL the model runs for it in src's dialect and what the
// answer must say, computed from the CSV.
func sourceAnswers(t *testing.T, src *sourceServer) []struct{ question, sql, want string } {
	q := func(name string) string { return dbsource.QuoteIdent(src.kind, name) }
	f := dbsourcetest.Read(t, "flights")
	year, pass := f.Col(t, "year"), f.Col(t, "passengers")
	total := 0
	for _, r := range f.Rows {
		if *r[year] == "1960" {
			n, _ := strconv.Atoi(*r[pass])
			total += n
		}
	}
	// The Avenger with the most appearances: a column named with a /.
	a := dbsourcetest.Read(t, "avengers")
	name, apps := a.Col(t, "Name/Alias"), a.Col(t, "Appearances")
	top, most, ties := "", -1, 0
	for _, r := range a.Rows {
		if r[apps] == nil || r[name] == nil {
			continue
		}
		n, _ := strconv.Atoi(*r[apps])
		switch {
		case n > most:
			top, most, ties = *r[name], n, 1
		case n == most:
			ties++
		}
	}
	if ties != 1 {
		t.Fatalf("avengers.csv: %d Avengers share the most appearances, want 1", ties)
	}
	// Where 髙橋淳 lives: CP932 text, 髙 an extension of Shift_JIS.
	k := dbsourcetest.Read(t, "test_mskanji")
	who, where := k.Col(t, "名前"), k.Col(t, "住所")
	home := ""
	for _, r := range k.Rows {
		if *r[who] == "髙橋淳" {
			home = *r[where]
		}
	}
	if home == "" {
		t.Fatal("test_mskanji.csv has no 髙橋淳")
	}
	return []struct{ question, sql, want string }{
		{"How many passengers flew in 1960?", "SELECT sum(passengers) AS total FROM flights WHERE year = 1960",
			fmt.Sprintf("total %d (1 row)", total)},
		{"Which Avenger has the most appearances?",
			fmt.Sprintf("SELECT %s AS name, %s AS n FROM avengers ORDER BY %s DESC LIMIT 1", q("Name/Alias"), q("Appearances"), q("Appearances")),
			fmt.Sprintf("name | n %s | %d (1 row)", strings.Join(strings.Fields(top), " "), most)},
		{"Where does 髙橋淳 live?", fmt.Sprintf("SELECT %s FROM test_mskanji WHERE %s = '髙橋淳'", q("住所"), q("名前")),
			fmt.Sprintf("%s %s (1 row)", k.Cols[where], home)},
	}
}

func testDatabaseSource(t *testing.T, src *sourceServer) {
	want := gentoos(t)
	penguins := dbsourcetest.Read(t, "penguins")
	const countSQL = "SELECT count(*) AS n FROM penguins WHERE species = 'Gentoo'"
	answers := sourceAnswers(t, src)
	var turns []llmtest.Turn
	for _, a := range answers {
		turns = append(turns, llmtest.Turn{Match: &llmtest.Match{LastRole: "user", Contains: a.question}, ToolCalls: []llmtest.ToolCall{
			llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q, "source": "warehouse"}`, a.sql))}})
	}
	script := llmtest.Script{
		Turns: append(turns, []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user", Contains: "How many Gentoo"}, ToolCalls: []llmtest.ToolCall{
				llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q, "source": "warehouse"}`, countSQL))}},
			{Match: &llmtest.Match{LastRole: "user", Contains: "Delete"}, ToolCalls: []llmtest.ToolCall{
				llmtest.Call("execute_sql", `{"query": "DELETE FROM penguins", "source": "warehouse"}`)}},
			{Match: &llmtest.Match{LastRole: "user", Contains: "again"}, ToolCalls: []llmtest.ToolCall{
				llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q, "source": "warehouse"}`, countSQL))}},
		}...),
		// Every tool result is answered by saying it: "Result: n 124 (1 row)".
		Default: &llmtest.Turn{ReplyFunc: func(r *llmtest.Request) string {
			return "Result: " + strings.Join(strings.Fields(r.Last().Text), " ")
		}},
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, script)
	env := testEnv(t, map[string]string{
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
		"DATACHAT_LOG_LEVEL": "debug", // the most a log can say
	})
	dataDir, _ := env("DATACHAT_DATA_DIR")
	var cliOut strings.Builder // everything the commands printed
	run := func(args ...string) (string, error) {
		t.Helper()
		stdout, stderr, err := runMain(t, env, args...)
		cliOut.WriteString(stdout + stderr)
		if err != nil {
			cliOut.WriteString(err.Error())
		}
		return stdout + stderr, err
	}

	// A role that could escape read-only is refused, with its privilege named.
	_, err := run("sources", "add", "risky", "--url", src.bad, "--all-users")
	if err == nil || !strings.Contains(err.Error(), src.privilege) {
		t.Fatalf("sources add with a role that has %s: got %v, want it refused naming %s", src.privilege, err, src.privilege)
	}
	// So is a role that may read more than --tables states, naming the
	// grant to revoke (PostgreSQL's proof of the grants).
	if src.kind == dbsource.KindPostgres {
		_, err := run("sources", "add", "narrow", "--url", src.reader, "--tables", "penguins", "--all-users")
		if err == nil || !strings.Contains(err.Error(), "REVOKE SELECT ON") || !strings.Contains(err.Error(), "outside --tables") {
			t.Fatalf("sources add with --tables narrower than the role's grants: got %v, want it refused naming the REVOKE", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, dbsource.KeyFile)); err == nil {
		t.Error("a refused source made the key file")
	}
	tables := dbsourcetest.Tables(t, sourceCSVs)
	if out, err := run("sources", "add", "warehouse", "--url", src.reader, "--tables", strings.Join(tables, ","), "--users", "alice"); err != nil {
		t.Fatalf("sources add: %v\n%s", err, out)
	} else if !strings.Contains(out, fmt.Sprintf("%d tables", len(tables))) || !strings.Contains(out, "granted to alice") {
		t.Errorf("sources add said %q, want the table found and the grant", out)
	}
	fi, err := os.Stat(filepath.Join(dataDir, dbsource.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, mode %v; want one made with mode 0600", err, fi.Mode().Perm())
	}
	out, err := run("sources", "list")
	if err != nil || !strings.Contains(out, "warehouse") || !strings.Contains(out, src.kind) || !strings.Contains(out, "xxxxx") || !strings.Contains(out, "alice") {
		t.Errorf("sources list: %v\n%s", err, out)
	}

	logs := &testlog.Buffer{}
	m, err := serveLogged(t, env, logs)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()
	alice, _ := run("keys", "create", "--user", "alice")
	bob, _ := run("keys", "create", "--user", "bob")
	alice, bob = strings.TrimSpace(firstLine(alice)), strings.TrimSpace(firstLine(bob))

	var bodies strings.Builder // every API answer
	call := func(method, path, key, body string) (int, string) {
		t.Helper()
		st, b, _ := apiCall(t, method, base+path, key, body)
		bodies.WriteString(b)
		return st, b
	}

	if st, body := call("GET", "/api/sources", alice, ""); st != 200 || !strings.Contains(body, `{"name":"warehouse","kind":"`+src.kind+`","tables":["`+strings.Join(tables, `","`)+`"]}`) {
		t.Errorf("alice's GET /api/sources: %d %s", st, body)
	}
	if st, body := call("GET", "/api/sources", bob, ""); st != 200 || body != "{\"sources\":[]}\n" {
		t.Errorf("bob's GET /api/sources: %d %s, want none", st, body)
	}
	_, conv := call("POST", "/api/conversations", alice, `{"title":"Penguins"}`)
	id := jsonField(t, conv, "id")
	_, bobConv := call("POST", "/api/conversations", bob, "")
	bobID := jsonField(t, bobConv, "id")
	for _, tc := range []struct{ what, key, path string }{
		{"bob attaching alice's source to his conversation", bob, "/api/conversations/" + bobID + "/sources"},
		{"bob attaching it to alice's conversation", bob, "/api/conversations/" + id + "/sources"},
		{"alice attaching a source that does not exist", alice, "/api/conversations/" + id + "/sources"},
	} {
		name := "warehouse"
		if strings.Contains(tc.what, "does not exist") {
			name = "nowhere"
		}
		if st, body := call("POST", tc.path, tc.key, `{"name":"`+name+`"}`); st != 404 {
			t.Errorf("%s: %d %s, want 404", tc.what, st, body)
		}
	}
	if st, body := call("POST", "/api/conversations/"+id+"/sources", alice, `{"name":"warehouse"}`); st != 201 || !strings.Contains(body, `"name":"warehouse"`) {
		t.Fatalf("alice attaching: %d %s", st, body)
	}
	if st, body := call("GET", "/api/conversations/"+id, alice, ""); st != 200 || !strings.Contains(body, `"sources":[{"name":"warehouse"`) {
		t.Errorf("conversation detail: %d %s, want the source attached", st, body)
	}
	if st, _ := call("GET", "/api/conversations/"+id+"/sources", bob, ""); st != 404 {
		t.Errorf("bob listing alice's conversation's sources: %d, want 404", st)
	}

	ask := func(q string) string {
		t.Helper()
		st, body := call("POST", "/chat/query", alice, fmt.Sprintf(`{"query":%q,"conversation_id":%q}`, q, id))
		if st != 200 {
			t.Fatalf("/chat/query %q: %d %s", q, st, body)
		}
		answer := jsonField(t, body, "answer")
		t.Logf("%s → %s", q, answer)
		return answer
	}
	if got := ask("How many Gentoo penguins are in the warehouse?"); !strings.Contains(got, fmt.Sprintf("n %d (1 row)", want)) {
		t.Errorf("answer %q, want the count %d from %s", got, want, src.dialect)
	}
	reqs := fake.ChatRequests()
	system := reqs[len(reqs)-1].Messages[0].Text
	flights := dbsourcetest.Read(t, "flights")
	for _, w := range []string{"Database warehouse (" + src.dialect + " ", fmt.Sprintf("penguins%s (about %d rows):", src.quote, len(penguins.Rows)), "- species: text (e.g. ",
		fmt.Sprintf("flights%s (about %d rows):", src.quote, len(flights.Rows)), "- " + dbsource.QuoteIdent(src.kind, "Name/Alias") + ": text", "test_mskanji" + src.quote} {
		if !strings.Contains(system, w) {
			t.Errorf("the prompt lacks %q:\n%s", w, system)
		}
	}
	// The tables added to penguins, a question on each: the answer carries
	// the value the CSV gives.
	for _, a := range answers {
		if got := ask(a.question); !strings.Contains(got, a.want) {
			t.Errorf("%s: answer %q, want it to say %q (from %s)", a.question, got, a.want, src.dialect)
		}
	}
	if got := ask("Delete every penguin from the warehouse."); !strings.Contains(got, "Error:") {
		t.Errorf("a write: answer %q, want the refusal", got)
	}
	if n := src.count(t); n != len(penguins.Rows) {
		t.Errorf("after the write attempt the table has %d rows, want %d", n, len(penguins.Rows))
	}

	// Removed while serve runs: no longer listed, attached or queried, and
	// its connections closed.
	if got := m.Server.Sources.Open(); len(got) != 1 || got[0] != "warehouse" {
		t.Errorf("pools open before remove: %q, want warehouse's", got)
	}
	if _, err := run("sources", "remove", "warehouse"); err != nil {
		t.Fatal(err)
	}
	if st, body := call("GET", "/api/sources", alice, ""); st != 200 || body != "{\"sources\":[]}\n" {
		t.Errorf("GET /api/sources after remove: %d %s", st, body)
	}
	if got := m.Server.Sources.Open(); len(got) != 0 {
		t.Errorf("pools open after remove: %q, want none", got)
	}
	if got := ask("Count them again please"); !strings.Contains(got, `no database named "warehouse" is attached`) {
		t.Errorf("a query on a removed source: answer %q, want it refused", got)
	}

	// The password is nowhere but in the sealed store.
	var prompts strings.Builder
	for _, r := range fake.Requests() {
		prompts.Write(r.Raw)
	}
	var store []byte
	for _, f := range []string{"datachat.db", "datachat.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dataDir, f))
		store = append(store, b...)
	}
	for what, text := range map[string]string{
		"API answers": bodies.String(), "the model's requests": prompts.String(), "serve's log": logs.String(),
		"the commands' output": cliOut.String(), "the store's files": string(store),
	} {
		if text == "" && what != "the commands' output" {
			t.Errorf("%s: nothing captured", what)
		}
		if strings.Contains(text, src.password) {
			t.Errorf("%s show the password", what)
		}
	}
	m.Close()
	testConfigSources(t, env, src, run, logs)

	t.Logf("the commands said:\n%s\nserve's log (sources):", cliOut.String())
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "source") {
			t.Log(line)
		}
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Error("serve's log has no debug lines: the check above saw less than it could")
	}
}

// onceServe is a serve that closes once, early or when its test ends.
type onceServe struct {
	*Main
	once sync.Once
}

func (s *onceServe) Close() { s.once.Do(func() { s.Main.Close() }) }

// serveLogged starts serve with args before the command (--config FILE),
// its log in logs.
func serveLogged(t *testing.T, env func(string) (string, bool), logs io.Writer, args ...string) (*onceServe, error) {
	t.Helper()
	m := &onceServe{Main: &Main{Env: env, Stdout: io.Discard, Stderr: logs}}
	err := m.ParseFlags(context.Background(), append(args, "serve"))
	if err == nil {
		err = m.Run(context.Background())
	}
	t.Cleanup(m.Close)
	return m, err
}

// testConfigSources: DATACHAT_SOURCES in the --config file adds a source
// when serve starts (checked as sources add checks one), leaves it alone at
// the next start, and removes it when the file no longer lists it; a source
// added with the command is not the file's to change; a role that could
// escape read-only stops serve.
func testConfigSources(t *testing.T, env func(string) (string, bool), src *sourceServer, run func(...string) (string, error), logs io.Writer) {
	dir := t.TempDir()
	file := func(name, yaml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The tables are what the role is granted: a role that may read more
	// than --tables states is refused.
	granted, reader := dbsourcetest.Tables(t, sourceCSVs), src.reader
	if src.penguinsReader != "" {
		granted, reader = []string{"penguins"}, src.penguinsReader
	}
	shop := file("shop.yaml", fmt.Sprintf("DATACHAT_SOURCES:\n  - name: shop\n    url: %q\n    tables: [%s]\n    all_users: true\n", reader, strings.Join(granted, ", ")))
	key, _ := run("keys", "create", "--user", "carol")
	carol := strings.TrimSpace(firstLine(key))
	sources := func(m *onceServe) string {
		t.Helper()
		_, b, _ := apiCall(t, "GET", "http://"+m.Addr()+"/api/sources", carol, "")
		return b
	}
	for i := range 2 { // the second start finds it unchanged
		m, err := serveLogged(t, env, logs, "--config", shop)
		if err != nil {
			t.Fatalf("serve with DATACHAT_SOURCES (start %d): %v", i+1, err)
		}
		if got := sources(m); !strings.Contains(got, `{"name":"shop","kind":"`+src.kind+`","tables":["`+strings.Join(granted, `","`)+`"]}`) {
			t.Errorf("start %d: carol's sources %s, want shop (all users)", i+1, got)
		}
		m.Close()
	}
	if out, _ := run("sources", "list"); !strings.Contains(out, "shop") || !strings.Contains(out, "config") || !strings.Contains(out, "(all users)") {
		t.Errorf("sources list: %s, want shop from the config", out)
	}
	if _, err := run("sources", "add", "shop", "--url", src.reader); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("sources add of the file's source: %v, want it refused", err)
	}
	// Unset: the file's sources are kept; set to none: removed.
	m, err := serveLogged(t, env, logs)
	if err != nil || !strings.Contains(sources(m), "shop") {
		t.Errorf("serve without DATACHAT_SOURCES: %v, %s; want shop kept", err, sources(m))
	}
	m.Close()
	m, err = serveLogged(t, env, logs, "--config", file("none.yaml", "DATACHAT_SOURCES: []\n"))
	if err != nil || sources(m) != "{\"sources\":[]}\n" {
		t.Errorf("serve with DATACHAT_SOURCES: []: %v, %s; want shop removed", err, sources(m))
	}
	m.Close()

	// A role that could escape read-only stops serve, naming its privilege.
	bad := file("bad.yaml", fmt.Sprintf("DATACHAT_SOURCES:\n  - name: risky\n    url: %q\n    all_users: true\n", src.bad))
	if _, err := serveLogged(t, env, logs, "--config", bad); err == nil || !strings.Contains(err.Error(), src.privilege) || !strings.Contains(err.Error(), "DATACHAT_SOURCES") {
		t.Errorf("serve with a risky source in DATACHAT_SOURCES: %v, want it refused naming %s", err, src.privilege)
	}
	// A source added with the command is not the file's.
	if _, err := run("sources", "add", "mine", "--url", src.reader, "--all-users"); err != nil {
		t.Fatal(err)
	}
	clash := file("clash.yaml", fmt.Sprintf("DATACHAT_SOURCES:\n  - name: mine\n    url: %q\n", src.reader))
	if _, err := serveLogged(t, env, logs, "--config", clash); err == nil || !strings.Contains(err.Error(), "datachat sources remove mine") {
		t.Errorf("serve with a file source named as a command's: %v, want it refused", err)
	}
}

// jsonField is a string field of a JSON object.
func jsonField(t *testing.T, body, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%q is not a JSON object: %v", body, err)
	}
	s, _ := m[key].(string)
	return s
}

// TestSourcesAddRefuses: sources add refuses a URL that is not a database's
// and a database that does not answer, saying so without the password, and
// stores nothing; --url - reads the URL from stdin.
func TestSourcesAddRefuses(t *testing.T) {
	env := testEnv(t, nil)
	addr := testnet.ClosedAddr(t)
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"sources", "add", "x", "--url", "http://u:s3cret@example.com/db"}, "", "must start with postgres:// or mysql://"},
		{[]string{"sources", "add", "x", "--url", "-"}, "https://u:s3cret@example.com/db\n", "must start with postgres:// or mysql://"},
		{[]string{"sources", "add", "x", "--url", "-"}, "", "no URL on stdin"},
		{[]string{"sources", "add", "Bad-Name", "--url", "postgres://u:s3cret@" + addr + "/db"}, "", "lower-case letters"},
		{[]string{"sources", "add", "x", "--url", "postgres://u:s3cret@" + addr + "/db?connect_timeout=5"}, "", "does not answer"},
		{[]string{"sources", "add", "x", "--url", "-"}, "mysql://u:s3cret@" + addr + "/db\n", "does not answer"},
		{[]string{"sources", "remove", "x"}, "", "database source not found"},
	} {
		var stdout, stderr bytes.Buffer
		m := &Main{Env: env, Stdin: strings.NewReader(tc.stdin), Stdout: &stdout, Stderr: &stderr}
		err := m.ParseFlags(context.Background(), tc.args)
		if err == nil {
			err = m.Run(context.Background())
		}
		m.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.args, err, tc.want)
		} else if strings.Contains(err.Error()+stdout.String()+stderr.String(), "s3cret") {
			t.Errorf("%q: the password shows: %v\n%s", tc.args, err, stderr.String())
		}
	}
	out, _, err := runMain(t, env, "sources", "list")
	if err != nil || strings.TrimSpace(out) != "NAME  KIND  URL  TABLES  USERS  ORIGIN  CREATED" {
		t.Errorf("sources list after refusals: %v\n%s", err, out)
	}
	dir, _ := env("DATACHAT_DATA_DIR")
	if _, err := os.Stat(filepath.Join(dir, dbsource.KeyFile)); err == nil {
		t.Error("refused sources made the key file")
	}
}

// runMainOut runs one command and returns what it printed on stdout and
// stderr together.
func runMainOut(t *testing.T, env func(string) (string, bool), args ...string) (string, error) {
	t.Helper()
	stdout, stderr, err := runMain(t, env, args...)
	return stdout + stderr, err
}
