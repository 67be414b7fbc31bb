package server

import (
	"fmt"
	"strings"
	"testing"

	"datachat/internal/chat"
	"datachat/internal/llmtest"
	"datachat/internal/testfiles"
)

func TestDocumentsAndSearch(t *testing.T) {
	ts := newTestServer(t, func(_ *Deps, c *Config) { c.AllowedMetadataKeys = []string{"source"} })
	conv := ts.newConversation(t, ts.alice)
	base := "/api/conversations/" + conv

	dir := t.TempDir()
	st, d := ts.upload(t, base+"/documents", ts.alice, testfiles.Guide(t, dir), "file")
	if st != 201 || d["name"] != testfiles.GuideName || d["pages"] != float64(testfiles.GuidePages) || d["chunks"].(float64) < testfiles.GuidePages {
		t.Fatalf("upload pdf: %d %v", st, d)
	}
	st, md := ts.upload(t, base+"/documents", ts.alice, testfiles.History(t, dir), "file")
	if st != 201 || md["chunks"].(float64) < 2 {
		t.Fatalf("upload md: %d %v", st, md)
	}
	st, res := ts.upload(t, base+"/documents", ts.alice, testfiles.Locked(t, dir), "file")
	if msg := fmt.Sprint(res); st != 400 || !strings.Contains(msg, testfiles.LockedName) || !strings.Contains(msg, "password") {
		t.Errorf("password-protected pdf: %d %v, want 400 naming the file and the password", st, res)
	}

	st, found := ts.post(t, base+"/search", ts.alice, fmt.Sprintf(`{"query":%q,"top_k":3}`, testfiles.GuidePhrase))
	if st != 200 {
		t.Fatalf("search: %d %v", st, found)
	}
	results := found["results"].([]any)
	first := results[0].(map[string]any)
	meta := first["metadata"].(map[string]any)
	if meta["document"] != testfiles.GuideName || meta["page"] != float64(testfiles.GuidePhrasePage) || meta["document_id"] != d["id"] || !strings.Contains(first["text"].(string), testfiles.GuidePhrase) {
		t.Errorf("top result %v", first)
	}
	st, found = ts.post(t, base+"/search", ts.alice, fmt.Sprintf(`{"query":%q}`, testfiles.HistoryQuestion))
	if top := found["results"].([]any)[0].(map[string]any); st != 200 || top["metadata"].(map[string]any)["document"] != testfiles.HistoryName ||
		!strings.Contains(strings.ToLower(top["text"].(string)), "renamed harbour instruments") {
		t.Errorf("history question: %d %v", st, top)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"query":"x","metadata_filters":{"author":"me"}}`, "author"},
		{`{"query":"x","top_k":0}`, "top_k"},
		{`{"query":" "}`, "query"},
		{`{"query":"x","metadata_filters":{"source":[]}}`, "empty"},
		{`{"query":"x","metadata_filters":{"source":{"a":1}}}`, "must be a string"},
	} {
		if st, res := ts.post(t, base+"/search", ts.alice, tc.body); st != 400 || !strings.Contains(fmt.Sprint(res), tc.want) {
			t.Errorf("%s: %d %v", tc.body, st, res)
		}
	}
	if st, res := ts.post(t, base+"/search", ts.alice, `{"query":"Harbour","metadata_filters":{"source":"nowhere"}}`); st != 200 || len(res["results"].([]any)) != 0 {
		t.Errorf("allowed filter matching nothing: %d %v", st, res)
	}
	// The one rule (retrieval.CheckFilters) takes a number as its text, as the model's search does.
	if st, res := ts.post(t, base+"/search", ts.alice, `{"query":"Harbour","metadata_filters":{"source":7}}`); st != 200 || len(res["results"].([]any)) != 0 {
		t.Errorf("a number as a filter value: %d %v", st, res)
	}
	if st, _ := ts.post(t, base+"/search", ts.bob, `{"query":"Harbour"}`); st != 404 {
		t.Errorf("bob searching alice's documents: %d", st)
	}

	// Deleting a document takes it out of search.
	req := mustRequest(t, "DELETE", ts.URL+base+"/documents/"+md["id"].(string), ts.alice)
	if st, _ := doJSON(t, req); st != 204 {
		t.Errorf("delete document: %d", st)
	}
	_, found = ts.post(t, base+"/search", ts.alice, `{"query":"Harbour founded"}`)
	for _, r := range found["results"].([]any) {
		if r.(map[string]any)["metadata"].(map[string]any)["document"] == testfiles.HistoryName {
			t.Errorf("deleted document still found")
		}
	}
	_, list := ts.getJSON(t, base+"/documents")
	if docs := list["documents"].([]any); len(docs) != 1 {
		t.Errorf("documents after delete: %v", docs)
	}
}

func TestChatCitesDocuments(t *testing.T) {
	var system string
	cs := newChatServer(t, llmtest.Gemini, llmtest.Script{Default: &llmtest.Turn{
		ReplyFunc: func(r *llmtest.Request) string {
			system = r.Messages[0].Text
			return "Clear names beat clever comments [1]."
		},
	}})
	conv := cs.newConversation(t, cs.alice)
	if st, d := cs.upload(t, "/api/conversations/"+conv+"/documents", cs.alice, testfiles.Guide(t, t.TempDir()), "file"); st != 201 {
		t.Fatalf("upload: %d %v", st, d)
	}
	c := cs.dial(t, conv, cs.alice)
	evs := c.ask("Why are clear names better than clever comments?")
	if want := fmt.Sprintf("[1] %s, page %d", testfiles.GuideName, testfiles.GuidePhrasePage); !strings.Contains(system, want) || !strings.Contains(system, testfiles.GuidePhrase) {
		t.Errorf("system prompt lacks the cited excerpt:\n%s", system)
	}
	if !cs.fake.ChatRequests()[0].HasTool("search_documents") {
		t.Errorf("search_documents not offered")
	}
	done := decode[chat.CompleteEvent](t, find(evs, "chat_complete")[0])
	if len(done.Sources) == 0 || done.Sources[0].Metadata["document"] != testfiles.GuideName || fmt.Sprint(done.Sources[0].Metadata["page"]) != fmt.Sprint(testfiles.GuidePhrasePage) {
		t.Errorf("chat_complete sources %+v", done.Sources)
	}
	// Reopened, the answer still has them: its [1] resolves as it did.
	st, conversation := cs.getJSON(t, "/api/conversations/"+conv)
	if st != 200 {
		t.Fatalf("GET conversation: %d %v", st, conversation)
	}
	msgs, _ := conversation["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages %v", msgs)
	}
	stored, _ := msgs[1].(map[string]any)["sources"].([]any)
	if len(stored) != len(done.Sources) || stored[0].(map[string]any)["id"] != done.Sources[0].ID ||
		stored[0].(map[string]any)["text"] != done.Sources[0].Text {
		t.Errorf("stored sources %v, want those of chat_complete %+v", stored, done.Sources)
	}
	if _, ok := msgs[0].(map[string]any)["sources"]; ok {
		t.Errorf("the user's message has sources: %v", msgs[0])
	}
	// /chat/query returns the same sources with retrieval timings.
	st, body := cs.post(t, "/chat/query", cs.alice, `{"query":"clear names?","conversation_id":"`+conv+`"}`)
	if st != 200 || len(body["sources"].([]any)) == 0 {
		t.Fatalf("/chat/query: %d %v", st, body)
	}
	if u := body["usage"].(map[string]any); u["retrieval_ms"].(float64) <= 0 {
		t.Errorf("retrieval_ms %v", u["retrieval_ms"])
	}
}
