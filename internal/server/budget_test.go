package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

// TestBudgetRefillsAndForgets runs a budget on a fake clock: a burst of a
// quarter of the limit, then one request per refill interval, a refusal
// saying the limit and when to retry, and idle users forgotten.
func TestBudgetRefillsAndForgets(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := newBudget("SQL queries", 120, time.Minute) // 2 a second, bursts of 30
	b.now = func() time.Time { return now }
	for i := range 30 {
		if err := b.take("u"); err != nil {
			t.Fatalf("request %d of the burst: %v", i+1, err)
		}
	}
	err := b.take("u")
	if err == nil {
		t.Fatal("request 31 at once: taken, want refused")
	}
	if ErrorStatus(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "Too many SQL queries: the limit is 120 a minute per user, at most 30 at once. Try again in 1 s.") {
		t.Errorf("refusal: got %d %q", ErrorStatus(err), err)
	}
	if d, ok := datachat.RetryAfter(err); !ok || d != 500*time.Millisecond {
		t.Errorf("retry after: got %v, want 500ms", d)
	}
	if err := b.take("v"); err != nil {
		t.Errorf("another user is refused: %v", err)
	}
	now = now.Add(500 * time.Millisecond)
	if err := b.take("u"); err != nil {
		t.Errorf("after one refill interval: %v", err)
	}
	if err := b.take("u"); err == nil {
		t.Errorf("two requests after one refill interval: taken")
	}

	// 10,000 users pass by; once their allowances have refilled (15 s for
	// bursts of 30 at 2 a second) they are forgotten.
	for i := range 10_000 {
		b.take(strconv.Itoa(i))
	}
	if n := b.size(); n < 10_000 {
		t.Fatalf("remembered %d users, want all 10,000 still refilling", n)
	}
	now = now.Add(15 * time.Second)
	b.take("last")
	if n := b.size(); n != 1 {
		t.Errorf("after the refill time: %d users remembered, want 1", n)
	}

	// No budget: never refused.
	off := newBudget("uploads", 0, time.Hour)
	for range 100 {
		if err := off.take("u"); err != nil {
			t.Fatalf("budget 0: %v", err)
		}
	}
}

