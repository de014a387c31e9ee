package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/tiers"
	"github.com/cycled/cycled/tools/sim"
)

// A scenario's mistakes are reported with the path of the field at fault.
func TestScenarioErrors(t *testing.T) {
	cases := []struct {
		name, yaml, path, msg string
	}{
		{"unknown module", "events: [{tick: 1, module: camra, fail_rate: 1}]", "events[0].module", `unknown module "camra" (did you mean "camera"?)`},
		{"unknown key", "events: [{tick: 1, module: camera, fail_rat: 1}]", "events[0].fail_rat", "unknown"},
		{"no time", "events: [{module: camera, fail_rate: 1}]", "events[0]", "give tick"},
		{"tick and at", "events: [{tick: 3, at: 1s, module: camera, fail_rate: 1}]", "events[0].at", "not both"},
		{"two things", "events: [{tick: 3, module: camera, fail_rate: 1, period: 50ms}]", "events[0]", "exactly one thing"},
		{"fail rate", "events: [{tick: 3, module: camera, fail_rate: 2}]", "events[0].fail_rate", "[0, 1]"},
		{"bad kind", "events: [{tick: 3, module: camera, fail_kind: flaky}]", "events[0].fail_kind", "flaky"},
		{"two dists", "events: [{tick: 3, module: camera, latency: {fixed: 1ms, uniform: [1ms, 2ms]}}]", "events[0].latency", "exactly one of"},
		{"uniform", "events: [{tick: 3, module: camera, latency: {uniform: [5ms, 2ms]}}]", "events[0].latency.uniform", "min <= max"},
		{"lognormal", "events: [{tick: 3, module: camera, latency: {lognormal: {median: 0s, sigma: 1}}}]", "events[0].latency.lognormal", "median must be > 0"},
		{"buckets", "events: [{tick: 3, module: camera, latency: {empirical: [{le: 5ms, weight: 1}, {le: 2ms, weight: 1}]}}]", "events[0].latency.empirical[1].le", "increase"},
		{"outage breaker", "events: [{tick: 3, outage: {breaker: memory-stor}}]", "events[0].outage.breaker", `did you mean "memory-store"`},
		{"outage for", "events: [{tick: 3, outage: {breaker: memory-store, for: 2s}}]", "events[0].outage.for", "use ticks"},
		{"reset", "events: [{tick: 3, reset: {}}]", "events[0].reset", "emergency: true or breaker"},
		{"reload", "events: [{tick: 3, reload: no-such-file.yaml}]", "events[0].reload", "no-such-file.yaml"},
		{"period", "events: [{tick: 3, period: -1s}]", "events[0].period", ">= 0"},
		{"stand-in", "stand_in: {fail_rate: -1}", "stand_in.fail_rate", "[0, 1]"},
		{"restore and more", "events: [{tick: 3, module: camera, restore: true, panic: true}]", "events[0].restore", "no other"},
	}
	cfg, err := config.Demo()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := sim.ParseScenario([]byte(c.yaml), "test.yaml")
			if err == nil {
				err = sc.Check(cfg)
			}
			var ve *tiers.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v; want a *tiers.ValidationError", err)
			}
			for _, p := range ve.Problems {
				if p.Path == c.path && strings.Contains(p.Message, c.msg) {
					return
				}
			}
			t.Fatalf("problems %v; want one at %s containing %q", ve.Problems, c.path, c.msg)
		})
	}
}

// The scenario with every kind of event loads, checks, and changes what the cycle does.
func TestScenarioEverything(t *testing.T) {
	sc, err := sim.LoadScenario("testdata/everything.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rep := runDemo(t, 1200, 1, sc)
	mod := func(name string) sim.ModuleReport {
		for _, m := range rep.Modules {
			if m.Name == name {
				return m
			}
		}
		t.Fatalf("no module %s in the report", name)
		return sim.ModuleReport{}
	}
	if n := mod("lidar").FaultKinds["downstream"]; n == 0 {
		t.Error("lidar's fail_rate 0.5 (downstream) from tick 200 to 300 made no downstream failure")
	}
	if n := mod("planner").Statuses["timed_out"]; n == 0 {
		t.Error("planner's 350ms hang at 40s never timed out")
	}
	if len(rep.Emergencies) == 0 || !strings.Contains(rep.Emergencies[0].Reason, "battery_monitor") {
		t.Errorf("emergencies %+v; want one caused by battery_monitor's panic", rep.Emergencies)
	}
	if rep.Tiers[1].BudgetMs != 20 {
		t.Errorf("knowledge budget after the reload = %gms; want tight.yaml's 20ms", rep.Tiers[1].BudgetMs)
	}
	if rep.SkippedGridPoints == 0 {
		t.Error("the 50ms period with slow modules skipped no grid point")
	}
}
