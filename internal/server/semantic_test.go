package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"datachat"
	"datachat/internal/dbsource"
	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
	"datachat/internal/workspace"
)

// patchTable sends PATCH …/dictionary/tables as the key's user.
func (ts *testServer) patchTable(t *testing.T, key, conv, body string) (int, string) {
	t.Helper()
	return ts.do(t, "PATCH", "/api/conversations/"+conv+"/dictionary/tables", key, body)
}

// patchTablesAtOnce saves each of bodies with [testServer.patchTable], all at
// once, and fails t naming the first save that was not 200.
func (ts *testServer) patchTablesAtOnce(t *testing.T, key, conv string, bodies []string) {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]string, len(bodies))
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if st, body := ts.patchTable(t, key, conv, b); st != 200 {
				errs[i] = fmt.Sprintf("%d %s", st, body)
			}
		}()
	}
	close(start)
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Fatalf("save %d: %s", i, e)
		}
	}
}

// tablesOf decodes GET …/dictionary/tables (or the shared view's).
func tablesOf(t *testing.T, body string) semanticTables {
	t.Helper()
	var out semanticTables
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return out
}

func tableNamed(tables []semanticTable, name string) *semanticTable {
	for i := range tables {
		if tables[i].Name == name {
			return &tables[i]
		}
	}
	return nil
}

