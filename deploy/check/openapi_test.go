package check

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// call is one request of the conformance run and the status it must get.
type call struct {
	method, path, body string
	admin              bool   // send the admin token
	token              string // send this bearer token instead
	header             [2]string
	host               string // the Host to name, if not the listener's
	status             int
	stream             bool   // an endless body: validate its first bytes
	before             func() // run before the request
	poll               bool   // repeat (for up to pollFor) until status and contains are met
	contains           string // a text the body must contain
}

// pollFor bounds a call's repetitions while it waits for the recorder's asynchronous writes.
const pollFor = 10 * time.Second

// recorderConfig runs a flight recorder with an in-memory history of two ticks, so that
// older ticks are answered from the database, and a module that fails its first two ticks.
const recorderConfig = `
cycle: {period: 0, history: 2}
recorder: {enabled: true, flush: 10ms}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    builtin: {value: 1, fail_ticks: [[1, 2]]}
`

const stepConfig = `
cycle: {period: 0}
bulkheads: {db: {max_in_flight: 2}}
retry_budget: {tiers: {knowledge: {ratio: 0.2, window: 10, min_per_tick: 1}}}
breakers: {ds: {kind: rate, window: 10, min_ticks: 5}}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    reads: [guard.result]
    bulkhead: db
    builtin: {value: 1}
`

