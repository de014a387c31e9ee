// Package ui is the daemon's live dashboard: a page and its assets, embedded in the binary
// (plain HTML, CSS and JavaScript with no build step and nothing fetched from elsewhere),
// served on GET / and GET /ui/<asset>. The page reads the API of the same origin: the SSE
// stream /ticks/stream (falling back to long-polling /ticks/latest), /breakers,
// /blackboard, /modules, /config, /ticks for older history and for its filters, and
// /events for the timeline when the flight recorder runs; operator actions use the
// admin routes with a bearer token the page asks for and keeps in the tab's
// sessionStorage only. docs/decisions.md ("Dashboard") records the choices.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only this origin's scripts, styles and connections, no
// inline script, and no framing (the page carries operator actions: no clickjacking).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is an embedded file with its entity tag.
type asset struct {
	body []byte
	etag string
}

// Handler returns the handler of the dashboard: the page on "/", its assets under "/ui/"
// (the page is also "/ui/index.html"). Any other path answers 404 with a JSON error like
// the API's. Responses carry an ETag (of the content), so a reload revalidates cheaply.
func Handler() http.Handler {
	assets := map[string]asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		assets[strings.TrimPrefix(p, "static/")] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("ui: embedded assets unreadable: " + err.Error()) // impossible: they are in the binary
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The assets change with the binary: revalidate (by ETag) rather than cache.
		h.Set("Cache-Control", "no-cache")
		name := "index.html"
		if r.URL.Path != "/" {
			name = strings.TrimPrefix(r.URL.Path, "/ui/")
		}
		a, ok := assets[name]
		if !ok || (name != "index.html" && name == r.URL.Path) {
			notFound(w, r)
			return
		}
		h.Set("ETag", a.etag)
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			h.Set("Content-Type", ct)
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

// notFound answers 404 with the daemon's JSON error shape.
func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	body, _ := json.Marshal(map[string]map[string]string{"error": {"code": "not_found", "message": "no dashboard asset " + r.URL.Path, "field": ""}})
	_, _ = w.Write(append(body, '\n'))
}
