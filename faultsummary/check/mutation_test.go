package check_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

// richRun runs an engine through retries, a breaker lifecycle, an emergency and a hung
// module, and returns its configuration and its summaries as JSON (what a daemon serves).
func richRun(t *testing.T) (cycle.Config, []cycle.Registration, [][]byte) {
	t.Helper()
	var out [][]byte
	var cfg cycle.Config
	var regs []cycle.Registration
	synctest.Test(t, func(t *testing.T) {
		var guardFail, lidarFail atomic.Bool
		flaky := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%2 == 0 && in.Attempt() == 1 {
				return nil, fault.Transient(errBoom)
			}
			return in.TickID(), nil
		})
		hang := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID() == 3 {
				time.Sleep(250 * time.Millisecond) // ignores its context
			}
			return "h", nil
		})
		cfg = cycle.Config{Tiers: engineTiers(), Emergency: cycle.EmergencyConfig{SkipTiers: []string{"knowledge"}}}
		regs = []cycle.Registration{
			reg("guard", "safety", switchable(&guardFail, fault.Validation(errBoom))),
			reg("flaky", "knowledge", flaky),
			reg("lidar", "knowledge", switchable(&lidarFail, fault.Permanent(errBoom)), func(s *tiers.ModuleSpec) {
				s.TTL = lastgood.TTL{Fixed: 2 * time.Second}
			}),
			reg("hang", "planning", hang, func(s *tiers.ModuleSpec) { s.MaxAttempts = 1 }),
			reg("slow", "planning", okMod("s"), func(s *tiers.ModuleSpec) { s.Every = 2 }),
		}
		h := newHarness(t, cfg, regs)
		for k := 1; k <= 30; k++ {
			guardFail.Store(k == 12 || k == 13)
			lidarFail.Store(k >= 2 && k <= 14)
			gap := 100 * time.Millisecond
			if k == 4 {
				gap = 0 // the hung run of tick 3 is still outstanding: busy
			}
			time.Sleep(gap)
			h.tick()
		}
		h.finish()
		for _, s := range h.ss {
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	})
	return cfg, regs, out
}

func decodeAll(t *testing.T, js [][]byte) []*faultsummary.Summary {
	t.Helper()
	var out []*faultsummary.Summary
	for _, b := range js {
		var s faultsummary.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, &s)
	}
	return out
}

// find returns the index of the first summary satisfying f.
func find(t *testing.T, ss []*faultsummary.Summary, what string, f func(*faultsummary.Summary) bool) int {
	t.Helper()
	for i, s := range ss {
		if f(s) {
			return i
		}
	}
	t.Fatalf("the engine run has no tick where %s", what)
	return -1
}

func statusIs(name string, st faultsummary.Status) func(*faultsummary.Summary) bool {
	return func(s *faultsummary.Summary) bool { m, _ := s.Module(name); return m.Status == st }
}

