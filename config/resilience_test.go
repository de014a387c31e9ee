package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cycled/cycled/breaker"
)

func TestLoadRateBreaker(t *testing.T) {
	c := mustLoad(t, `
breakers:
  llm: {kind: rate, window: 20, min_ticks: 10, failure_rate: 0.5, cooldown: 5s}
  db: {kind: rate}
tiers:
  - name: safety
    budget: 50ms
  - name: knowledge
    budget: 200ms
    breaker: {kind: rate, window: 8}
modules:
  - {name: planner, tier: knowledge, breaker: llm}
`)
	if b := c.Breakers["llm"]; b.Kind != breaker.Rate || b.Window != 20 || b.MinTicks != 10 || b.FailureRate != 0.5 {
		t.Fatalf("llm = %+v", b)
	}
	if b := c.Breakers["db"]; b.Window != 20 || b.MinTicks != 20 || b.FailureRate != 0.5 {
		t.Fatalf("db defaults = %+v, want window 20, min_ticks 20, failure_rate 0.5", b)
	}
	if b := c.Tiers[1].Breaker; b.Kind != breaker.Rate || b.Window != 8 || b.MinTicks != 8 {
		t.Fatalf("tier breaker = %+v", b)
	}
	ec, _, ps := c.Engine()
	if len(ps.Errors()) > 0 {
		t.Fatal(ps)
	}
	if s := ec.Breakers["llm"]; s.Kind != breaker.Rate || s.Window != 20 || s.MinTicks != 10 || s.FailureRate != 0.5 {
		t.Fatalf("engine settings = %+v", s)
	}
}

func TestLoadRateBreakerRejections(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		paths      []string
		msg        string
	}{
		{"unknown kind", "breakers:\n  b: {kind: ewma}\n", []string{"breakers.b.kind"}, "unknown breaker kind"},
		{"rate fields on a consecutive breaker", "breakers:\n  b: {window: 5, failure_rate: 0.2}\n",
			[]string{"breakers.b.window", "breakers.b.failure_rate"}, "only for kind: rate"},
		{"rate bounds", "breakers:\n  b: {kind: rate, window: 5, min_ticks: 6, failure_rate: 1.5}\n",
			[]string{"breakers.b.min_ticks", "breakers.b.failure_rate"}, "must be between 1 and window (5)"},
		{"window too large", "breakers:\n  b: {kind: rate, window: 1000000}\n",
			[]string{"breakers.b.window"}, "must be between 1 and 100000"},
		{"tier breaker", "tiers:\n  - {name: safety, budget: 50ms, breaker: {kind: rate, failure_rate: -1}}\n",
			[]string{"tiers[0].breaker.failure_rate"}, "must be > 0 and <= 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.yaml)
			ps := problems(t, err)
			if got := paths(ps); !slices.Equal(got, tt.paths) {
				t.Fatalf("paths %q, want %q\n%v", got, tt.paths, err)
			}
			if !strings.Contains(ps[0].Message, tt.msg) {
				t.Fatalf("message %q does not contain %q", ps[0].Message, tt.msg)
			}
		})
	}
}
