// Package web holds datachat's single-page web UI, embedded in the binary so
// `datachat serve` needs no files beside it and no front-end build step.
//
// The page is plain ES modules (assets/js), one stylesheet (assets/app.css)
// and vendored libraries (assets/vendor, see its README.md). Mount [Handler]
// for "GET /" and "GET /assets/"; the page talks to the JSON API and to the
// WebSocket at /ws on the same origin.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Files is the embedded page: index.html and assets/.
//
//go:embed index.html assets
var Files embed.FS

// contentSecurityPolicy allows only same-origin scripts, styles, API calls and
// WebSocket; no inline script, no external request of any kind.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-src 'none'; frame-ancestors 'none'"

type file struct {
	body        []byte
	etag        string
	contentType string
}

// Handler serves the page at "/" (and "/index.html") and its static files
// under "/assets/". Any other path answers 404, so it can be mounted as the
// catch-all "GET /" of a ServeMux.
//
// Caching: index.html is "no-cache" (always revalidated, so a new binary's
// page shows at once); files under assets/vendor/ carry their version in
// their name and are cached for a year as immutable; the other assets are
// cached but revalidated on use ("no-cache" with a content-hash ETag, which
// answers 304 when unchanged), so the modules of one version never mix with
// another's.
func Handler() http.Handler {
	files := map[string]*file{}
	err := fs.WalkDir(Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := Files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js", ".mjs":
			ct = "text/javascript; charset=utf-8"
		case ".md":
			ct = "text/markdown; charset=utf-8"
		case "":
			ct = "application/octet-stream"
		}
		if ct == "" {
			ct = http.DetectContentType(b)
		}
		files["/"+p] = &file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		panic("web: read embedded files: " + err.Error()) // the embed is fixed at build time
	}
	index := files["/index.html"]

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		var f *file
		h := w.Header()
		switch {
		case p == "/" || p == "/index.html":
			f = index
			h.Set("Cache-Control", "no-cache")
			h.Set("Content-Security-Policy", contentSecurityPolicy)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "no-referrer")
		case strings.HasPrefix(p, "/assets/") && !strings.Contains(p, ".."):
			f = files[p]
			if strings.HasPrefix(p, "/assets/vendor/") {
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				h.Set("Cache-Control", "no-cache")
			}
		}
		if f == nil {
			h.Del("Cache-Control")
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", f.contentType)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
