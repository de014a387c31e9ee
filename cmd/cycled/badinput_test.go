package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bad input against the running daemon: every request of the table gets the expected
// status and, when the API answers it, a JSON error; slow-header connections are closed by
// the server's ReadHeaderTimeout; none of it crashes the daemon or disturbs the tick.

const badInputToken = "bad-input-token-7f3c"

// badInputConfig runs at 100 Hz so that the tests can tell whether the tick is disturbed.
func badInputConfig(t *testing.T, httpSection string) string {
	return `
cycle: {period: 10ms, history: 2000}
modules:
  - {name: guard, tier: safety, builtin: {value: {clear: true}}}
  - {name: recall, tier: knowledge, builtin: {value: 1}}
  - {name: plan, tier: planning, builtin: {value: go}}
` + httpSection + "\nstate_dir: " + t.TempDir() + "\n"
}

// errorAnswer is the JSON error body.
type errorAnswer struct {
	Error *struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Field    string `json:"field"`
		Problems []struct {
			Field string `json:"field"`
		} `json:"problems"`
	} `json:"error"`
}

// badInput is one row of the table.
type badInput struct {
	name    string
	method  string
	path    string // sent as is (no cleaning, no escaping)
	body    string
	ctype   string // Content-Type; "" for none
	auth    string // the Authorization header: "" none, "token" the right one, else as given
	chunked bool   // send the body without a Content-Length
	header  [2]string

	status int
	code   string   // the JSON error code; "" to skip the check
	field  string   // the JSON error field; "" to skip the check
	fields []string // every field of the error's problems, in order; nil to skip the check
	plain  bool     // answered by net/http before the API: not JSON
}

func (r badInput) send(t *testing.T, base string) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(strings.NewReader(r.body)) // unknown length: chunked
		}
	}
	req, err := http.NewRequest(r.method, base+"/", body)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Opaque = r.path // exactly this request target
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	switch r.auth {
	case "":
	case "token":
		req.Header.Set("Authorization", "Bearer "+badInputToken)
	default:
		req.Header.Set("Authorization", r.auth)
	}
	if r.header[0] != "" {
		req.Header.Set(r.header[0], r.header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", r.method, r.path, err)
	}
	return resp.StatusCode, resp.Header, b
}