// TestMutations checks that the sequence of a real engine run, decoded from JSON, passes,
// and that each mutation of it is caught by the right rule.
func TestMutations(t *testing.T) {
	cfg, regs, js := richRun(t)
	run := func(ss []*faultsummary.Summary) []check.Violation {
		c, err := cycle.NewChecker(cfg, regs)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			c.Check(s)
		}
		return c.Violations()
	}
	if vs := run(decodeAll(t, js)); len(vs) > 0 {
		t.Fatalf("the unmutated run has violations: %v", vs)
	}
	cases := []struct {
		name   string
		rule   string
		mutate func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary
	}{
		{"drop a tick", check.RuleTickConsecutive, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			return slices.Delete(ss, 10, 11)
		}},
		{"swap two ticks", check.RuleTickConsecutive, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			ss[5], ss[6] = ss[6], ss[5]
			return ss
		}},
		{"flip ok to failed", check.RuleServedLive, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "slow is ok", statusIs("slow", faultsummary.StatusOK))
			m := line(ss[i], "slow")
			m.Status, m.FaultKind = faultsummary.StatusFailed, "transient"
			return ss
		}},
		{"flip failed to ok", check.RuleServedLive, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "lidar failed", statusIs("lidar", faultsummary.StatusFailed))
			m := line(ss[i], "lidar")
			m.Status, m.FaultKind, m.Error = faultsummary.StatusOK, "", ""
			return ss
		}},
		{"retry not counted", check.RuleRetryCounts, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "flaky retried", statusIs("flaky", faultsummary.StatusRetried))
			delete(ss[i].RetryCounts, "flaky")
			return ss
		}},
		{"tier over budget", check.RuleTierBudget, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			ss[7].Tiers[2].ElapsedMs = ss[7].Tiers[2].BudgetMs + 5
			return ss
		}},
		{"breaker did not open at the threshold", check.RuleBreakerOpen, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "lidar opened", func(s *faultsummary.Summary) bool { return slices.Contains(s.OpenCircuits, "lidar") })
			line(ss[i], "lidar").CircuitState = "closed"
			ss[i].OpenCircuits = slices.DeleteFunc(ss[i].OpenCircuits, func(n string) bool { return n == "lidar" })
			return ss[:i+1]
		}},
		{"refused after the cooldown", check.RuleBreakerCooldown, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "lidar probed", func(s *faultsummary.Summary) bool {
				m, _ := s.Module("lidar")
				return m.Status == faultsummary.StatusProbeFailed || m.Status == faultsummary.StatusProbeOK
			})
			m := line(ss[i], "lidar")
			m.Status, m.Attempts, m.LatencyMs, m.FaultKind, m.Error, m.CircuitState = faultsummary.StatusOpen, 0, 0, "", "", "open"
			return ss[:i+1]
		}},
		{"emergency not entered", check.RuleEmergencyEnter, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "emergency", func(s *faultsummary.Summary) bool { return s.EmergencyMode })
			ss[i].EmergencyMode, ss[i].Emergency = false, faultsummary.Emergency{}
			return ss[:i+1]
		}},
		{"emergency left early", check.RuleEmergencyLeave, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "a healthy emergency tick", func(s *faultsummary.Summary) bool { return s.EmergencyMode && s.Emergency.HealthyTicks == 1 })
			ss[i].EmergencyMode, ss[i].Emergency.Active, ss[i].Emergency.EndedTick = false, false, ss[i].TickID
			return ss[:i+1]
		}},
		{"skipped tier ran", check.RuleSkippedTier, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "emergency", func(s *faultsummary.Summary) bool { return s.EmergencyMode })
			m := line(ss[i], "flaky")
			m.Status, m.Attempts = faultsummary.StatusOK, 1
			return ss[:i+1]
		}},
		{"busy after a run that returned", check.RuleBusy, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "hang timed out", statusIs("hang", faultsummary.StatusTimedOut))
			if m, _ := ss[i+1].Module("hang"); m.Status != faultsummary.StatusBusy {
				t.Fatalf("hang not busy after timing out: %s", m.Status)
			}
			m := line(ss[i], "hang")
			m.Status, m.Error = faultsummary.StatusFailed, "boom"
			return ss[:i+2]
		}},
		{"fallback older than it is", check.RuleLastGoodAge, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "lidar served stale", func(s *faultsummary.Summary) bool {
				m, _ := s.Module("lidar")
				return m.Served.Source == blackboard.LastGood
			})
			line(ss[i], "lidar").Served.AgeMs += 50
			return ss[:i+1]
		}},
		{"degraded key dropped", check.RuleDegradedKeys, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "degraded keys", func(s *faultsummary.Summary) bool { return len(s.DegradedKeys) > 0 })
			ss[i].DegradedKeys = ss[i].DegradedKeys[1:]
			return ss
		}},
		{"severity understated", check.RuleSeverity, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			i := find(t, ss, "critical", func(s *faultsummary.Summary) bool { return s.OverallSeverity == faultsummary.Critical })
			ss[i].OverallSeverity = faultsummary.Degraded
			return ss
		}},
		{"wrong schema", check.RuleSchema, func(t *testing.T, ss []*faultsummary.Summary) []*faultsummary.Summary {
			ss[0].Schema = "cycled.fault_summary/v2"
			return ss
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vs := run(tc.mutate(t, decodeAll(t, js)))
			if !slices.Contains(rulesOf(vs), tc.rule) {
				t.Fatalf("rule %s not reported; got %v", tc.rule, vs)
			}
			for _, v := range vs {
				t.Logf("reported: %v", v)
			}
		})
	}
}

// TestSeedAtAnyTick: a sequence taken from the middle of a run (a daemon's history) is
// checked from its second summary on; the first only seeds state.
func TestSeedAtAnyTick(t *testing.T) {
	cfg, regs, js := richRun(t)
	all := decodeAll(t, js)
	for start := range all {
		c, err := cycle.NewChecker(cfg, regs)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all[start:] {
			c.Check(s)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("from tick %d: %v", all[start].TickID, err)
		}
	}
}

// TestOperatorBreakerReset: an operator reset closes a breaker without any module event;
// recorded with ResetBreaker it is accepted, unrecorded it is a violation.
func TestOperatorBreakerReset(t *testing.T) {
	for _, record := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var fail atomic.Bool
			fail.Store(true)
			cfg := cycle.Config{Tiers: engineTiers()}
			regs := []cycle.Registration{reg("lidar", "knowledge", switchable(&fail, fault.Permanent(errBoom)))}
			c, err := cycle.NewChecker(cfg, regs)
			if err != nil {
				t.Fatal(err)
			}
			e, err := cycle.New(cfg, regs)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var vs []check.Violation
			for k := 1; k <= 6; k++ {
				if k == 5 {
					fail.Store(false)
					if err := e.ResetBreaker("lidar"); err != nil {
						t.Fatal(err)
					}
					if record {
						c.ResetBreaker("lidar", 4)
					}
				}
				time.Sleep(100 * time.Millisecond)
				s, err := e.Tick(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				vs = append(vs, c.Check(s)...)
			}
			if record && len(vs) > 0 {
				t.Fatalf("recorded reset: %v", vs)
			}
			if !record && !slices.Contains(rulesOf(vs), check.RuleBreakerAdmit) {
				t.Fatalf("unrecorded reset: want %s, got %v", check.RuleBreakerAdmit, vs)
			}
		})
	}
}