// TestBudgetsOverHTTP: /sql, /search and uploads each have their own budget
// per user; a refusal is 429 rate_limited with Retry-After and a message
// naming the limit; MCP execute_sql spends the same budget as /sql.
func TestBudgetsOverHTTP(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t, func(_ *Deps, c *Config) {
		c.SQLPerMinute, c.SearchPerMinute, c.UploadsPerHour = 8, 4, 4 // bursts of 2, 1 and 1
	})}
	conv := cs.withPenguins(t) // the one upload of the burst
	base := "/api/conversations/" + conv
	sql := `{"query":"SELECT count(*) FROM penguins"}`

	for i := range 2 {
		if st, res := cs.post(t, base+"/sql", cs.alice, sql); st != 200 {
			t.Fatalf("SQL %d of the burst: %d %v", i+1, st, res)
		}
	}
	req, _ := http.NewRequest("POST", cs.URL+base+"/sql", strings.NewReader(sql))
	req.Header.Set("X-API-Key", cs.alice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third SQL query: got %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	st, res := cs.post(t, base+"/sql", cs.alice, sql)
	if msg := fmt.Sprint(res); st != 429 || !strings.Contains(msg, "type:rate_limited") || !strings.Contains(msg, "Too many SQL queries: the limit is 8 a minute per user") || !strings.Contains(msg, "Try again in") {
		t.Errorf("over the SQL budget: got %d %v", st, res)
	}

	// Search has its own budget, untouched by the SQL queries.
	if st, res := cs.post(t, base+"/search", cs.alice, `{"query":"penguins"}`); st != 200 {
		t.Errorf("search with the SQL budget spent: %d %v", st, res)
	}
	if st, res := cs.post(t, base+"/search", cs.alice, `{"query":"penguins"}`); st != 429 || !strings.Contains(fmt.Sprint(res), "Too many document searches") {
		t.Errorf("second search: got %d %v, want 429", st, res)
	}

	// Uploads: the dataset already spent the burst; documents share it.
	if st, res := cs.upload(t, base+"/documents", cs.alice, testfiles.History(t, t.TempDir()), "file"); st != 429 || !strings.Contains(fmt.Sprint(res), "Too many uploads: the limit is 4 an hour per user") {
		t.Errorf("document upload over the budget: got %d %v, want 429", st, res)
	}
	if st, res := cs.post(t, base+"/datasets", cs.alice, `{"url":"http://127.0.0.1:1/x.csv"}`); st != 429 {
		t.Errorf("dataset URL over the budget: got %d %v, want 429", st, res)
	}

	// Bob's budgets are his own.
	bobConv := cs.newConversation(t, cs.bob)
	if st, res := cs.post(t, "/api/conversations/"+bobConv+"/sql", cs.bob, `{"query":"SELECT 1"}`); st != 200 {
		t.Errorf("bob's first query: %d %v", st, res)
	}

	// MCP execute_sql spends the SQL budget; its refusal is the tool's error.
	s := cs.mcpSession(t, cs.alice)
	_, text, isErr := callTool(t, s, "execute_sql", map[string]any{"conversation_id": conv, "query": "SELECT 1"})
	if !isErr || !strings.Contains(text, "Too many SQL queries") || !strings.Contains(text, "Try again in") {
		t.Errorf("MCP execute_sql over the budget: error %v %q", isErr, text)
	}
	_, text, isErr = callTool(t, s, "search_documents", map[string]any{"conversation_id": conv, "query": "x"})
	if !isErr || !strings.Contains(text, "Too many document searches") {
		t.Errorf("MCP search_documents over the budget: error %v %q", isErr, text)
	}
	_, text, isErr = callTool(t, s, "list_datasets", map[string]any{"conversation_id": conv})
	if isErr {
		t.Errorf("list_datasets is not budgeted: %q", text)
	}
	bs := cs.mcpSession(t, cs.bob)
	if _, text, isErr := callTool(t, bs, "execute_sql", map[string]any{"conversation_id": bobConv, "query": "SELECT 1"}); isErr {
		t.Errorf("bob's MCP query: %q", text)
	}
	if _, text, isErr := callTool(t, bs, "execute_sql", map[string]any{"conversation_id": bobConv, "query": "SELECT 1"}); !isErr || !strings.Contains(text, "Too many SQL queries") {
		t.Errorf("bob's third query (HTTP, then MCP twice): error %v %q, want refused", isErr, text)
	}
}

// TestChatToolsSpendTheBudgets: a chat turn's tool calls spend the budgets
// /sql and MCP spend, charged in the catalog: the turn's execute_sql takes
// the user's one SQL query of the burst, so /sql is refused, and the next
// turn's execute_sql is refused too, the model told why.
func TestChatToolsSpendTheBudgets(t *testing.T) {
	sql := llmtest.Turn{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) FROM penguins"}`)}}
	echo := llmtest.Turn{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string { return "Result: " + r.LastToolResult() }}
	fake := llmtest.NewServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{sql, echo, sql, echo}})
	cs := &chatServer{testServer: newTestServer(t, func(d *Deps, c *Config) {
		c.SQLPerMinute = 4 // a burst of 1
		d.Chat = &chat.Runner{
			Store: d.Store, Data: d.Workspace, Model: newModel(llmtest.Gemini, fake.URL),
			Provider: "gemini", ModelID: "test-model", Window: 1_000_000, MaxOutputTokens: 1024,
			MaxQueryChars: 2000, Logger: quiet,
		}
	}), fake: fake}
	conv := cs.withPenguins(t)
	ask := `{"query":"How many?","conversation_id":"` + conv + `"}`
	if st, body := cs.post(t, "/chat/query", cs.alice, ask); st != 200 || !strings.Contains(fmt.Sprint(body["answer"]), "344") {
		t.Fatalf("first turn: %d %v", st, body)
	}
	if st, res := cs.post(t, "/api/conversations/"+conv+"/sql", cs.alice, `{"query":"SELECT 1"}`); st != 429 || !strings.Contains(fmt.Sprint(res), "Too many SQL queries") {
		t.Errorf("/sql after the chat's query: %d %v, want 429", st, res)
	}
	st, body := cs.post(t, "/chat/query", cs.alice, ask)
	if st != 200 || !strings.Contains(fmt.Sprint(body["answer"]), "Too many SQL queries: the limit is 4 a minute per user") {
		t.Errorf("second turn: %d %v, want the model told of the refusal", st, body)
	}
}