func badInputTable() []badInput {
	big := `{"name": "big", "tier": "planning", "builtin": {"value": "` + strings.Repeat("x", 2<<20) + `"}}`
	return []badInput{
		// Malformed JSON.
		{name: "malformed module", method: "POST", path: "/modules", body: `{"name": `, ctype: "application/json", auth: "token", status: 400, code: "malformed_json"},
		{name: "malformed faults", method: "POST", path: "/modules/recall/faults", body: `{"fail_rate": }`, ctype: "application/json", auth: "token", status: 400, code: "malformed_json"},
		{name: "trailing data", method: "POST", path: "/modules", body: `{"name": "a", "tier": "planning"} {}`, ctype: "application/json", auth: "token", status: 400, code: "malformed_json"},
		{name: "not an object", method: "POST", path: "/modules", body: `["name"]`, ctype: "application/json", auth: "token", status: 400},
		{name: "empty module body", method: "POST", path: "/modules", ctype: "application/json", auth: "token", status: 400, code: "empty_body"},
		{name: "invalid UTF-8", method: "POST", path: "/modules", body: "{\"name\": \"\xff\xfe\", \"tier\": \"planning\"}", ctype: "application/json", auth: "token", status: 422, field: "name"},
		// Unknown fields and wrong types.
		{name: "unknown module field", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "budegt": 1}`, ctype: "application/json", auth: "token", status: 400, field: "budegt"},
		{name: "unknown fault field", method: "POST", path: "/modules/recall/faults", body: `{"fail_rte": 1}`, ctype: "application/json", auth: "token", status: 400, field: "fail_rte"},
		{name: "wrong type", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "every": "often"}`, ctype: "application/json", auth: "token", status: 400, field: "every"},
		{name: "string for a number", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "every": "3"}`, ctype: "application/json", auth: "token", status: 400, field: "every"},
		{name: "string for a bool", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "emergency": "TRUE"}`, ctype: "application/json", auth: "token", status: 400, field: "emergency"},
		{name: "number for a name", method: "POST", path: "/modules", body: `{"name": 123, "tier": "planning"}`, ctype: "application/json", auth: "token", status: 400, field: "name"},
		{name: "two wrong types", method: "POST", path: "/modules", body: `{"name": 123, "tier": "planning", "every": "3"}`, ctype: "application/json", auth: "token", status: 400, field: "name", fields: []string{"name", "every"}},
		{name: "string for a fail rate", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "builtin": {"fail_rate": "0.5"}}`, ctype: "application/json", auth: "token", status: 400, field: "builtin.fail_rate"},
		{name: "boolean for a priority", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "priority": true}`, ctype: "application/json", auth: "token", status: 400, field: "priority"},
		// A priority is an integer or "critical": another string has the right type and a wrong value.
		{name: "hex string for a priority", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning", "priority": "0x10"}`, ctype: "application/json", auth: "token", status: 422, field: "priority"},
		{name: "object for a name", method: "POST", path: "/modules", body: `{"name": {"a": 1}, "tier": "planning"}`, ctype: "application/json", auth: "token", status: 400, field: "name"},
		{name: "wrong fault type", method: "POST", path: "/modules/recall/faults", body: `{"panic": "yes"}`, ctype: "application/json", auth: "token", status: 400, field: "panic"},
		{name: "fault value out of range", method: "POST", path: "/modules/recall/faults", body: `{"fail_rate": 2}`, ctype: "application/json", auth: "token", status: 422, field: "fail_rate"},
		// Huge bodies: declared, and streamed without a length.
		{name: "huge body", method: "POST", path: "/modules", body: big, ctype: "application/json", auth: "token", status: 413, code: "body_too_large"},
		{name: "huge chunked body", method: "POST", path: "/modules", body: big, chunked: true, ctype: "application/json", auth: "token", status: 413, code: "body_too_large"},
		{name: "huge faults body", method: "POST", path: "/modules/recall/faults", body: big, ctype: "application/json", auth: "token", status: 413, code: "body_too_large"},
		// Wrong content type.
		{name: "text/plain", method: "POST", path: "/modules", body: `{}`, ctype: "text/plain", auth: "token", status: 415, code: "unsupported_media_type"},
		{name: "form", method: "POST", path: "/modules/recall/faults", body: `a=b`, ctype: "application/x-www-form-urlencoded", auth: "token", status: 415, code: "unsupported_media_type"},
		{name: "unparsable content type", method: "POST", path: "/modules", body: `{}`, ctype: "application/json; =", auth: "token", status: 415},
		// Ids and query parameters.
		{name: "non-numeric id", method: "GET", path: "/ticks/abc", status: 400, code: "bad_parameter", field: "id"},
		{name: "negative id", method: "GET", path: "/ticks/-1", status: 400, field: "id"},
		{name: "id overflow", method: "GET", path: "/ticks/99999999999999999999999", status: 400, field: "id"},
		{name: "id past the history", method: "GET", path: "/ticks/18446744073709551615", status: 404, code: "not_found"},
		{name: "negative limit", method: "GET", path: "/ticks?limit=-1", status: 400, field: "limit"},
		{name: "zero limit", method: "GET", path: "/ticks?limit=0", status: 400, field: "limit"},
		{name: "non-numeric limit", method: "GET", path: "/ticks?limit=ten", status: 400, field: "limit"},
		{name: "non-numeric before", method: "GET", path: "/ticks?before=x", status: 400, field: "before"},
		{name: "negative wait", method: "GET", path: "/ticks/latest?wait=-1s", status: 400, field: "wait"},
		{name: "non-numeric after", method: "GET", path: "/ticks/latest?wait=1ms&after=x", status: 400, field: "after"},
		{name: "after without wait", method: "GET", path: "/ticks/latest?after=3", status: 400, field: "after"},
		{name: "bad escape in path", method: "GET", path: "/ticks/%zz", status: 400, plain: true},
		// Path traversal in names.
		{name: "traversal in module name", method: "GET", path: "/modules/..%2F..%2Fetc", status: 404, code: "not_found"},
		{name: "traversal in module delete", method: "DELETE", path: "/modules/..%2F..%2Fetc", auth: "token", status: 404, code: "not_found"},
		{name: "traversal in faults", method: "POST", path: "/modules/..%2F..%2Fetc/faults", body: `{}`, ctype: "application/json", auth: "token", status: 404, code: "not_found"},
		{name: "traversal in breaker", method: "POST", path: "/breakers/..%2F..%2Fetc/reset", auth: "token", status: 404, code: "not_found"},
		{name: "dot-dot in blackboard key", method: "GET", path: "/blackboard/../x", status: 404, code: "not_found"},
		{name: "encoded traversal in key", method: "GET", path: "/blackboard/..%2F..%2Fetc%2Fpasswd", status: 404, code: "not_found"},
		{name: "traversal in module body", method: "POST", path: "/modules", body: `{"name": "../../etc/passwd", "tier": "planning"}`, ctype: "application/json", auth: "token", status: 422, field: "name"},
		// Control characters in a module name.
		{name: "NUL in name", method: "POST", path: "/modules", body: `{"name": "bad\u0000name", "tier": "planning"}`, ctype: "application/json", auth: "token", status: 422, code: "invalid", field: "name"},
		{name: "newline in name", method: "POST", path: "/modules", body: `{"name": "bad\nname", "tier": "planning"}`, ctype: "application/json", auth: "token", status: 422, code: "invalid", field: "name"},
		{name: "escape in name", method: "POST", path: "/modules", body: `{"name": "\u001b[31mred", "tier": "planning"}`, ctype: "application/json", auth: "token", status: 422, code: "invalid", field: "name"},
		// Tokens: 401 on every listener once a token is configured.
		{name: "no token", method: "POST", path: "/emergency/reset", status: 401, code: "unauthorized"},
		{name: "empty token", method: "POST", path: "/emergency/reset", auth: "Bearer ", status: 401, code: "unauthorized"},
		{name: "wrong token", method: "POST", path: "/emergency/reset", auth: "Bearer " + badInputToken + "x", status: 401, code: "unauthorized"},
		{name: "token prefix", method: "POST", path: "/emergency/reset", auth: "Bearer " + badInputToken[:8], status: 401, code: "unauthorized"},
		{name: "basic auth", method: "POST", path: "/emergency/reset", auth: "Basic " + badInputToken, status: 401, code: "unauthorized"},
		{name: "wrong token on a body route", method: "POST", path: "/modules", body: `{"name": "x", "tier": "planning"}`, ctype: "application/json", auth: "Bearer nope", status: 401, code: "unauthorized"},
		{name: "cross-origin browser request", method: "POST", path: "/emergency/reset", auth: "token", header: [2]string{"Sec-Fetch-Site", "cross-site"}, status: 403, code: "cross_origin"},
		// Routing.
		{name: "unknown route", method: "GET", path: "/nope", status: 404, code: "not_found"},
		{name: "wrong method", method: "PUT", path: "/ticks", status: 405, code: "method_not_allowed"},
		{name: "step tick on a periodic daemon", method: "POST", path: "/ticks", auth: "token", status: 409, code: "not_step_mode"},
		{name: "huge header", method: "GET", path: "/healthz", header: [2]string{"X-Big", strings.Repeat("a", 128<<10)}, status: 431, plain: true},
	}
}

