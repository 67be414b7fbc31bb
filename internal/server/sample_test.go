package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"datachat/internal/sampledata"
)

// TestSample: one POST adds the sample dataset and document through the
// upload path (they are listed, queried and searched like uploads); another
// adds nothing and says so; two at once add it once; another user's
// conversation is not found.
func TestSample(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	url := "/api/conversations/" + conv + "/sample"

	st, body := ts.post(t, url, ts.alice, "")
	if st != http.StatusCreated || body["added"] != true {
		t.Fatalf("first add: %d %v, want 201 and added", st, body)
	}
	if msg, _ := body["message"].(string); !strings.Contains(msg, "table sales") || !strings.Contains(msg, sampledata.DocumentFile) {
		t.Errorf("message %q does not name the table and the document", msg)
	}
	assertSample(t, ts, conv)

	// The table answers SQL as an uploaded one does.
	st, res := ts.post(t, "/api/conversations/"+conv+"/sql", ts.alice, `{"query": "SELECT count(*) AS n FROM sales"}`)
	if st != http.StatusOK || !strings.Contains(fmt.Sprint(res["rows"]), fmt.Sprint(sampledata.Rows())) {
		t.Errorf("count(*) of sales: %d %v, want %d rows", st, res, sampledata.Rows())
	}
	// The guide is searchable.
	st, res = ts.post(t, "/api/conversations/"+conv+"/search", ts.alice, `{"query": "partner channel discount"}`)
	if st != http.StatusOK || !strings.Contains(fmt.Sprint(res["results"]), sampledata.DocumentFile) {
		t.Errorf("search: %d %v, want a result from %s", st, res, sampledata.DocumentFile)
	}

	st, body = ts.post(t, url, ts.alice, "")
	if st != http.StatusOK || body["added"] != false || !strings.Contains(fmt.Sprint(body["message"]), "already") {
		t.Errorf("second add: %d %v, want 200, not added, saying it is already there", st, body)
	}
	assertSample(t, ts, conv)

	// Two clicks at once, in a new conversation: one adds, the other finds it.
	conv2 := ts.newConversation(t, ts.alice)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", ts.URL+"/api/conversations/"+conv2+"/sample", nil)
			req.Header.Set("X-API-Key", ts.alice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	if codes[0]+codes[1] != http.StatusCreated+http.StatusOK {
		t.Errorf("two adds at once answered %v, want one 201 and one 200", codes)
	}
	assertSample(t, ts, conv2)

	// With its document removed, a click adds the document back, and only it.
	_, docs := ts.getJSON(t, "/api/conversations/"+conv+"/documents")
	doc := docs["documents"].([]any)[0].(map[string]any)["id"].(string)
	if st, b := ts.withCookie(t, "DELETE", "/api/conversations/"+conv+"/documents/"+doc, "", "", "X-API-Key", ts.alice); st != http.StatusNoContent {
		t.Fatalf("delete the guide: %d %s", st, b)
	}
	st, body = ts.post(t, url, ts.alice, "")
	if st != http.StatusCreated || body["added"] != true {
		t.Errorf("add after removing the guide: %d %v, want 201 and added", st, body)
	}
	assertSample(t, ts, conv)

	st, body = ts.post(t, url, ts.bob, "")
	if st != http.StatusNotFound {
		t.Errorf("bob adding to alice's conversation: %d %v, want 404", st, body)
	}
	assertSample(t, ts, conv)

	// The per-conversation locks are gone once nobody holds them.
	sampleLocks.mu.Lock()
	left := len(sampleLocks.m)
	sampleLocks.mu.Unlock()
	if left != 0 {
		t.Errorf("%d sample locks left after the requests ended", left)
	}
}

// assertSample checks that conv holds the sample's table and document once each.
func assertSample(t *testing.T, ts *testServer, conv string) {
	t.Helper()
	st, b := ts.get(t, "/api/conversations/"+conv+"/datasets", ts.alice)
	if st != http.StatusOK || strings.Count(b, `"source":"`+sampledata.DatasetFile+`"`) != 1 || !strings.Contains(b, `"name":"sales"`) ||
		!strings.Contains(b, fmt.Sprintf(`"row_count":%d`, sampledata.Rows())) {
		t.Errorf("datasets of %s: %d %s, want table sales from %s once, with %d rows", conv, st, b, sampledata.DatasetFile, sampledata.Rows())
	}
	st, b = ts.get(t, "/api/conversations/"+conv+"/documents", ts.alice)
	if st != http.StatusOK || strings.Count(b, `"name":"`+sampledata.DocumentFile+`"`) != 1 {
		t.Errorf("documents of %s: %d %s, want %s once", conv, st, b, sampledata.DocumentFile)
	}
}
