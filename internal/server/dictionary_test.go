package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

func (ts *testServer) penguins(t *testing.T, key string) (conv, datasetID string) {
	t.Helper()
	conv = ts.newConversation(t, key)
	st, d := ts.upload(t, "/api/conversations/"+conv+"/datasets", key, testfiles.Penguins(t, t.TempDir()), "file")
	if st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	return conv, d["id"].(string)
}

func TestDictionaryAPI(t *testing.T) {
	ts := newTestServer(t)
	conv, ds := ts.penguins(t, ts.alice)
	alice := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/json"}
	aliceYAML := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/yaml"}
	bob := map[string]string{"X-API-Key": ts.bob, "Content-Type": "application/json"}
	c := "/api/conversations/" + conv
	long := strings.Repeat("x", datachat.MaxDescriptionChars+1)

	for _, sc := range []scenario{
		{name: "notes", method: "PATCH", url: c, headers: alice, body: `{"notes":"Fiscal year starts in April."}`,
			wantStatus: 200, wantContent: []string{`"notes":"Fiscal year starts in April."`, `"title":"New conversation"`}},
		{name: "title and notes", method: "PATCH", url: c, headers: alice, body: `{"title":"Birds","notes":"Mass is in grams."}`,
			wantStatus: 200, wantContent: []string{`"title":"Birds"`, `"notes":"Mass is in grams."`}},
		{name: "neither", method: "PATCH", url: c, headers: alice, body: `{}`, wantStatus: 400, wantContent: []string{"notes"}},
		{name: "notes too long", method: "PATCH", url: c, headers: alice, body: `{"title":"changed","notes":"` + strings.Repeat("n", datachat.MaxNotesChars+1) + `"}`,
			wantStatus: 400, wantContent: []string{"notes is 20001 characters long; at most 20000"}},
		{name: "another user's notes", method: "PATCH", url: c, headers: bob, body: `{"notes":"x"}`, wantStatus: 404},
		{name: "dataset description", method: "PATCH", url: c + "/datasets/" + ds, headers: alice,
			body:       `{"description":"One row per penguin.","columns":{"body_mass_g":"Body mass in grams.","Species":"Adelie, Chinstrap or Gentoo."}}`,
			wantStatus: 200, wantContent: []string{`"description":"One row per penguin."`, `"description":"Body mass in grams."`, `"description":"Adelie, Chinstrap or Gentoo."`}},
		{name: "unknown column", method: "PATCH", url: c + "/datasets/" + ds, headers: alice, body: `{"columns":{"wingspan":"x"}}`,
			wantStatus: 400, wantContent: []string{`table penguins has no column \"wingspan\"`, "bill_length_mm"}},
		{name: "description too long", method: "PATCH", url: c + "/datasets/" + ds, headers: alice, body: `{"description":"` + long + `"}`,
			wantStatus: 400, wantContent: []string{"at most 2000"}},
		{name: "empty dataset patch", method: "PATCH", url: c + "/datasets/" + ds, headers: alice, body: `{}`, wantStatus: 400},
		{name: "unknown dataset", method: "PATCH", url: c + "/datasets/nope", headers: alice, body: `{"description":"x"}`, wantStatus: 404},
		{name: "another user's dataset", method: "PATCH", url: c + "/datasets/" + ds, headers: bob, body: `{"description":"x"}`, wantStatus: 404},
		{name: "import", method: "POST", url: c + "/dictionary", headers: aliceYAML, body: "notes: |\n  Fiscal year starts in April.\n  Revenue excludes refunds.\ndatasets:\n  penguins:\n    columns:\n      island: One of three islands.\n      body_mass_g: ''\n",
			wantStatus: 200, wantContent: []string{`"notes":"Fiscal year starts in April.\nRevenue excludes refunds."`, `"description":"One of three islands."`, `"description":"One row per penguin."`},
			notContent: []string{"Body mass in grams."}},
		{name: "import naming unknowns", method: "POST", url: c + "/dictionary", headers: aliceYAML, body: "notes: changed\ndatasets:\n  pengiuns:\n    description: x\n  penguins:\n    columns:\n      beak: x\n",
			wantStatus: 400, wantContent: []string{`unknown table \"pengiuns\" (the tables are penguins)`, `table penguins has no column \"beak\"`}},
		{name: "import bad YAML", method: "POST", url: c + "/dictionary", headers: aliceYAML, body: "datasets:\n  penguins: [1, 2]\n",
			wantStatus: 400, wantContent: []string{"line 2: a list where a mapping is expected", "expected shape"}},
		{name: "import unknown field", method: "POST", url: c + "/dictionary", headers: aliceYAML, body: "tables: {}\n",
			wantStatus: 400, wantContent: []string{`unknown field \"tables\"`}},
		{name: "export", method: "GET", url: c + "/dictionary", headers: alice,
			wantStatus: 200, wantContent: []string{`"notes":"Fiscal year starts in April.\nRevenue excludes refunds."`, `"penguins":{"description":"One row per penguin.","columns":{"island":"One of three islands.","species":"Adelie, Chinstrap or Gentoo."}}`}},
		{name: "export as YAML", method: "GET", url: c + "/dictionary", headers: map[string]string{"X-API-Key": ts.alice, "Accept": "application/yaml"},
			wantStatus: 200, wantContent: []string{"notes: |-\n  Fiscal year starts in April.\n  Revenue excludes refunds.\n", "    island: One of three islands.\n"}},
		{name: "datasets list the descriptions", method: "GET", url: c + "/datasets", headers: alice,
			wantStatus: 200, wantContent: []string{`"description":"One of three islands."`}},
	} {
		ts.run(t, sc)
	}

	// A dictionary file uploaded as multipart field "file".
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "dictionary.yaml")
	io.WriteString(fw, "datasets:\n  penguins:\n    description: From a file.\n")
	mw.Close()
	req, _ := http.NewRequest("POST", ts.URL+c+"/dictionary", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", ts.alice)
	if st, body := doJSON(t, req); st != 200 || !strings.Contains(mustJSON(body), "From a file.") {
		t.Errorf("multipart import: %d %v", st, body)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestDictionaryAndExamplesReachLaterTurns: the notes, the descriptions and
// a verified example reach the prompt of a later turn (as the provider
// receives it), and an example over other columns does not.
func TestDictionaryAndExamplesReachLaterTurns(t *testing.T) {
	const speciesSQL = "SELECT species, count(*) AS n FROM penguins GROUP BY species ORDER BY species"
	const otherSQL = "SELECT count(*) AS n FROM alltypes WHERE bool_col"
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{
		Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user", Contains: "penguins per species"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+speciesSQL+`"}`)}},
			{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{fmt.Sprintf("Adelie %d, Chinstrap %d, Gentoo %d.", testfiles.AdelieCount, testfiles.ChinstrapCount, testfiles.GentooCount)}},
			{Match: &llmtest.Match{LastRole: "user", Contains: "warehouse"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT 1","source":"warehouse"}`)}},
		},
		Default: &llmtest.Turn{Text: []string{"Noted."}},
	})
	conv, ds := cs.penguins(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("How many penguins per species?")
	done := decode[struct {
		MessageID string `json:"message_id"`
	}](t, find(evs, "chat_complete")[0])
	start := decode[struct{ ID string }](t, find(evs, "tool_call_start")[0])

	// Mark the answer's query correct; and write an example over other
	// columns whose question shares the words of the next one.
	st, ex := cs.post(t, "/api/examples", cs.alice, `{"conversation_id":"`+conv+`","message_id":"`+done.MessageID+`","call_id":"`+start.ID+`","verdict":"correct"}`)
	if st != 201 || ex["question"] != "How many penguins per species?" || ex["sql"] != speciesSQL || !strings.Contains(mustJSON(ex["tables"]), `{"name":"body_mass_g","type":"BIGINT"}`) {
		t.Fatalf("mark correct: %d %v", st, ex)
	}
	if _, ok := ex["result"]; ok {
		t.Errorf("an unedited query ran again: %v", ex)
	}
	other := cs.newConversation(t, cs.alice)
	if st, d := cs.upload(t, "/api/conversations/"+other+"/datasets", cs.alice, alltypesParquet(t, t.TempDir()), "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	st, ex2 := cs.post(t, "/api/examples", cs.alice, `{"conversation_id":"`+other+`","question":"How many penguins per species, of all types?","sql":"`+otherSQL+`","verdict":"correct"}`)
	if st != 201 || ex2["result"] == nil {
		t.Fatalf("hand-written example: %d %v", st, ex2)
	}
	// Refusals: a failing edit, a query reading no table, a bad verdict,
	// another user's conversation, an unknown call.
	for _, tc := range []struct {
		key, body, want string
		status          int
	}{
		{cs.alice, `{"conversation_id":"` + conv + `","message_id":"` + done.MessageID + `","call_id":"` + start.ID + `","sql":"SELECT nope FROM penguins","verdict":"correct"}`, "cannot be marked correct", 400},
		{cs.alice, `{"conversation_id":"` + conv + `","question":"one","sql":"SELECT 1","verdict":"correct"}`, "reads none of the conversation's tables", 400},
		{cs.alice, `{"conversation_id":"` + conv + `","question":"q","sql":"SELECT 1","verdict":"maybe"}`, "verdict", 400},
		{cs.bob, `{"conversation_id":"` + conv + `","question":"q","sql":"SELECT 1","verdict":"wrong"}`, "not found", 404},
		{cs.alice, `{"conversation_id":"` + conv + `","message_id":"` + done.MessageID + `","call_id":"nope","verdict":"wrong"}`, "no SQL query", 404},
		{cs.alice, `{"conversation_id":"` + conv + `","sql":"SELECT 1","verdict":"wrong"}`, "question and its sql", 400},
	} {
		if st, body := cs.post(t, "/api/examples", tc.key, tc.body); st != tc.status || !strings.Contains(mustJSON(body), tc.want) {
			t.Errorf("POST /api/examples %s: %d %v, want %d with %q", tc.body, st, body, tc.status, tc.want)
		}
	}

	// A query run in a database source is no example (examples are over the
	// datasets), whatever the verdict.
	evs = c.ask("How many penguins in the warehouse?")
	srcDone := decode[struct {
		MessageID string `json:"message_id"`
	}](t, find(evs, "chat_complete")[0])
	srcCall := decode[struct{ ID string }](t, find(evs, "tool_call_start")[0])
	for _, verdict := range []string{"correct", "wrong"} {
		body := `{"conversation_id":"` + conv + `","message_id":"` + srcDone.MessageID + `","call_id":"` + srcCall.ID + `","verdict":"` + verdict + `"}`
		if st, b := cs.post(t, "/api/examples", cs.alice, body); st != 400 || !strings.Contains(mustJSON(b), "ran in the database warehouse") {
			t.Errorf("marking a database source's query %s: %d %v", verdict, st, b)
		}
	}

	patch := func(url, body string) {
		t.Helper()
		req, _ := http.NewRequest("PATCH", cs.URL+url, strings.NewReader(body))
		req.Header.Set("X-API-Key", cs.alice)
		if st, b := doJSON(t, req); st != 200 {
			t.Fatalf("PATCH %s: %d %v", url, st, b)
		}
	}
	patch("/api/conversations/"+conv, `{"notes":"Count only birds seen after 2008."}`)
	patch("/api/conversations/"+conv+"/datasets/"+ds, `{"description":"Palmer penguins.","columns":{"island":"Where the bird was seen."}}`)

	c.ask("And the penguins per species on Biscoe?")
	reqs := cs.fake.ChatRequests()
	sys := reqs[len(reqs)-1].Messages[0].Text
	for _, want := range []string{
		fmt.Sprintf("Table penguins (from penguins.csv, %d rows): Palmer penguins.", testfiles.PenguinsRows),
		"- island: text — Where the bird was seen.",
		"## Business rules from the user\n", "Count only birds seen after 2008.",
		"## Verified examples (question → SQL)", "Example 1. How many penguins per species?\n```sql\n" + speciesSQL + "\n```",
	} {
		if !strings.Contains(sys, want) {
			t.Errorf("the later turn's system prompt lacks %q:\n%s", want, sys)
		}
	}
	if strings.Contains(sys, otherSQL) || strings.Contains(sys, "Example 2") {
		t.Errorf("an example over other columns reached the prompt:\n%s", sys)
	}
	// The first turn's prompt had none of it.
	if first := reqs[0].Messages[0].Text; strings.Contains(first, "Verified examples") || strings.Contains(first, "Business rules") {
		t.Errorf("the first turn's prompt already had a dictionary or examples:\n%s", first)
	}

	// Listed, and once deleted, gone from the next turn's prompt.
	_, list := cs.getJSON(t, "/api/examples")
	if n := len(list["examples"].([]any)); n != 2 {
		t.Fatalf("GET /api/examples: %d examples, want 2: %v", n, list)
	}
	req, _ := http.NewRequest("DELETE", cs.URL+"/api/examples/"+ex["id"].(string), nil)
	req.Header.Set("X-API-Key", cs.alice)
	if st, b := doJSON(t, req); st != 204 {
		t.Fatalf("DELETE example: %d %v", st, b)
	}
	req, _ = http.NewRequest("DELETE", cs.URL+"/api/examples/"+ex2["id"].(string), nil)
	req.Header.Set("X-API-Key", cs.bob)
	if st, _ := doJSON(t, req); st != 404 {
		t.Errorf("DELETE of another user's example: %d, want 404", st)
	}
	c.ask("Penguins per species once more?")
	reqs = cs.fake.ChatRequests()
	if sys := reqs[len(reqs)-1].Messages[0].Text; strings.Contains(sys, "Verified examples") {
		t.Errorf("a deleted example reached the prompt:\n%s", sys)
	}
}

func TestMCPDescribesDictionary(t *testing.T) {
	ts := newTestServer(t)
	conv, _ := ts.penguins(t, ts.alice)
	notes, desc := "Fiscal year starts in April.", "Palmer penguins."
	err := ts.Store.UpdateDictionary(t.Context(), ts.aliceID, conv, datachat.Dictionary{Notes: &notes,
		Datasets: map[string]datachat.DatasetDictionary{"penguins": {Description: &desc, Columns: map[string]string{"body_mass_g": "In grams."}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, text, isErr := callTool(t, ts.mcpSession(t, ts.alice), "describe_dataset", map[string]any{"conversation_id": conv, "name": "penguins"})
	b := mustJSON(out)
	if isErr || out["description"] != desc || out["notes"] != notes || !strings.Contains(b, `"description":"In grams.","name":"body_mass_g"`) {
		t.Errorf("describe_dataset: %s (%s)", b, text)
	}
}

// TestDictionaryHostile: dictionary files built to exhaust the server —
// aliases, merge keys, nesting, keys, values — are refused at once with
// the limit they hit, and text that is not UTF-8 is refused naming its
// field, in YAML and JSON bodies and in the PATCH requests.
func TestDictionaryHostile(t *testing.T) {
	ts := newTestServer(t)
	conv, ds := ts.penguins(t, ts.alice)
	c := "/api/conversations/" + conv
	yamlH := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/yaml"}
	jsonH := map[string]string{"X-API-Key": ts.alice, "Content-Type": "application/json"}
	for _, sc := range []scenario{
		{name: "billion laughs", body: "notes: x\n" + testfiles.YAMLLaughs(9, 9), wantContent: []string{"through its aliases (*name) and merge keys"}},
		{name: "merge keys", body: testfiles.YAMLMerges(20, 9), wantContent: []string{"through its aliases (*name) and merge keys"}},
		{name: "recursive merge", body: "datasets:\n  penguins: &a\n    <<: [*a, *a]\n", wantContent: []string{"alias *a inside its own anchor"}},
		{name: "nested 40,000 deep", body: testfiles.YAMLDeepFlow(40_000), wantContent: []string{"nests more than 64 levels deep"}},
		{name: "nested 40,000 deep in blocks", body: testfiles.YAMLDeepBlock(40_000), wantContent: []string{"nests more than 64 levels deep"}},
		{name: "a mapping of 10,000 keys", body: testfiles.YAMLManyKeys(10_000), wantContent: []string{"too many keys"}},
		{name: "1 MiB of values", body: testfiles.YAMLDenseList(500_000), wantContent: []string{"more than 100000 values"}},
		{name: "two documents", body: "notes: a\n---\nnotes: b\n", wantContent: []string{"more than one YAML document"}},
		{name: "notes not UTF-8", body: "notes: caf\xe9\n", wantContent: []string{"the notes are not valid UTF-8", "line 1"}},
		{name: "column description not UTF-8", body: "datasets:\n  penguins:\n    columns:\n      island: \"\xff\"\n", wantContent: []string{"the description of penguins.island is not valid UTF-8", "line 4"}},
		{name: "column name not UTF-8", body: "datasets:\n  penguins:\n    columns:\n      isl\xffand: x\n", wantContent: []string{"a column name of penguins is not valid UTF-8", "line 4"}},
		{name: "JSON notes not UTF-8", headers: jsonH, body: "{\"notes\": \"caf\xe9\"}", wantContent: []string{"the notes are not valid UTF-8"}},
		{name: "JSON table description not UTF-8", headers: jsonH, body: "{\"datasets\": {\"penguins\": {\"description\": \"\xc3\"}}}", wantContent: []string{"the description of penguins is not valid UTF-8"}},
		{name: "JSON table name not UTF-8", headers: jsonH, body: "{\"datasets\": {\"pen\xffguins\": {\"description\": \"x\"}}}", wantContent: []string{"a table name is not valid UTF-8"}},
	} {
		sc.method, sc.url, sc.wantStatus = "POST", c+"/dictionary", 400
		if sc.headers == nil {
			sc.headers = yamlH
		}
		sc.wantContent = append(sc.wantContent, `"type":"invalid_request"`)
		ts.run(t, sc)
	}
	for _, sc := range []scenario{
		{name: "PATCH notes not UTF-8", url: c, body: "{\"notes\": \"caf\xe9\"}", wantContent: []string{"the value of notes (line 1) has bytes that are not UTF-8"}},
		{name: "PATCH notes with a lone surrogate", url: c, body: `{"notes": "caf\udce9"}`, wantContent: []string{"the value of notes (line 1)", "escaped surrogate"}},
		{name: "PATCH description not UTF-8", url: c + "/datasets/" + ds, body: "{\"description\": \"\xff\"}", wantContent: []string{"the value of description (line 1)"}},
		{name: "PATCH column description not UTF-8", url: c + "/datasets/" + ds, body: "{\"columns\": {\"island\": \"\xfe\"}}", wantContent: []string{"the value of columns.island (line 1)"}},
		{name: "PATCH column name not UTF-8", url: c + "/datasets/" + ds, body: "{\"columns\": {\"isl\xfeand\": \"x\"}}", wantContent: []string{"a key in columns (line 1)"}},
		{name: "PATCH title not UTF-8", url: c, body: "{\"title\": \"caf\xe9\"}", wantContent: []string{"the value of title (line 1)"}},
	} {
		sc.method, sc.headers, sc.wantStatus = "PATCH", jsonH, 400
		sc.wantContent = append(sc.wantContent, `"type":"invalid_request"`)
		ts.run(t, sc)
	}
	// Nothing of it was stored.
	body := ts.run(t, scenario{name: "unchanged", method: "GET", url: c + "/dictionary", headers: jsonH, wantStatus: 200})
	if strings.Contains(body, "\\ufffd") || strings.Contains(body, "caf") {
		t.Errorf("a refused text was stored: %s", body)
	}
}