func TestBadInput(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: 127.0.0.1:0, admin_token: "+badInputToken+"}")))
	first := waitTick(t, d, 0)

	for _, r := range badInputTable() {
		t.Run(r.name, func(t *testing.T) {
			status, h, body := r.send(t, d.base)
			if status != r.status {
				t.Fatalf("%s %s: status %d, want %d: %.300s", r.method, r.path, status, r.status, body)
			}
			if r.plain {
				return
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var e errorAnswer
			if err := json.Unmarshal(body, &e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("not a JSON error (%v): %.300s", err, body)
			}
			if r.code != "" && e.Error.Code != r.code {
				t.Errorf("code %q, want %q: %s", e.Error.Code, r.code, body)
			}
			if r.field != "" && e.Error.Field != r.field {
				t.Errorf("field %q, want %q: %s", e.Error.Field, r.field, body)
			}
			var fields []string
			for _, p := range e.Error.Problems {
				fields = append(fields, p.Field)
			}
			if r.fields != nil && !slices.Equal(fields, r.fields) {
				t.Errorf("problems' fields %q, want %q: %s", fields, r.fields, body)
			}
			if status == http.StatusUnauthorized && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %q", h.Get("WWW-Authenticate"))
			}
			if strings.Contains(string(body), badInputToken[:8]) {
				t.Errorf("the answer echoes the token: %s", body)
			}
		})
	}

	// None of it stopped the tick or crashed the daemon.
	last := waitTick(t, d, first)
	if st := d.do("GET", "/healthz", "", nil); st != http.StatusOK {
		t.Fatalf("/healthz = %d after the table", st)
	}
	if last <= first {
		t.Fatalf("ticks did not advance: %d then %d", first, last)
	}
	if strings.Contains(d.stderr(), badInputToken) {
		t.Fatal("the admin token appears in the daemon's log")
	}
}

