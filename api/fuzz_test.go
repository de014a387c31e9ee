package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// fuzzRoutes are the admin routes that read a request body, and those that take none (a
// body sent to them must be harmless too).
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/modules"},
	{http.MethodPost, "/modules/probe/faults"},
	{http.MethodPost, "/modules/guard/faults"},
	{http.MethodPost, "/modules/nope/faults"},
	{http.MethodPost, "/breakers/probe/reset"},
	{http.MethodPost, "/emergency/reset"},
	{http.MethodPost, "/ticks"},
	{http.MethodDelete, "/modules/probe"},
}

// FuzzAPIBodies sends fuzzed bodies, with fuzzed content types, to every admin route of an
// API wired as the daemon wires it (config.DecodeModule for POST /modules,
// modules.ApplyFaultsJSON for fault injection, decoding errors answered 400). The answer is
// never a 5xx; an error is always the JSON error body; a success is JSON; and the engine
// still lists its modules and runs a tick afterwards (faults that would block the tick
// longer than its budget are reset first). The seed corpus is in testdata/fuzz/FuzzAPIBodies;
// run with go test -fuzz FuzzAPIBodies ./api/.
func FuzzAPIBodies(f *testing.F) {
	for _, s := range []struct {
		route uint8
		ct    string
		body  string
	}{
		{0, "application/json", `{"name": "late", "tier": "work", "builtin": {"value": {"a": [1, 2]}, "latency": "1ms-2ms", "fail_rate": 0.5}}`},
		{0, "application/json", `{"name": "remote", "tier": "work", "kind": "http", "http": {"url": "http://127.0.0.1:1/x", "timeout": "1ms"}}`},
		{0, "", `{"name": "probe", "tier": "work"}`},
		{0, "application/json", `{"name": "a b", "tier": "nowhere", "budegt": 1}`},
		{0, "application/json", `{"name": `},
		{1, "application/json", `{"latency": "1ms-3ms", "fail_rate": 0.25, "fail_kind": "downstream", "fail_ticks": [[1, 9]], "fail_attempts": 1, "hang": "0s", "panic": false}`},
		{1, "application/json", `{"reset": true}`},
		{1, "application/json", `{"fail_rate": 1e400}`},
		{1, "text/plain", `{"fail_rate": 1}`},
		{2, "application/merge-patch+json", `{"fail_kind": "nonsense"}`},
		{3, "application/json", `{}`},
		{4, "application/json", `[]`},
		{6, "application/json", `{"tick": 1}`},
		{7, "", ``},
	} {
		f.Add(s.route, s.ct, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, ct string, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		e, h := fuzzAPI(t)
		defer e.Close()

		req := httptest.NewRequest(r.method, r.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer fuzz")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkAnswer(t, r.method+" "+r.path, w, body)

		// The engine still serves its views and ticks. What the fuzzer configured to block
		// or to call out (a hang, a latency, a remote URL) is taken back first: runtime
		// modules are deregistered (they never run: registration and removal apply at the
		// same tick boundary) and the configured modules' faults zeroed. Fuzzing the tick
		// itself is FuzzEngine's job (cycle/).
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/modules", nil))
		checkAnswer(t, "GET /modules", w, body)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /modules after %s: %d", r.path, w.Code)
		}
		for _, m := range e.Modules() {
			if m.Origin == cycle.FromRuntime {
				if err := e.Deregister(m.Spec.Name); err != nil {
					t.Fatalf("deregister %s: %v", m.Spec.Name, err)
				}
				continue
			}
			if _, err := modules.ApplyFaultsJSON(m.Module, []byte(`{"reset": true, "hang": "0s", "latency": "0s"}`)); err != nil {
				t.Fatalf("zero the faults of %s: %v", m.Spec.Name, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := e.Tick(ctx); err != nil {
			t.Fatalf("tick after %s %q: %v", r.path, body, err)
		}
	})
}

// fuzzAPI returns a step-mode engine with a builtin module in each of two tiers, behind
// the API wired as cmd/cycled wires it.
func fuzzAPI(t *testing.T) (*cycle.Engine, http.Handler) {
	cfg := cycle.Config{
		History: 4,
		Tiers: []tiers.Tier{
			{Name: "safety", Budget: 20 * time.Millisecond, MaxAttempts: 1},
			{Name: "work", Budget: 20 * time.Millisecond, MaxAttempts: 2},
		},
	}
	var regs []cycle.Registration
	for _, m := range []string{
		`{"name": "guard", "tier": "safety", "builtin": {"value": "clear"}}`,
		`{"name": "probe", "tier": "work", "builtin": {"value": 1}}`,
	} {
		reg, err := config.DecodeModule([]byte(m))
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	e, err := cycle.New(cfg, regs)
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(api.Options{
		Engine:     e,
		AdminToken: "fuzz",
		DecodeModule: func(body []byte) (cycle.Registration, error) {
			reg, err := config.DecodeModule(body)
			var de *config.DecodeError
			if errors.As(err, &de) {
				return reg, &api.HTTPError{Status: http.StatusBadRequest, Err: err}
			}
			return reg, err
		},
		Faults: func(name string, body []byte) (any, error) {
			m, ok := e.Module(name)
			if !ok {
				return nil, cycle.ErrNotFound
			}
			f, err := modules.ApplyFaultsJSON(m.Module, body)
			var de *modules.DecodeError
			if errors.As(err, &de) {
				return nil, &api.HTTPError{Status: http.StatusBadRequest, Err: err}
			}
			return f, err
		},
	})
	return e, h
}

// checkAnswer fails on a 5xx, an error answer that is not the JSON error body, or a
// success that is not JSON.
func checkAnswer(t *testing.T, what string, w *httptest.ResponseRecorder, body []byte) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("%s with %q: %d %s", what, body, w.Code, w.Body.Bytes())
	}
	if w.Code == http.StatusNoContent {
		return
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s with %q: %d with Content-Type %q", what, body, w.Code, ct)
	}
	if w.Code >= 400 {
		var e struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("%s with %q: %d is not a JSON error (%v): %s", what, body, w.Code, err, w.Body.Bytes())
		}
		return
	}
	if !json.Valid(w.Body.Bytes()) {
		t.Fatalf("%s with %q: %d with a body that is not JSON: %s", what, body, w.Code, w.Body.Bytes())
	}
}
