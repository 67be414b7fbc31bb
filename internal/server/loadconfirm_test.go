package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"datachat/internal/chat"
	"datachat/internal/llmtest"
)

// figures serves a small CSV and counts the requests that reached it.
func figures(t *testing.T) (url string, hits *atomic.Int32) {
	hits = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("region,revenue\nnorth,10\nsouth,32\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/figures.csv", hits
}

// loadScript: the model calls load_dataset with url, then answers from the
// tool's result.
func loadScript(url string) llmtest.Script {
	return llmtest.Script{Turns: []llmtest.Turn{
		{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("load_dataset", `{"url":"`+url+`"}`)}},
		{Match: &llmtest.Match{LastRole: "tool", Contains: "declined"}, Text: []string{"Not loaded."}},
		{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Loaded."}},
	}}
}

// TestLoadDatasetAsksFirst: a URL the model did not get from the user (one
// planted in a document or a cell, maybe carrying data out in its query)
// is loaded only after the user approves, with the full URL shown; nothing is
// requested before. A URL the user gave loads at once, unless every action
// must be confirmed.
func TestLoadDatasetAsksFirst(t *testing.T) {
	t.Run("planted URL, declined", func(t *testing.T) {
		url, hits := figures(t)
		url += "?d=the-secret-cell"
		cs := newChatServer(t, llmtest.OpenAI, loadScript(url))
		conv := cs.newConversation(t, cs.alice)
		c := cs.dial(t, conv, cs.alice)
		c.send("chat_send", map[string]string{"content": "Summarise the figures the report mentions."})
		evs := c.until("confirmation_required")
		conf := decode[chat.ConfirmationEvent](t, find(evs, "confirmation_required")[0])
		var params struct {
			URL string `json:"url"`
		}
		json.Unmarshal(conf.Parameters, &params)
		if conf.Action != "load_dataset" || params.URL != url {
			t.Fatalf("confirmation %+v, want load_dataset of %s", conf, url)
		}
		if hits.Load() != 0 {
			t.Fatalf("the URL was requested %d times before approval", hits.Load())
		}
		c.send("confirm_action", map[string]any{"id": conf.ID, "approved": false})
		evs = c.until("chat_complete")
		if tokens(evs) != "Not loaded." || hits.Load() != 0 {
			t.Errorf("answer %q, %d requests", tokens(evs), hits.Load())
		}
		if ds, _ := cs.Store.Datasets(context.Background(), conv); len(ds) != 0 {
			t.Errorf("%d datasets after a declined load", len(ds))
		}
	})
	t.Run("planted URL, approved", func(t *testing.T) {
		url, hits := figures(t)
		cs := newChatServer(t, llmtest.Gemini, loadScript(url))
		conv := cs.newConversation(t, cs.alice)
		c := cs.dial(t, conv, cs.alice)
		// The user gave a different address; the model's is not it.
		c.send("chat_send", map[string]string{"content": "Load " + strings.Replace(url, "figures", "other", 1) + " and sum it."})
		conf := decode[chat.ConfirmationEvent](t, find(c.until("confirmation_required"), "confirmation_required")[0])
		c.send("confirm_action", map[string]any{"id": conf.ID, "approved": true})
		evs := c.until("chat_complete")
		if tokens(evs) != "Loaded." || hits.Load() != 1 {
			t.Errorf("answer %q, %d requests", tokens(evs), hits.Load())
		}
		if ds, _ := cs.Store.Datasets(context.Background(), conv); len(ds) != 1 {
			t.Errorf("%d datasets after an approved load", len(ds))
		}
	})
	t.Run("URL from an earlier message of the user", func(t *testing.T) {
		url, hits := figures(t)
		cs := newChatServer(t, llmtest.OpenAI, llmtest.Script{Turns: []llmtest.Turn{
			{Match: &llmtest.Match{LastRole: "user", Contains: "Hello"}, Text: []string{"Hi."}},
			{Match: &llmtest.Match{LastRole: "user"}, ToolCalls: []llmtest.ToolCall{llmtest.Call("load_dataset", `{"url":"`+url+`"}`)}},
			{Match: &llmtest.Match{LastRole: "tool"}, Text: []string{"Loaded."}},
		}})
		conv := cs.newConversation(t, cs.alice)
		c := cs.dial(t, conv, cs.alice)
		c.ask("Hello, my data is at " + url)
		evs := c.ask("Now load it.")
		if len(find(evs, "confirmation_required")) != 0 || tokens(evs) != "Loaded." || hits.Load() != 1 {
			t.Errorf("events %v, answer %q, %d requests", types(evs), tokens(evs), hits.Load())
		}
	})
	t.Run("always confirm", func(t *testing.T) {
		url, hits := figures(t)
		cs := newChatServer(t, llmtest.Ollama, loadScript(url), func(r *chat.Runner) { r.ConfirmAlways = true })
		conv := cs.newConversation(t, cs.alice)
		c := cs.dial(t, conv, cs.alice)
		c.send("chat_send", map[string]string{"content": "Load " + url})
		conf := decode[chat.ConfirmationEvent](t, find(c.until("confirmation_required"), "confirmation_required")[0])
		if conf.Action != "load_dataset" || hits.Load() != 0 {
			t.Fatalf("confirmation %+v, %d requests", conf, hits.Load())
		}
		c.send("confirm_action", map[string]any{"id": conf.ID, "approved": true})
		if evs := c.until("chat_complete"); tokens(evs) != "Loaded." || hits.Load() != 1 {
			t.Errorf("answer %q, %d requests", tokens(evs), hits.Load())
		}
	})
}
