package server

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"datachat/internal/testfiles"
)

// upload posts path as the multipart field "file" and returns status and body.
func (ts *testServer) upload(t *testing.T, url, key, path, field string) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile(field, path[strings.LastIndex(path, "/")+1:])
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(b)
	mw.Close()
	req, _ := http.NewRequest("POST", ts.URL+url, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", key)
	return doJSON(t, req)
}

func (ts *testServer) post(t *testing.T, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	return doJSON(t, req)
}

func doJSON(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	st, b, _ := send(t, req)
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal([]byte(b), &out); err != nil {
			t.Fatalf("body %q: %v", b, err)
		}
	}
	return st, out
}

func (ts *testServer) newConversation(t *testing.T, key string) string {
	t.Helper()
	st, c := ts.post(t, "/api/conversations", key, `{}`)
	if st != 201 {
		t.Fatalf("create conversation: %d %v", st, c)
	}
	return c["id"].(string)
}

// penguinsOracle computes, independently of DuckDB, the number of Adelie
// penguins and their total body mass from the CSV.
func penguinsOracle(t *testing.T) (count int, mass float64) {
	rows, err := csv.NewReader(bytes.NewReader(testfiles.PenguinsCSV())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		if r[0] == "Adelie" {
			count++
			if v, err := strconv.ParseFloat(r[5], 64); err == nil {
				mass += v
			}
		}
	}
	return count, mass
}

// alltypesParquet writes dir/alltypes.parquet with DuckDB: 8 rows of an
// integer id and boolean, integer, floating-point, date, text and
// timestamp columns.
func alltypesParquet(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "alltypes.parquet")
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`COPY (SELECT i::INTEGER AS id, i % 2 = 0 AS bool_col, (i % 2)::TINYINT AS tinyint_col,
		(i % 2)::SMALLINT AS smallint_col, (i % 2)::INTEGER AS int_col, (i % 2 * 10)::BIGINT AS bigint_col,
		(i % 2 * 1.1)::FLOAT AS float_col, (i % 2 * 10.1)::DOUBLE AS double_col, DATE '2009-03-01' + i::INTEGER AS date_col,
		(i % 2)::VARCHAR AS string_col, TIMESTAMP '2009-03-01 00:00:00' + INTERVAL (i) MINUTE AS timestamp_col
		FROM range(8) t(i)) TO '` + strings.ReplaceAll(path, "'", "''") + `' (FORMAT parquet)`)
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}

func TestDatasetUploadAndSQL(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	base := "/api/conversations/" + conv

	dir := t.TempDir()
	penguins := testfiles.Penguins(t, dir)
	st, d := ts.upload(t, base+"/datasets", ts.alice, penguins, "file")
	if st != 201 {
		t.Fatalf("upload csv: %d %v", st, d)
	}
	if d["name"] != "penguins" || d["source"] != "penguins.csv" || d["row_count"] != float64(344) {
		t.Errorf("csv dataset: got %v", d)
	}
	cols := d["columns"].([]any)
	if len(cols) != 7 || cols[0].(map[string]any)["name"] != "species" || cols[0].(map[string]any)["type"] != "text" {
		t.Errorf("csv columns: got %v", cols)
	}
	alltypes := alltypesParquet(t, dir)
	st, p := ts.upload(t, base+"/datasets", ts.alice, alltypes, "file")
	if st != 201 || p["name"] != "alltypes" || p["row_count"] != float64(8) {
		t.Fatalf("upload parquet: %d %v", st, p)
	}
	var types []string
	for _, c := range p["columns"].([]any) {
		types = append(types, fmt.Sprint(c.(map[string]any)["type"]))
	}
	if got, want := strings.Join(types, " "), "integer boolean integer integer integer integer float float date text timestamp"; got != want {
		t.Errorf("parquet column types: got %s, want %s", got, want)
	}
	// The same file again gets a new table name.
	st, again := ts.upload(t, base+"/datasets", ts.alice, alltypes, "file")
	if st != 201 || again["name"] != "alltypes_2" {
		t.Errorf("second upload: %d %v, want name alltypes_2", st, again)
	}

	wantCount, wantMass := penguinsOracle(t)
	st, res := ts.post(t, base+"/sql", ts.alice, `{"query":"SELECT count(*) AS n, sum(body_mass_g) AS mass FROM penguins WHERE species = 'Adelie'"}`)
	if st != 200 {
		t.Fatalf("sql: %d %v", st, res)
	}
	row := res["rows"].([]any)[0].([]any)
	if fmt.Sprint(row[0]) != fmt.Sprint(wantCount) || toFloat(row[1]) != wantMass {
		t.Errorf("sql: got %v, want [%d %v]", row, wantCount, wantMass)
	}
	if res["row_count"] != float64(1) || res["truncated"] != false {
		t.Errorf("sql shape: got %v", res)
	}

	st, res = ts.post(t, base+"/sql", ts.alice, `{"query":"SELECT count(*) FROM alltypes JOIN alltypes_2 USING (id)"}`)
	if st != 200 || fmt.Sprint(res["rows"].([]any)[0].([]any)[0]) != "8" {
		t.Errorf("join: %d %v", st, res)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"unknown column", `{"query":"SELECT prcie FROM penguins"}`, "column"},
		{"syntax", `{"query":"SELEC 1"}`, "syntax"},
		{"file read", `{"query":"SELECT * FROM read_csv('/etc/passwd')"}`, ""},
		{"empty", `{"query":"  "}`, "query"},
	} {
		st, res := ts.post(t, base+"/sql", ts.alice, tc.body)
		msg := fmt.Sprint(res["error"])
		if st != 400 || !strings.Contains(strings.ToLower(msg), tc.want) {
			t.Errorf("%s: got %d %s, want 400 mentioning %q", tc.name, st, msg, tc.want)
		}
	}

	// Bob sees none of it.
	if st, _ := ts.post(t, base+"/sql", ts.bob, `{"query":"SELECT 1"}`); st != 404 {
		t.Errorf("bob's sql on alice's conversation: got %d, want 404", st)
	}
	if st, _ := ts.upload(t, base+"/datasets", ts.bob, penguins, "file"); st != 404 {
		t.Errorf("bob's upload: got %d, want 404", st)
	}

	// Another conversation of alice's cannot see these tables.
	other := ts.newConversation(t, ts.alice)
	if st, _ := ts.post(t, "/api/conversations/"+other+"/sql", ts.alice, `{"query":"SELECT count(*) FROM penguins"}`); st != 400 {
		t.Errorf("other conversation: got %d, want 400 (no such table)", st)
	}

	// Delete a dataset: the table is gone.
	req, _ := http.NewRequest("DELETE", ts.URL+base+"/datasets/"+p["id"].(string), nil)
	req.Header.Set("X-API-Key", ts.alice)
	if st, _ := doJSON(t, req); st != 204 {
		t.Errorf("delete dataset: got %d", st)
	}
	if st, _ := ts.post(t, base+"/sql", ts.alice, `{"query":"SELECT * FROM alltypes"}`); st != 400 {
		t.Errorf("query deleted table: got %d, want 400", st)
	}
	req, _ = http.NewRequest("GET", ts.URL+base+"/datasets", nil)
	req.Header.Set("X-API-Key", ts.alice)
	if st, list := doJSON(t, req); st != 200 || len(list["datasets"].([]any)) != 2 {
		t.Errorf("list: %d %v", st, list)
	}
}