// TestBadInputSlowloris opens connections that send a request header one line at a time,
// too slowly: the server must close each within ReadHeaderTimeout plus a margin, and the
// tick must go on meanwhile at its rate, its start lag undisturbed.
func TestBadInputSlowloris(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: 127.0.0.1:0, admin_token: "+badInputToken+"}")))
	first := waitTick(t, d, 0)
	host := strings.TrimPrefix(d.base, "http://")

	const conns = 32
	margin := 2 * time.Second
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	t0 := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- slowHeader(host, i, readHeaderTimeout+margin)
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	last := waitTick(t, d, first)
	// At 100 Hz the tick advanced at least at half its rate while the connections hung.
	if want := uint64(elapsed / (20 * time.Millisecond)); last-first < want {
		t.Errorf("%d ticks in %s, want at least %d", last-first, elapsed.Round(time.Millisecond), want)
	}
	var list struct {
		Ticks []struct {
			TickID     uint64  `json:"tick_id"`
			StartLagMs float64 `json:"start_lag_ms"`
		} `json:"ticks"`
	}
	if st := d.do("GET", "/ticks?limit=2000", "", &list); st != http.StatusOK || len(list.Ticks) == 0 {
		t.Fatalf("GET /ticks = %d", st)
	}
	var lags []float64
	for _, s := range list.Ticks {
		if s.TickID > first && s.TickID <= last {
			lags = append(lags, s.StartLagMs)
		}
	}
	slices.Sort(lags)
	// The median start lag stays well under a period: the slow connections cost the tick
	// nothing. (A generous bound: CI machines run other tests at the same time.)
	if med := lags[len(lags)/2]; med > 5 {
		t.Errorf("median start lag %.3f ms during the slow connections (max %.3f ms)", med, lags[len(lags)-1])
	}
	if st := d.do("GET", "/healthz", "", nil); st != http.StatusOK {
		t.Fatalf("/healthz = %d", st)
	}
}

// slowHeader sends a request line and one header line every 300 ms, never finishing the
// header, and returns nil when the server closes the connection within limit (without
// answering, or with a 408).
func slowHeader(host string, i int, limit time.Duration) error {
	c, err := net.Dial("tcp", host)
	if err != nil {
		return err
	}
	defer c.Close()
	t0 := time.Now()
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", host); err != nil {
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			if _, err := fmt.Fprintf(c, "X-Slow-%d: %d\r\n", n, i); err != nil {
				return // closed by the server
			}
		}
	}()
	_ = c.SetReadDeadline(t0.Add(limit + time.Second))
	b, err := io.ReadAll(bufio.NewReader(c))
	took := time.Since(t0)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("connection %d still open after %s", i, took.Round(time.Millisecond))
	case took > limit:
		return fmt.Errorf("connection %d closed after %s, want within %s", i, took.Round(time.Millisecond), limit)
	case took < readHeaderTimeout-time.Second:
		return fmt.Errorf("connection %d closed after %s, before the header timeout (%s): %v %q", i, took.Round(time.Millisecond), readHeaderTimeout, err, b)
	case len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408"):
		return fmt.Errorf("connection %d answered %q", i, b)
	}
	return nil
}

// waitTick waits for a tick after the given id and returns the latest id.
func waitTick(t *testing.T, d *daemon, after uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(d.base + "/ticks/latest?wait=2s&after=" + strconv.FormatUint(after, 10))
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			TickID uint64 `json:"tick_id"`
		}
		st := decodeInto(t, resp, &s)
		resp.Body.Close()
		if st == http.StatusOK && s.TickID > after {
			return s.TickID
		}
	}
	t.Fatalf("no tick after %d within 10 s", after)
	return 0
}

// TestAdminNonLoopbackWithoutToken runs the daemon on a non-loopback address of this host
// with no token: admin routes answer 403 (the read routes still work), and the daemon warns
// at startup. Skipped on a host with no non-loopback IPv4 address; the api package tests
// the same rule with a fake local address.
func TestAdminNonLoopbackWithoutToken(t *testing.T) {
	ip := nonLoopbackIPv4()
	if ip == "" {
		t.Skip("no non-loopback IPv4 address on this host")
	}
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: '"+ip+":0'}")))
	d.waitLog("no admin token configured")
	for _, r := range []badInput{
		{method: "POST", path: "/emergency/reset", status: 403, code: "admin_disabled"},
		{method: "POST", path: "/emergency/reset", auth: "Bearer anything", status: 403, code: "admin_disabled"},
		{method: "POST", path: "/config/reload", status: 403, code: "admin_disabled"},
		{method: "DELETE", path: "/modules/plan", status: 403, code: "admin_disabled"},
	} {
		expectAnswer(t, r, d.base)
	}
	if st := d.do("GET", "/modules/plan", "", nil); st != http.StatusOK {
		t.Errorf("GET /modules/plan = %d", st)
	}
}

