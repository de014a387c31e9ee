package config_test

import (
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/tiers"
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
			wantRejected(t, tt.yaml, tt.paths, tt.msg)
		})
	}
}

func TestLoadBulkheadsAndRetryBudgets(t *testing.T) {
	c := mustLoad(t, `
bulkheads:
  db: {max_in_flight: 4, wait: 5ms}
retry_budget:
  tiers:
    knowledge: {ratio: 0.2, window: 20, min_per_tick: 1}
  downstreams:
    llm: {ratio: 0.1, window: 5s}
modules:
  - {name: a, tier: knowledge, bulkhead: db, on_reject: fail, retry_budget: llm}
`)
	ec, regs, ps := c.Engine()
	if len(ps.Errors()) > 0 {
		t.Fatal(ps)
	}
	if b := ec.Bulkheads["db"]; b.MaxInFlight != 4 || b.Wait != 5*time.Millisecond || b.Name != "db" {
		t.Fatalf("bulkhead %+v", b)
	}
	if r := ec.RetryBudgets.Tiers["knowledge"]; r.Ratio != 0.2 || r.Window != 20 || r.MinPerTick != 1 {
		t.Fatalf("tier budget %+v", r)
	}
	if r := ec.RetryBudgets.Downstreams["llm"]; r.WindowTime != 5*time.Second || r.Window != 0 {
		t.Fatalf("downstream budget %+v", r)
	}
	if s := regs[0].Spec; s.Bulkhead != "db" || s.OnReject != tiers.Fail || s.RetryBudget != "llm" {
		t.Fatalf("spec %+v", s)
	}
}

func TestLoadResilienceRejections(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		paths      []string
		msg        string
	}{
		{"bulkhead bounds", "bulkheads:\n  db: {max_in_flight: 0, wait: -1s}\n",
			[]string{"bulkheads.db.max_in_flight", "bulkheads.db.wait"}, "must be >= 1"},
		{"unknown names", "modules:\n  - {name: a, tier: planning, bulkhead: ghost, retry_budget: nobody}\n",
			[]string{"modules[0].bulkhead", "modules[0].retry_budget"}, `unknown bulkhead "ghost"`},
		{"bad window", "retry_budget:\n  tiers:\n    knowledge: {ratio: 0.1, window: soon}\n",
			[]string{"retry_budget.tiers.knowledge.window"}, "invalid window"},
		{"window ticks bound", "retry_budget:\n  downstreams:\n    llm: {ratio: 0.1, window: 0}\n",
			[]string{"retry_budget.downstreams.llm.window"}, "must be between 1 and"},
		{"ratio and tier", "retry_budget:\n  tiers:\n    nowhere: {ratio: -1, min_per_tick: -2}\n",
			[]string{"retry_budget.tiers.nowhere", "retry_budget.tiers.nowhere.ratio", "retry_budget.tiers.nowhere.min_per_tick"}, `unknown tier "nowhere"`},
		{"bad on_reject", "modules:\n  - {name: a, tier: planning, on_reject: explode}\n", []string{"modules[0].on_reject"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantRejected(t, tt.yaml, tt.paths, tt.msg)
		})
	}
}

// TestMisspelledNamesSuggest: a misspelled tier, breaker, bulkhead or retry-budget name in
// a file gets the same did-you-mean as a misspelled key.
func TestMisspelledNamesSuggest(t *testing.T) {
	const declared = "bulkheads:\n  database: {max_in_flight: 2}\nretry_budget:\n  downstreams:\n    llm_api: {ratio: 0.1}\nbreakers:\n  memory-store: {failure_threshold: 3}\n"
	for _, tt := range []struct {
		name, yaml, path, msg string
	}{
		{"module tier", "modules:\n  - {name: a, tier: safty}\n", "modules[0].tier", `unknown tier "safty" (did you mean "safety"?)`},
		{"named breaker", declared + "modules:\n  - {name: a, tier: planning, breaker: memory-stor}\n", "modules[0].breaker", `unknown breaker "memory-stor" (did you mean "memory-store"?)`},
		{"bulkhead", declared + "modules:\n  - {name: a, tier: planning, bulkhead: databse}\n", "modules[0].bulkhead", `unknown bulkhead "databse" (did you mean "database"?)`},
		{"retry budget", declared + "modules:\n  - {name: a, tier: planning, retry_budget: llm-api}\n", "modules[0].retry_budget", `unknown retry budget "llm-api" (did you mean "llm_api"?)`},
		{"retry budget's tier", "retry_budget:\n  tiers:\n    knowlege: {ratio: 0.1}\n", "retry_budget.tiers.knowlege", `unknown tier "knowlege" (did you mean "knowledge"?)`},
		{"skipped tier", "emergency: {skip_tiers: [planing]}\n", "emergency.skip_tiers[0]", `unknown tier "planing" (did you mean "planning"?)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantRejected(t, tt.yaml, []string{tt.path}, tt.msg)
		})
	}
}
