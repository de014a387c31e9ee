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
	admin              bool // send the admin token
	header             [2]string
	status             int
	stream             bool   // an endless body: validate its first bytes
	before             func() // run before the request
}

const stepConfig = `
cycle: {period: 0}
modules:
  - name: guard
    tier: safety
    builtin: {value: {clear: true}}
  - name: recall
    tier: knowledge
    reads: [guard.result]
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

	step := startDaemon(t, stepConfig)
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
			{method: "GET", path: "/healthz", status: 200},
			{method: "GET", path: "/metrics", status: 200},
			{method: "GET", path: "/openapi.json", status: 200},
		}},
		{periodic, []call{
			{method: "GET", path: "/ticks/latest?wait=5s&after=3", status: 200},
			{method: "POST", path: "/ticks", admin: true, status: 409},
			{method: "GET", path: "/healthz", status: 200},
		}},
	} {
		for _, c := range d.calls {
			check(t, v, d.d, c)
		}
	}
}

// check sends one call and validates its answer against the description.
func check(t *testing.T, v validator.Validator, d *daemon, c call) {
	t.Helper()
	if c.before != nil {
		c.before()
	}
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
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	if c.header[0] != "" {
		req.Header.Set(c.header[0], c.header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	var body []byte
	if c.stream {
		body = make([]byte, 256)
		n, _ := io.ReadAtLeast(resp.Body, body, 16)
		body = body[:n]
	} else {
		body, _ = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	if resp.StatusCode != c.status {
		t.Errorf("%s %s: status %d, want %d: %.300s", c.method, c.path, resp.StatusCode, c.status, body)
		return
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	vreq, _ := http.NewRequest(c.method, "http://127.0.0.1:8080"+c.path, nil)
	if ok, errs := v.ValidateHttpResponse(vreq, resp); !ok {
		for _, e := range errs {
			t.Errorf("%s %s → %d: %s (%s)%s", c.method, c.path, resp.StatusCode, e.Message, e.Reason, schemaErrors(e))
		}
	}
}