// TestSemanticEditorAPI: one table's semantic layer read and changed as the
// page's editor does; each refusal names the field it is about, in words;
// a metric that does not run, or gives many rows, is refused; another
// user's conversation (a viewer's included) is 404, and a viewer reads the
// layer, read-only, through /api/shared.
func TestSemanticEditorAPI(t *testing.T) {
	ts := newTestServer(t)
	conv, ds := ts.penguins(t, ts.alice)
	tables := "/api/conversations/" + conv + "/dictionary/tables"

	st, body := ts.do(t, "GET", tables, ts.alice, "")
	if st != 200 {
		t.Fatalf("GET: %d %s", st, body)
	}
	got := tablesOf(t, body)
	p := tableNamed(got.Tables, "penguins")
	if p == nil || p.Kind != "dataset" || p.DatasetID != ds || len(p.Columns) == 0 || p.Metrics == nil || p.Relationships == nil || got.ReadOnly {
		t.Fatalf("GET: %s", body)
	}

	ok := `{"dataset_id":"` + ds + `","description":"One row per penguin.","columns":{"body_mass_g":"In grams."},` +
		`"metrics":{"birds":{"sql":"count(*)","description":"Penguins seen."},"heavy birds":{"sql":"count(*)","filter":"body_mass_g > 4500"}},` +
		`"synonyms":{"heavy":"body_mass_g > 4500"}}`
	st, body = ts.patchTable(t, ts.alice, conv, ok)
	var saved semanticSaved
	json.Unmarshal([]byte(body), &saved)
	if st != 200 || saved.Metrics["birds"].SQL != "count(*)" || saved.Synonyms["heavy"] != "body_mass_g > 4500" || saved.Description != "One row per penguin." ||
		fmt.Sprint(saved.Values["birds"]) != fmt.Sprint(testfiles.PenguinsRows) || saved.Values["heavy birds"] == nil {
		t.Fatalf("PATCH: %d %s", st, body)
	}

	type refusal struct {
		name, body string
		status     int
		field      string // the problem's field ("": no problems listed)
		want       string
	}
	for _, r := range []refusal{
		{"an expression that does not run", `{"dataset_id":"` + ds + `","metrics":{"span":{"sql":"avg(wingspan)"}}}`, 400, "metrics.span.sql", `avg(wingspan) does not run: unknown column: Referenced column \"wingspan\" not found`},
		{"a filter that does not run", `{"dataset_id":"` + ds + `","metrics":{"big":{"sql":"count(*)","filter":"wingspan > 3"}}}`, 400, "metrics.big.filter", "its filter wingspan > 3 does not run"},
		{"not one value", `{"dataset_id":"` + ds + `","metrics":{"mass":{"sql":"body_mass_g"}}}`, 400, "metrics.mass.sql", "not one value"},
		{"a bad name", `{"dataset_id":"` + ds + `","metrics":{"a;b":{"sql":"count(*)"}}}`, 400, "metrics.a;b.name", "a name is letters"},
		{"two statements", `{"dataset_id":"` + ds + `","metrics":{"n":{"sql":"count(*); DROP TABLE penguins"}}}`, 400, "metrics.n.sql", "without ;"},
		{"an unknown column", `{"dataset_id":"` + ds + `","columns":{"wingspan":"x"}}`, 400, "columns.wingspan", `table penguins has no column \"wingspan\"`},
		{"a join to nowhere", `{"dataset_id":"` + ds + `","relationships":[{"columns":["island"],"ref_table":"islands","ref_columns":["name"]}]}`, 400, "relationships.0.ref_table", `ref_table \"islands\" is not a table here`},
		{"a synonym on two lines", `{"dataset_id":"` + ds + `","synonyms":{"a\nb":"x"}}`, 400, "synonyms.a\nb.term", "on one line"},
		{"no table", `{"metrics":{"n":{"sql":"count(*)"}}}`, 400, "", "Name the table"},
		{"two tables", `{"dataset_id":"` + ds + `","source":"w","table":"t","metrics":{"n":{"sql":"count(*)"}}}`, 400, "", "Name the table"},
		{"nothing to change", `{"dataset_id":"` + ds + `"}`, 400, "", "Send what changes"},
		{"an unknown field", `{"dataset_id":"` + ds + `","measures":{}}`, 400, "", "measures"},
		{"text that is not UTF-8", `{"dataset_id":"` + ds + `","synonyms":{"a":"caf` + "\xe9" + `"}}`, 400, "", "UTF-8"},
		{"an unknown dataset", `{"dataset_id":"nope","metrics":{"n":{"sql":"count(*)"}}}`, 404, "", "reload the page"},
		{"a source on a server without", `{"source":"w","table":"t","metrics":{"n":{"sql":"count(*)"}}}`, 404, "", "no database sources"},
	} {
		st, body := ts.patchTable(t, ts.alice, conv, r.body)
		var e struct {
			Error struct {
				Message  string
				Problems []datachat.Problem
			}
		}
		json.Unmarshal([]byte(body), &e)
		if st != r.status || !strings.Contains(body, r.want) || strings.Contains(body, "LINE 1") {
			t.Errorf("%s: %d %s, want %d with %q", r.name, st, body, r.status, r.want)
			continue
		}
		if r.field != "" && (len(e.Error.Problems) != 1 || e.Error.Problems[0].Field != r.field || !strings.Contains(e.Error.Message, "were not saved")) {
			t.Errorf("%s: problems %+v, want one of field %q", r.name, e.Error.Problems, r.field)
		}
	}

	// Nothing refused was stored; a removal takes one metric and leaves the rest.
	st, body = ts.patchTable(t, ts.alice, conv, `{"dataset_id":"`+ds+`","metrics":{"heavy birds":{"sql":""}}}`)
	saved = semanticSaved{}
	json.Unmarshal([]byte(body), &saved)
	if st != 200 || len(saved.Metrics) != 1 || saved.Metrics["birds"].Description != "Penguins seen." || saved.Synonyms["heavy"] == "" {
		t.Fatalf("removal: %d %s", st, body)
	}
	_, body = ts.do(t, "GET", tables, ts.alice, "")
	if p := tableNamed(tablesOf(t, body).Tables, "penguins"); p == nil || len(p.Metrics) != 1 || len(p.Columns) == 0 || p.Relationships == nil ||
		strings.Contains(body, "wingspan") || strings.Contains(body, `"mass"`) {
		t.Errorf("after the refusals and the removal: %s", body)
	}

	// Another user's conversation, and a viewer's: 404, nothing changed.
	if st, body := ts.patchTable(t, ts.bob, conv, ok); st != 404 {
		t.Errorf("bob's PATCH of alice's conversation: %d %s", st, body)
	}
	if st, body := ts.do(t, "GET", tables, ts.bob, ""); st != 404 {
		t.Errorf("bob's GET of alice's conversation: %d %s", st, body)
	}
	if st, _ := ts.do(t, "GET", "/api/shared/"+conv+"/dictionary/tables", ts.bob, ""); st != 404 {
		t.Errorf("the shared view of a conversation not shared: %d", st)
	}
	ts.share(t, ts.alice, conv, `{"users":["bob"]}`)
	if st, body := ts.patchTable(t, ts.bob, conv, `{"dataset_id":"`+ds+`","metrics":{"birds":{"sql":""}}}`); st != 404 {
		t.Errorf("a viewer's PATCH: %d %s", st, body)
	}
	st, body = ts.do(t, "GET", "/api/shared/"+conv+"/dictionary/tables", ts.bob, "")
	shared := tablesOf(t, body)
	if p := tableNamed(shared.Tables, "penguins"); st != 200 || !shared.ReadOnly || p == nil || p.Metrics["birds"].SQL != "count(*)" || p.Synonyms["heavy"] == "" {
		t.Errorf("the viewer's read-only view: %d %s", st, body)
	}
}

