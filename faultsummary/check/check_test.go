package check_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/tiers"
)

type (
	S = *faultsummary.Summary
	M = map[string]out
)

const (
	ok      = faultsummary.StatusOK
	retried = faultsummary.StatusRetried
	failed  = faultsummary.StatusFailed
	timeout = faultsummary.StatusTimedOut
	busy    = faultsummary.StatusBusy
	open    = faultsummary.StatusOpen
	probeOK = faultsummary.StatusProbeOK
	probeKO = faultsummary.StatusProbeFailed
	notDue  = faultsummary.StatusNotDue
	skipped = faultsummary.StatusSkipped
)

// when returns edit for the violating sequence and nil for the valid one.
func when(bad bool, edit func(S)) func(S) {
	if bad {
		return edit
	}
	return nil
}

func withModule(m check.Module, bs ...breaker.Settings) func(*check.Config) {
	return func(c *check.Config) {
		c.Modules = append(c.Modules, m)
		for _, b := range bs {
			c.Breakers[b.Name] = b
		}
	}
}

// ruleCase builds a minimal sequence twice: valid (bad false: no violation at all) and
// violating rule (bad true: rule must be among the violations).
type ruleCase struct {
	rule  string
	name  string
	cfg   []func(*check.Config)
	build func(q *seq, bad bool)
	// before, when set, runs before the summary of the given index is checked (operator
	// actions are recorded on the checker, not in summaries).
	before func(c *check.Checker, i int, bad bool)
}

// openA fails module a on two ticks: its breaker (threshold 2) opens on the second.
func openA(q *seq) {
	q.tick(nil, nil)
	q.tick(M{"a": {st: failed}}, nil)
	q.tick(M{"a": {st: failed, circuit: "open"}}, nil)
}

var shared = breaker.Settings{Name: "ext", FailureThreshold: 1, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1,
	TripOn: fault.SetOf(fault.KindTransient, fault.KindDownstream)}

