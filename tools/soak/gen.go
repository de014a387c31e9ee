package main

import (
	"fmt"
	"strings"
)

// The generated configuration.
//
// Five seed tiers whose budgets add up to 9 ms, so that a tick in which every tier runs to
// its deadline still fits in the period of 10 ms; what does not fit (scheduling jitter, GC)
// is an overrun, handled by overrun: skip and recorded in the summary. Half the modules of
// tiers 1-4 wait 20-200 µs on each attempt (longer when the process is idle, as Go's
// timers wake it late), the others and the safety modules return at
// once, so that emergencies come from the injected safety faults; injected latency spikes
// (2-6 ms) and hangs (50-400 ms, ignoring the context) blow through the budgets on purpose.
//
// Two valid variants alternate on reload. They differ in visible ways only: the budgets
// of knowledge and perception, and a marker module (cfg_a or cfg_b) in the execution
// tier, so that the soak can tell from a summary which variant was in force for it (a
// reload applies at a tick boundary the soak cannot observe otherwise).

// variant is one valid configuration.
type variant struct {
	name    string // "a" or "b"
	marker  string // the marker module's name
	budgets [5]string
}

var variants = []variant{
	{name: "a", marker: "cfg_a", budgets: [5]string{"1500us", "2500us", "2ms", "1500us", "1500us"}},
	{name: "b", marker: "cfg_b", budgets: [5]string{"1500us", "2ms", "2500us", "1500us", "1500us"}},
}

var tierNames = [5]string{"safety", "knowledge", "perception", "planning", "execution"}

// safetyFlaky is the safety module that the driver makes fail for a while, then recover.
const safetyFlaky = "s_flaky"

// module is one generated module.
type module struct {
	name       string
	tier       int
	yaml       string // the flow mapping of the module
	injectable bool   // the fault driver may change its faults
}

// modules returns the configured modules of every variant (the marker excepted).
func genModules() []module {
	out := []module{
		// Safety: fail closed; only s_flaky is made to fail, in episodes.
		newModule(0, "s_guard", false, "priority: 10", "builtin: {value: {clear: true}}"),
		newModule(0, "s_battery", false, "builtin: {value: {charge: 0.8}}"),
		newModule(0, safetyFlaky, false, "ttl: 200ms", "builtin: {value: {ok: true}}"),
		newModule(0, "s_watch", false, "every: 2", "builtin: {value: 1}"),
		newModule(0, "s_estop", false, "emergency: true", "builtin: {value: {command: stop}}"),
	}
	vs := "breaker: vector-store"
	out = append(out, tierModules(1, "k", 0, map[int][]string{
		0: {vs}, 1: {vs}, 2: {vs, "reads: [s_guard.result]"}, 3: {vs, "on_open: fail"},
		5: {"policy: fail_fast"}, 6: {"reads: [s_guard.result]"}, 8: {"priority: critical"}, 9: {"every: 3"},
	}, map[int]string{7: "fail_attempts: 1"})...) // k_07 is always retried once
	gp := "breaker: gpu-pool"
	// p_00 to p_02 share the gpu bulkhead (two permits) and the gpu retry budget; p_02
	// fails when the bulkhead refuses it.
	gb := "bulkhead: gpu, retry_budget: gpu"
	out = append(out, tierModules(2, "p", 1, map[int][]string{
		0: {gp, gb}, 1: {gp, gb}, 2: {gp, gb, "on_reject: fail"}, 3: {"reads: [k_00.result, k_01.result]"},
		4: {"every: 2"}, 5: {"priority: -1"}, 7: {"reads: [k_00.result, k_01.result]"}, 8: {"every: 5"}, 10: {"priority: 7"},
	}, map[int]string{6: "fail_rate: 0.02"})...) // p_06 is background noise
	out = append(out, tierModules(3, "q", 2, map[int][]string{
		3: {"reads: [p_00.result, k_00.result]"}, 5: {"idempotent: false", "max_attempts: 1"},
		1: {"priority: -2"}, 7: {"every: 10"}, 10: {"policy: abort"},
	}, nil)...)
	out = append(out, tierModules(4, "e", 3, map[int][]string{
		0: {"reads: [q_00.result]"}, 5: {"every: 4"}, 7: {"breaker: rate-api"}, 8: {"breaker: rate-api"},
	}, nil)...)
	return out
}

// soakTTLs rotate over the modules of tiers 1-4 ("": the default TTL).
var soakTTLs = []string{"ttl: 100ms", "ttl: 300ms", "ttl: 1s", "ttl: auto", ""}

// newModule returns the module name in tier with the flow-mapping fields given.
func newModule(tier int, name string, injectable bool, fields ...string) module {
	y := fmt.Sprintf("{name: %s, tier: %s", name, tierNames[tier])
	for _, f := range fields {
		if f != "" {
			y += ", " + f
		}
	}
	return module{name: name, tier: tier, yaml: y + "}", injectable: injectable}
}