// TestReconfigure: a registration at runtime shows a new module line; once the checker is
// told the new configuration, the new module is seeded and checked from then on.
func TestReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := cycle.Config{Tiers: engineTiers()}
		regs := []cycle.Registration{reg("a", "knowledge", okMod("a"))}
		h := newHarness(t, cfg, regs)
		h.ticks(3, 100*time.Millisecond)
		late := reg("late", "planning", okMod("late"))
		late.Origin = cycle.FromRuntime
		if err := h.e.Register(late); err != nil {
			t.Fatal(err)
		}
		plan, ps := cycle.Validate(cfg, append(regs, late))
		if err := ps.Err(); err != nil {
			t.Fatal(err)
		}
		h.c.Reconfigure(cycle.CheckConfig(cfg, plan))
		h.ticks(3, 100*time.Millisecond)
		if _, ok := h.ss[len(h.ss)-1].Module("late"); !ok {
			t.Fatal("late not registered")
		}
		h.finish()
	})
}

func TestCheckConfigDefaults(t *testing.T) {
	regs := []cycle.Registration{
		reg("guard", "safety", okMod(1)),
		reg("lidar", "knowledge", okMod(1), func(s *tiers.ModuleSpec) { s.Breaker = "llm"; s.TTL = lastgood.TTL{Auto: true} }),
		reg("plan", "planning", okMod(1), func(s *tiers.ModuleSpec) { s.Every = 3; s.MaxAttempts = 1 }),
	}
	cfg := cycle.Config{Breakers: map[string]breaker.Settings{"llm": {FailureThreshold: 3}}}
	plan, ps := cycle.Validate(cfg, regs)
	if err := ps.Err(); err != nil {
		t.Fatal(err)
	}
	c := cycle.CheckConfig(cfg, plan)
	if len(c.Tiers) != 5 || c.Tiers[1].Name != "knowledge" || c.Tiers[1].Budget != 200*time.Millisecond {
		t.Fatalf("tiers %+v, want the seed tiers", c.Tiers)
	}
	if got := c.Emergency; got.RecoverAfter != 3 || got.Latch || !slices.Equal(got.SkipTiers, []string{"knowledge", "perception", "planning", "execution"}) {
		t.Fatalf("emergency %+v", got)
	}
	mods := map[string]check.Module{}
	for _, m := range c.Modules {
		mods[m.Name] = m
	}
	if g := mods["guard"]; g.Policy != tiers.FailFast || g.Breaker != "guard" || g.TTL != 5*time.Second || g.MaxAttempts != 1 || !g.OwnBreaker() {
		t.Fatalf("guard %+v", g)
	}
	if l := mods["lidar"]; l.Policy != tiers.Degrade || l.Breaker != "llm" || l.TTL != 0 || l.MaxAttempts != 3 || l.OwnBreaker() {
		t.Fatalf("lidar %+v", l)
	}
	if p := mods["plan"]; p.Every != 3 || p.MaxAttempts != 1 || p.Tier != 3 {
		t.Fatalf("plan %+v", p)
	}
	llm := c.Breakers["llm"]
	if llm.FailureThreshold != 3 || llm.Cooldown != 30*time.Second || llm.HalfOpenProbes != 1 || llm.HalfOpenSuccesses != 1 ||
		llm.TripOn != fault.SetOf(fault.KindTransient, fault.KindDownstream) {
		t.Fatalf("llm %+v", llm)
	}
	if g := c.Breakers["guard"]; g.FailureThreshold != 2 || g.Cooldown != time.Minute || g.HalfOpenSuccesses != 3 || g.TripOn != fault.AllFaults {
		t.Fatalf("guard breaker %+v", g)
	}
	if _, err := cycle.NewChecker(cycle.Config{}, []cycle.Registration{reg("x", "nowhere", okMod(1))}); err == nil {
		t.Fatal("NewChecker accepted an invalid configuration")
	}
}

// TestGapReseeds: a gap in the tick ids (a reader that missed summaries) is one violation;
// the summaries after it are checked as a new sequence, not against the state before it.
func TestGapReseeds(t *testing.T) {
	cfg, regs, js := richRun(t)
	for _, gap := range [][2]int{{3, 5}, {10, 11}, {12, 20}} {
		ss := decodeAll(t, js)
		ss = slices.Delete(ss, gap[0], gap[1])
		c, err := cycle.NewChecker(cfg, regs)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			c.Check(s)
		}
		vs := c.Violations()
		if len(vs) != 1 || vs[0].Rule != check.RuleTickConsecutive {
			t.Errorf("summaries %d–%d missing: want one tick_consecutive violation, got %v", gap[0]+1, gap[1], vs)
		}
	}
}