// TestSemanticEditorConcurrentSaves: saves of two tables, and of two
// metrics of one table, made at once, are all kept: each merges into
// what the other stored.
func TestSemanticEditorConcurrentSaves(t *testing.T) {
	ts := newTestServer(t)
	conv, penguins := ts.penguins(t, ts.alice)
	st, d := ts.upload(t, "/api/conversations/"+conv+"/datasets", ts.alice, testfiles.Write(t, t.TempDir(), "islands.csv", []byte("island,area_km2\nBiscoe,100\nDream,50\nTorgersen,3\n")), "file")
	if st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	islands := d["id"].(string)
	bodies := []string{
		`{"dataset_id":"` + penguins + `","metrics":{"birds":{"sql":"count(*)"}},"relationships":[{"columns":["island"],"ref_table":"islands","ref_columns":["island"]}]}`,
		`{"dataset_id":"` + penguins + `","metrics":{"mass":{"sql":"sum(body_mass_g)"}}}`,
		`{"dataset_id":"` + islands + `","metrics":{"area":{"sql":"sum(area_km2)"}},"synonyms":{"size":"area"}}`,
		`{"dataset_id":"` + islands + `","columns":{"area_km2":"In square kilometres."}}`,
	}
	ts.patchTablesAtOnce(t, ts.alice, conv, bodies)
	_, body := ts.do(t, "GET", "/api/conversations/"+conv+"/dictionary/tables", ts.alice, "")
	got := tablesOf(t, body)
	p, is := tableNamed(got.Tables, "penguins"), tableNamed(got.Tables, "islands")
	if p == nil || is == nil || len(p.Metrics) != 2 || len(p.Relationships) != 1 || len(is.Metrics) != 1 || is.Synonyms["size"] != "area" ||
		is.Columns[1].Description != "In square kilometres." {
		t.Errorf("after four saves at once: %s", body)
	}
}

// TestSemanticEditorSources: a source's table that cannot be read now is
// listed as unavailable, and a change to it is refused saying why; a
// source not attached is 404.
func TestSemanticEditorSources(t *testing.T) {
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		// DataDir: opening the source reads the server's secret key there.
		d.Sources = &workspace.Sources{Store: d.Store, DataDir: t.TempDir(), Logger: d.Logger}
	})
	if err := ts.Store.CreateDBSource(t.Context(), &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: "v1:sealed-warehouse", Tables: []string{"public.*"}, Users: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	conv := ts.newConversation(t, ts.alice)
	if st, body := ts.patchTable(t, ts.alice, conv, `{"source":"warehouse","table":"public.orders","description":"x"}`); st != 404 || !strings.Contains(body, "not attached") {
		t.Errorf("a source not attached: %d %s", st, body)
	}
	if st, body := ts.do(t, "POST", "/api/conversations/"+conv+"/sources", ts.alice, `{"name":"warehouse"}`); st != 201 {
		t.Fatalf("attach: %d %s", st, body)
	}
	st, body := ts.do(t, "GET", "/api/conversations/"+conv+"/dictionary/tables", ts.alice, "")
	if got := tablesOf(t, body); st != 200 || len(got.Unavailable) != 1 || got.Unavailable[0].Name != "warehouse" || got.Unavailable[0].Reason == "" {
		t.Errorf("GET with a source that cannot be read: %d %s", st, body)
	}
	if st, body := ts.patchTable(t, ts.alice, conv, `{"source":"warehouse","table":"public.orders","description":"x"}`); st != 400 || !strings.Contains(body, "cannot be read now") {
		t.Errorf("a change to a source that cannot be read: %d %s", st, body)
	}
}

// TestSemanticEditorReachesPrompt: a metric and a synonym saved through the
// editor's route reach the next turn's system prompt beside the table.
func TestSemanticEditorReachesPrompt(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"Noted."}}})
	conv, ds := cs.penguins(t, cs.alice)
	if st, body := cs.patchTable(t, cs.alice, conv, `{"dataset_id":"`+ds+`","metrics":{"heavy birds":{"sql":"count(*)","filter":"body_mass_g > 4500","description":"Over 4.5 kg."}},"synonyms":{"chunky":"body_mass_g > 4500"}}`); st != 200 {
		t.Fatalf("PATCH: %d %s", st, body)
	}
	c := cs.dial(t, conv, cs.alice)
	c.ask("How many heavy birds?")
	reqs := cs.fake.ChatRequests()
	sys := reqs[len(reqs)-1].Messages[0].Text
	for _, want := range []string{
		"Metrics (compute each exactly as defined): heavy birds = count(*) WHERE body_mass_g > 4500 (Over 4.5 kg.)",
		`Synonyms: "chunky" means body_mass_g > 4500`,
	} {
		if !strings.Contains(sys, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, sys)
		}
	}
}

