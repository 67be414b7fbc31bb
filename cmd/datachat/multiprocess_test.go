package main

import (
	"context"
	"crypto/rand"
	"datachat/internal/testenv"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

// postgresSchemaURL returns DATACHAT_TEST_POSTGRES_URL with search_path set to
// a new, empty schema dropped when the test ends. Without the variable the
// test is skipped, except in CI, as the store tests do.
func postgresSchemaURL(t *testing.T) string {
	t.Helper()
	base := os.Getenv("DATACHAT_TEST_POSTGRES_URL")
	if base == "" {
		const how = "set DATACHAT_TEST_POSTGRES_URL=postgres://… (internal/postgres/testdata/start-test-cluster.sh starts a throwaway cluster and prints its URL)"
		testenv.Missing(t, "two-process test: "+how)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("DATACHAT_TEST_POSTGRES_URL: want a postgres:// URL, got %v", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "datachat_mp_" + hex.EncodeToString(b)
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestTwoProcessesOneDatabase runs two `datachat serve` processes on one
// PostgreSQL database and one data directory, as behind a load balancer.
func TestTwoProcessesOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	dbURL := postgresSchemaURL(t)
	chunks := make([]string, 60)
	for i := range chunks {
		chunks[i] = "tok" + string(rune('a'+i%26)) + " "
	}
	fake := llmtest.NewServer(t, llmtest.OpenAI, llmtest.Script{
		Turns: []llmtest.Turn{
			{Match: &llmtest.Match{Contains: "slow question"}, Text: chunks, Delay: llmtest.Duration(40 * time.Millisecond)},
			{Match: &llmtest.Match{Contains: "follow-up"}, Text: []string{"Follow-up ", "answer."}},
		},
		Default: &llmtest.Turn{Text: []string{"ok"}},
	})
	vars := map[string]string{
		"DATACHAT_DATABASE_URL":   dbURL,
		"DATACHAT_DATA_DIR":       t.TempDir(), // shared: the dataset files
		"DATACHAT_RATE_LIMIT_RPM": "5",
		"LLM_PROVIDER":            "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.URL,
	}
	a, key := startFirstProc(t, vars)
	conv := newConversation(t, a.URL(), key)
	ca := dialWS(t, a.URL(), key, conv)
	ca.send("chat_send", map[string]string{"content": "slow question"})
	evA := ca.until(5*time.Second, "chat_token")

	// B starts while A streams: it leaves A's turn alone.
	b := startProc(t, vars)
	if strings.Contains(b.Log(), "marked interrupted") {
		t.Errorf("B interrupted messages at start:\n%s", b.Log())
	}
	msgs := conversationMessages(t, b.URL(), key, conv)
	if len(msgs) != 2 || msgs[1].Status != "streaming" {
		t.Fatalf("A's turn seen from B: got %+v, want its answer streaming", msgs)
	}

	// One turn at a time per conversation holds across processes.
	cb := dialWS(t, b.URL(), key, conv)
	cb.send("chat_send", map[string]string{"content": "follow-up"})
	got := cb.until(5 * time.Second)
	if len(got) != 1 || got[0].Type != "chat_error" || !strings.Contains(field(got[0], "message"), "still being written") {
		t.Errorf("chat_send on B while A streams: got %v, want a chat_error", got)
	}

	evA = append(evA, ca.until(10*time.Second, "chat_complete")...)
	if last := evA[len(evA)-1]; last.Type != "chat_complete" || field(last, "status") != "complete" {
		t.Fatalf("A's turn: ended with %s %s", last.Type, last.Data)
	}
	if got, want := tokensText(evA), strings.Join(chunks, ""); got != want {
		t.Errorf("A's answer: got %q, want %q", got, want)
	}

	// The conversation started on A continues on B, history and all.
	cb.send("chat_send", map[string]string{"content": "follow-up"})
	got = cb.until(10*time.Second, "chat_complete")
	if last := got[len(got)-1]; last.Type != "chat_complete" || tokensText(got) != "Follow-up answer." {
		t.Fatalf("turn on B: got %v", got)
	}
	reqs := fake.ChatRequests()
	var sawAnswer bool
	for _, m := range reqs[len(reqs)-1].Messages {
		sawAnswer = sawAnswer || m.Role == "assistant" && m.Text == strings.Join(chunks, "")
	}
	if !sawAnswer {
		t.Errorf("B's model request lacks A's answer: %+v", reqs[len(reqs)-1].Messages)
	}
	var statuses []string
	for _, m := range conversationMessages(t, a.URL(), key, conv) {
		statuses = append(statuses, m.Role+":"+m.Status)
	}
	if want := "user:complete assistant:complete user:complete assistant:complete"; strings.Join(statuses, " ") != want {
		t.Errorf("messages seen from A: got %v, want %s", statuses, want)
	}

	// A dataset added through A is queryable through B, even with B's SQL
	// instance for the conversation already open.
	if st, res := do(t, "POST", b.URL()+"/api/conversations/"+conv+"/sql", key, `{"query":"SELECT 42 AS n"}`); st != 200 {
		t.Errorf("query through B before the upload: HTTP %d %v", st, res)
	}
	st, ds := upload(t, a.URL(), key, conv, testfiles.Penguins(t, t.TempDir()))
	if st != 201 || ds["name"] != "penguins" {
		t.Fatalf("upload through A: HTTP %d %v", st, ds)
	}
	st, res := do(t, "POST", b.URL()+"/api/conversations/"+conv+"/sql", key, `{"query":"SELECT count(*) AS n FROM penguins"}`)
	if rows, _ := res["rows"].([]any); st != 200 || len(rows) != 1 || rows[0].([]any)[0] != float64(testfiles.PenguinsRows) {
		t.Errorf("query through B: HTTP %d %v, want %d rows counted", st, res, testfiles.PenguinsRows)
	}

	// Rate limits hold across both: 5 a minute for carol, wherever she asks.
	carol, _, err := runMain(t, func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}, "keys", "create", "--user", "carol")
	if err != nil {
		t.Fatal(err)
	}
	carol = strings.TrimSpace(carol)
	for i := range 6 {
		p := []*serveProc{a, b}[i%2]
		st, body := do(t, "POST", p.URL()+"/chat/query", carol, `{"query":"hello"}`)
		want := 200
		if i == 5 {
			want = 429
		}
		if st != want {
			t.Errorf("carol's question %d on %s: got HTTP %d %v, want %d", i+1, p.Addr, st, body, want)
		}
	}
}

// upload posts a file as a dataset of a conversation.
func upload(t *testing.T, base, key, conv, path string) (int, map[string]any) {
	t.Helper()
	return postFile(t, base+"/api/conversations/"+conv+"/datasets", key, path)
}

// uploadDocument posts a file as a document of a conversation.
func uploadDocument(t *testing.T, base, key, conv, path string) (int, map[string]any) {
	t.Helper()
	return postFile(t, base+"/api/conversations/"+conv+"/documents", key, path)
}

// postFile posts a file as the multipart field "file" and decodes the JSON answer.
func postFile(t *testing.T, url, key, path string) (int, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	contentType, body := multipartFile(filepath.Base(path), data)
	a := request(t, "POST", url, key, contentType, body)
	return a.status, a.body
}
