package api_test

import (
	"net/http"
	"testing"

	"github.com/cycled/cycled/cycle"
)

// With a startup configuration /readyz answers 503 "starting" (step mode
// too) until every safety module has succeeded once, then 200.
func TestReadyzWhileStarting(t *testing.T) {
	cfg := testConfig()
	cfg.Startup = &cycle.StartupConfig{}
	r := newRig(t, rigOptions{cfg: cfg})
	r.failSafety.Store(true)
	r.expectError(http.StatusServiceUnavailable, "starting", http.MethodGet, "/readyz", nil)
	r.expect(http.StatusOK, http.MethodPost, "/ticks", nil)
	r.expectError(http.StatusServiceUnavailable, "starting", http.MethodGet, "/readyz", nil)
	r.failSafety.Store(false)
	r.expect(http.StatusOK, http.MethodPost, "/ticks", nil)
	if h := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/readyz", nil)); h["status"] != "ready" {
		t.Fatalf("GET /readyz after startup: %v", h)
	}
}
