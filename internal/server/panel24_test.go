package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/extract"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

// getAs sends a GET with alice's (or another) key and returns status, body and headers.
func (ts *testServer) getAs(t *testing.T, url, key string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+url, nil)
	req.Header.Set("X-API-Key", key)
	return send(t, req)
}

// TestFormatsListsWhatUploadsTake: GET /api/formats lists the dataset and
// document formats, and a file of every format listed, under each of its
// extensions (and compressed, for datasets), is taken by the upload it is
// listed for — the page builds its drop zones and file picker from this
// list, so a format listed must be one the server reads, and Excel and JSON
// must be there.
func TestFormatsListsWhatUploadsTake(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.getAs(t, "/api/formats", ts.alice)
	if status != 200 {
		t.Fatalf("GET /api/formats: %d %s", status, body)
	}
	var got formatsView
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	var dsExts, docExts []string
	for _, f := range got.Datasets.Formats {
		dsExts = append(dsExts, f.Extensions...)
	}
	for _, f := range got.Documents.Formats {
		docExts = append(docExts, f.Extensions...)
	}
	for _, e := range []string{".csv", ".tsv", ".parquet", ".xlsx", ".json", ".ndjson", ".jsonl"} {
		if !slices.Contains(dsExts, e) {
			t.Errorf("dataset formats %v lack %s", dsExts, e)
		}
	}
	for _, e := range []string{".pdf", ".docx", ".md", ".html", ".txt"} {
		if !slices.Contains(docExts, e) {
			t.Errorf("document formats %v lack %s", docExts, e)
		}
	}
	if !slices.Contains(got.Datasets.Compression, ".gz") {
		t.Errorf("compression %v lacks .gz", got.Datasets.Compression)
	}
	if status, _, _ := ts.getAs(t, "/api/formats", "not-a-key"); status != 401 {
		t.Errorf("GET /api/formats without a key: %d, want 401", status)
	}

	conv := ts.conversationOf(t, ts.aliceID)
	dir := t.TempDir()
	csv := "species,n\nAdelie,152\nGentoo,124\n"
	// A Parquet file: the one the server stored for a CSV.
	code, res := ts.upload(t, "/api/conversations/"+conv+"/datasets", ts.alice, testfiles.Write(t, dir, "seed.csv", []byte(csv)), "file")
	if code != 201 {
		t.Fatalf("seed upload: %d %v", code, res)
	}
	stored, err := ts.Store.Datasets(t.Context(), conv)
	if err != nil || len(stored) != 1 {
		t.Fatalf("Datasets: %v %v", stored, err)
	}
	parquet, err := os.ReadFile(filepath.Join(ts.Workspace.Loader.Dir(), stored[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string][]byte{
		"CSV":     []byte(csv),
		"TSV":     []byte("species\tn\nAdelie\t152\n"),
		"Parquet": parquet,
		"Excel":   testfiles.ZooWorkbook(),
		"JSON":    []byte(`[{"species":"Adelie","n":152},{"species":"Gentoo","n":124}]`),
		"NDJSON":  []byte("{\"species\":\"Adelie\",\"n\":152}\n{\"species\":\"Gentoo\",\"n\":124}\n"),
	}
	tables := map[string]int{"Excel": 3} // one table per sheet
	// The same files by link, as pasted in the data panel's URL field.
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for name, data := range samples {
			if strings.HasPrefix(r.URL.Path, "/"+name+".") {
				w.Write(data)
				return
			}
		}
		http.NotFound(w, r)
	}))
	defer files.Close()
	for _, f := range got.Datasets.Formats {
		data, ok := samples[f.Name]
		if !ok {
			t.Errorf("dataset format %s is listed but this test has no sample of it: add one", f.Name)
			continue
		}
		for _, ext := range f.Extensions {
			for _, comp := range []string{"", ".gz"} {
				b := data
				if comp == ".gz" {
					var buf bytes.Buffer
					zw := gzip.NewWriter(&buf)
					zw.Write(data)
					zw.Close()
					b = buf.Bytes()
				}
				name := "sample" + ext + comp
				code, res := ts.upload(t, "/api/conversations/"+conv+"/datasets", ts.alice, testfiles.Write(t, t.TempDir(), name, b), "file")
				if code != 201 {
					t.Errorf("%s (%s): upload answered %d %v", name, f.Name, code, res)
					continue
				}
				want := max(tables[f.Name], 1)
				if list, _ := res["datasets"].([]any); len(list) != want {
					t.Errorf("%s: the upload answered %d tables, want %d: %v", name, len(list), want, res)
				}
			}
			link := files.URL + "/" + f.Name + ext
			code, res := ts.post(t, "/api/conversations/"+conv+"/datasets", ts.alice, `{"url":"`+link+`"}`)
			if list, _ := res["datasets"].([]any); code != 201 || len(list) != max(tables[f.Name], 1) {
				t.Errorf("%s by link: %d %v", link, code, res)
			}
		}
	}
	docs := map[string][]byte{
		"PDF":         testfiles.GuidePDF(),
		"Word (DOCX)": testfiles.TripDOCX(),
		"Markdown":    testfiles.HistoryMarkdown(),
		"HTML":        testfiles.BlogHTML(),
		"text":        []byte("Penguins of the Antarctic: Adelie, Gentoo and Chinstrap.\n"),
	}
	for _, f := range got.Documents.Formats {
		data, ok := docs[f.Name]
		if !ok {
			t.Errorf("document format %s is listed but this test has no sample of it: add one", f.Name)
			continue
		}
		for _, ext := range f.Extensions {
			name := "doc" + ext
			code, res := ts.upload(t, "/api/conversations/"+conv+"/documents", ts.alice, testfiles.Write(t, t.TempDir(), name, data), "file")
			if code != 201 {
				t.Errorf("%s (%s): upload answered %d %v", name, f.Name, code, res)
			}
			if !extract.IsDocumentName(name) || datachat.IsDatasetName(name) {
				t.Errorf("%s: IsDocumentName %v, IsDatasetName %v", name, extract.IsDocumentName(name), datachat.IsDatasetName(name))
			}
		}
	}
}

