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
