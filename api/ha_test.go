package api_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cycled/cycled/api"
)

// fakeHA plays a daemon's part in a group.
type fakeHA struct {
	mu   sync.Mutex
	role string
}

func (f *fakeHA) Role() string { f.mu.Lock(); defer f.mu.Unlock(); return f.role }
func (f *fakeHA) Status() any {
	return map[string]any{"role": f.Role(), "node": "a", "active": map[string]any{"node": "b", "url": "http://127.0.0.1:1"}}
}
func (f *fakeHA) StepDown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.role != "active" {
		return errors.New("this daemon is not the active one")
	}
	f.role = "standby"
	return nil
}

// TestHAHealth: a standby that never ticked is healthy and ready, and says so and who is
// active; step-down answers 409 on a standby and moves an active one to standby.
func TestHAHealth(t *testing.T) {
	cfg := testConfig()
	cfg.Period = time.Hour // periodic, never run: no tick ever completes
	f := &fakeHA{role: "standby"}
	r := newRig(t, rigOptions{cfg: cfg, opts: func(o *api.Options) { o.HA = f; o.WatchdogTimeout = time.Nanosecond }})
	for _, path := range []string{"/healthz", "/readyz"} {
		h := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, path, nil))
		ha, _ := h["ha"].(map[string]any)
		if h["role"] != "standby" || ha == nil || ha["active"].(map[string]any)["node"] != "b" {
			t.Errorf("GET %s: %v", path, h)
		}
	}
	st := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/ha", nil))
	if st["role"] != "standby" {
		t.Errorf("GET /ha: %v", st)
	}
	r.expectError(http.StatusConflict, "not_active", http.MethodPost, "/ha/step-down", nil)
	f.role = "active"
	// An active daemon that has not ticked is under the watchdog like a lone one.
	r.expectError(http.StatusServiceUnavailable, "watchdog", http.MethodGet, "/healthz", nil)
	r.expectError(http.StatusServiceUnavailable, "no_tick_yet", http.MethodGet, "/readyz", nil)
	r.expect(http.StatusOK, http.MethodPost, "/ha/step-down", nil)
	if f.Role() != "standby" {
		t.Errorf("role after step-down: %s", f.Role())
	}
}

// TestHAAbsent: without a group, /ha answers 404 and health carries no role.
func TestHAAbsent(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.expectError(http.StatusNotFound, "not_found", http.MethodGet, "/ha", nil)
	r.expectError(http.StatusNotFound, "not_found", http.MethodPost, "/ha/step-down", nil)
	if h := decode[map[string]any](t, r.expect(http.StatusOK, http.MethodGet, "/healthz", nil)); h["role"] != nil {
		t.Errorf("GET /healthz without ha: %v", h)
	}
}
