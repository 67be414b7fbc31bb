package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"datachat"
	"datachat/internal/chat"
	"datachat/internal/gemini"
	"datachat/internal/llm"
	"datachat/internal/llmtest"
	"datachat/internal/ollama"
	"datachat/internal/openai"
	"datachat/internal/testfiles"
)

var quiet = slog.New(slog.DiscardHandler)

var protocols = []llmtest.Protocol{llmtest.Gemini, llmtest.OpenAI, llmtest.Ollama}

// chatServer is a test server whose chat runner talks to a scripted fake of
// one provider protocol.
type chatServer struct {
	*testServer
	fake *llmtest.Server
}

func newChatServer(t *testing.T, p llmtest.Protocol, script llmtest.Script, tweak ...func(*chat.Runner)) *chatServer {
	t.Helper()
	fake := llmtest.NewServer(t, p, script)
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		r := &chat.Runner{
			Store: d.Store, Data: d.Workspace, Model: newModel(p, fake.URL),
			Provider: string(p), ModelID: "test-model", Window: 1_000_000,
			MaxOutputTokens: 1024, Temperature: 0.2, MaxContextDocs: 5, MaxQueryChars: 2000,
			Streaming: true, CheckNumbers: true, Logger: slog.New(slog.DiscardHandler),
		}
		for _, f := range tweak {
			f(r)
		}
		d.Chat = r
	})
	return &chatServer{testServer: ts, fake: fake}
}

func newModel(p llmtest.Protocol, url string) chat.Model {
	quick := func() (time.Duration, time.Duration, time.Duration) {
		return 2 * time.Second, 5 * time.Second, 50 * time.Millisecond
	}
	c, idle, retry := quick()
	switch p {
	case llmtest.Gemini:
		return gemini.New(gemini.Options{APIKey: "test-key", BaseURL: url, Transport: llm.Transport{ConnectTimeout: c, StreamIdleTimeout: idle, RetryDelay: retry, Logger: quiet}})
	case llmtest.OpenAI:
		return openai.New(openai.Options{APIKey: "test-key", BaseURL: url, Transport: llm.Transport{ConnectTimeout: c, StreamIdleTimeout: idle, RetryDelay: retry, Logger: quiet}})
	}
	return ollama.New(ollama.Options{Host: url, Transport: llm.Transport{ConnectTimeout: c, StreamIdleTimeout: idle, RetryDelay: retry, Logger: quiet}})
}

// client is a WebSocket client of one conversation, collecting events.
type client struct {
	t      *testing.T
	conn   *websocket.Conn
	events chan wireEvent
	raw    chan json.RawMessage
}

type wireEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func (cs *chatServer) dial(t *testing.T, conv, key string) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := strings.Replace(cs.URL, "http://", "ws://", 1) + "/ws?conversation_id=" + conv + "&api_key=" + key
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.SetReadLimit(16 << 20)
	c := &client{t: t, conn: conn, events: make(chan wireEvent, 1024)}
	go func() {
		defer close(c.events)
		for {
			_, b, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			var ev wireEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Errorf("bad event %s", b)
				return
			}
			c.events <- ev
		}
	}()
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	return c
}

func (c *client) send(typ string, data any) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", typ, err)
	}
}

// ask sends content as the user's message and returns the turn's events,
// up to its chat_complete (or chat_error).
func (c *client) ask(content string) []wireEvent {
	c.t.Helper()
	c.send("chat_send", map[string]string{"content": content})
	return c.until("chat_complete")
}

// until collects events until one of type end (or chat_error) arrives.
func (c *client) until(end ...string) []wireEvent {
	c.t.Helper()
	var got []wireEvent
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatalf("connection closed; events so far: %v", types(got))
			}
			got = append(got, ev)
			for _, e := range append(end, "chat_error") {
				if ev.Type == e {
					return got
				}
			}
		case <-timeout:
			c.t.Fatalf("timed out waiting for %v; events so far: %v", end, types(got))
		}
	}
}

func types(evs []wireEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func find(evs []wireEvent, typ string) []json.RawMessage {
	var out []json.RawMessage
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e.Data)
		}
	}
	return out
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

func tokens(evs []wireEvent) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == "chat_token" {
			var tk chat.TokenEvent
			json.Unmarshal(e.Data, &tk)
			b.WriteString(tk.Token)
		}
	}
	return b.String()
}

