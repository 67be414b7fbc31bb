package main

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPostgresHostileIDs: every route that takes an id or a name in its path,
// and the WebSocket its conversation's id in the query, sent one
// PostgreSQL's text cannot hold (not UTF-8, a NUL) or one no store holds,
// answers not found or, for the first, a request to send UTF-8 text: never a
// failure of the server. The first-run administrator's key reaches
// every route, the admin ones too.
func TestPostgresHostileIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	p, key := startFirstProc(t, map[string]string{
		"DATACHAT_DATABASE_URL": postgresSchemaURL(t),
		"DATACHAT_DATA_DIR":     t.TempDir(),
		"LLM_PROVIDER":          "openai", "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:1",
	})
	conv := newConversation(t, p.URL(), key)
	routes := []struct{ method, path, body string }{
		{"GET", "/api/conversations/ID", ""},
		{"PATCH", "/api/conversations/ID", `{"title":"x"}`},
		{"DELETE", "/api/conversations/ID", ""},
		{"GET", "/api/conversations/ID/datasets", ""},
		{"GET", "/api/conversations/ID/documents", ""},
		{"GET", "/api/conversations/ID/dictionary", ""},
		{"GET", "/api/conversations/ID/dictionary/tables", ""},
		{"GET", "/api/conversations/ID/export.md", ""},
		{"GET", "/api/conversations/ID/sources", ""},
		{"POST", "/api/conversations/ID/sql", `{"sql":"SELECT 1"}`},
		{"POST", "/api/conversations/ID/search", `{"query":"revenue"}`},
		{"GET", "/api/shared/ID/dictionary/tables", ""},
		{"DELETE", "/api/conversations/CONV/datasets/ID", ""},
		{"PATCH", "/api/conversations/CONV/datasets/ID", `{"description":"x"}`},
		{"DELETE", "/api/conversations/CONV/documents/ID", ""},
		{"DELETE", "/api/conversations/CONV/sources/ID", ""},
		{"DELETE", "/api/keys/ID", ""},
		{"DELETE", "/api/examples/ID", ""},
		{"DELETE", "/api/admin/keys/ID", ""},
		{"POST", "/api/admin/users/ID/disable", ""},
		{"PATCH", "/api/admin/users/ID", `{"role":"member"}`},
		{"DELETE", "/api/admin/users/ID", ""},
		{"PUT", "/api/admin/sources/ID/grants", `{"all_users":true}`},
	}
	for _, id := range []string{"\xff", "a\x00b", "\xe6\x97", "' OR '1'='1", "../../etc/passwd", strings.Repeat("x", 4000)} {
		invalid := strings.ContainsRune(id, 0) || !utf8.ValidString(id)
		for _, rt := range routes {
			path := strings.ReplaceAll(strings.ReplaceAll(rt.path, "CONV", conv), "ID", url.PathEscape(id))
			a := request(t, rt.method, p.URL()+path, key, "application/json", []byte(rt.body))
			switch {
			case a.status >= 500:
				t.Errorf("%s %s: HTTP %d %s; want not found or a bad request", rt.method, path[:min(len(path), 60)], a.status, a.raw)
			case a.status == 400 && !(invalid && strings.Contains(a.raw, "UTF-8")):
				t.Errorf("%s %s: HTTP 400 %s; want not found, or for text that is not UTF-8 a request to send UTF-8", rt.method, path[:min(len(path), 60)], a.raw)
			case a.status == 200 || a.status == 204:
				if rt.method != "GET" {
					t.Errorf("%s %s: HTTP %d %s; want nothing done to an id no store holds", rt.method, path[:min(len(path), 60)], a.status, a.raw)
				}
			}
		}
		// The WebSocket names its conversation in the query.
		a := dialWSAnswer(t, p.URL(), key, url.QueryEscape(id))
		if a.status >= 500 || a.status == 400 && !(invalid && strings.Contains(a.raw, "UTF-8")) {
			t.Errorf("WebSocket to conversation %q: HTTP %d %s; want not found, or for text that is not UTF-8 a request to send UTF-8", id[:min(len(id), 20)], a.status, a.raw)
		}
	}
	if strings.Contains(p.Log(), "SQLSTATE 22021") && strings.Contains(strings.ToLower(p.Log()), "internal") {
		t.Errorf("the server logged a store failure for a client's text:\n%s", p.Log())
	}
	if msgs := conversationMessages(t, p.URL(), key, conv); len(msgs) != 0 {
		t.Errorf("the conversation gained %d messages", len(msgs))
	}
}