// TestSemanticEditorPostgres: a real PostgreSQL source's tables are listed
// with their columns; one table's description, a column's, a metric and a
// join are saved, the metric checked by the database (LIMIT 0) and refused
// beside its field when it does not run there; saves of two of its tables at
// once keep both.
func TestSemanticEditorPostgres(t *testing.T) {
	ctx := context.Background()
	pg := dbsourcetest.NewPostgresDB(t, "dcsem")
	pg.Exec(t,
		"CREATE TABLE orders (id int, customer text, amount numeric, status text)",
		"CREATE TABLE customers (code text, name text)",
		"INSERT INTO orders VALUES (1, 'c1', 10, 'paid'), (2, 'c2', 5, 'open')",
		"GRANT USAGE ON SCHEMA public TO "+pg.Role,
		"GRANT SELECT ON orders, customers TO "+pg.Role,
	)
	key := make([]byte, 32)
	rand.Read(key)
	sec, err := dbsource.NewSecrets(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sec.Seal(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		d.Sources = &workspace.Sources{Store: d.Store, SecretKey: base64.StdEncoding.EncodeToString(key), DataDir: t.TempDir(), Logger: d.Logger}
	})
	t.Cleanup(func() { ts.Sources.Close() })
	if err := ts.Store.CreateDBSource(ctx, &datachat.DBSource{Name: "warehouse", Kind: "postgres", SealedURL: sealed,
		Tables: []string{"public.*"}, Users: []string{"alice"}, Origin: datachat.OriginCLI}); err != nil {
		t.Fatal(err)
	}
	conv := ts.newConversation(t, ts.alice)
	if st, body := ts.do(t, "POST", "/api/conversations/"+conv+"/sources", ts.alice, `{"name":"warehouse"}`); st != 201 {
		t.Fatalf("attach: %d %s", st, body)
	}
	st, body := ts.do(t, "GET", "/api/conversations/"+conv+"/dictionary/tables", ts.alice, "")
	got := tablesOf(t, body)
	if o := tableNamed(got.Tables, "public.orders"); st != 200 || o == nil || o.Kind != "source" || o.Source != "warehouse" || len(o.Columns) != 4 || len(got.Unavailable) != 0 {
		t.Fatalf("GET: %d %s", st, body)
	}

	orders := `{"source":"warehouse","table":"public.orders",`
	for _, r := range []struct{ name, body, field, want string }{
		{"an expression the database refuses", orders + `"metrics":{"revenue":{"sql":"sum(amout)"}}}`, "metrics.revenue.sql", "sum(amout) does not run"},
		{"a filter the database refuses", orders + `"metrics":{"revenue":{"sql":"sum(amount)","filter":"state = 'paid'"}}}`, "metrics.revenue.filter", "its filter state = 'paid' does not run"},
		{"an unknown column", orders + `"columns":{"price":"x"}}`, "columns.price", `has no column \"price\"`},
		{"a join to another source's table", orders + `"relationships":[{"columns":["customer"],"ref_table":"public.clients","ref_columns":["code"]}]}`, "relationships.0.ref_table", "is not a table here"},
	} {
		st, body := ts.patchTable(t, ts.alice, conv, r.body)
		var e struct {
			Error struct{ Problems []datachat.Problem }
		}
		json.Unmarshal([]byte(body), &e)
		if st != 400 || len(e.Error.Problems) != 1 || e.Error.Problems[0].Field != r.field || !strings.Contains(body, r.want) {
			t.Errorf("%s: %d %s, want 400 on %s with %q", r.name, st, body, r.field, r.want)
		}
	}
	if st, body := ts.patchTable(t, ts.alice, conv, `{"source":"warehouse","table":"public.nothing","description":"x"}`); st != 404 || !strings.Contains(body, "no table") {
		t.Errorf("an unknown table: %d %s", st, body)
	}

	bodies := []string{
		orders + `"description":"One row per order.","columns":{"amount":"In euros."},"metrics":{"revenue":{"sql":"sum(amount)","filter":"status = 'paid'"}},` +
			`"relationships":[{"columns":["customer"],"ref_table":"customers","ref_columns":["code"]}]}`,
		`{"source":"warehouse","table":"customers","synonyms":{"client":"customers"},"columns":{"name":"Legal name."}}`,
	}
	ts.patchTablesAtOnce(t, ts.alice, conv, bodies)
	_, body = ts.do(t, "GET", "/api/conversations/"+conv+"/dictionary/tables", ts.alice, "")
	got = tablesOf(t, body)
	o, cu := tableNamed(got.Tables, "public.orders"), tableNamed(got.Tables, "public.customers")
	if o == nil || cu == nil || o.Description != "One row per order." || o.Metrics["revenue"].Filter != "status = 'paid'" || len(o.Relationships) != 1 ||
		o.Relationships[0].RefTable != `"public"."customers"` || cu.Synonyms["client"] != "customers" || !strings.Contains(body, `"description":"In euros."`) || !strings.Contains(body, `"description":"Legal name."`) {
		t.Errorf("after two saves at once: %s", body)
	}
}
