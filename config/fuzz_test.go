package config_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/tiers"
)

// FuzzLoad checks that loading never panics and that every rejection is either a YAML
// syntax error or a list of problems that each name a field path. The seed corpus is in
// testdata/fuzz/FuzzLoad; run with go test -fuzz FuzzLoad ./config/.
func FuzzLoad(f *testing.F) {
	f.Add(config.DemoYAML())
	f.Add([]byte(minimal))
	f.Add([]byte("tiers:\n  - name: safety\n    budegt: 50ms\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Load(config.WithData(data, "fuzz.yaml"), config.WithoutEnv())
		if err == nil {
			if ps := c.Validate().Errors(); len(ps) != 0 {
				t.Fatalf("accepted a configuration with errors: %v", ps)
			}
			if _, err := json.Marshal(c.Redacted()); err != nil {
				t.Fatalf("Redacted does not encode: %v", err)
			}
			return
		}
		if errors.Is(err, config.ErrSyntax) {
			return
		}
		var ve *tiers.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("rejection %v (%T) is neither ErrSyntax nor a *tiers.ValidationError", err, err)
		}
		if len(ve.Problems) == 0 {
			t.Fatal("a ValidationError without problems")
		}
		for _, p := range ve.Problems {
			if p.Path == "" {
				t.Fatalf("problem without a field path: %q", p.Message)
			}
		}
	})
}

// FuzzDecodeModule checks the decoder of POST /modules bodies: it never panics; an
// accepted body gives a built module with a valid name; every rejection is a *DecodeError
// (400: malformed, unknown field, wrong type; a malformed body has the empty path) or a
// *tiers.ValidationError (422) whose problems each name a field. The seed corpus is in
// testdata/fuzz/FuzzDecodeModule; run with go test -fuzz FuzzDecodeModule ./config/.
func FuzzDecodeModule(f *testing.F) {
	for _, s := range []string{
		`{"name": "probe", "tier": "perception", "builtin": {"value": {"ok": true}, "latency": "1ms-2ms", "fail_ticks": [[3, 9]]}}`,
		`{"name": "planner", "tier": "planning", "kind": "http", "reads": ["map.result"], "http": {"url": "http://127.0.0.1:9000/tick", "max_body": "64KiB", "timeout": "40ms"}}`,
		`{"name": "p", "kind": "http", "http": {"url": "ftp://x", "max_body": "1GiB"}}`,
		`{"name": "p", "kind": "http", "http": {"url": "http://u:p@[::1]:99999/"}}`,
		`{"name": "a b", "tier": "safety", "budegt": 1, "ttl": "soon"}`,
		`{"name": "m", "name": "n"}`,
		`{"name": `,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reg, err := config.DecodeModule(body)
		if err == nil {
			if reg.Module == nil || !tiers.ValidName(reg.Spec.Name) {
				t.Fatalf("accepted %q as %+v", body, reg)
			}
			return
		}
		if err.Error() == "" {
			t.Fatal("an error without a message")
		}
		var de *config.DecodeError
		if errors.As(err, &de) {
			if len(de.Problems) == 0 {
				t.Fatalf("a DecodeError without problems for %q", body)
			}
			for _, p := range de.Problems {
				if p.Message == "" {
					t.Fatalf("a problem without a message for %q", body)
				}
			}
			return
		}
		var ve *tiers.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("rejection %v (%T) is neither a *config.DecodeError nor a *tiers.ValidationError", err, err)
		}
		if len(ve.Problems) == 0 {
			t.Fatal("a ValidationError without problems")
		}
		for _, p := range ve.Problems {
			if p.Path == "" || p.Message == "" {
				t.Fatalf("problem %+v without a field path or message for %q", p, body)
			}
		}
	})
}