// TestAdminWildcardWithoutToken runs the daemon on 0.0.0.0 with no token and sends the
// admin requests to 127.0.0.1: the connection is local, but the listener is not a
// loopback listener, so they answer 403 (the daemon wires its listener into the API).
func TestAdminWildcardWithoutToken(t *testing.T) {
	d := start(t, nil, "--config", write(t, "cycled.yaml", badInputConfig(t, "http: {addr: '0.0.0.0:0'}")))
	d.waitLog("no admin token configured")
	u, err := url.Parse(d.base)
	if err != nil {
		t.Fatal(err)
	}
	local := "http://" + net.JoinHostPort("127.0.0.1", u.Port())
	for _, r := range []badInput{
		{method: "POST", path: "/ticks", status: 403, code: "admin_disabled"},
		{method: "POST", path: "/emergency/reset", status: 403, code: "admin_disabled"},
		{method: "POST", path: "/config/reload", status: 403, code: "admin_disabled"},
		{method: "DELETE", path: "/modules/plan", status: 403, code: "admin_disabled"},
	} {
		expectAnswer(t, r, local)
	}
	if st := d.do("GET", "/modules/plan", "", nil); st != http.StatusOK {
		t.Errorf("GET /modules/plan = %d", st)
	}
}

// expectAnswer sends r to the server at base and checks its status and error code.
func expectAnswer(t *testing.T, r badInput, base string) {
	t.Helper()
	status, _, body := r.send(t, base)
	var e errorAnswer
	_ = json.Unmarshal(body, &e)
	if status != r.status || e.Error == nil || e.Error.Code != r.code {
		t.Errorf("%s %s%s: %d %s, want %d %s", r.method, base, r.path, status, body, r.status, r.code)
	}
}

func nonLoopbackIPv4() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// TestAdminTokenSources runs the daemon with its token from a file (http.admin_token_file)
// and from the environment (CYCLED_HTTP_ADMIN_TOKEN), at debug level: the token works, and
// it shows neither in the logs, nor in GET /config, nor in an answer.
func TestAdminTokenSources(t *testing.T) {
	fileTok := "file-token-4c1d9a"
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("  "+fileTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envTok := "env-token-b85e20"
	for _, tc := range []struct {
		name, tok, http string
		env             []string
	}{
		{name: "file", tok: fileTok, http: "http: {addr: 127.0.0.1:0, admin_token_file: '" + tokFile + "'}"},
		{name: "env", tok: envTok, http: "http: {addr: 127.0.0.1:0}", env: []string{"CYCLED_HTTP_ADMIN_TOKEN=" + envTok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := start(t, tc.env, "--config", write(t, "cycled.yaml", badInputConfig(t, tc.http)), "--log-level", "debug")
			waitTick(t, d, 0)
			ok := badInput{method: "POST", path: "/modules/recall/faults", body: `{"fail_attempts": 1}`, ctype: "application/json", auth: "Bearer " + tc.tok}
			if st, _, body := ok.send(t, d.base); st != http.StatusOK {
				t.Fatalf("with the token: %d %s", st, body)
			}
			wrong := ok
			wrong.auth = "Bearer " + tc.tok + "-wrong"
			if st, _, body := wrong.send(t, d.base); st != http.StatusUnauthorized || strings.Contains(string(body), tc.tok) {
				t.Fatalf("with a wrong token: %d %s", st, body)
			}
			var cfg map[string]any
			if st := d.do("GET", "/config", "", &cfg); st != http.StatusOK {
				t.Fatalf("GET /config = %d", st)
			}
			b, _ := json.Marshal(cfg)
			if strings.Contains(string(b), tc.tok) || !strings.Contains(string(b), `"admin_token":"***"`) {
				t.Fatalf("GET /config shows the token or no redaction: %s", b)
			}
			if code, _ := d.stop(); code != 0 {
				t.Fatalf("exit %d", code)
			}
			logs := d.stderr()
			if !strings.Contains(logs, "admin request") {
				t.Fatalf("no admin audit line in the log:\n%s", logs)
			}
			if strings.Contains(logs, tc.tok) {
				t.Fatalf("the token appears in the log:\n%s", logs)
			}
		})
	}
}