// withPenguins makes a conversation of alice's with penguins.csv loaded.
func (cs *chatServer) withPenguins(t *testing.T) string {
	conv := cs.newConversation(t, cs.alice)
	if st, d := cs.upload(t, "/api/conversations/"+conv+"/datasets", cs.alice, testfiles.Penguins(t, t.TempDir()), "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	return conv
}

func (cs *chatServer) messages(t *testing.T, conv string) []*datachat.Message {
	t.Helper()
	msgs, err := cs.Store.Messages(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

const adelieSQL = `SELECT count(*) AS n, sum(body_mass_g) AS mass FROM penguins WHERE species = 'Adelie'`

func TestChatAnswersThroughSQL(t *testing.T) {
	wantCount, wantMass := penguinsOracle(t)
	for _, p := range protocols {
		t.Run(string(p), func(t *testing.T) {
			cs := newChatServer(t, p, llmtest.Script{Turns: []llmtest.Turn{
				{Match: &llmtest.Match{LastRole: "user"}, Text: []string{"Let me count ", "them."},
					ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+adelieSQL+`"}`)},
					Usage:     &llmtest.Usage{Input: 100, Output: 10}},
				{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string {
					return "There are " + cell(r.LastToolResult(), 0, 0) + " Adelie penguins.\n\nResult seen: " + r.LastToolResult()
				},
					Usage: &llmtest.Usage{Input: 200, Output: 20}},
			}})
			conv := cs.withPenguins(t)
			c := cs.dial(t, conv, cs.alice)
			evs := c.ask("How many Adelie penguins are there, and their total mass?")
			if got := types(evs); got[len(got)-1] != "chat_complete" {
				t.Fatalf("events: %v", got)
			}
			start := decode[chat.ToolCallStartEvent](t, find(evs, "tool_call_start")[0])
			res := decode[chat.ToolCallResultEvent](t, find(evs, "tool_call_result")[0])
			if start.Tool != "execute_sql" || !strings.Contains(string(start.Args), "Adelie") || res.ID != start.ID {
				t.Errorf("tool_call_start %+v / result id %s", start, res.ID)
			}
			if !res.OK || len(res.Rows) != 1 || fmt.Sprint(res.Rows[0][0]) != fmt.Sprint(wantCount) || toFloat(res.Rows[0][1]) != wantMass || *res.RowCount != 1 {
				t.Errorf("tool_call_result: %+v, want [%d %v]", res, wantCount, wantMass)
			}
			// The numbers reached the model: its second request carries them.
			reqs := cs.fake.ChatRequests()
			if len(reqs) != 2 {
				t.Fatalf("fake saw %d chat requests, want 2", len(reqs))
			}
			toolResult := reqs[1].LastToolResult()
			if !strings.Contains(toolResult, fmt.Sprint(wantCount)) || !strings.Contains(toolResult, fmt.Sprint(wantMass)) {
				t.Errorf("tool result sent to the model %q lacks %d and %v", toolResult, wantCount, wantMass)
			}
			sys := reqs[0].Messages[0]
			if sys.Role != "system" || !strings.Contains(sys.Text, "Table penguins") || !strings.Contains(sys.Text, "body_mass_g: integer") || !strings.Contains(sys.Text, "LIMIT 1000") {
				t.Errorf("system prompt lacks the schema or rules:\n%s", sys.Text)
			}
			answer := tokens(evs)
			if !strings.HasPrefix(answer, "Let me count them.There are "+fmt.Sprint(wantCount)+" Adelie penguins.") {
				t.Errorf("streamed answer %q", answer)
			}
			done := decode[chat.CompleteEvent](t, find(evs, "chat_complete")[0])
			if done.Status != "complete" || done.InputTokens != 300 || done.OutputTokens != 30 || done.TotalTokens != 330 {
				t.Errorf("chat_complete %+v, want complete 300/30/330", done)
			}
			msgs := cs.messages(t, conv)
			if len(msgs) != 2 || msgs[0].Role != "user" || msgs[1].Status != "complete" || msgs[1].Content != answer || len(msgs[1].ToolCalls) != 1 {
				t.Fatalf("stored messages: %+v", msgs)
			}
			if tc := msgs[1].ToolCalls[0]; tc.Tool != "execute_sql" || !tc.OK || tc.Result != toolResult {
				t.Errorf("stored tool call %+v", tc)
			}
			if msgs[1].InputTokens != 300 || msgs[1].OutputTokens != 30 {
				t.Errorf("stored tokens %d/%d", msgs[1].InputTokens, msgs[1].OutputTokens)
			}
			if used, _ := cs.Store.TokensSince(context.Background(), cs.aliceID, time.Now().Add(-time.Hour)); used != 330 {
				t.Errorf("token_usage: got %d, want 330", used)
			}
		})
	}
}

func TestChatSelfCorrects(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT avg(body_mas) FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool", Contains: "Error"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT round(avg(body_mass_g)) AS m FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string { return "The average is " + cell(r.LastToolResult(), 0, 0) + " g." }},
	}})
	conv := cs.withPenguins(t)
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("Average body mass?")
	results := find(evs, "tool_call_result")
	if len(results) != 2 {
		t.Fatalf("events %v", types(evs))
	}
	first := decode[chat.ToolCallResultEvent](t, results[0])
	if first.OK || !strings.Contains(first.Content, "body_mas") || !strings.Contains(first.Content, "body_mass_g") {
		t.Errorf("failed attempt should name the bad column and the candidate: %+v", first)
	}
	if want := fmt.Sprintf("The average is %d g.", testfiles.MeanBodyMass); !strings.Contains(tokens(evs), want) {
		t.Errorf("answer %q", tokens(evs))
	}
}

