package server

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"datachat/internal/sharedtest"
)

// TestSharedPDFsUpload uploads every PDF of ../shared/data/docs through the
// API, as a user would, with no outside program (PDF text is read inside
// the binary): the readable ones give their pages and are found by search
// with the page they are on; the password-protected one is refused with a
// message naming the file and what is wrong.
func TestSharedPDFsUpload(t *testing.T) {
	ts := newTestServer(t)
	conv := ts.newConversation(t, ts.alice)
	base := "/api/conversations/" + conv
	for _, tc := range []struct {
		name  string
		pages int
		// phrase is on page (among others, maybe), searched for once the
		// upload is in.
		phrase string
		page   int
		// refused, when the upload must fail: what the message must say.
		refused string
	}{
		{name: "dmca.pdf", pages: 18, phrase: "Vessel Hull Design Protection Act", page: 17},
		{name: "naacl06-shinyama.pdf", pages: 8, phrase: "Unrestricted Relation Discovery", page: 1},
		{name: "pr-00530-ml-lines.pdf", pages: 1, phrase: "Airworthiness Directives", page: 1},
		{name: "google-doc-document.pdf", pages: 1, phrase: "Beautiful is better than ugly", page: 1},
		{name: "redp5110_sampled.pdf", pages: 18, phrase: "Row and Column Access Control", page: 1},
		{name: "libreoffice-writer-password.pdf", refused: "password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, d := ts.upload(t, base+"/documents", ts.alice, sharedtest.Path(t, filepath.Join("data/docs", tc.name)), "file")
			if tc.refused != "" {
				msg := fmt.Sprint(d)
				if st != 400 || !strings.Contains(msg, tc.name) || !strings.Contains(strings.ToLower(msg), tc.refused) {
					t.Fatalf("upload: %d %v, want 400 naming the file and saying %q", st, d, tc.refused)
				}
				return
			}
			if st != 201 || d["name"] != tc.name || d["pages"] != float64(tc.pages) {
				t.Fatalf("upload: %d %v, want 201 with %d pages", st, d, tc.pages)
			}
			st, found := ts.post(t, base+"/search", ts.alice, fmt.Sprintf(`{"query":%q,"top_k":10}`, tc.phrase))
			if st != 200 {
				t.Fatalf("search: %d %v", st, found)
			}
			var pages []any
			for _, r := range found["results"].([]any) {
				r := r.(map[string]any)
				meta := r["metadata"].(map[string]any)
				text := strings.Join(strings.Fields(strings.ToLower(r["text"].(string))), " ")
				if meta["document"] == tc.name && strings.Contains(text, strings.ToLower(tc.phrase)) {
					if meta["page"] == float64(tc.page) {
						return
					}
					pages = append(pages, meta["page"])
				}
			}
			t.Errorf("search for %q: no result from %s on page %d holds it (found on pages %v): %v", tc.phrase, tc.name, tc.page, pages, found["results"])
		})
	}
}
