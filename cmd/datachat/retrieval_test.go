package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"datachat/internal/chroma"
	"datachat/internal/chroma/chromatest"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
	"datachat/internal/testnet"
)

// The question and the page of testfiles' DMCA summary that answers it.
const (
	dmcaQuestion = testfiles.DMCAQuestion
	dmcaPage     = testfiles.DMCAAnswerPage
)

// TestPostgresRetrievalAcrossProcesses runs two `serve` processes with
// DATACHAT_RETRIEVAL=postgres on one database but separate data
// directories: a document uploaded through one is searched, cited in a chat
// turn and deleted through the other, so the index lives in PostgreSQL alone.
func TestPostgresRetrievalAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	dbURL := postgresSchemaURL(t)
	var mu sync.Mutex
	var system string
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{
		ReplyFunc: func(r *llmtest.Request) string {
			mu.Lock()
			system = r.Messages[0].Text
			mu.Unlock()
			return "Title V protects vessel hull designs [1]."
		},
	}})
	vars := map[string]string{
		"DATACHAT_DATABASE_URL": dbURL,
		"DATACHAT_RETRIEVAL":    "postgres",
		"LLM_PROVIDER":          "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	}
	varsA, varsB := clone(vars), clone(vars)
	varsA["DATACHAT_DATA_DIR"] = t.TempDir()
	varsB["DATACHAT_DATA_DIR"] = t.TempDir()
	a, key := startFirstProc(t, varsA)
	b := startProc(t, varsB)
	conv := newConversation(t, a.URL(), key)

	st, doc := uploadDocument(t, a.URL(), key, conv, testfiles.DMCA(t, t.TempDir()))
	if st != 201 || doc["name"] != "dmca.pdf" || doc["pages"] != float64(testfiles.DMCAPages) {
		t.Fatalf("upload through A: HTTP %d %v", st, doc)
	}
	docID, _ := doc["id"].(string)

	res := searchDocs(t, b.URL(), key, conv, dmcaQuestion)
	if !citesPage(res, "dmca.pdf", dmcaPage) {
		t.Errorf("search through B: want dmca.pdf page %d among %s", dmcaPage, describe(res))
	}
	if len(res) > 0 && (res[0].Score <= 0 || res[0].Metadata["document_id"] != docID) {
		t.Errorf("search through B: first source %+v", res[0])
	}

	st, body := do(t, "POST", b.URL()+"/chat/query", key, fmt.Sprintf(`{"query":%q,"conversation_id":%q}`, dmcaQuestion, conv))
	if st != 200 {
		t.Fatalf("/chat/query through B: HTTP %d %v", st, body)
	}
	mu.Lock()
	prompt := system
	mu.Unlock()
	if want := fmt.Sprintf("dmca.pdf, page %d", dmcaPage); !strings.Contains(prompt, want) || !strings.Contains(prompt, "vessel hull") {
		t.Errorf("B's system prompt lacks the excerpt %q:\n%.3000s", want, prompt)
	}
	if srcs, _ := body["sources"].([]any); len(srcs) == 0 {
		t.Errorf("/chat/query sources: %v", body["sources"])
	}

	// Deleted through B, gone for A.
	if st, body := do(t, "DELETE", b.URL()+"/api/conversations/"+conv+"/documents/"+docID, key, ""); st != 204 {
		t.Fatalf("delete through B: HTTP %d %v", st, body)
	}
	if res := searchDocs(t, a.URL(), key, conv, dmcaQuestion); len(res) != 0 {
		t.Errorf("search through A after the delete: %s", describe(res))
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type source struct {
	ID       string         `json:"id"`
	Text     string         `json:"text"`
	Score    float64        `json:"score"`
	Distance *float64       `json:"distance"`
	Metadata map[string]any `json:"metadata"`
}

// searchDocs asks /search for the top 5 chunks.
func searchDocs(t *testing.T, base, key, conv, q string) []source {
	t.Helper()
	st, b, _ := apiCall(t, "POST", base+"/api/conversations/"+conv+"/search", key, fmt.Sprintf(`{"query":%q,"top_k":5}`, q))
	var out struct {
		Results []source `json:"results"`
	}
	if st != 200 || json.Unmarshal([]byte(b), &out) != nil {
		t.Fatalf("search: HTTP %d %s", st, b)
	}
	return out.Results
}

func citesPage(srcs []source, doc string, page int) bool {
	return slices.ContainsFunc(srcs, func(s source) bool {
		return s.Metadata["document"] == doc && s.Metadata["page"] == float64(page)
	})
}

func describe(srcs []source) string {
	var parts []string
	for _, s := range srcs {
		parts = append(parts, fmt.Sprintf("%v p.%v (%.3g)", s.Metadata["document"], s.Metadata["page"], s.Score))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TestIndexRebuiltFromStore loses the embedded index file between two runs:
// the documents the store lists are indexed again from its chunks on the
// first search, so none is listed yet unfindable.
func TestIndexRebuiltFromStore(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	dir := t.TempDir()
	vars := map[string]string{"DATACHAT_DATA_DIR": dir}
	a := startProc(t, vars)
	key := a.Key
	conv := newConversation(t, a.URL(), key)
	if st, doc := uploadDocument(t, a.URL(), key, conv, testfiles.DMCA(t, t.TempDir())); st != 201 {
		t.Fatalf("upload: HTTP %d %v", st, doc)
	}
	if res := searchDocs(t, a.URL(), key, conv, dmcaQuestion); !citesPage(res, "dmca.pdf", dmcaPage) {
		t.Fatalf("search before: %s", describe(res))
	}
	a.Signal(syscall.SIGTERM)
	if err := a.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dir, "index.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	b := startProc(t, vars)
	if res := searchDocs(t, b.URL(), key, conv, dmcaQuestion); !citesPage(res, "dmca.pdf", dmcaPage) {
		t.Errorf("search after losing the index: %s", describe(res))
	}
	// The line is written before the search answers, but reaches the test
	// through the pipe of serve's stderr on its own time: wait for it.
	b.waitLog("document re-indexed from the store", 30*time.Second)
}

// TestChromaRetrieval runs `serve` with DATACHAT_RETRIEVAL=chroma against a
// real Chroma server, embeddings from the OpenAI fake: a PDF is
// uploaded, searched and cited by page, and deleted; a conversation's
// deletion drops its collection.
func TestChromaRetrieval(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	srv := chromatest.Start(t)
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{
		EmbeddingDim: 256,
		Default:      &llmtest.Turn{Text: []string{"Title V [1]."}},
	})
	vars := map[string]string{
		"DATACHAT_DATA_DIR":  t.TempDir(),
		"DATACHAT_RETRIEVAL": "chroma", "CHROMA_URL": srv.URL,
		"LLM_PROVIDER": "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
		"EMBEDDING_PROVIDER": "openai",
	}
	p := startProc(t, vars)
	key := p.Key
	conv := newConversation(t, p.URL(), key)
	dmca := testfiles.DMCA(t, t.TempDir())
	st, doc := uploadDocument(t, p.URL(), key, conv, dmca)
	if st != 201 || doc["pages"] != float64(testfiles.DMCAPages) {
		t.Fatalf("upload: HTTP %d %v", st, doc)
	}
	docID, _ := doc["id"].(string)
	res := searchDocs(t, p.URL(), key, conv, dmcaQuestion)
	if !citesPage(res, "dmca.pdf", dmcaPage) {
		t.Errorf("search: want dmca.pdf page %d among %s", dmcaPage, describe(res))
	}
	for _, s := range res {
		if s.Distance == nil || *s.Distance < 0 || *s.Distance > 2 || s.Metadata["document_id"] != docID {
			t.Errorf("source %s: distance %v, metadata %v", s.ID, s.Distance, s.Metadata)
		}
	}
	st, body := do(t, "POST", p.URL()+"/chat/query", key, fmt.Sprintf(`{"query":%q,"conversation_id":%q}`, dmcaQuestion, conv))
	if srcs, _ := body["sources"].([]any); st != 200 || len(srcs) == 0 {
		t.Errorf("/chat/query: HTTP %d %v", st, body)
	}
	if u, _ := body["usage"].(map[string]any); u == nil || !(u["embedding_ms"].(float64) > 0) {
		t.Errorf("/chat/query usage: %v", body["usage"])
	}
	if st, body := do(t, "DELETE", p.URL()+"/api/conversations/"+conv+"/documents/"+docID, key, ""); st != 204 {
		t.Fatalf("delete: HTTP %d %v", st, body)
	}
	if res := searchDocs(t, p.URL(), key, conv, dmcaQuestion); len(res) != 0 {
		t.Errorf("search after the delete: %s", describe(res))
	}

	// Deleting the conversation drops its collection in Chroma.
	if st, _ := uploadDocument(t, p.URL(), key, conv, dmca); st != 201 {
		t.Fatalf("second upload: HTTP %d", st)
	}
	coll := srv.URL + "/api/v2/tenants/default_tenant/databases/default_database/collections/" + chroma.CollectionName(conv)
	if resp, err := http.Get(coll); err != nil || resp.StatusCode != 200 {
		t.Fatalf("collection before the delete: %v %v", resp, err)
	}
	if st, body := do(t, "DELETE", p.URL()+"/api/conversations/"+conv, key, ""); st != 204 {
		t.Fatalf("delete conversation: HTTP %d %v", st, body)
	}
	if resp, err := http.Get(coll); err != nil || resp.StatusCode != 404 {
		t.Errorf("collection after the delete: %v %v, want 404", resp, err)
	}
}

// TestChromaUnreachable: a wrong CHROMA_URL stops `serve` at start with a
// message naming it; so does chroma without an embedding model.
func TestChromaUnreachable(t *testing.T) {
	addr := testnet.ClosedAddr(t)
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"CHROMA_URL": "http://user:secret@" + addr, "EMBEDDING_PROVIDER": "openai", "OPENAI_API_KEY": "k"},
			[]string{"CHROMA_URL", addr}},
		{map[string]string{"CHROMA_URL": "http://" + addr},
			[]string{"EMBEDDING_PROVIDER"}},
	} {
		env := map[string]string{"DATACHAT_DATA_DIR": t.TempDir(), "DATACHAT_ADDR": "127.0.0.1:0", "DATACHAT_RETRIEVAL": "chroma"}
		for k, v := range tc.env {
			env[k] = v
		}
		_, _, err := runMain(t, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "serve")
		if err == nil {
			t.Errorf("%v: serve started", tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not name %s", tc.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows the password: %q", err)
		}
	}
}
