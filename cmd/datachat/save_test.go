package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"datachat/internal/dbsource/dbsourcetest"
	"datachat/internal/llmtest"
	"datachat/internal/testlog"
)

// TestSaveAsJoin drives execute_sql's save_as end to end, on a real
// PostgreSQL and a real MariaDB holding ../shared's penguins.csv: in one
// answer the model saves a query on the source as a table of the
// conversation and joins it with an uploaded CSV; the saved table is listed
// with the datasets, from the database and when; a save the database
// estimates past DATACHAT_SAVE_AS_MAX_ROWS (a cross join) waits for the user
// and, approved, saves that many rows; after a restart the saved tables are still there
// and queried.
func TestSaveAsJoin(t *testing.T) {
	onEachSourceServer(t, testSaveAsJoin)
}

// islandsCSV is the upload: each island's area (made up) and a row whose
// name is SQL.
const islandsCSV = "island,area_km2\nBiscoe,10\nDream,4\nTorgersen,2\n\"'); DROP TABLE penguins; --\",1\n"

func testSaveAsJoin(t *testing.T, src *sourceServer) {
	// What the join must say: penguins per island from the CSV, per km².
	p := dbsourcetest.Read(t, "penguins")
	island := p.Col(t, "island")
	counts := map[string]int{}
	for _, r := range p.Rows {
		counts[*r[island]]++
	}
	area := map[string]int{"Biscoe": 10, "Dream": 4, "Torgersen": 2}
	var names []string
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var want []string
	for _, n := range names {
		want = append(want, fmt.Sprintf("%s | %d | %d", n, counts[n], counts[n]/area[n]))
	}

	const (
		countSQL = "SELECT island, count(*) AS n FROM penguins GROUP BY island"
		joinSQL  = "SELECT c.island, c.n, c.n // i.area_km2 AS per_km2 FROM island_counts c JOIN islands i USING (island) ORDER BY c.island"
		allSQL   = "SELECT a.species, a.island, b.sex FROM penguins a CROSS JOIN penguins b"
	)
	script := llmtest.Script{
		Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user", Contains: "per km²"}, ToolCalls: []llmtest.ToolCall{
				llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q, "source": "warehouse", "save_as": "island_counts"}`, countSQL))}},
			{Match: &llmtest.Match{LastRole: "tool", Contains: "Saved 3 rows"}, ToolCalls: []llmtest.ToolCall{
				llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q}`, joinSQL))}},
			{Match: &llmtest.Match{LastRole: "user", Contains: "every penguin"}, ToolCalls: []llmtest.ToolCall{
				llmtest.Call("execute_sql", fmt.Sprintf(`{"query": %q, "source": "warehouse", "save_as": "all penguins; DROP TABLE islands"}`, allSQL))}},
		},
		Default: &llmtest.Turn{ReplyFunc: func(r *llmtest.Request) string {
			return "Result: " + strings.Join(strings.Fields(r.Last().Text), " ")
		}},
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, script)
	env := testEnv(t, map[string]string{
		"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL, "DATACHAT_SAVE_AS_MAX_ROWS": "1000",
	})
	if out, err := runMainOut(t, env, "sources", "add", "warehouse", "--url", src.reader, "--tables", strings.Join(dbsourcetest.Tables(t, sourceCSVs), ","), "--users", "alice"); err != nil {
		t.Fatalf("sources add: %v\n%s", err, out)
	}
	m, err := serveLogged(t, env, &testlog.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	keyOut, _ := runMainOut(t, env, "keys", "create", "--user", "alice")
	key := strings.TrimSpace(firstLine(keyOut))
	base := "http://" + m.Addr()
	call := func(method, path, body string) (int, string) {
		t.Helper()
		st, b, _ := apiCall(t, method, base+path, key, body)
		return st, b
	}
	_, conv := call("POST", "/api/conversations", `{"title":"islands"}`)
	id := jsonField(t, conv, "id")
	csvPath := filepath.Join(t.TempDir(), "islands.csv")
	if err := os.WriteFile(csvPath, []byte(islandsCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, body := upload(t, base, key, id, csvPath); st != 201 {
		t.Fatalf("upload: %d %v", st, body)
	}
	if st, body := call("POST", "/api/conversations/"+id+"/sources", `{"name":"warehouse"}`); st != 201 {
		t.Fatalf("attach: %d %s", st, body)
	}

	// One answer: save the source's counts, join them with the upload.
	ws := dialWS(t, base, key, id)
	ws.send("chat_send", map[string]string{"content": "How many penguins per km² on each island?"})
	evs := ws.until(60*time.Second, "chat_complete")
	answer := tokensText(evs)
	for _, w := range want {
		if !strings.Contains(answer, w) {
			t.Errorf("the answer %q lacks %q", answer, w)
		}
	}
	if strings.Contains(answer, "DROP") {
		t.Errorf("the answer holds the CSV's hostile row, which no island of the source matches: %q", answer)
	}

	saved := func(name string) map[string]any {
		t.Helper()
		_, body := call("GET", "/api/conversations/"+id+"/datasets", "")
		var list struct {
			Datasets []map[string]any `json:"datasets"`
		}
		json.Unmarshal([]byte(body), &list)
		for _, d := range list.Datasets {
			if d["name"] == name {
				return d
			}
		}
		t.Fatalf("no dataset %s among %s", name, body)
		return nil
	}
	d := saved("island_counts")
	if s, _ := d["source"].(string); !strings.HasPrefix(s, "database warehouse, saved 20") || d["format"] != "database" || d["row_count"] != 3.0 {
		t.Errorf("the saved table as the data panel lists it: %v", d)
	}

	// Past the cap (MariaDB's estimate of the GROUP BY above is the rows it
	// scans, 344: under it): the user is asked, with the estimate; approved,
	// the first 1000 rows are saved, under a name made of the hostile one.
	ws.send("chat_send", map[string]string{"content": "Save every penguin"})
	evs = ws.until(60*time.Second, "confirmation_required", "chat_complete")
	last := evs[len(evs)-1]
	if last.Type != "confirmation_required" {
		t.Fatalf("a save of %d rows over a cap of 1000: %v, want a confirmation", len(p.Rows)*len(p.Rows), evs)
	}
	var c struct {
		ID          string         `json:"id"`
		Parameters  map[string]any `json:"parameters"`
		Explanation string         `json:"explanation"`
	}
	json.Unmarshal(last.Data, &c)
	if est, _ := c.Parameters["estimated_rows"].(float64); est <= 1000 || c.Parameters["max_rows"] != 1000.0 || !strings.Contains(c.Explanation, "only the first 1000") {
		t.Errorf("confirmation %+v", c)
	}
	ws.send("confirm_action", map[string]any{"id": c.ID, "approved": true})
	evs = ws.until(60*time.Second, "chat_complete")
	if a := tokensText(evs); !strings.Contains(a, "Saved 1000 rows") || !strings.Contains(a, "only the first 1000 rows") {
		t.Errorf("after approval: %q", a)
	}
	if d := saved("all_penguins_drop_table_islands"); d["row_count"] != 1000.0 {
		t.Errorf("the capped table: %v", d)
	}

	// A restart: the saved tables are still there, and join.
	m.Close()
	m2, err := serveLogged(t, env, &testlog.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	base = "http://" + m2.Addr()
	saved("island_counts")
	st, body := call("POST", "/api/conversations/"+id+"/sql", `{"query":"SELECT count(*) AS n FROM island_counts JOIN islands USING (island) JOIN all_penguins_drop_table_islands USING (island)"}`)
	if st != 200 || !strings.Contains(body, `"rows":[[1000]]`) {
		t.Errorf("a join of the saved tables after a restart: %d %s", st, body)
	}
}