// TestOpenAPIConformance calls every route of a real daemon, with answers of success and
// of error, and validates each answer (status, headers, body) against api/openapi.yaml
// with libopenapi-validator, which reads OpenAPI 3.1 (kin-openapi reads 3.0 only).
func TestOpenAPIConformance(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join(repoRoot(t), "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("the description does not load: %v", errs)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("the description is not valid OpenAPI 3.1: %v", errs)
	}
	desc := loadDescription(t, spec)

	step := startDaemon(t, stepConfig)
	guards := startDaemon(t, guardsConfig)
	events := watchStream(t, guards)
	periodic := startDaemon(t, "cycle: {period: 20ms}\n")
	bad := func() {
		if err := os.WriteFile(step.config, []byte("tiers: [{name: safety, budget: -1s}]\nhttp: {addr: \"127.0.0.1:0\"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	huge := `{"name": "big", "tier": "knowledge", "builtin": {"value": "` + strings.Repeat("x", 2<<20) + `"}}`
	for _, d := range []struct {
		d     *daemon
		calls []call
	}{
		{step, []call{
			{method: "GET", path: "/ticks/latest", status: 503},
			{method: "GET", path: "/readyz", status: 200},
			{method: "POST", path: "/ticks", admin: true, status: 200},
			{method: "POST", path: "/ticks", status: 401},
			{method: "POST", path: "/ticks", admin: true, header: [2]string{"Content-Type", "text/plain"}, body: "x", status: 415},
			{method: "POST", path: "/ticks", admin: true, status: 200},
			{method: "GET", path: "/ticks/latest", status: 200},
			{method: "GET", path: "/ticks/latest", header: [2]string{"If-None-Match", "*"}, status: 304},
			{method: "GET", path: "/ticks/latest?wait=abc", status: 400},
			{method: "GET", path: "/ticks/latest?wait=10ms&after=9", status: 200},
			{method: "GET", path: "/ticks?limit=2", status: 200},
			{method: "GET", path: "/ticks?limit=0", status: 400},
			{method: "GET", path: "/ticks/1", status: 200},
			{method: "GET", path: "/ticks/999", status: 404},
			{method: "GET", path: "/ticks/abc", status: 400},
			{method: "GET", path: "/ticks/stream", status: 200, stream: true},
			{method: "GET", path: "/modules", status: 200},
			{method: "GET", path: "/modules/guard", status: 200},
			{method: "GET", path: "/modules/nope", status: 404},
			{method: "POST", path: "/modules", admin: true, body: `{"name": "extra", "tier": "knowledge", "reads": ["nobody.result"], "builtin": {"value": 2}}`, status: 201},
			{method: "POST", path: "/modules", admin: true, body: `{"name": "extra", "tier": "knowledge"}`, status: 409},
			{method: "POST", path: "/modules", admin: true, body: `{"name": "x", "tier": "nowhere"}`, status: 422},
			{method: "POST", path: "/modules", admin: true, body: `{"name": 1, "every": "3"}`, status: 400},
			{method: "POST", path: "/modules", admin: true, body: `{"name": `, status: 400},
			{method: "POST", path: "/modules", admin: true, body: huge, status: 413},
			{method: "POST", path: "/modules", body: `{}`, status: 401},
			{method: "POST", path: "/ticks", admin: true, status: 200},
			{method: "DELETE", path: "/modules/extra", admin: true, status: 204},
			{method: "DELETE", path: "/modules/extra", admin: true, status: 404},
			{method: "DELETE", path: "/modules/guard", admin: true, status: 409},
			{method: "POST", path: "/modules/guard/faults", admin: true, body: `{"fail_rate": 0}`, status: 200},
			{method: "POST", path: "/modules/guard/faults", admin: true, body: `{"fail_rate": 2}`, status: 422},
			{method: "POST", path: "/modules/guard/faults", admin: true, body: `{"fail_rte": 1}`, status: 400},
			{method: "POST", path: "/modules/nope/faults", admin: true, body: `{}`, status: 404},
			{method: "GET", path: "/breakers", status: 200},
			{method: "GET", path: "/bulkheads", status: 200, contains: `"name":"db"`},
			{method: "POST", path: "/breakers/guard/reset", admin: true, status: 200},
			{method: "POST", path: "/breakers/nope/reset", admin: true, status: 404},
			{method: "GET", path: "/blackboard", status: 200},
			{method: "GET", path: "/blackboard/guard.result", status: 200},
			{method: "GET", path: "/blackboard/nope", status: 404},
			{method: "GET", path: "/emergency", status: 200},
			{method: "POST", path: "/emergency/reset", admin: true, status: 200},
			{method: "GET", path: "/config", status: 200},
			{method: "POST", path: "/config/reload", admin: true, status: 200},
			{method: "POST", path: "/config/reload", admin: true, status: 422, before: bad},
			{method: "GET", path: "/config", status: 200, contains: `"last_reload"`},
			{method: "GET", path: "/ha", status: 404},
			{method: "POST", path: "/ha/step-down", admin: true, status: 404},
			{method: "GET", path: "/healthz", status: 200},
			{method: "GET", path: "/metrics", status: 200},
			{method: "GET", path: "/openapi.json", status: 200},
		}},
		{periodic, []call{
			{method: "GET", path: "/ticks/latest?wait=5s&after=3", status: 200},
			{method: "POST", path: "/ticks", admin: true, status: 409},
			{method: "GET", path: "/healthz", status: 200},
		}},
		{startDaemon(t, recorderConfig), recorderCalls()},
		{guards, guardCalls()},
		{startDaemonHTTP(t, stepConfig, `{addr: "127.0.0.1:0"}`), localCalls()},
	} {
		for _, c := range d.calls {
			check(t, v, desc, d.d, c)
		}
	}
	checkStream(t, desc, doc, events)
}

// recorderCalls are the calls to a daemon with a flight recorder (recorderConfig): ticks
// past the in-memory history, the list's filters, events, and the slow-down of an address
// that keeps failing authentication (last: it refuses the address's admin requests).
func recorderCalls() []call {
	calls := []call{
		{method: "POST", path: "/ticks", admin: true, status: 200, contains: `"run_id"`},
		{method: "POST", path: "/ticks", admin: true, status: 200},
		{method: "POST", path: "/ticks", admin: true, status: 200},
		{method: "POST", path: "/ticks", admin: true, status: 200},
		{method: "GET", path: "/ticks/latest", status: 200, contains: `"recorder"`},
		{method: "GET", path: "/ticks/1", status: 200, poll: true, contains: `"tick_id":1,`},
		{method: "GET", path: "/ticks/99", status: 404},
		{method: "GET", path: "/ticks?limit=10", status: 200, poll: true, contains: `"count":4`},
		{method: "GET", path: "/ticks?severity=degraded", status: 200, contains: `"count":2`},
		{method: "GET", path: "/ticks?module=recall&status=failed", status: 200},
		{method: "GET", path: "/ticks?module=recall", status: 200, contains: `"count":2`},
		{method: "GET", path: "/ticks?since=2000-01-01T00:00:00Z&until=2100-01-01T00:00:00Z&limit=1", status: 200},
		{method: "GET", path: "/ticks?severity=bad", status: 400},
		{method: "GET", path: "/ticks?module=recall&status=ok", status: 400},
		{method: "GET", path: "/ticks?since=yesterday", status: 400},
		{method: "GET", path: "/ticks?since=2100-01-01T00:00:00Z&until=2000-01-01T00:00:00Z", status: 400},
		{method: "GET", path: "/ticks?before=x", status: 400},
		{method: "GET", path: "/events", status: 200, poll: true, contains: `"kind":"admin"`},
		{method: "GET", path: "/events?kind=admin&after=1&limit=2", status: 200, contains: `"count":2`},
		{method: "GET", path: "/events?after=x", status: 400},
		{method: "GET", path: "/events?limit=0", status: 400},
	}
	for range authFailureBurst {
		calls = append(calls, call{method: "POST", path: "/emergency/reset", token: "wrong", status: 401})
	}
	return append(calls, call{method: "POST", path: "/emergency/reset", admin: true, status: 429})
}

// authFailureBurst is api.AuthFailureBurst: the failed authentications an address is
// allowed in a row before it is slowed down.
const authFailureBurst = 10

// localCalls are the calls to a daemon without an admin token and without a recorder:
// the dashboard, the 501 of GET /events, and the refusals of the token-less admin rules.
func localCalls() []call {
	return []call{
		{method: "GET", path: "/", status: 200, contains: "<html"},
		{method: "GET", path: "/ui/app.js", status: 200},
		{method: "GET", path: "/ui/app.css", status: 200},
		{method: "GET", path: "/ui/nope.js", status: 404},
		{method: "GET", path: "/events", status: 501},
		{method: "POST", path: "/emergency/reset", status: 200},
		{method: "POST", path: "/emergency/reset", token: adminToken, status: 401},
		{method: "POST", path: "/emergency/reset", host: "rebound.example", status: 403, contains: "foreign_host"},
		{method: "POST", path: "/emergency/reset", header: [2]string{"Origin", "http://rebound.example"}, status: 403, contains: "cross_origin"},
	}
}

// check sends one call and validates its answer against the description: by the
// validator, and by desc for keys that no schema declares.
func check(t *testing.T, v validator.Validator, desc *description, d *daemon, c call) {
	t.Helper()
	if c.before != nil {
		c.before()
	}
	resp, body := send(t, d, c)
	for deadline := time.Now().Add(pollFor); c.poll && !c.met(resp.StatusCode, body) && time.Now().Before(deadline); {
		resp, body = send(t, d, c)
	}
	if !c.met(resp.StatusCode, body) {
		t.Errorf("%s %s: status %d, want %d (with %q): %.300s", c.method, c.path, resp.StatusCode, c.status, c.contains, body)
		return
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	vreq, _ := http.NewRequest(c.method, "http://127.0.0.1:8080"+c.path, nil)
	if ok, errs := v.ValidateHttpResponse(vreq, resp); !ok {
		for _, e := range errs {
			t.Errorf("%s %s → %d: %s (%s)%s", c.method, c.path, resp.StatusCode, e.Message, e.Reason, schemaErrors(e))
		}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return
	}
	schema, err := desc.responseSchema(c.method, c.path, resp.StatusCode)
	if err != nil {
		t.Error(err)
		return
	}
	keys, err := desc.undeclared(schema, body)
	if err != nil {
		t.Errorf("%s %s → %d: %v", c.method, c.path, resp.StatusCode, err)
	}
	for _, k := range keys {
		t.Errorf("%s %s → %d: the answer has %s, which the description does not declare", c.method, c.path, resp.StatusCode, k)
	}
}

// met reports whether an answer is the one the call wants.
func (c call) met(status int, body []byte) bool {
	return status == c.status && bytes.Contains(body, []byte(c.contains))
}

// send makes the call's request and reads its answer (the first bytes of a stream).
func send(t *testing.T, d *daemon, c call) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.method, d.base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.admin {
		c.token = adminToken
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.header[0] != "" {
		req.Header.Set(c.header[0], c.header[1])
	}
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	if !c.stream {
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	body := make([]byte, 256)
	n, _ := io.ReadAtLeast(resp.Body, body, 16)
	return resp, body[:n]
}
