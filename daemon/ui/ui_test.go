package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cycled/cycled/daemon/ui"
)

func TestHandler(t *testing.T) {
	tests := []struct {
		path, method string
		status       int
		ctype, body  string
	}{
		{"/", "GET", 200, "text/html", `<script src="/ui/app.js"`},
		{"/", "HEAD", 200, "text/html", ""},
		{"/ui/app.js", "GET", 200, "text/javascript", "requestAnimationFrame"},
		{"/ui/app.js", "POST", 200, "text/javascript", "requestAnimationFrame"}, // the router decides methods
		{"/ui/app.css", "GET", 200, "text/css", "prefers-color-scheme"},
		{"/ui/index.html", "GET", 200, "text/html", "<!doctype html>"},
		{"/ui/", "GET", 404, "application/json", `"not_found"`},
		{"/ui/nope.js", "GET", 404, "application/json", `"no dashboard asset /ui/nope.js"`},
		{"/ui/static/app.js", "GET", 404, "application/json", `"not_found"`},
		{"/ui/../ui.go", "GET", 404, "application/json", `"not_found"`},
		{"/other", "GET", 404, "application/json", `"not_found"`},
	}
	h := ui.Handler()
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/", nil)
			req.URL.Path = tc.path // unclean paths reach the handler as they are
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("%s %s = %d %q %.200q, want %d %q containing %q", tc.method, tc.path, rec.Code,
					rec.Header().Get("Content-Type"), rec.Body.String(), tc.status, tc.ctype, tc.body)
			}
			if tc.status == 404 && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("404 body is not JSON: %q", rec.Body.String())
			}
			for _, hdr := range []string{"Content-Security-Policy", "X-Content-Type-Options"} {
				if rec.Header().Get(hdr) == "" {
					t.Errorf("no %s header", hdr)
				}
			}
		})
	}
}

// The page allows no inline script, no other origin, and no framing.
func TestContentSecurityPolicy(t *testing.T) {
	rec := httptest.NewRecorder()
	ui.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(rec.Body.String(), "<script>") || strings.Contains(rec.Body.String(), " style=") {
		t.Error("the page has inline script or style, which its CSP refuses")
	}
}

func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("GET /", ui.Handler()) // the page on "/", its assets under "/ui/"
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}

// A reload revalidates by ETag and gets 304 when the binary has not changed.
func TestHandlerRevalidates(t *testing.T) {
	h := ui.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/app.js", nil))
	tag := rec.Header().Get("ETag")
	if tag == "" {
		t.Fatal("no ETag")
	}
	req := httptest.NewRequest("GET", "/ui/app.js", nil)
	req.Header.Set("If-None-Match", tag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Fatalf("revalidation = %d, want 304", rec.Code)
	}
}
