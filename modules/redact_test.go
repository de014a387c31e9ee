package modules_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cycled/cycled/modules"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:9000/plan", "http://127.0.0.1:9000/plan"},
		{"http://h/plan?api_key=s3cret", "http://h/plan?api_key=***"},
		{"https://h/p?v=2&api_key=s3cret&v=3", "https://h/p?v=***&api_key=***&v=***"},
		{"http://h/p?s3cret", "http://h/p?***"},
		{"http://h/p?=s3cret", "http://h/p?=***"},
		{"http://h/p#s3cret", "http://h/p#***"},
		{"http://user:s3cret@h/p", "http://***@h/p"},
		{"http://h/%zz?api_key=s3cret", "http://h/%zz?***"},
		{"http://user:s3cret@h/%zz", "http://***@h/%zz"},
	} {
		if got := modules.RedactURL(tc.in); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestHTTPSecretsNotShown: a remote module's query values and header values appear in no
// error message, no String and no Redact, while the remote receives them.
func TestHTTPSecretsNotShown(t *testing.T) {
	const secret = "s3cret-9d41"
	var mu sync.Mutex
	var got http.Header
	var query string
	r := newRemote(t, func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got, query = req.Header.Clone(), req.URL.RawQuery
		mu.Unlock()
		reply(200, `{"value": 1}`)(w, req)
	})
	m := r.module(t, "/plan?api_key="+secret, func(s *modules.HTTPSettings) {
		s.Headers = map[string]string{"Authorization": "Bearer " + secret, "X-Team": "blue"}
	})
	if _, err := m.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if got.Get("Authorization") != "Bearer "+secret || got.Get("X-Team") != "blue" || query != "api_key="+secret {
		t.Errorf("remote got headers %v, query %q", got, query)
	}
	mu.Unlock()
	if s := m.Settings(); strings.Contains(s.String(), secret) || strings.Contains(s.Redact().URL, secret) || s.Redact().Headers["Authorization"] != modules.Redacted {
		t.Errorf("settings show the secret: %s / %+v", s, s.Redact())
	}

	// A failed round trip: net/http's error quotes the URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	dead, err := modules.NewHTTP(modules.HTTPSettings{URL: "http://" + closed + "/plan?api_key=" + secret}, modules.WithClient(modules.NewClient()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = dead.Run(context.Background(), nil)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "api_key=***") {
		t.Errorf("transport error %v", err)
	}
	// A URL refused by validation.
	_, err = modules.NewHTTP(modules.HTTPSettings{URL: "/plan?api_key=" + secret})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("validation error %v", err)
	}
}

func TestHTTPHeadersValidation(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		msg         string // "" valid
	}{
		{"Authorization", "Bearer x", ""},
		{"X-Api-Key", "", ""},
		{"bad name", "x", "invalid header name"},
		{"", "x", "invalid header name"},
		{"content-type", "text/plain", "set by the daemon"},
		{"Idempotency-Key", "1", "set by the daemon"},
		{"X-Cycled-Deadline", "1", "set by the daemon"},
		{"Host", "evil", "set by the daemon"},
		{"Proxy-Authorization", "x", "set by the daemon"},
		{"X-Split", "a\r\nX-Injected: 1", "control character"},
		{"X-Big", strings.Repeat("a", modules.MaxHeaderValue+1), "longer than"},
	} {
		s := modules.HTTPSettings{URL: "http://127.0.0.1:1/", Headers: map[string]string{tc.name: tc.value}}
		ps := s.Validate()
		switch {
		case tc.msg == "" && len(ps) != 0:
			t.Errorf("%q: %v", tc.name, ps)
		case tc.msg != "" && (len(ps) != 1 || ps[0].Path != "headers."+tc.name || !strings.Contains(ps[0].Message, tc.msg)):
			t.Errorf("%q: %v, want headers.%s: …%s…", tc.name, ps, tc.name, tc.msg)
		}
	}
}