// TestSearchConversationsEndpoint: GET /api/search finds the user's own
// conversations by title and message text, with a snippet, and refuses a
// search too long to be one.
func TestSearchConversationsEndpoint(t *testing.T) {
	ts := newTestServer(t)
	ctx := t.Context()
	mine := &datachat.Conversation{UserID: ts.aliceID, Title: "Zoo budget"}
	other := &datachat.Conversation{UserID: ts.aliceID, Title: "New conversation"}
	for _, c := range []*datachat.Conversation{mine, other} {
		if err := ts.Store.CreateConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Store.CreateMessage(ctx, &datachat.Message{ConversationID: other.ID, Role: datachat.RoleUser,
		Content: "How much do the otters eat each week?", Status: datachat.StatusComplete}); err != nil {
		t.Fatal(err)
	}
	status, body, _ := ts.getAs(t, "/api/search?q=OTTERS", ts.alice)
	if status != 200 || !strings.Contains(body, other.ID) || strings.Contains(body, mine.ID) || !strings.Contains(body, `"snippet":"How much do the otters eat each week?"`) {
		t.Errorf("search otters: %d %s", status, body)
	}
	status, body, _ = ts.getAs(t, "/api/search?q=budget", ts.alice)
	if status != 200 || !strings.Contains(body, mine.ID) || strings.Contains(body, other.ID) {
		t.Errorf("search budget: %d %s", status, body)
	}
	status, body, _ = ts.getAs(t, "/api/search?q=budget", ts.bob)
	if status != 200 || body != "{\"conversations\":[]}\n" {
		t.Errorf("bob's search: %d %s, want an empty list", status, body)
	}
	status, body, _ = ts.getAs(t, "/api/search?q="+strings.Repeat("x", datachat.MaxSearchQuery+1), ts.alice)
	if status != 400 || !strings.Contains(body, "at most 200") {
		t.Errorf("a long search: %d %s, want 400 saying the limit", status, body)
	}
}

// TestExportMarkdown: a conversation downloads as Markdown with its
// questions, the answer's text, the SQL it ran and the result as a table.
func TestExportMarkdown(t *testing.T) {
	ts := newTestServer(t)
	ctx := t.Context()
	c := &datachat.Conversation{UserID: ts.aliceID, Title: "Penguins / by species?"}
	if err := ts.Store.CreateConversation(ctx, c); err != nil {
		t.Fatal(err)
	}
	q := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleUser, Content: "How many penguins per species?", Status: datachat.StatusComplete}
	if err := ts.Store.CreateMessage(ctx, q); err != nil {
		t.Fatal(err)
	}
	a := &datachat.Message{ConversationID: c.ID, Role: datachat.RoleAssistant, Status: datachat.StatusStreaming}
	if err := ts.Store.CreateMessage(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Status = datachat.StatusComplete
	a.Content = "Counting them.There are **152** Adelie penguins [2]."
	a.Parts = []datachat.Part{{Type: datachat.PartText, Text: "Counting them."}, {Type: datachat.PartToolCall, CallID: "call_1"}, {Type: datachat.PartText, Text: "There are **152** Adelie penguins [2]."}}
	a.Sources = []datachat.Source{{ID: "s1", Text: "uncited", Metadata: map[string]any{"document": "other.pdf"}},
		{ID: "s2", Text: "Adelie counts", Metadata: map[string]any{"document": "census.pdf", "page": 4}}}
	a.ToolCalls = []datachat.ToolCall{{CallID: "call_1", Tool: "execute_sql", Args: json.RawMessage(`{"query":"SELECT species, count(*) AS n\nFROM penguins GROUP BY 1"}`),
		OK: true, Result: "species | n\nAdelie | 152\nGentoo | 124\n(2 rows)", StartedAt: time.Now()}}
	if err := ts.Store.FinishMessage(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	tc := a.ToolCalls[0]
	tc.MessageID = a.ID
	if err := ts.Store.CreateToolCall(ctx, &tc); err != nil {
		t.Fatal(err)
	}
	status, body, h := ts.getAs(t, "/api/conversations/"+c.ID+"/export.md", ts.alice)
	if status != 200 {
		t.Fatalf("export: %d %s", status, body)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/markdown") {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := h.Get("Content-Disposition"); cd != `attachment; filename="penguins-by-species.md"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	for _, want := range []string{
		"# Penguins / by species?\n",
		"## You\n\nHow many penguins per species?\n",
		"## datachat\n\nCounting them.\n\n```sql\nSELECT species, count(*) AS n\nFROM penguins GROUP BY 1\n```\n\n| species | n |\n| --- | --- |\n| Adelie | 152 |\n| Gentoo | 124 |\n\n(2 rows)\n\nThere are **152** Adelie penguins [2].\n\nSources:\n\n2. census.pdf, page 4\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the export lacks %q:\n%s", want, body)
		}
	}
	if status, _, _ := ts.getAs(t, "/api/conversations/"+c.ID+"/export.md", ts.bob); status != 404 {
		t.Errorf("bob exporting alice's conversation: %d, want 404", status)
	}
}

// TestFormatsSayQuestionLimit: GET /api/formats says the chat's limit on a
// question's length, so the page counts characters before sending one.
func TestFormatsSayQuestionLimit(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{}, func(r *chat.Runner) { r.MaxQueryChars = 1234 })
	status, body, _ := cs.getAs(t, "/api/formats", cs.alice)
	if status != 200 || !strings.Contains(body, `"question":{"max_chars":1234}`) {
		t.Errorf("GET /api/formats: %d %s, want the question limit 1234", status, body)
	}
}
