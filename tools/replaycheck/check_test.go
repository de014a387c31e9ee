package replaycheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
	"github.com/cycled/cycled/tools/replaycheck"
)

// faults are the switches of the recorded cycle's modules.
type faults struct {
	guard, planner, flaky, checker, gate atomic.Bool
	slow                                 atomic.Bool   // "slow" ignores its context until released
	release                              chan struct{} // closed to release "slow"
	flakyN                               atomic.Int64
}

func registrations(f *faults) []cycle.Registration {
	failIf := func(b *atomic.Bool, v any) tiers.Module {
		return tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
			if b.Load() {
				return nil, fault.Transient(errors.New("injected"))
			}
			return v, nil
		})
	}
	flaky := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
		if f.flaky.Load() && f.flakyN.Add(1)%2 == 1 {
			return nil, fault.Transient(errors.New("first attempt fails"))
		}
		return 3, nil
	})
	slow := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
		if f.slow.Load() {
			<-f.release // ignores its context: abandoned at the deadline, then busy
		}
		return 4, nil
	})
	spec := func(name, tier string, p tiers.Policy) tiers.ModuleSpec {
		return tiers.ModuleSpec{Name: name, Tier: tier, Policy: p}
	}
	return []cycle.Registration{
		{Spec: spec("guard", "safety", tiers.PolicyDefault), Module: failIf(&f.guard, 1)},
		{Spec: spec("planner", "planning", tiers.Degrade), Module: failIf(&f.planner, 2)},
		{Spec: spec("flaky", "planning", tiers.Degrade), Module: flaky},
		{Spec: spec("slow", "planning", tiers.Degrade), Module: slow},
		{Spec: spec("checker", "planning", tiers.FailFast), Module: failIf(&f.checker, 5)},
		{Spec: spec("gate", "planning", tiers.Abort), Module: failIf(&f.gate, 6)},
		{Spec: spec("actor", "acting", tiers.Degrade), Module: failIf(new(atomic.Bool), 7)},
	}
}