func TestChatToolCallLimit(t *testing.T) {
	cs := newChatServer(t, llmtest.Gemini, llmtest.Script{
		Turns:   []llmtest.Turn{{Match: &llmtest.Match{NoTools: true}, Text: []string{"Here is what I found."}}},
		Default: &llmtest.Turn{ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT 1"}`)}},
	})
	conv := cs.withPenguins(t)
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("Loop forever")
	results := find(evs, "tool_call_result")
	if len(results) != 6 {
		t.Fatalf("got %d tool results, want 5 run + 1 refused: %v", len(results), types(evs))
	}
	for i, r := range results {
		res := decode[chat.ToolCallResultEvent](t, r)
		if i < 5 && !res.OK || i == 5 && (res.OK || !strings.Contains(res.Content, "limit of 5 tool calls")) {
			t.Errorf("result %d: %+v", i, res)
		}
	}
	reqs := cs.fake.ChatRequests()
	last := reqs[len(reqs)-1]
	if len(last.Tools) != 0 || len(reqs) != 7 {
		t.Errorf("fake saw %d requests, the last declaring tools %v; want 7, the last with none", len(reqs), last.Tools)
	}
	if tokens(evs) != "Here is what I found." {
		t.Errorf("answer %q", tokens(evs))
	}
	msgs := cs.messages(t, conv)
	if n := len(msgs[1].ToolCalls); n != 6 {
		t.Errorf("stored %d tool rounds, want 6", n)
	}
}

func TestChatSQLFailureLimit(t *testing.T) {
	cs := newChatServer(t, llmtest.Ollama, llmtest.Script{
		Turns:   []llmtest.Turn{{Match: &llmtest.Match{Contains: "do not run more SQL"}, Text: []string{"The column does not exist."}}},
		Default: &llmtest.Turn{ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT nope FROM penguins"}`)}},
	})
	conv := cs.withPenguins(t)
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("Use the nope column")
	if n := len(find(evs, "tool_call_result")); n != 3 {
		t.Fatalf("got %d SQL attempts, want 3: %v", n, types(evs))
	}
	reqs := cs.fake.ChatRequests()
	last := reqs[len(reqs)-1]
	if last.HasTool("execute_sql") {
		t.Errorf("after 3 failures the model was still offered execute_sql: %v", last.Tools)
	}
	if tokens(evs) != "The column does not exist." {
		t.Errorf("answer %q", tokens(evs))
	}
}

func TestChatPruningAndContextRetry(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{Error: &llmtest.ErrorReply{Preset: "context_too_large"}},
		{Text: []string{"Fits now."}},
		{Error: &llmtest.ErrorReply{Preset: "context_too_large"}},
		{Error: &llmtest.ErrorReply{Preset: "context_too_large"}},
	}})
	conv := cs.newConversation(t, cs.alice)
	ctx := context.Background()
	for i := range 60 {
		role := datachat.RoleUser
		if i%2 == 1 {
			role = datachat.RoleAssistant
		}
		if err := cs.Store.CreateMessage(ctx, &datachat.Message{ConversationID: conv, Role: role, Content: fmt.Sprintf("message %d", i), Status: "complete"}); err != nil {
			t.Fatal(err)
		}
	}
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("message 60")
	reqs := cs.fake.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("fake saw %d requests, want 2", len(reqs))
	}
	count := func(r llmtest.Request) (n int, first string) {
		for _, m := range r.Messages {
			if m.Role == "user" || m.Role == "assistant" {
				if n == 0 {
					first = m.Text
				}
				n++
			}
		}
		return n, first
	}
	if n, first := count(reqs[0]); n != 50 || first != "message 11" {
		t.Errorf("first request: %d messages from %q, want 50 from message 11", n, first)
	}
	if n, first := count(reqs[1]); n != 40 || first != "message 21" {
		t.Errorf("retry: %d messages from %q, want 40 from message 21", n, first)
	}
	if tokens(evs) != "Fits now." {
		t.Errorf("answer %q", tokens(evs))
	}
	// Too large again after the retry: the exact chat_error.
	evs = c.ask("again")
	errs := find(evs, "chat_error")
	if len(errs) != 1 || decode[chat.ErrorEvent](t, errs[0]).Message != chat.ErrContextTooLarge {
		t.Errorf("events %v %s", types(evs), errs)
	}
	msgs := cs.messages(t, conv)
	if last := msgs[len(msgs)-1]; last.Status != "error" {
		t.Errorf("failed turn stored as %q", last.Status)
	}
	if used, _ := cs.Store.TokensSince(ctx, cs.aliceID, time.Now().Add(-time.Hour)); used == 0 {
		t.Errorf("failed turns recorded no usage")
	}
}

