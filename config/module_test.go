package config_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

func TestDecodeModule(t *testing.T) {
	reg, err := config.DecodeModule([]byte(`{
		"name": "probe", "tier": "perception", "reads": ["lidar.result"], "ttl": "2s",
		"policy": "degrade", "every": 2, "idempotent": true, "priority": -1,
		"builtin": {"value": {"ok": true, "n": 3}, "latency": "1ms-2ms", "fail_ticks": [[3, 9]], "fail_kind": "downstream"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	s := reg.Spec
	if s.Name != "probe" || s.Tier != "perception" || s.TTL.Fixed != 2*time.Second || s.Every != 2 || s.Priority != -1 ||
		!slices.Equal(s.Reads, []string{"lidar.result"}) {
		t.Fatalf("spec %+v", s)
	}
	b, ok := reg.Module.(*modules.Builtin)
	if !ok {
		t.Fatalf("module %T, want *modules.Builtin", reg.Module)
	}
	st := b.Settings()
	if v, _ := st.Value.(map[string]any); v["ok"] != true || v["n"] != int64(3) {
		t.Fatalf("value %#v", st.Value)
	}
	if st.Faults.Latency.Max != 2*time.Millisecond || st.Faults.FailTicks[0] != (modules.Window{3, 9}) || st.Faults.FailKind.String() != "downstream" {
		t.Fatalf("faults %+v", st.Faults)
	}
}

func TestDecodeModuleHTTP(t *testing.T) {
	reg, err := config.DecodeModule([]byte(`{"name": "planner", "tier": "planning", "kind": "http", "reads": ["map.result"],
		"http": {"url": "http://127.0.0.1:9000/tick", "timeout": "40ms"}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, ok := reg.Module.(*modules.HTTP)
	if !ok {
		t.Fatalf("module %T, want *modules.HTTP", reg.Module)
	}
	want := modules.HTTPSettings{URL: "http://127.0.0.1:9000/tick", MaxBody: modules.DefaultMaxBody, Timeout: 40 * time.Millisecond}
	if !h.Settings().Equal(want) || !slices.Equal(reg.Spec.Reads, []string{"map.result"}) {
		t.Fatalf("settings %+v, spec %+v", h.Settings(), reg.Spec)
	}
	reg, err = config.DecodeModule([]byte(`{"name": "p", "tier": "planning", "kind": "http", "http": {"url": "https://x/", "max_body": 4096}}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := reg.Module.(*modules.HTTP); h.Settings().MaxBody != 4096 {
		t.Fatalf("max_body %d", h.Settings().MaxBody)
	}
}

func TestDecodeModuleRejections(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		paths  []string
		decode bool // a *config.DecodeError (400) rather than a *tiers.ValidationError (422)
	}{
		{"unknown field", `{"name": "m", "tier": "safety", "budegt": 1}`, []string{"budegt"}, true},
		{"nested unknown field", `{"name": "m", "tier": "safety", "builtin": {"fail_rte": 1}}`, []string{"builtin.fail_rte"}, true},
		{"wrong type", `{"name": "m", "tier": "safety", "every": "often", "ttl": "soon"}`, []string{"every", "ttl"}, true},
		{"bad values", `{"name": "m", "tier": "safety", "ttl": "soon", "builtin": {"fail_rate": 3, "latency": "9ms-1ms"}}`,
			[]string{"ttl", "builtin.latency", "builtin.fail_rate"}, false},
		{"missing name", `{"tier": "safety"}`, []string{"name"}, false},
		{"bad name", `{"name": "a b", "tier": "safety"}`, []string{"name"}, false},
		{"http url", `{"name": "m", "tier": "safety", "kind": "http", "http": {"url": "localhost:9000"}}`, []string{"http.url"}, false},
		{"http without url", `{"name": "m", "tier": "safety", "kind": "http", "http": {"max_body": "1KiB"}}`, []string{"http.url"}, false},
		{"http without settings", `{"name": "m", "tier": "safety", "kind": "http"}`, []string{"http.url"}, false},
		{"http limits", `{"name": "m", "kind": "http", "http": {"url": "http://x", "max_body": "1GiB", "timeout": "-1s"}}`,
			[]string{"http.max_body", "http.timeout"}, false},
		{"http unknown field", `{"name": "m", "kind": "http", "http": {"url": "http://x", "heders": {}}}`, []string{"http.heders"}, true},
		{"http wrong type", `{"name": "m", "kind": "http", "http": {"url": ["http://x"]}}`, []string{"http.url"}, true},
		{"unknown kind", `{"name": "m", "kind": "grpc"}`, []string{"kind"}, false},
		{"malformed", `{"name": `, []string{""}, true},
		{"trailing", `{"name": "m"} x`, []string{""}, true},
		{"duplicate key", `{"name": "m", "name": "n"}`, []string{""}, true},
		{"not an object", `["m"]`, []string{""}, true},
		{"empty", ``, []string{""}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.DecodeModule([]byte(tt.body))
			var de *config.DecodeError
			var ps tiers.Problems
			if tt.decode {
				if !errors.As(err, &de) {
					t.Fatalf("err = %v (%T), want *config.DecodeError", err, err)
				}
				ps = de.Problems
			} else {
				ps = problems(t, err)
			}
			if got := paths(ps); !slices.Equal(got, tt.paths) {
				t.Fatalf("paths %q, want %q (%v)", got, tt.paths, err)
			}
		})
	}
}

// TestDecodeModuleStrictJSONTypes: a POST /modules body is JSON and strictly typed, as
// the faults body is: a string where a number or a bool belongs, or a number where a
// string belongs, is a *DecodeError (400) naming the field, not a value parsed from it.
func TestDecodeModuleStrictJSONTypes(t *testing.T) {
	tests := []struct {
		body, path string
	}{
		{`{"name": 123, "tier": "knowledge"}`, "name"},
		{`{"name": "a", "tier": 1}`, "tier"},
		{`{"name": "a", "tier": "knowledge", "every": "3"}`, "every"},
		{`{"name": "a", "tier": "knowledge", "every": 3.0}`, "every"},
		{`{"name": "a", "tier": "knowledge", "emergency": "TRUE"}`, "emergency"},
		{`{"name": "a", "tier": "knowledge", "idempotent": 1}`, "idempotent"},
		{`{"name": "a", "tier": "knowledge", "priority": true}`, "priority"},
		{`{"name": "a", "tier": "knowledge", "reads": [1]}`, "reads[0]"},
		{`{"name": "a", "tier": "knowledge", "policy": 1}`, "policy"},
		{`{"name": "a", "tier": "knowledge", "ttl": 5}`, "ttl"},
		{`{"name": "a", "tier": "knowledge", "builtin": {"fail_rate": "0.5"}}`, "builtin.fail_rate"},
		{`{"name": "a", "tier": "knowledge", "builtin": {"fail_attempts": "1"}}`, "builtin.fail_attempts"},
		{`{"name": "a", "tier": "knowledge", "builtin": {"fail_ticks": [["3", 9]]}}`, "builtin.fail_ticks[0][0]"},
		{`{"name": "a", "tier": "knowledge", "builtin": {"hang": 5}}`, "builtin.hang"},
		{`{"name": "a", "tier": "knowledge", "builtin": {"panic": "false"}}`, "builtin.panic"},
		{`{"name": "a", "kind": "http", "http": {"url": "http://x", "timeout": 40}}`, "http.timeout"},
		{`{"name": "a", "kind": "http", "http": {"url": "http://x", "max_body": true}}`, "http.max_body"},
	}
	for _, tt := range tests {
		_, err := config.DecodeModule([]byte(tt.body))
		var de *config.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: err = %v (%T), want *config.DecodeError", tt.body, err, err)
			continue
		}
		if got := de.Problems[0]; got.Path != tt.path || !strings.HasPrefix(got.Message, "want ") {
			t.Errorf("%s: first problem %+v, want a wrong type at %q (%v)", tt.body, got, tt.path, err)
		}
	}
	// The JSON types themselves still decode, a size takes an integer, and a YAML file
	// keeps reading quoted scalars by the field's type (as environment overrides are).
	reg, err := config.DecodeModule([]byte(`{"name": "a", "tier": "knowledge", "every": 3, "emergency": true, "priority": -2,
		"builtin": {"fail_rate": 1, "fail_ticks": [[3, 9]], "hang": "0s", "value": "3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := reg.Spec; s.Every != 3 || !s.Emergency || s.Priority != -2 {
		t.Fatalf("spec %+v", s)
	}
	if v := reg.Module.(*modules.Builtin).Settings().Value; v != "3" {
		t.Fatalf("value %#v, want the string \"3\"", v)
	}
	c := mustLoad(t, "cycle: {period: 0}\n"+minimal+`  - name: quoted
    tier: knowledge
    every: "3"
    emergency: "true"
`)
	if m := c.Modules[len(c.Modules)-1]; m.Name != "quoted" || m.Every != 3 || !m.Emergency {
		t.Fatalf("YAML module %+v", m)
	}
}

// TestDecodeModuleThenRegister is the path of POST /modules: decode, then register with
// the running engine, which validates the module against the configuration in force.
func TestDecodeModuleThenRegister(t *testing.T) {
	c := mustLoad(t, "cycle: {period: 0}\n"+minimal)
	ec, regs, _ := c.Engine()
	e, err := cycle.New(ec, regs)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reg, err := config.DecodeModule([]byte(`{"name": "late", "tier": "planning", "builtin": {"value": 42}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(reg); err != nil {
		t.Fatal(err)
	}
	s, err := e.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range s.Modules() {
		found = found || (m.Name == "late" && m.Status == "ok")
	}
	if !found {
		t.Fatalf("registered module did not run: %+v", s.Modules())
	}
	// A module naming an unknown tier passes decoding but not registration.
	reg, err = config.DecodeModule([]byte(`{"name": "lost", "tier": "nowhere"}`))
	if err != nil {
		t.Fatal(err)
	}
	err = e.Register(reg)
	var ve *tiers.ValidationError
	if !errors.As(err, &ve) || !strings.HasSuffix(ve.Problems[0].Path, ".tier") {
		t.Fatalf("Register = %v", err)
	}
}
