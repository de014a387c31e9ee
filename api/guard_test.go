package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cycled/cycled/api"
)

// TestAdminDNSRebinding: with no token, an admin request is served only when its Host is
// a loopback address or localhost and its Origin, if any, is that same origin; a web page
// on a name that resolves to 127.0.0.1 (DNS rebinding) sends its own name in both, and is
// refused. With a token, the token decides.
func TestAdminDNSRebinding(t *testing.T) {
	r := newRig(t, rigOptions{})
	u, _ := url.Parse(r.srv.URL)
	port := u.Port()
	for _, tc := range []struct {
		name         string
		host, origin string
		fetchSite    string
		status       int
		code         string
	}{
		{name: "loopback host", host: "127.0.0.1:" + port, status: 200},
		{name: "localhost", host: "localhost:" + port, status: 200},
		{name: "localhost without port", host: "localhost", status: 200},
		{name: "LOCALHOST", host: "LOCALHOST:" + port, status: 200},
		{name: "ipv6 loopback", host: "[::1]:" + port, status: 200},
		{name: "other loopback address", host: "127.0.0.2:" + port, status: 200},
		{name: "same loopback origin (dashboard)", host: "127.0.0.1:" + port, origin: "http://127.0.0.1:" + port, fetchSite: "same-origin", status: 200},
		{name: "same localhost origin", host: "localhost:" + port, origin: "http://localhost:" + port, status: 200},
		{name: "rebinding", host: "evil.example:" + port, origin: "http://evil.example:" + port, fetchSite: "same-origin", status: 403, code: "foreign_host"},
		{name: "rebinding without origin", host: "evil.example:" + port, status: 403, code: "foreign_host"},
		{name: "foreign host without port", host: "evil.example", status: 403, code: "foreign_host"},
		{name: "loopback-looking name", host: "127.0.0.1.evil.example:" + port, status: 403, code: "foreign_host"},
		{name: "localhost suffix", host: "localhost.evil.example:" + port, status: 403, code: "foreign_host"},
		{name: "origin of another port", host: "127.0.0.1:" + port, origin: "http://127.0.0.1:1", status: 403, code: "cross_origin"},
		{name: "origin on another loopback name", host: "127.0.0.1:" + port, origin: "http://localhost:" + port, status: 403, code: "cross_origin"},
		{name: "null origin", host: "127.0.0.1:" + port, origin: "null", status: 403, code: "cross_origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := []string{"Host", tc.host}
			if tc.origin != "" {
				hdr = append(hdr, "Origin", tc.origin)
			}
			if tc.fetchSite != "" {
				hdr = append(hdr, "Sec-Fetch-Site", tc.fetchSite)
			}
			if tc.status == 200 {
				r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil, hdr...)
				return
			}
			r.expectError(tc.status, tc.code, http.MethodPost, "/modules",
				jsonBody(`{"name": "x", "tier": "work"}`), append(hdr, "Content-Type", "application/json")...)
		})
	}
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/modules/x", nil) // nothing registered
	// Read routes keep answering any Host.
	r.expect(http.StatusOK, http.MethodGet, "/healthz", nil, "Host", "evil.example:"+port)

	t.Run("with a token the token decides", func(t *testing.T) {
		r := newRig(t, rigOptions{opts: func(o *api.Options) { o.AdminToken = "s3cret" }})
		r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil, "Host", "cycled.internal:8080", "Authorization", "Bearer s3cret")
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Host", "cycled.internal:8080")
	})
}

// TestAdminUnexpectedToken: with no token configured, a request that presents one (right
// or wrong, there is none to compare with) is refused 401 rather than served as if it
// had none.
func TestAdminUnexpectedToken(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, auth := range []string{"Bearer wrong", "Bearer ", "Basic dXNlcjpwYXNz"} {
		e := r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Authorization", auth)
		if !strings.Contains(e.Error.Message, "no admin token is configured") {
			t.Errorf("%q: message %q", auth, e.Error.Message)
		}
	}
	r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil)
}