// tierModules returns the eleven injectable modules of a tier after safety: prefix_00 to
// prefix_10, whose value is {prefix: i}, whose TTLs rotate from shift, with the fields of
// extra[i] and the builtin fields more[i]. Every even module waits 20-200 µs.
func tierModules(tier int, prefix string, shift int, extra map[int][]string, more map[int]string) []module {
	out := make([]module, 0, 11)
	for i := range 11 {
		f := append([]string{soakTTLs[(i+shift)%len(soakTTLs)]}, extra[i]...)
		lat := "latency: 0s"
		if i%2 == 0 {
			lat = "latency: 20us-200us"
		}
		b := fmt.Sprintf("builtin: {value: {%s: %d}, %s", prefix, i, lat)
		if m := more[i]; m != "" {
			b += ", " + m
		}
		f = append(f, b+"}")
		out = append(out, newModule(tier, fmt.Sprintf("%s_%02d", prefix, i), true, f...))
	}
	return out
}

// settings are the daemon-wide parts of the configuration.
type settings struct {
	history  int
	token    string
	stateDir string
}

// render returns the YAML of variant v.
func render(v variant, mods []module, s settings) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# generated by tools/soak: variant %s\n", v.name)
	fmt.Fprintf(&b, "cycle: {period: 10ms, overrun: skip, history: %d}\n", s.history)
	b.WriteString("backoff: {base: 200us, factor: 2, max: 1ms, jitter: 0.2}\n")
	b.WriteString("emergency: {latch: false, recover_after: 3}\n")
	b.WriteString("lastgood: {default_ttl: 1s}\n")
	// Overruns (injected spikes and hangs) shed the lowest priority classes;
	// startup holds the tiers back until every safety module has succeeded once.
	b.WriteString("shedding: {after_overruns: 3, restore_after: 10, floor: 5}\n")
	b.WriteString("startup: {timeout: 5s}\n")
	b.WriteString("tiers:\n")
	tierExtra := [5]string{
		"max_attempts: 1, policy: fail_fast, breaker: {failure_threshold: 2, cooldown: 1s, half_open_probes: 1, half_open_successes: 3}",
		"max_attempts: 3, breaker: {failure_threshold: 5, cooldown: 800ms, half_open_successes: 2}",
		"max_attempts: 2, breaker: {failure_threshold: 7, cooldown: 600ms, half_open_successes: 2}",
		"max_attempts: 2, breaker: {failure_threshold: 10, cooldown: 500ms, half_open_successes: 1}",
		"max_attempts: 2, breaker: {failure_threshold: 10, cooldown: 400ms, half_open_successes: 1}",
	}
	for i, n := range tierNames {
		fmt.Fprintf(&b, "  - {name: %s, budget: %s, %s}\n", n, v.budgets[i], tierExtra[i])
	}
	b.WriteString("breakers:\n")
	b.WriteString("  vector-store: {failure_threshold: 3, cooldown: 700ms, half_open_probes: 2, half_open_successes: 2}\n")
	b.WriteString("  gpu-pool: {failure_threshold: 4, cooldown: 500ms, trip_on: [transient, downstream, internal]}\n")
	// A rate breaker, a bulkhead and retry-amplification budgets.
	b.WriteString("  rate-api: {kind: rate, window: 10, min_ticks: 5, failure_rate: 0.5, cooldown: 300ms}\n")
	b.WriteString("bulkheads:\n  gpu: {max_in_flight: 2}\n  remote: {max_in_flight: 2, wait: 500us}\n")
	b.WriteString("retry_budget:\n  tiers:\n    knowledge: {ratio: 0.2, window: 50, min_per_tick: 1}\n")
	b.WriteString("  downstreams:\n    gpu: {ratio: 0.1, window: 500ms, min_per_tick: 1}\n")
	b.WriteString("modules:\n")
	for _, m := range mods {
		b.WriteString("  - " + m.yaml + "\n")
	}
	fmt.Fprintf(&b, "  - {name: %s, tier: execution, builtin: {value: %q}}\n", v.marker, v.name)
	// The cache of encoded summaries grows to its ceiling and stays there; a small ceiling
	// is reached during warm-up, so that the memory check sees a cache that is full, not
	// one that is filling.
	fmt.Fprintf(&b, "http: {addr: 127.0.0.1:0, admin_token: %q, cache_bytes: 1MiB, admin_limit: {rate: 1000, burst: 1000}}\n", s.token) // admin routes: the soak paces its own actors
	b.WriteString("log: {level: warn, format: json}\n")
	fmt.Fprintf(&b, "state_dir: %q\n", s.stateDir)
	return b.String()
}

// syntaxError is the kind of invalid configuration that is not YAML at all.
const syntaxError = "YAML syntax error"

// invalid returns a configuration that must be rejected whole (POST /config/reload → 422),
// the k-th of a few kinds of mistake.
func invalid(k int, v variant, mods []module, s settings) (string, string) {
	good := render(v, mods, s)
	switch k % 6 {
	case 0:
		return "negative budget", strings.Replace(good, "budget: "+v.budgets[2], "budget: -2ms", 1)
	case 1:
		return "unknown field", strings.Replace(good, "max_attempts: 2, breaker", "max_atempts: 2, breaker", 1)
	case 2:
		return "duplicate module", strings.Replace(good, "  - {name: "+v.marker, "  - {name: k_00, tier: knowledge, builtin: {value: 0}}\n  - {name: "+v.marker, 1)
	case 3:
		return "unknown tier", strings.Replace(good, "{name: e_00, tier: execution", "{name: e_00, tier: actuation", 1)
	case 4:
		return syntaxError, strings.Replace(good, "breakers:\n", "breakers: [\n", 1)
	default:
		return "fail_rate out of range", strings.Replace(good, "fail_rate: 0.02", "fail_rate: 2", 1)
	}
}