var ruleCases = []ruleCase{
	{rule: check.RuleTickConsecutive, name: "tick skipped", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		if bad {
			q.id++
		}
		q.tick(nil, nil)
	}},
	{rule: check.RuleSchema, name: "wrong schema", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { s.Schema = "cycled.fault_summary/v0" }))
	}},
	{rule: check.RuleSchema, name: "unknown module status", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { line(s, "guard").Status = "fine" }))
	}},
	{rule: check.RuleConfig, name: "served key not the module's", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { line(s, "a").Served.Key = "b.result" }))
	}},
	{rule: check.RuleConfig, name: "configured module missing", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { s.SetModules(s.Modules()[:1]) }))
	}},
	{rule: check.RuleTiming, name: "wall_ms disagrees with the times", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { s.WallMs += 5 }))
	}},
	{rule: check.RuleTiming, name: "ticks overlap", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(nil, when(bad, func(s S) {
			d := 150 * time.Millisecond // tick 1 finished 100ms before tick 2 started
			s.ScheduledAt, s.StartedAt, s.FinishedAt = s.ScheduledAt.Add(-d), s.StartedAt.Add(-d), s.FinishedAt.Add(-d)
		}))
	}},
	{rule: check.RuleTierBudget, name: "tier past its budget", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) {
			s.Tiers[1].ElapsedMs = 103
			s.WallMs += 102
			s.FinishedAt = s.FinishedAt.Add(102 * time.Millisecond)
		}))
	}},
	{rule: check.RuleTierBudget, name: "module latency past the budget", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { line(s, "a").LatencyMs = 102.5 }))
	}},
	{rule: check.RuleBudgetViolation, name: "violation listed for a tier within budget", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: timeout}}, nil) // listed: exhausted
		q.tick(nil, when(bad, func(s S) { s.BudgetViolations = []string{"work"} }))
	}},
	{rule: check.RuleBudgetViolation, name: "timed out without budget_exhausted", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: timeout}}, when(bad, func(s S) { s.Tiers[1].BudgetExhausted = false; s.BudgetViolations = []string{} }))
	}},
	{rule: check.RuleSkippedTier, name: "module of a skipped tier ran", build: func(q *seq, bad bool) {
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) {
			a := line(s, "a")
			a.Status, a.Attempts, a.LatencyMs = ok, 1, 1
		}))
	}},
	{rule: check.RuleFinish, name: "failed finish without a failed tier", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { s.Finish = faultsummary.Failed }))
	}},
	{rule: check.RuleFinish, name: "abort did not short-circuit", cfg: []func(*check.Config){withModule(
		check.Module{Name: "gate", Tier: 0, Key: "gate.result", Breaker: "gate", Policy: tiers.Abort, Every: 1, MaxAttempts: 1, TTL: time.Second},
		breaker.Settings{Name: "gate", FailureThreshold: 5, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1, TripOn: fault.AllFaults})},
		build: func(q *seq, bad bool) {
			q.tick(M{"gate": {st: failed, kind: "validation"}}, when(bad, func(s S) {
				s.Finish = faultsummary.Completed
				s.Tiers[1].Status = faultsummary.TierOK
				a := line(s, "a")
				a.Status, a.Attempts, a.LatencyMs, a.Served = ok, 1, 1, faultsummary.Served{Key: "a.result", Source: blackboard.Live}
				s.DegradedKeys = []string{"gate.result (none)"}
			}))
		}},
	{rule: check.RuleTierStatus, name: "tier ok with a failed module", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { s.Tiers[1].Status = faultsummary.TierOK }))
	}},
	{rule: check.RuleTierStatus, name: "safety tier not failed when its fail_fast module failed", build: func(q *seq, bad bool) {
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) { s.Tiers[0].Status = faultsummary.TierDegraded }))
	}},
	{rule: check.RuleEvery, name: "multi-rate module ran when not due", cfg: []func(*check.Config){func(c *check.Config) { c.Modules[1].Every = 2 }},
		build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) {
				a := line(s, "a")
				a.Status, a.Attempts, a.LatencyMs, a.Served.Source = ok, 1, 1, blackboard.Live
			}))
			q.tick(nil, nil)
		}},
	{rule: check.RuleEmergencyOnly, name: "emergency-only module ran outside emergency",
		cfg: []func(*check.Config){withModule(
			check.Module{Name: "stop", Tier: 1, Key: "stop.result", Breaker: "stop", Policy: tiers.Degrade, Every: 1, EmergencyOnly: true, MaxAttempts: 1, TTL: time.Second},
			breaker.Settings{Name: "stop", FailureThreshold: 5, Cooldown: time.Second, HalfOpenProbes: 1, HalfOpenSuccesses: 1, TripOn: fault.AllFaults}),
			func(c *check.Config) { c.Emergency.SkipTiers = nil }},
		build: func(q *seq, bad bool) {
			q.tick(nil, when(bad, func(s S) {
				st := line(s, "stop")
				st.Status, st.Attempts, st.LatencyMs, st.Served.Source = ok, 1, 1, blackboard.Live
			}))
			q.tick(M{"guard": {st: failed}}, nil) // emergency: stop runs
			if line(q.ss[1], "stop").Status != ok {
				panic("stop did not run in emergency")
			}
		}},
	{rule: check.RuleRetryCounts, name: "retries not counted", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: retried, attempts: 3}}, when(bad, func(s S) { delete(s.RetryCounts, "a") }))
	}},
	{rule: check.RuleRetryCounts, name: "retries counted for a single attempt", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { s.RetryCounts["a"] = 1 }))
	}},
	{rule: check.RuleStatusAttempts, name: "ok after two attempts", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) { line(s, "a").Attempts = 2; s.RetryCounts["a"] = 1 }))
	}},
	{rule: check.RuleStatusAttempts, name: "more attempts than configured", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: retried, attempts: 3}}, when(bad, func(s S) { line(s, "a").Attempts = 4; s.RetryCounts["a"] = 3 }))
	}},
	{rule: check.RuleFaultKind, name: "busy with a kind other than transient", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: timeout}}, nil)
		q.tick(M{"a": {st: busy}}, when(bad, func(s S) { line(s, "a").FaultKind = "internal" }))
	}},
	{rule: check.RuleServedLive, name: "successful module serves nothing", build: func(q *seq, bad bool) {
		q.tick(nil, when(bad, func(s S) {
			line(s, "a").Served.Source = blackboard.None
			s.DegradedKeys = []string{"a.result (none)"}
			s.OverallSeverity = faultsummary.Degraded
		}))
	}},
	{rule: check.RuleStale, name: "fallback of a failed module not tagged stale", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { line(s, "a").Served.Stale = false }))
	}},
	{rule: check.RuleExpired, name: "expired value served", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.wait(time.Second)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) {
			a := line(s, "a")
			a.Served.Source, a.Served.Stale, a.UsingFallback = blackboard.LastGood, true, true
		}))
		if !line(q.ss[1], "a").Served.Expired {
			panic("not expired")
		}
	}},
	{rule: check.RuleSafetyClosed, name: "failed safety check served from last_good", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) {
			g := line(s, "guard")
			g.Served.Source, g.Served.Stale, g.UsingFallback, g.Served.AgeMs = blackboard.LastGood, true, true, 99
			s.DegradedKeys = []string{"guard.result"}
		}))
	}},
	{rule: check.RuleLastGoodTTL, name: "value served at its TTL", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { line(s, "a").Served.AgeMs = 1000 }))
	}},
	{rule: check.RuleLastGoodTTL, name: "value expired before its TTL", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) {
			a := line(s, "a")
			a.Served.Source, a.Served.Stale, a.UsingFallback, a.Served.Expired = blackboard.None, false, false, true
			s.DegradedKeys = []string{"a.result (expired)"}
		}))
	}},
	{rule: check.RuleLastGoodAge, name: "fallback younger than the last production", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { line(s, "a").Served.AgeMs = 10 }))
	}},
	{rule: check.RuleLastGoodAge, name: "fallback of a module that never produced", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) {
			a := line(s, "a")
			a.Served.Source, a.Served.Stale, a.UsingFallback, a.Served.AgeMs = blackboard.LastGood, true, true, 10
			s.DegradedKeys = []string{"a.result"}
		}))
	}},
	{rule: check.RuleLastGoodAge, name: "produced value vanished", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) {
			a := line(s, "a")
			a.Served = faultsummary.Served{Key: "a.result"}
			a.UsingFallback = false
			s.DegradedKeys = []string{"a.result (none)"}
		}))
	}},
	{rule: check.RuleDegradedKeys, name: "degraded key not listed", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { s.DegradedKeys = []string{} }))
	}},
	{rule: check.RuleEmergencyEnter, name: "safety failure without emergency", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) {
			s.EmergencyMode, s.Emergency = false, faultsummary.Emergency{}
			s.Tiers[1] = faultsummary.Tier{Index: 1, Name: "work", BudgetMs: 100, ElapsedMs: 1, Status: faultsummary.TierOK}
			a := line(s, "a")
			a.Status, a.Attempts, a.LatencyMs, a.Served = ok, 1, 1, faultsummary.Served{Key: "a.result", Source: blackboard.Live}
			s.DegradedKeys = []string{"guard.result (none)"}
			s.WallMs, s.FinishedAt = 2, s.FinishedAt.Add(time.Millisecond)
		}))
	}},
	{rule: check.RuleEmergencyEnter, name: "emergency without safety failure", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) {
			s.EmergencyMode = true
			s.Emergency = faultsummary.Emergency{Active: true, SinceTick: 2, Reason: "?"}
			s.OverallSeverity = faultsummary.Critical
		}))
	}},
	{rule: check.RuleEmergencyEnter, name: "since_tick is not the tick it began", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) { s.Emergency.SinceTick = 1 }))
	}},
	{rule: check.RuleEmergencyLeave, name: "left after one healthy tick, recover_after 2", build: func(q *seq, bad bool) {
		q.tick(M{"guard": {st: failed}}, nil)
		if bad {
			q.em = faultsummary.Emergency{SinceTick: 1, Reason: "safety failure", HealthyTicks: 1, EndedTick: 2}
			q.tick(nil, func(s S) { s.Emergency.HealthyTicks = 1 })
		} else {
			q.tick(nil, nil)
			q.tick(nil, nil)
			if q.ss[2].EmergencyMode || q.ss[2].Emergency.EndedTick != 3 {
				panic("not left")
			}
		}
	}},
	{rule: check.RuleEmergencyLeave, name: "still active after recover_after healthy ticks", build: func(q *seq, bad bool) {
		q.tick(M{"guard": {st: failed}}, nil)
		q.tick(nil, nil)
		if bad {
			q.em.HealthyTicks = -1 // keeps it active one tick longer, with a wrong count
		}
		q.tick(nil, nil)
		q.tick(nil, nil)
	}},
	{rule: check.RuleEmergencyLeave, name: "latched emergency left without an operator reset",
		cfg: []func(*check.Config){func(c *check.Config) { c.Emergency.Latch = true }},
		build: func(q *seq, bad bool) {
			q.tick(M{"guard": {st: failed}}, nil)
			q.tick(nil, nil)
			q.tick(nil, nil)
			q.resetEmergency() // the engine got a reset after tick 3; the checker is told only in the valid case
			q.tick(nil, nil)
			q.tick(nil, nil)
			if q.ss[4].EmergencyMode || !q.ss[3].EmergencyMode || !q.ss[2].Emergency.Latched {
				panic("latch sequence")
			}
		},
		before: func(c *check.Checker, i int, bad bool) {
			if i == 3 && !bad {
				c.ResetEmergency(3)
			}
		}},
	{rule: check.RuleEmergencySkip, name: "skip tier ran in emergency", build: func(q *seq, bad bool) {
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) {
			s.Tiers[1].Status, s.Tiers[1].ElapsedMs = faultsummary.TierOK, 1
			a := line(s, "a")
			a.Status, a.Attempts, a.LatencyMs, a.Served = ok, 1, 1, faultsummary.Served{Key: "a.result", Source: blackboard.Live}
			s.DegradedKeys = []string{"guard.result (none)"}
			s.WallMs, s.FinishedAt = 2, s.FinishedAt.Add(time.Millisecond)
		}))
	}},
	{rule: check.RuleSeverity, name: "ok with a failed module", build: func(q *seq, bad bool) {
		q.tick(M{"a": {st: failed}}, when(bad, func(s S) { s.OverallSeverity = faultsummary.OK }))
	}},
	{rule: check.RuleSeverity, name: "degraded in emergency", build: func(q *seq, bad bool) {
		q.tick(M{"guard": {st: failed}}, when(bad, func(s S) { s.OverallSeverity = faultsummary.Degraded }))
	}},
	{rule: check.RuleCircuitLists, name: "open breaker not listed", build: func(q *seq, bad bool) {
		openA(q)
		q.tick(M{"a": {st: open}}, when(bad, func(s S) { s.OpenCircuits = []string{} }))
	}},
	{rule: check.RuleBreakerAdmit, name: "refused while closed", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		st := faultsummary.StatusFailed
		if bad {
			st = open
		}
		q.tick(M{"a": {st: st}}, nil)
	}},
	{rule: check.RuleBreakerAdmit, name: "ran normally while open", build: func(q *seq, bad bool) {
		openA(q)
		st := open
		if bad {
			st = failed
		}
		q.tick(M{"a": {st: st}}, nil)
	}},
	{rule: check.RuleBreakerOpen, name: "opened below the threshold", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		if bad {
			q.tick(M{"a": {st: failed, circuit: "open"}}, nil)
			return
		}
		q.tick(M{"a": {st: failed}}, nil)
		q.tick(M{"a": {st: failed, circuit: "open"}}, nil)
	}},
	{rule: check.RuleBreakerOpen, name: "stayed closed at the threshold", build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		q.tick(M{"a": {st: failed}}, nil)
		if bad {
			q.tick(M{"a": {st: failed}}, nil)
			return
		}
		q.tick(M{"a": {st: failed, circuit: "open"}}, nil)
	}},
	{rule: check.RuleBreakerOpen, name: "opened on a kind it does not trip on", cfg: []func(*check.Config){func(c *check.Config) {
		b := c.Breakers["a"]
		b.TripOn = fault.SetOf(fault.KindTransient)
		c.Breakers["a"] = b
	}}, build: func(q *seq, bad bool) {
		q.tick(nil, nil)
		kind := "transient"
		if bad {
			kind = "validation"
		}
		q.tick(M{"a": {st: failed, kind: kind}}, nil)
		q.tick(M{"a": {st: failed, kind: kind, circuit: "open"}}, nil)
	}},
	{rule: check.RuleBreakerCooldown, name: "probed before the cooldown", build: func(q *seq, bad bool) {
		openA(q)
		if !bad {
			q.wait(time.Second)
		}
		q.tick(M{"a": {st: probeOK, circuit: "half_open"}}, nil)
	}},
	{rule: check.RuleBreakerCooldown, name: "refused after the cooldown", build: func(q *seq, bad bool) {
		openA(q)
		q.wait(time.Second)
		if bad {
			q.tick(M{"a": {st: open}}, nil)
			return
		}
		q.tick(M{"a": {st: probeKO, circuit: "open"}}, nil)
	}},
	{rule: check.RuleBreakerClose, name: "closed after one of two successful probes", build: func(q *seq, bad bool) {
		openA(q)
		q.wait(time.Second)
		if bad {
			q.tick(M{"a": {st: probeOK, circuit: "closed"}}, nil)
			return
		}
		q.tick(M{"a": {st: probeOK, circuit: "half_open"}}, nil)
		q.tick(M{"a": {st: probeOK, circuit: "closed"}}, nil)
		q.tick(nil, nil)
	}},
	{rule: check.RuleBreakerReopen, name: "re-opened after a successful probe", build: func(q *seq, bad bool) {
		openA(q)
		q.wait(time.Second)
		c := "half_open"
		if bad {
			c = "open"
		}
		q.tick(M{"a": {st: probeOK, circuit: c}}, nil)
	}},
	{rule: check.RuleBreakerProbes, name: "more failed probes than probe slots",
		cfg: []func(*check.Config){
			withModule(check.Module{Name: "x", Tier: 1, Key: "x.result", Breaker: "ext", Policy: tiers.Degrade, Every: 1, MaxAttempts: 1, TTL: time.Second}, shared),
			withModule(check.Module{Name: "y", Tier: 1, Key: "y.result", Breaker: "ext", Policy: tiers.Degrade, Every: 1, MaxAttempts: 1, TTL: time.Second}),
		},
		build: func(q *seq, bad bool) {
			q.tick(nil, nil)
			q.tick(M{"x": {st: failed, circuit: "open"}, "y": {st: failed}}, nil)
			q.wait(time.Second)
			y := out{st: open}
			if bad {
				y = out{st: probeKO}
			}
			q.tick(M{"x": {st: probeKO, circuit: "open"}, "y": y}, nil)
		}},
	{rule: check.RuleBusy, name: "busy after a run that returned", build: func(q *seq, bad bool) {
		st := timeout
		if bad {
			st = failed
		}
		q.tick(M{"a": {st: st}}, nil)
		q.tick(M{"a": {st: busy}}, nil)
	}},
}