func TestChatCancel(t *testing.T) {
	for _, p := range protocols {
		t.Run(string(p), func(t *testing.T) {
			chunks := make([]string, 200)
			for i := range chunks {
				chunks[i] = fmt.Sprintf("w%d ", i)
			}
			cs := newChatServer(t, p, llmtest.Script{Turns: []llmtest.Turn{{Text: chunks, Delay: llmtest.Duration(20 * time.Millisecond)}}})
			conv := cs.newConversation(t, cs.alice)
			c := cs.dial(t, conv, cs.alice)
			c.send("chat_send", map[string]string{"content": "Tell me a long story"})
			var got []wireEvent
			for len(find(got, "chat_token")) < 5 {
				got = append(got, <-c.events)
			}
			c.send("chat_cancel", map[string]any{})
			got = append(got, c.until("chat_complete")...)
			done := decode[chat.CompleteEvent](t, find(got, "chat_complete")[0])
			if done.Status != "cancelled" {
				t.Fatalf("status %q", done.Status)
			}
			received := tokens(got)
			if strings.Count(received, "w") >= 100 {
				t.Errorf("cancel did not stop the stream: %d tokens", strings.Count(received, "w"))
			}
			msgs := cs.messages(t, conv)
			if m := msgs[1]; m.Status != "cancelled" || m.Content != received {
				t.Errorf("stored %q %q, want cancelled %q", m.Status, m.Content, received)
			}
			if done.TotalTokens == 0 {
				t.Errorf("cancelled turn has no usage")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := cs.fake.Wait(ctx, func(reqs []llmtest.Request) bool {
				for _, r := range reqs {
					if r.Kind == llmtest.KindChat {
						return r.Disconnected
					}
				}
				return false
			}); err != nil {
				t.Errorf("the provider request was not aborted: %v", err)
			}
		})
	}
}

func TestChatConfirmation(t *testing.T) {
	script := func() llmtest.Script {
		return llmtest.Script{Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("request_confirmation",
				`{"action":"execute_sql","parameters":{"query":"SELECT count(*) FROM penguins WHERE sex = 'FEMALE'"},"explanation":"I assume 'women' means sex = FEMALE."}`)}},
			{Match: &llmtest.Match{LastRole: "tool", Contains: "approved"}, ReplyFunc: func(r *llmtest.Request) string {
				return "There are " + cell(strings.TrimPrefix(r.LastToolResult(), "The user approved. Result:\n"), 0, 0) + " female penguins."
			}},
			{Match: &llmtest.Match{LastRole: "tool", Contains: "declined"}, Text: []string{"OK, I won't."}},
		}}
	}
	t.Run("approved after reconnect", func(t *testing.T) {
		cs := newChatServer(t, llmtest.Gemini, script())
		conv := cs.withPenguins(t)
		c := cs.dial(t, conv, cs.alice)
		c.send("chat_send", map[string]string{"content": "How many women?"})
		evs := c.until("confirmation_required")
		conf := decode[chat.ConfirmationEvent](t, find(evs, "confirmation_required")[0])
		if conf.Action != "execute_sql" || !strings.Contains(string(conf.Parameters), "FEMALE") || !strings.Contains(conf.Explanation, "FEMALE") {
			t.Fatalf("confirmation %+v", conf)
		}
		if n := len(find(evs, "tool_call_result")); n != 0 {
			t.Errorf("ran %d tools before approval", n)
		}
		c.conn.Close(websocket.StatusNormalClosure, "")

		// The pending confirmation survives the disconnect.
		st, body := cs.getJSON(t, "/api/conversations/"+conv)
		if st != 200 || body["pending_confirmation"] == nil || cs.messages(t, conv)[1].Status != "awaiting_confirmation" {
			t.Fatalf("after disconnect: %d %v", st, body["pending_confirmation"])
		}
		c2 := cs.dial(t, conv, cs.alice)
		again := decode[chat.ConfirmationEvent](t, find(c2.until("confirmation_required"), "confirmation_required")[0])
		if again.ID != conf.ID {
			t.Errorf("reconnect showed %s, want %s", again.ID, conf.ID)
		}
		c2.send("confirm_action", map[string]any{"id": conf.ID, "approved": true})
		evs = c2.until("chat_complete")
		female := countSex("FEMALE")
		if !strings.Contains(tokens(evs), fmt.Sprintf("There are %d female penguins.", female)) {
			t.Errorf("answer %q, want %d", tokens(evs), female)
		}
		res := decode[chat.ToolCallResultEvent](t, find(evs, "tool_call_result")[0])
		if res.Tool != "execute_sql" || !res.OK {
			t.Errorf("approved action: %+v", res)
		}
		if m := cs.messages(t, conv)[1]; m.Status != "complete" {
			t.Errorf("status %q", m.Status)
		}
	})
	t.Run("declined", func(t *testing.T) {
		cs := newChatServer(t, llmtest.OpenAI, script())
		conv := cs.withPenguins(t)
		c := cs.dial(t, conv, cs.alice)
		c.send("chat_send", map[string]string{"content": "How many women?"})
		conf := decode[chat.ConfirmationEvent](t, find(c.until("confirmation_required"), "confirmation_required")[0])
		c.send("confirm_action", map[string]any{"id": conf.ID, "approved": false, "note": "I meant something else"})
		evs := c.until("chat_complete")
		if tokens(evs) != "OK, I won't." {
			t.Errorf("answer %q", tokens(evs))
		}
		reqs := cs.fake.ChatRequests()
		if got := reqs[len(reqs)-1].LastToolResult(); !strings.Contains(got, "declined") || !strings.Contains(got, "I meant something else") {
			t.Errorf("model was told %q", got)
		}
	})
	t.Run("always mode asks with estimated rows", func(t *testing.T) {
		cs := newChatServer(t, llmtest.Ollama, llmtest.Script{Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT * FROM penguins LIMIT 1000"}`)}},
			{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Done."}},
		}}, func(r *chat.Runner) { r.ConfirmAlways = true })
		conv := cs.withPenguins(t)
		c := cs.dial(t, conv, cs.alice)
		c.send("chat_send", map[string]string{"content": "Show all"})
		conf := decode[chat.ConfirmationEvent](t, find(c.until("confirmation_required"), "confirmation_required")[0])
		var params struct {
			Query         string `json:"query"`
			EstimatedRows *int64 `json:"estimated_rows"`
		}
		json.Unmarshal(conf.Parameters, &params)
		if params.Query == "" || params.EstimatedRows == nil || *params.EstimatedRows <= 0 {
			t.Errorf("parameters %s, want query and estimated_rows", conf.Parameters)
		}
		c.send("confirm_action", map[string]any{"id": conf.ID, "approved": true})
		evs := c.until("chat_complete")
		res := decode[chat.ToolCallResultEvent](t, find(evs, "tool_call_result")[0])
		if *res.RowCount != 344 {
			t.Errorf("rows %d", *res.RowCount)
		}
	})
}

