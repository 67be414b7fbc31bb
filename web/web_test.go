package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHandler(t *testing.T) {
	h := Handler()
	tests := []struct {
		path                         string
		status                       int
		contentType, cache, contains string
	}{
		{"/", 200, "text/html; charset=utf-8", "no-cache", `data-testid="api-key-input"`},
		{"/index.html", 200, "text/html; charset=utf-8", "no-cache", `data-testid="chat-input"`},
		{"/assets/app.css", 200, "text/css; charset=utf-8", "no-cache", ".composer"},
		{"/assets/js/main.js", 200, "text/javascript; charset=utf-8", "no-cache", "import"},
		{"/assets/vendor/chart-4.6.1.umd.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", "Released under the MIT License"},
		{"/assets/nope.js", 404, "", "", ""},
		{"/api/conversations", 404, "", "", ""},
		{"/assets/../web.go", 404, "", "", ""},
		{"/web.go", 404, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := get(t, h, tt.path, nil)
			if rec.Code != tt.status {
				t.Fatalf("status: got %d, want %d", rec.Code, tt.status)
			}
			if tt.status != http.StatusOK {
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tt.contentType {
				t.Errorf("Content-Type: got %q, want %q", got, tt.contentType)
			}
			if got := rec.Header().Get("Cache-Control"); got != tt.cache {
				t.Errorf("Cache-Control: got %q, want %q", got, tt.cache)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options: got %q, want nosniff", got)
			}
			if !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("body does not contain %q", tt.contains)
			}
		})
	}
}

func TestHandlerETag(t *testing.T) {
	h := Handler()
	rec := get(t, h, "/assets/app.css", nil)
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	rec = get(t, h, "/assets/app.css", http.Header{"If-None-Match": {etag}})
	if rec.Code != http.StatusNotModified {
		t.Errorf("revalidation: got %d, want 304", rec.Code)
	}
}

func TestIndexCSP(t *testing.T) {
	rec := get(t, Handler(), "/", nil)
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "connect-src 'self'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
}

func TestHandlerRejectsWrites(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: got %d, want 405", rec.Code)
	}
}

// TestPageIsSelfContained checks that the page makes no external request: no
// http(s) URL in a src/href of index.html, no CDN import in the modules, and
// every module import resolves to an embedded file.
func TestPageIsSelfContained(t *testing.T) {
	index, err := Files.ReadFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).Find(index); m != nil {
		t.Errorf("index.html loads from another origin: %s", m)
	}
	importRE := regexp.MustCompile(`(?m)^\s*import\s[^'"]*['"]([^'"]+)['"]`)
	eachModule(t, func(p string, b []byte) {
		if regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`).Match(b) {
			t.Errorf("%s uses an HTML-parsing or eval API", p)
		}
		for _, m := range importRE.FindAllSubmatch(b, -1) {
			spec := string(m[1])
			if !strings.HasPrefix(spec, "./") {
				t.Errorf("%s imports %q: only relative imports of embedded modules are allowed", p, spec)
				continue
			}
			target := "assets/js/" + strings.TrimPrefix(spec, "./")
			if _, err := fs.Stat(Files, target); err != nil {
				t.Errorf("%s imports %q: %v", p, spec, err)
			}
		}
	})
}

// TestModulesFindTheirElements checks that every element a module looks up
// by id — $('…') or document.getElementById('…') — is in index.html: a
// renamed or missing element would otherwise fail only when that path of
// the page runs (a null where an element was expected).
func TestModulesFindTheirElements(t *testing.T) {
	index, err := Files.ReadFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\sid="([^"]+)"`).FindAllSubmatch(index, -1) {
		if ids[string(m[1])] {
			t.Errorf("index.html has two elements with id %q", m[1])
		}
		ids[string(m[1])] = true
	}
	lookup := regexp.MustCompile(`(?:\$|getElementById)\(\s*'([^'$` + "`" + `]+)'\s*\)`)
	made := regexp.MustCompile(`\bid: '([^']+)'`) // elements a module builds itself
	eachModule(t, func(p string, b []byte) {
		own := map[string]bool{}
		for _, m := range made.FindAllSubmatch(b, -1) {
			own[string(m[1])] = true
		}
		for _, m := range lookup.FindAllSubmatch(b, -1) {
			if id := string(m[1]); !ids[id] && !own[id] {
				t.Errorf("%s looks up #%s, which index.html does not have", p, id)
			}
		}
	})
	if len(ids) < 50 {
		t.Errorf("found only %d ids in index.html: the pattern no longer reads it", len(ids))
	}
}

// eachModule calls check with the path and text of each module the page
// embeds under assets/js (and fails when there is none).
func eachModule(t *testing.T, check func(path string, src []byte)) {
	t.Helper()
	n := 0
	err := fs.WalkDir(Files, "assets/js", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := Files.ReadFile(p)
		if err != nil {
			return err
		}
		check(p, b)
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no module under assets/js")
	}
}