func runCase(t *testing.T, rc ruleCase, bad bool) []check.Violation {
	t.Helper()
	q := newSeq(rc.cfg...)
	rc.build(q, bad)
	c := check.New(q.cfg)
	var all []check.Violation
	for i, s := range q.ss {
		if rc.before != nil {
			rc.before(c, i, bad)
		}
		all = append(all, c.Check(s)...)
	}
	if !slices.Equal(all, c.Violations()) {
		t.Fatalf("Violations() %v differs from what Check returned %v", c.Violations(), all)
	}
	if (c.Err() == nil) != (len(all) == 0) {
		t.Fatalf("Err() %v with %d violations", c.Err(), len(all))
	}
	return all
}

func TestRules(t *testing.T) {
	covered := map[string]bool{}
	for _, rc := range ruleCases {
		covered[rc.rule] = true
		t.Run(rc.rule+"/"+strings.ReplaceAll(rc.name, " ", "_"), func(t *testing.T) {
			if vs := runCase(t, rc, false); len(vs) > 0 {
				for _, v := range vs {
					t.Errorf("valid sequence: %v", v)
				}
			}
			vs := runCase(t, rc, true)
			if !slices.Contains(rulesOf(vs), rc.rule) {
				t.Errorf("violating sequence: rule %s not reported; got %v", rc.rule, vs)
			}
			for _, v := range vs {
				t.Logf("reported: %v", v)
			}
		})
	}
	for _, r := range check.Rules() {
		if !covered[r] {
			t.Errorf("rule %s has no case", r)
		}
	}
}