func toFloat(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return -1
}

func TestDatasetUploadRefusals(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	base := "/api/conversations/" + conv
	bad := t.TempDir() + "/notes.csv"
	os.WriteFile(bad, []byte{0x00, 0x01, 0x02, 0xff, 0xfe, 0x00, 0x00}, 0o600)
	if st, res := ts.upload(t, base+"/datasets", ts.alice, bad, "file"); st != 400 || !strings.Contains(fmt.Sprint(res), "notes.csv") {
		t.Errorf("binary junk: got %d %v, want 400 naming the file", st, res)
	}
	penguins := testfiles.Penguins(t, t.TempDir())
	if st, _ := ts.upload(t, base+"/datasets", ts.alice, penguins, "upload"); st != 400 {
		t.Errorf("wrong field: got %d, want 400", st)
	}
	if st, _ := ts.post(t, base+"/datasets", ts.alice, `{"url":"file:///etc/passwd"}`); st != 400 {
		t.Errorf("file URL: got %d, want 400", st)
	}
	if st, _ := ts.post(t, base+"/datasets", ts.alice, `{}`); st != 400 {
		t.Errorf("no url: got %d, want 400", st)
	}
	ts.cfg.MaxDatasetBytes = 1000
	if st, res := ts.upload(t, base+"/datasets", ts.alice, penguins, "file"); st != 400 {
		t.Errorf("too large: got %d %v, want 400", st, res)
	}
}

func TestDatasetFromURL(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	base := "/api/conversations/" + conv
	csvBytes := testfiles.PenguinsCSV()
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/data/penguins.csv":
			w.Write(csvBytes)
		case "/redirect":
			// 127.0.0.2 is loopback too, but outside the allowed 127.0.0.1/32.
			http.Redirect(w, r, strings.Replace("http://"+r.Host, "127.0.0.1", "127.0.0.2", 1)+"/data/penguins.csv", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer files.Close()

	st, d := ts.post(t, base+"/datasets", ts.alice, `{"url":"`+files.URL+`/data/penguins.csv","name":"Birds"}`)
	if st != 201 || d["name"] != "birds" || d["row_count"] != float64(344) {
		t.Fatalf("url dataset: %d %v", st, d)
	}
	if st, res := ts.post(t, base+"/datasets", ts.alice, `{"url":"`+files.URL+`/redirect"}`); st != 400 || !strings.Contains(fmt.Sprint(res), "127.0.0.2") {
		t.Errorf("redirect to 127.0.0.2: got %d %v, want 400 naming the address", st, res)
	}
	if st, _ := ts.post(t, base+"/datasets", ts.alice, `{"url":"`+files.URL+`/missing.csv"}`); st != 400 {
		t.Errorf("404 URL: got %d, want 400", st)
	}
}

func mustRequest(t *testing.T, method, url, key string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	return req
}