// countSex counts the penguins of one sex in the CSV, independently of DuckDB.
func countSex(sex string) int {
	n := 0
	for _, line := range strings.Split(string(testfiles.PenguinsCSV()), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), ","+sex) {
			n++
		}
	}
	return n
}

func (ts *testServer) getJSON(t *testing.T, url string) (int, map[string]any) {
	req, _ := http.NewRequest("GET", ts.URL+url, nil)
	req.Header.Set("X-API-Key", ts.alice)
	return doJSON(t, req)
}

// servePenguins serves the penguins CSV at every path of the server whose
// URL it returns, until the test ends.
func servePenguins(t *testing.T) string {
	csvBytes := testfiles.PenguinsCSV()
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(csvBytes) }))
	t.Cleanup(files.Close)
	return files.URL
}

// countRowsScript: the model loads the penguins CSV at url with
// load_dataset, counts its rows with execute_sql and answers "N rows.".
func countRowsScript(url string) llmtest.Script {
	return llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("load_dataset", `{"url":"`+url+`"}`)}},
		{Match: &llmtest.Match{LastRole: "tool", Contains: "Loaded"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string { return cell(r.LastToolResult(), 0, 0) + " rows." }},
	}}
}

func TestChatLoadsURLFromMessage(t *testing.T) {
	url := servePenguins(t) + "/penguins.csv"
	cs := newChatServer(t, llmtest.OpenAI, countRowsScript(url))
	conv := cs.newConversation(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("How many rows in " + url + " ?")
	if tokens(evs) != "344 rows." {
		t.Errorf("answer %q; events %v", tokens(evs), types(evs))
	}
	reqs := cs.fake.ChatRequests()
	if !strings.Contains(reqs[0].Messages[0].Text, "No datasets are loaded") || !strings.Contains(reqs[1].Messages[0].Text, "Table penguins") {
		t.Errorf("system prompt before/after load not refreshed")
	}
	if ds, _ := cs.Store.Datasets(context.Background(), conv); len(ds) != 1 {
		t.Errorf("datasets: %d", len(ds))
	}
}

func TestChatRateLimitUnderConcurrency(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}}}, func(r *chat.Runner) { r.RateLimitRPM = 10 })
	const n = 50
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", cs.URL+"/chat/query", strings.NewReader(`{"query":"hi"}`))
			req.Header.Set("X-API-Key", cs.alice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			statuses <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[200] != 10 || count[429] != 40 {
		t.Errorf("got %v, want 10×200 and 40×429", count)
	}
	if got := len(cs.fake.ChatRequests()); got != 10 {
		t.Errorf("the model was called %d times, want 10", got)
	}
}