// record runs a step-mode engine recorded on a real database in a fresh state directory
// (with its decision rules recorded when watch is set)
// through every kind of line (retried, failed, timed_out, busy, open, a failed tier, a
// short-circuit, emergency entered and left) and returns the directory.
func record(t *testing.T, watch bool) string {
	t.Helper()
	dir := t.TempDir()
	rec, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f := &faults{release: make(chan struct{})}
	br := breaker.Settings{FailureThreshold: 2, Cooldown: time.Hour, HalfOpenSuccesses: 1}
	ts := []tiers.Tier{
		{Name: "safety", Budget: 200 * time.Millisecond, MaxAttempts: 1, Breaker: br},
		{Name: "planning", Budget: 200 * time.Millisecond, MaxAttempts: 2, Breaker: br},
		{Name: "acting", Budget: 200 * time.Millisecond, MaxAttempts: 1, Breaker: br},
	}
	eng, err := cycle.New(cycle.Config{Tiers: ts, History: 8}, registrations(f),
		cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	if watch {
		rec.Watch(eng)
	}
	tick := func(n int) {
		for range n {
			if _, err := eng.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		sw    *atomic.Bool
		ticks int
	}{{nil, 2}, {&f.flaky, 2}, {&f.planner, 3}, {&f.slow, 2}, {&f.checker, 1}, {&f.gate, 1}, {&f.guard, 2}}
	for _, st := range steps {
		if st.sw != nil {
			st.sw.Store(true)
		}
		tick(st.ticks)
		if st.sw == &f.slow {
			close(f.release)
		}
		if st.sw != nil && st.sw != &f.planner {
			st.sw.Store(false)
		}
	}
	tick(4) // the safety tier healthy again: emergency mode left
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	seen := statuses(t, dir)
	for _, want := range []string{"retried", "failed", "timed_out", "busy", "open", "skipped", "emergency",
		"short_circuited", "completed"} {
		if !seen[want] {
			t.Fatalf("the recorded cycle has no %q: %v", want, seen)
		}
	}
	return dir
}

func check(t *testing.T, dir string, opts ...replaycheck.Option) ([]replaycheck.Diff, int) {
	t.Helper()
	rd, err := sqlite.OpenReader(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	diffs, n, err := replaycheck.Check(context.Background(), rd, 0, 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return diffs, n
}

// statuses returns every module status and tick finish recorded in dir.
func statuses(t *testing.T, dir string) map[string]bool {
	t.Helper()
	rd, err := sqlite.OpenReader(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ticks, err := rd.Ticks(context.Background(), recorder.Query{Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tk := range ticks {
		var s faultsummary.Summary
		if err := s.UnmarshalJSON(tk.JSON); err != nil {
			t.Fatal(err)
		}
		seen[string(s.Finish)] = true
		if s.EmergencyMode {
			seen["emergency"] = true
		}
		for _, m := range s.Modules() {
			seen[string(m.Status)] = true
		}
	}
	return seen
}

// A database recorded by the current version replays with no difference, and it holds
// every kind of line the check recomputes.
func TestCurrentVersionHasNoDifference(t *testing.T) {
	t.Run("rules recorded", func(t *testing.T) { noDifference(t, record(t, true)) })
	t.Run("rules inferred", func(t *testing.T) { noDifference(t, record(t, false)) })
}

func noDifference(t *testing.T, dir string) {
	diffs, n := check(t, dir)
	if n < 17 {
		t.Errorf("checked %d ticks", n)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// A changed rule, injected in the test, is reported with the tick, the module and the field.
func TestChangedRuleIsReported(t *testing.T) {
	dir := record(t, true)
	for _, c := range []struct {
		name   string
		opt    replaycheck.Option
		module string
		field  string
		rec    string
		now    string
	}{
		{"a retried module counts as ok", replaycheck.WithStatusOf(func(o decide.Outcome) decide.Status {
			if s := decide.StatusOf(o); s != decide.Retried {
				return s
			}
			return decide.OK
		}), "flaky", "status", "retried", "ok"},
		{"abort no longer short-circuits", replaycheck.WithJudge(func(o decide.Outcome, p decide.Policy) decide.Verdict {
			v := decide.Judge(o, p)
			v.Aborts = false
			return v
		}), "", "finish", "short_circuited", "completed"},
		{"the safety tier no longer enters emergency mode", replaycheck.WithJudge(func(o decide.Outcome, p decide.Policy) decide.Verdict {
			v := decide.Judge(o, p)
			v.SafetyFailure = false
			return v
		}), "", "emergency.active", "true", "false"},
		{"fail_fast degrades instead", replaycheck.WithJudge(func(o decide.Outcome, p decide.Policy) decide.Verdict {
			v := decide.Judge(o, p)
			v.FailsTier = false
			return v
		}), "", "tiers[1].status", "failed", "degraded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			diffs, _ := check(t, dir, c.opt)
			found := false
			for _, d := range diffs {
				if d.TickID == 0 {
					t.Errorf("a difference without its tick: %v", d)
				}
				if d.Module == c.module && d.Field == c.field && d.Recorded == c.rec && d.Recomputed == c.now {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s %s %q → %q among %v", c.module, c.field, c.rec, c.now, diffs)
			}
		})
	}
}

// A check from a tick in the middle of an emergency takes its state as given.
func TestCheckFromTheMiddle(t *testing.T) {
	dir := record(t, true)
	rd, err := sqlite.OpenReader(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ms, err := rd.Metas(context.Background(), 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var from uint64
	for _, m := range ms {
		if m.Emergency && from == 0 {
			from = m.ID + 1 // the second tick in emergency mode
		}
	}
	if from == 0 {
		t.Fatal("no emergency recorded")
	}
	diffs, n, err := replaycheck.Check(context.Background(), rd, from, from+1)
	if err != nil || n != 2 || len(diffs) != 0 {
		t.Errorf("from %d: %d ticks, %v, %v", from, n, diffs, err)
	}
}

// A reload that changes a module's policy is recorded with its generation: the ticks after
// it are judged under the new policy, those before under the old one.
func TestRulesFollowReloads(t *testing.T) {
	dir := t.TempDir()
	rec, err := sqlite.Open(context.Background(), sqlite.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var fail atomic.Bool
	fail.Store(true)
	mod := tiers.ModuleFunc(func(context.Context, *tiers.Input) (any, error) {
		if fail.Load() {
			return nil, fault.Transient(errors.New("injected"))
		}
		return 1, nil
	})
	br := breaker.Settings{FailureThreshold: 100, Cooldown: time.Hour, HalfOpenSuccesses: 1}
	cfg := cycle.Config{Tiers: []tiers.Tier{{Name: "safety", Budget: time.Second, Breaker: br},
		{Name: "planning", Budget: time.Second, Breaker: br}}, History: 8}
	regs := func(p tiers.Policy) []cycle.Registration {
		return []cycle.Registration{{Spec: tiers.ModuleSpec{Name: "checker", Tier: "planning", Policy: p}, Module: mod}}
	}
	eng, err := cycle.New(cfg, regs(tiers.FailFast), cycle.WithIdentity(rec.Identity()), cycle.WithHooks(rec.Hooks()))
	if err != nil {
		t.Fatal(err)
	}
	rec.Watch(eng)
	var finishes []faultsummary.Finish
	tick := func() {
		s, err := eng.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		finishes = append(finishes, s.Finish)
	}
	tick()
	if err := eng.Reload(cfg, regs(tiers.Degrade)); err != nil {
		t.Fatal(err)
	}
	tick()
	tick()
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if finishes[0] != faultsummary.Failed || finishes[2] != faultsummary.Completed {
		t.Fatalf("finishes %v: the reload did not change the policy", finishes)
	}
	if diffs, n := check(t, dir); len(diffs) != 0 || n != 3 {
		t.Errorf("%d ticks: %v", n, diffs)
	}
	rd, err := sqlite.OpenReader(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	evs, err := rd.Events(context.Background(), recorder.EventQuery{Kind: recorder.KindRules})
	if err != nil {
		t.Fatal(err)
	}
	var policies []string
	for _, ev := range evs {
		var r recorder.Rules
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, fmt.Sprintf("%d:%s", r.Generation, r.Modules["checker"].Policy))
	}
	if n := len(policies); n < 2 || !strings.HasSuffix(policies[0], ":fail_fast") || !strings.HasSuffix(policies[n-1], ":degrade") ||
		strings.HasPrefix(policies[n-1], "0:") {
		t.Errorf("recorded rules %v: want fail_fast, then degrade under the reload's generation", policies)
	}
}