// fakeNow is a settable clock for the admin guard.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// TestAdminAuthFailures: failed authentications are counted by reason, logged with the
// remote address and route but never the token, and an address that fails more than
// AuthFailureBurst times in a row is answered 429 (even with the right token) until it
// has earned an attempt back.
func TestAdminAuthFailures(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1e9, 0)}
	const tok, wrong = "s3cret-token", "guess-4f2a91"
	r := newRig(t, rigOptions{opts: func(o *api.Options) {
		o.AdminToken = tok
		*o = api.WithClock(*o, clk.now)
	}})
	for range api.AuthFailureBurst {
		r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer "+wrong)
	}
	res, b := r.do(http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer "+tok)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "2" || !strings.Contains(string(b), "too_many_failures") {
		t.Fatalf("after %d failures, the right token: %d Retry-After %q %s", api.AuthFailureBurst, res.StatusCode, res.Header.Get("Retry-After"), b)
	}
	clk.add(api.AuthFailureEvery)
	r.expect(http.StatusOK, http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer "+tok)
	r.expectError(http.StatusUnauthorized, "unauthorized", http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer "+wrong)
	r.expectError(http.StatusTooManyRequests, "too_many_failures", http.MethodPost, "/emergency/reset", nil, "Authorization", "Bearer "+tok)

	if got := refusedCount(t, r, "invalid_token"); got != api.AuthFailureBurst+1 {
		t.Errorf("invalid_token refusals counted %v, want %d", got, api.AuthFailureBurst+1)
	}
	if got := refusedCount(t, r, "too_many_failures"); got != 2 {
		t.Errorf("too_many_failures refusals counted %v, want 2", got)
	}
	lines := r.logs.FilterMessage("admin request refused").All()
	if len(lines) != api.AuthFailureBurst+3 {
		t.Fatalf("%d refusal log lines, want %d", len(lines), api.AuthFailureBurst+3)
	}
	for _, l := range lines {
		f := l.ContextMap()
		if f["path"] != "/emergency/reset" || !strings.HasPrefix(f["remote"].(string), "127.0.0.1:") || f["reason"] == "" {
			t.Errorf("refusal log line without route, remote address or reason: %v", f)
		}
	}
	for _, l := range r.logs.All() {
		for k, v := range l.ContextMap() {
			if s, ok := v.(string); ok && (strings.Contains(s, wrong) || strings.Contains(s, tok)) {
				t.Errorf("log line %q shows a token in %s", l.Message, k)
			}
		}
	}
}

// TestAdminRefusalLogRateLimited: a flood of refusals writes at most a burst of log lines
// a second; the next line says how many were left out.
func TestAdminRefusalLogRateLimited(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1e9, 0)}
	r := newRig(t, rigOptions{opts: func(o *api.Options) { *o = api.WithClock(*o, clk.now) }})
	for range 25 {
		r.expectError(http.StatusForbidden, "foreign_host", http.MethodPost, "/emergency/reset", nil, "Host", "evil.example")
	}
	lines := r.logs.FilterMessage("admin request refused")
	if n := lines.Len(); n >= 25 || n == 0 {
		t.Fatalf("%d log lines for 25 refusals in an instant", n)
	}
	logged := lines.Len()
	clk.add(time.Minute)
	r.expectError(http.StatusForbidden, "foreign_host", http.MethodPost, "/emergency/reset", nil, "Host", "evil.example")
	all := r.logs.FilterMessage("admin request refused").All()
	last := all[len(all)-1].ContextMap()
	if len(all) != logged+1 || last["suppressed_since_last"] != int64(25-logged) {
		t.Fatalf("after a quiet minute: %d lines (had %d), last %v", len(all), logged, last)
	}
	if got := refusedCount(t, r, "foreign_host"); got != 26 {
		t.Errorf("foreign_host refusals counted %v, want 26", got)
	}
}

// refusedCount is the value of cycled_http_admin_refused_total{reason}.
func refusedCount(t *testing.T, r *rig, reason string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cycled_http_admin_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