func TestChatQueryREST(t *testing.T) {
	cs := newChatServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"SELECT count(*) FROM penguins"}`)}},
		{Match: &llmtest.Match{LastRole: "tool"}, ReplyFunc: func(r *llmtest.Request) string { return cell(r.LastToolResult(), 0, 0) + " penguins." }, Usage: &llmtest.Usage{Input: 50, Output: 5}},
	}})
	conv := cs.withPenguins(t)
	st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"How many?","conversation_id":"`+conv+`","override":{"temperature":0.1,"max_output_tokens":100}}`)
	if st != 200 || body["answer"] != "344 penguins." || body["conversation_id"] != conv || body["request_id"] == "" {
		t.Fatalf("got %d %v", st, body)
	}
	usage := body["usage"].(map[string]any)
	for _, k := range []string{"embedding_ms", "retrieval_ms", "generation_ms", "total_ms", "total_tokens"} {
		if _, ok := usage[k]; !ok {
			t.Errorf("usage lacks %s: %v", k, usage)
		}
	}
	if _, ok := body["sources"].([]any); !ok {
		t.Errorf("sources not a list: %v", body["sources"])
	}
	// The answer's number, checked against the result it came from.
	checks, _ := body["number_checks"].([]any)
	if len(checks) != 1 || checks[0].(map[string]any)["status"] != "matched" || checks[0].(map[string]any)["text"] != "344" ||
		checks[0].(map[string]any)["start"] != float64(0) {
		t.Errorf("number_checks %v", body["number_checks"])
	}
	req := cs.fake.ChatRequests()[0]
	if !strings.Contains(string(req.Raw), "0.1") {
		t.Errorf("temperature override not sent: %s", req.Raw)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"query":""}`, "empty"},
		{`{"query":"` + strings.Repeat("x", 2001) + `"}`, "2000"},
		{`{"query":"x","override":{"temperature":3}}`, "temperature"},
		{`{"query":"x","override":{"top_k":0}}`, "top_k"},
		{`{"query":"x","override":{"max_output_tokens":9000}}`, "max_output_tokens"},
		{`{"query":"x","metadata_filters":{"author":"me"}}`, "author"},
		{`{"query":"x","conversation_id":"nope"}`, "not found"},
	} {
		st, body := cs.post(t, "/chat/query", cs.alice, tc.body)
		if st/100 != 4 || !strings.Contains(strings.ToLower(fmt.Sprint(body)), tc.want) {
			t.Errorf("%s: got %d %v", tc.body[:min(len(tc.body), 60)], st, body)
		}
	}
}

func TestChatWithoutProvider(t *testing.T) {
	ts := newTestServer(t, func(d *Deps, _ *Config) {
		d.Chat = &chat.Runner{Store: d.Store, Data: d.Workspace, Logger: slog.New(slog.DiscardHandler)}
	})
	cs := &chatServer{testServer: ts}
	conv := cs.newConversation(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("hello")
	e := decode[chat.ErrorEvent](t, find(evs, "chat_error")[0])
	for _, v := range []string{"GEMINI_API_KEY", "OPENAI_API_KEY", "OLLAMA_HOST"} {
		if !strings.Contains(e.SuggestedAction, v) {
			t.Errorf("chat_error %+v does not name %s", e, v)
		}
	}
	c.send("bogus", nil)
	if e := c.until("chat_error"); !strings.Contains(string(find(e, "chat_error")[0]), "bogus") {
		t.Errorf("unknown type: %s", find(e, "chat_error")[0])
	}
}

func TestChatOneTurnAtATime(t *testing.T) {
	cs := newChatServer(t, llmtest.Ollama, llmtest.Script{Default: &llmtest.Turn{Text: []string{"a", "b", "c", "d"}, Delay: llmtest.Duration(100 * time.Millisecond)}})
	conv := cs.newConversation(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	c.send("chat_send", map[string]string{"content": "one"})
	evs := c.ask("two")
	if errs := find(evs, "chat_error"); len(errs) != 1 || !strings.Contains(string(errs[0]), "still being written") {
		t.Fatalf("second chat_send: events %v", types(evs))
	}
	evs = append(evs, c.until("chat_complete")...)
	if tokens(evs) != "abcd" {
		t.Errorf("first turn: %q", tokens(evs))
	}
}

func TestWebSocketAuth(t *testing.T) {
	cs := &chatServer{testServer: newTestServer(t)}
	conv := cs.newConversation(t, cs.alice)
	for _, tc := range []struct {
		url  string
		want int
	}{
		{"/ws?conversation_id=" + conv, 401},
		{"/ws?conversation_id=" + conv + "&api_key=wrong", 401},
		{"/ws?conversation_id=" + conv + "&api_key=" + cs.bob, 404},
		{"/ws?conversation_id=nope&api_key=" + cs.alice, 404},
	} {
		_, resp, err := websocket.Dial(context.Background(), strings.Replace(cs.URL, "http", "ws", 1)+tc.url, nil)
		if err == nil || resp == nil || resp.StatusCode != tc.want {
			t.Errorf("%s: got %v %v, want HTTP %d before the upgrade", tc.url, resp, err, tc.want)
		}
	}
}

// cell reads a value from the compact result table the model receives:
// a header line, then one line per row with " | " between values.
func cell(result string, row, col int) string {
	lines := strings.Split(result, "\n")
	if row+1 >= len(lines) {
		return ""
	}
	vals := strings.Split(lines[row+1], " | ")
	if col >= len(vals) {
		return ""
	}
	return vals[col]
}

func TestChatFlushesWhileStreaming(t *testing.T) {
	chunks := make([]string, 40)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("t%d ", i)
	}
	cs := newChatServer(t, llmtest.Gemini, llmtest.Script{Turns: []llmtest.Turn{{Text: chunks, Delay: llmtest.Duration(60 * time.Millisecond)}}})
	conv := cs.newConversation(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	c.send("chat_send", map[string]string{"content": "Stream slowly"})
	var got []wireEvent
	for len(find(got, "chat_token")) < 25 { // 1.5 s in
		got = append(got, <-c.events)
	}
	m := cs.messages(t, conv)[1]
	received := tokens(got)
	if m.Status != "streaming" || m.Content == "" || !strings.HasPrefix(received, m.Content) {
		t.Fatalf("mid-stream the store holds %q %q; the client has %q", m.Status, m.Content, received)
	}
	// At most a second (≈17 tokens at 60 ms) behind what the client has.
	if behind := strings.Count(received, " ") - strings.Count(m.Content, " "); behind > 18 {
		t.Errorf("stored text is %d tokens behind the client", behind)
	}
	c.until("chat_complete")
}

func TestChatCancelStopsRunningQuery(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{llmtest.Call("execute_sql", `{"query":"`+longQuery+`"}`)}},
	}})
	conv := cs.newConversation(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	c.send("chat_send", map[string]string{"content": "Sum a lot"})
	c.until("tool_call_start")
	cs.awaitQueryRunning(t)
	start := time.Now()
	c.send("chat_cancel", map[string]any{})
	evs := c.until("chat_complete")
	// The query runs for hours unless stopped: a turn that ends before the
	// engine's own timeout was ended by the cancel. (Not a measure of how
	// fast the cancel is, which a loaded machine stretches.)
	if took, limit := time.Since(start), cs.Workspace.Engine.Options().Timeout; took >= limit {
		t.Errorf("the turn ended %v after the cancel: the query ran to the engine's timeout (%v)", took, limit)
	}
	done := decode[chat.CompleteEvent](t, find(evs, "chat_complete")[0])
	if done.Status != "cancelled" {
		t.Errorf("status %q", done.Status)
	}
	// The engine is free for the next query.
	st, res := cs.post(t, "/api/conversations/"+conv+"/sql", cs.alice, `{"query":"SELECT 42"}`)
	if st != 200 || fmt.Sprint(res["rows"]) != "[[42]]" {
		t.Errorf("after cancel: %d %v", st, res)
	}
}

func TestChatDailyTokenLimit(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Text: []string{"ok"}, Usage: &llmtest.Usage{Input: 80, Output: 30}}},
		func(r *chat.Runner) { r.TokensPerDay = 100 })
	conv := cs.newConversation(t, cs.alice)
	if st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"first","conversation_id":"`+conv+`"}`); st != 200 {
		t.Fatalf("first turn: %d %v", st, body)
	}
	// 110 tokens used of 100: the next turn is refused before the model is called.
	st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"second","conversation_id":"`+conv+`"}`)
	if st != 429 || !strings.Contains(fmt.Sprint(body), "110 of 100") {
		t.Errorf("over the daily limit: %d %v", st, body)
	}
	c := cs.dial(t, conv, cs.alice)
	c.send("chat_send", map[string]string{"content": "third"})
	e := decode[chat.ErrorEvent](t, find(c.until("chat_complete"), "chat_error")[0])
	if e.Reason != "rate_limited" || !strings.Contains(e.Message, "Daily token limit") {
		t.Errorf("chat_error %+v", e)
	}
	if n := len(cs.fake.ChatRequests()); n != 1 {
		t.Errorf("the model was called %d times, want 1", n)
	}
	// Bob has his own budget.
	bobConv := cs.newConversation(t, cs.bob)
	if st, _ := cs.post(t, "/chat/query", cs.bob, `{"query":"hi","conversation_id":"`+bobConv+`"}`); st != 200 {
		t.Errorf("bob: %d", st)
	}
}

// TestChatProviderErrorStored: a turn the provider refuses is stored as
// failed with chat_error's message, reason and suggested action, so the
// reopened answer still says what to do.
func TestChatProviderErrorStored(t *testing.T) {
	cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Default: &llmtest.Turn{Error: &llmtest.ErrorReply{Preset: "permission_denied"}}})
	conv := cs.newConversation(t, cs.alice)
	c := cs.dial(t, conv, cs.alice)
	c.send("chat_send", map[string]string{"content": "hello"})
	e := decode[chat.ErrorEvent](t, find(c.until("chat_complete"), "chat_error")[0])
	if e.Reason == "" || e.SuggestedAction == "" {
		t.Fatalf("chat_error %+v lacks a reason or suggested action", e)
	}
	st, body := cs.getJSON(t, "/api/conversations/"+conv)
	msgs, _ := body["messages"].([]any)
	if st != 200 || len(msgs) != 2 {
		t.Fatalf("GET conversation: %d %v", st, body)
	}
	m := msgs[1].(map[string]any)
	if m["status"] != "error" || m["error"] != e.Message || m["error_reason"] != e.Reason || m["error_suggested_action"] != e.SuggestedAction {
		t.Errorf("stored answer %v, want the chat_error %+v", m, e)
	}
}
