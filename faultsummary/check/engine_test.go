package check_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
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
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

var errBoom = errors.New("boom")

// engineTiers are small tiers with deterministic backoff and short cooldowns.
func engineTiers() []tiers.Tier {
	bo := retrybudget.Backoff{Base: 5 * time.Millisecond, Factor: 2, Max: 20 * time.Millisecond}
	return []tiers.Tier{
		{Name: "safety", Budget: 50 * time.Millisecond, MaxAttempts: 1, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 2, Cooldown: time.Second, HalfOpenSuccesses: 1}},
		{Name: "knowledge", Budget: 200 * time.Millisecond, MaxAttempts: 3, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 3, Cooldown: time.Second, HalfOpenSuccesses: 2}},
		{Name: "planning", Budget: 100 * time.Millisecond, MaxAttempts: 2, Backoff: bo,
			Breaker: breaker.Settings{FailureThreshold: 3, Cooldown: 500 * time.Millisecond, HalfOpenSuccesses: 1}},
	}
}

// behave is a module whose outcome per tick and attempt is a function.
type behave func(ctx context.Context, in *tiers.Input) (any, error)

func (f behave) Run(ctx context.Context, in *tiers.Input) (any, error) { return f(ctx, in) }

func okMod(v any) behave {
	return func(context.Context, *tiers.Input) (any, error) { return v, nil }
}

// switchable fails with err while fail is set.
func switchable(fail *atomic.Bool, err error) behave {
	return func(_ context.Context, in *tiers.Input) (any, error) {
		if fail.Load() {
			return nil, err
		}
		return in.TickID(), nil
	}
}

func reg(name, tier string, m tiers.Module, mut ...func(*tiers.ModuleSpec)) cycle.Registration {
	s := tiers.ModuleSpec{Name: name, Tier: tier}
	for _, f := range mut {
		f(&s)
	}
	return cycle.Registration{Spec: s, Module: m}
}

// harness runs an engine in step mode and checks every summary.
type harness struct {
	t  *testing.T
	e  *cycle.Engine
	c  *check.Checker
	ss []*faultsummary.Summary
}

func newHarness(t *testing.T, cfg cycle.Config, regs []cycle.Registration) *harness {
	t.Helper()
	if cfg.Tiers == nil {
		cfg.Tiers = engineTiers()
	}
	c, err := cycle.NewChecker(cfg, regs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := cycle.New(cfg, regs, cycle.WithRand(func() float64 { return 0.5 }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &harness{t: t, e: e, c: c}
}

func (h *harness) tick() *faultsummary.Summary {
	h.t.Helper()
	s, err := h.e.Tick(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	h.ss = append(h.ss, s)
	for _, v := range h.c.Check(s) {
		h.t.Errorf("%v", v)
	}
	return s
}

func (h *harness) ticks(n int, gap time.Duration) {
	h.t.Helper()
	for range n {
		time.Sleep(gap)
		h.tick()
	}
}

func (h *harness) status(s *faultsummary.Summary, name string) faultsummary.Status {
	h.t.Helper()
	m, ok := s.Module(name)
	if !ok {
		h.t.Fatalf("tick %d: no module %q", s.TickID, name)
	}
	return m.Status
}

// finish closes the engine, waits for its workers (hung modules included) and checks that
// the checker saw no violation.
func (h *harness) finish() {
	h.t.Helper()
	_ = h.e.Close()
	if err := h.e.WaitWorkers(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.Err(); err != nil {
		h.t.Fatal(err)
	}
	if h.c.Checked() != len(h.ss) {
		h.t.Fatalf("checked %d of %d summaries", h.c.Checked(), len(h.ss))
	}
}

func TestEngineFlakyModules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		firstAttempt := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if in.Attempt() == 1 {
				return nil, fault.Transient(errBoom)
			}
			return "fine", nil
		})
		oddTicks := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%2 == 1 {
				return nil, fault.Transient(errBoom)
			}
			return in.TickID(), nil
		})
		everyThird := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%3 == 0 {
				return nil, fault.Permanent(errBoom)
			}
			return 1, nil
		})
		h := newHarness(t, cycle.Config{}, []cycle.Registration{
			reg("guard", "safety", okMod("clear")),
			reg("flaky", "knowledge", firstAttempt),
			reg("odd", "knowledge", oddTicks, func(s *tiers.ModuleSpec) { s.TTL = lastgood.TTL{Fixed: 250 * time.Millisecond} }),
			reg("third", "planning", everyThird, func(s *tiers.ModuleSpec) { s.Reads = []string{"odd.result"} }),
			reg("slow", "planning", okMod("s"), func(s *tiers.ModuleSpec) { s.Every = 2 }),
			reg("gate", "planning", behave(func(context.Context, *tiers.Input) (any, error) {
				return nil, fault.Control(errors.New("nothing to do"))
			})),
			// A transient failure, then a control short-circuit on the retry (the soak met
			// this when a fault was injected between two attempts): ok, after 2 attempts.
			reg("late-gate", "planning", behave(func(_ context.Context, in *tiers.Input) (any, error) {
				if in.Attempt() == 1 {
					return nil, fault.Transient(errBoom)
				}
				return nil, fault.Control(errors.New("nothing to do"))
			})),
		})
		h.ticks(12, 100*time.Millisecond)
		if st := h.status(h.ss[0], "flaky"); st != faultsummary.StatusRetried {
			t.Fatalf("flaky: %s", st)
		}
		h.finish()
	})
}

// TestEngineBreakerLifecycle walks an own breaker through closed → open → (cooldown) →
// half_open → open (failed probe) → half_open → closed, and a shared breaker through open.
func TestEngineBreakerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail, llmFail atomic.Bool
		h := newHarness(t, cycle.Config{
			Breakers: map[string]breaker.Settings{"llm": {FailureThreshold: 2, Cooldown: 700 * time.Millisecond, HalfOpenProbes: 2, HalfOpenSuccesses: 2}},
		}, []cycle.Registration{
			reg("lidar", "knowledge", switchable(&fail, fault.Permanent(errBoom)), func(s *tiers.ModuleSpec) {
				s.TTL = lastgood.TTL{Fixed: 2500 * time.Millisecond}
			}),
			reg("a", "knowledge", switchable(&llmFail, fault.Transient(errBoom)), func(s *tiers.ModuleSpec) { s.Breaker = "llm" }),
			reg("b", "planning", switchable(&llmFail, fault.Downstream(errBoom)), func(s *tiers.ModuleSpec) { s.Breaker = "llm" }),
			reg("c", "planning", okMod("c"), func(s *tiers.ModuleSpec) { s.Breaker = "llm"; s.OnOpen = tiers.Fail }),
		})
		h.tick()
		fail.Store(true)
		llmFail.Store(true)
		h.ticks(3, 100*time.Millisecond) // lidar opens on the third failure
		if m, _ := h.ss[3].Module("lidar"); m.CircuitState != "open" {
			t.Fatalf("lidar: %+v", m)
		}
		h.ticks(9, 100*time.Millisecond) // cooldown 1s: refused, then a failed probe
		llmFail.Store(false)
		h.ticks(10, 100*time.Millisecond)
		fail.Store(false)
		h.ticks(15, 100*time.Millisecond)
		var sawProbeFail, sawClosed bool
		for _, s := range h.ss {
			m, _ := s.Module("lidar")
			sawProbeFail = sawProbeFail || m.Status == faultsummary.StatusProbeFailed
			sawClosed = sawClosed || (sawProbeFail && m.Status == faultsummary.StatusProbeOK && m.CircuitState == "closed")
		}
		if !sawProbeFail || !sawClosed {
			t.Fatalf("lifecycle incomplete: probe failed %v, closed again %v", sawProbeFail, sawClosed)
		}
		h.finish()
	})
}

func TestEngineEmergencyEnterAndLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		h := newHarness(t, cycle.Config{Emergency: cycle.EmergencyConfig{SkipTiers: []string{"knowledge"}, RecoverAfter: 2}},
			[]cycle.Registration{
				reg("guard", "safety", switchable(&fail, fault.Validation(errBoom))),
				reg("stop0", "safety", okMod("halt"), func(s *tiers.ModuleSpec) { s.Emergency = true }),
				reg("world", "knowledge", okMod("w")),
				reg("planner", "planning", okMod("p")),
				reg("safe_stop", "planning", okMod("stopped"), func(s *tiers.ModuleSpec) { s.Emergency = true }),
			})
		h.ticks(2, 50*time.Millisecond)
		fail.Store(true)
		h.ticks(1, 50*time.Millisecond)
		fail.Store(false)
		h.ticks(1, 50*time.Millisecond)
		fail.Store(true) // a relapse restarts the healthy count
		h.ticks(1, 50*time.Millisecond)
		fail.Store(false)
		h.ticks(4, 50*time.Millisecond)
		fail.Store(true) // fails long enough to open the safety breaker (a standing failure)
		h.ticks(4, 50*time.Millisecond)
		fail.Store(false)
		h.ticks(30, 100*time.Millisecond) // cooldown 1s, then a probe closes it, then recovery
		if !h.ss[2].EmergencyMode || h.ss[len(h.ss)-1].EmergencyMode {
			t.Fatalf("emergency not entered or not left: %+v / %+v", h.ss[2].Emergency, h.ss[len(h.ss)-1].Emergency)
		}
		h.finish()
	})
}

func TestEngineEmergencyLatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		h := newHarness(t, cycle.Config{Emergency: cycle.EmergencyConfig{Latch: true, RecoverAfter: 2}}, []cycle.Registration{
			reg("guard", "safety", switchable(&fail, fault.Transient(errBoom)), func(s *tiers.ModuleSpec) { s.Every = 1 }),
			reg("world", "knowledge", okMod("w")),
		})
		h.tick()
		fail.Store(true)
		h.tick()
		fail.Store(false)
		h.ticks(4, 10*time.Millisecond)
		if !h.ss[len(h.ss)-1].Emergency.Latched {
			t.Fatal("not latched")
		}
		h.e.ResetEmergency()
		h.c.ResetEmergency(h.ss[len(h.ss)-1].TickID)
		h.ticks(3, 10*time.Millisecond)
		if h.ss[len(h.ss)-1].EmergencyMode {
			t.Fatalf("still in emergency after a reset and 2 healthy ticks: %+v", h.ss[len(h.ss)-1].Emergency)
		}
		h.finish()
	})
}

func TestEngineHungModule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hangs atomic.Int32
		hang := behave(func(ctx context.Context, in *tiers.Input) (any, error) {
			if in.TickID() == 2 || in.TickID() == 9 {
				hangs.Add(1)
				time.Sleep(350 * time.Millisecond) // ignores its context
				return "late", nil
			}
			return "on time", nil
		})
		honours := behave(func(ctx context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%4 == 0 {
				<-ctx.Done() // slow, but honours its context
				return nil, ctx.Err()
			}
			return 1, nil
		})
		h := newHarness(t, cycle.Config{}, []cycle.Registration{
			reg("guard", "safety", okMod("ok")),
			reg("hang", "planning", hang, func(s *tiers.ModuleSpec) { s.MaxAttempts = 1 }),
			reg("honours", "planning", honours),
			reg("fast", "planning", okMod("fast")),
		})
		h.ticks(8, 100*time.Millisecond)
		h.ticks(4, 0) // back to back: busy while the hung run is outstanding
		synctest.Wait()
		h.ticks(3, 500*time.Millisecond)
		statuses := map[faultsummary.Status]bool{}
		for _, s := range h.ss {
			statuses[h.status(s, "hang")] = true
		}
		if !statuses[faultsummary.StatusTimedOut] || !statuses[faultsummary.StatusBusy] {
			t.Fatalf("hang statuses %v", statuses)
		}
		h.finish()
	})
}

func TestEngineAbortAndFailFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gateFail, strictFail atomic.Bool
		h := newHarness(t, cycle.Config{}, []cycle.Registration{
			reg("guard", "safety", okMod("ok")),
			reg("gate", "knowledge", switchable(&gateFail, fault.Validation(errBoom)), func(s *tiers.ModuleSpec) { s.Policy = tiers.Abort }),
			reg("strict", "knowledge", switchable(&strictFail, fault.Validation(errBoom)), func(s *tiers.ModuleSpec) { s.Policy = tiers.FailFast }),
			reg("later", "planning", okMod("x")),
		})
		h.tick()
		gateFail.Store(true)
		h.ticks(3, 100*time.Millisecond)
		gateFail.Store(false)
		strictFail.Store(true)
		h.ticks(3, 100*time.Millisecond)
		gateFail.Store(true)
		h.ticks(2, 100*time.Millisecond)
		if h.ss[1].Finish != faultsummary.ShortCircuited || h.ss[4].Finish != faultsummary.Failed {
			t.Fatalf("finishes %s %s", h.ss[1].Finish, h.ss[4].Finish)
		}
		h.finish()
	})
}

func TestEngineLastGoodExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		h := newHarness(t, cycle.Config{DefaultTTL: 700 * time.Millisecond}, []cycle.Registration{
			reg("cam", "knowledge", switchable(&fail, fault.Validation(errBoom))),
			reg("map", "planning", switchable(&fail, fault.Transient(errBoom)), func(s *tiers.ModuleSpec) {
				s.TTL = lastgood.TTL{Auto: true}
			}),
			reg("multi", "planning", okMod("m"), func(s *tiers.ModuleSpec) {
				s.Every = 5
				s.TTL = lastgood.TTL{Fixed: 300 * time.Millisecond}
			}),
		})
		h.ticks(6, 100*time.Millisecond)
		fail.Store(true)
		h.ticks(12, 100*time.Millisecond)
		h.finish()
	})
}

// ptrModule is a module of a comparable (pointer) type, like *modules.Builtin.
type ptrModule struct{ fail *atomic.Bool }

func (m *ptrModule) Run(_ context.Context, in *tiers.Input) (any, error) {
	if m.fail.Load() {
		return nil, fault.Permanent(errBoom)
	}
	return in.TickID(), nil
}

// TestEngineReloadKeepsKey: a reload that gives a module a new implementation (the config
// package does this whenever a builtin module's settings change) keeps the module's key:
// readers in later tiers see its values, and its last good value is served when it fails.
// Regression test of a bug found with the checker (lastgood_age: a produced value
// vanished; fixed in 7aeabb0).
func TestEngineReloadKeepsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		reader := behave(func(_ context.Context, in *tiers.Input) (any, error) { return in.Value("src.result"), nil })
		regs := func() []cycle.Registration {
			return []cycle.Registration{
				reg("src", "knowledge", &ptrModule{fail: &fail}), // a new pointer: a new implementation
				reg("reader", "planning", reader, func(s *tiers.ModuleSpec) { s.Reads = []string{"src.result"} }),
			}
		}
		cfg := cycle.Config{Tiers: engineTiers()}
		h := newHarness(t, cfg, regs())
		h.tick()
		if err := h.e.Reload(cfg, regs()); err != nil { // same specs, new implementations
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		s := h.tick() // the reload applies; src produces 2
		if m, _ := s.Module("reader"); m.Served.Value != uint64(2) {
			t.Errorf("tick 2: reader read %v from src.result, want 2 (written by src in tier knowledge)", m.Served.Value)
		}
		fail.Store(true)
		time.Sleep(100 * time.Millisecond)
		s = h.tick()
		if m, _ := s.Module("src"); m.Served.Source != blackboard.LastGood {
			t.Errorf("tick 3: src failed and serves %s (expired %v), want last_good (value of tick 2, TTL 5s)", m.Served.Source, m.Served.Expired)
		}
		h.finish()
	})
}

// TestEngineRetryCountsTimedOut: a module abandoned at the deadline during its second
// attempt has a retry_counts entry (attempts − 1 wherever > 0). Regression test
// of a bug found by the checker (fixed in 8e404cd).
func TestEngineRetryCountsTimedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if in.Attempt() == 1 {
				return nil, fault.Transient(errBoom)
			}
			time.Sleep(time.Second) // ignores its context
			return "late", nil
		})
		h := newHarness(t, cycle.Config{}, []cycle.Registration{reg("slow", "knowledge", m)})
		s := h.tick()
		ln, _ := s.Module("slow")
		if ln.Status != faultsummary.StatusTimedOut || ln.Attempts != 2 {
			t.Fatalf("setup: %s after %d attempts, want timed_out after 2", ln.Status, ln.Attempts)
		}
		if s.RetryCounts["slow"] != 1 {
			t.Errorf("retry_counts %v, want slow: 1", s.RetryCounts)
		}
		h.finish()
	})
}

// TestEngineRetryCountsProbe: a half-open probe that succeeds on its second attempt has a
// retry_counts entry. Regression test of a bug found by the checker (fixed in 8e404cd).
func TestEngineRetryCountsProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		fail.Store(true)
		m := behave(func(_ context.Context, in *tiers.Input) (any, error) {
			if fail.Load() {
				return nil, fault.Permanent(errBoom)
			}
			if in.Attempt() == 1 {
				return nil, fault.Transient(errBoom)
			}
			return "ok", nil
		})
		h := newHarness(t, cycle.Config{}, []cycle.Registration{reg("probe", "knowledge", m)})
		h.ticks(3, 100*time.Millisecond) // threshold 3: open
		fail.Store(false)
		time.Sleep(time.Second) // cooldown
		s := h.tick()
		ln, _ := s.Module("probe")
		if ln.Status != faultsummary.StatusProbeOK || ln.Attempts != 2 {
			t.Fatalf("setup: %s after %d attempts, want probe_ok after 2", ln.Status, ln.Attempts)
		}
		if s.RetryCounts["probe"] != 1 {
			t.Errorf("retry_counts %v, want probe: 1", s.RetryCounts)
		}
		h.finish()
	})
}

// TestStressDeadlineCommit hunts a suspected engine race (opt-in: CYCLED_STRESS=ticks). A
// module that honours its context returns exactly at the tier deadline; when it wins the
// commit (status failed), cycle/worker.go execute stores phDone before it clears
// w.running, and settleAtDeadline waits only for phDone: the engine may end the tick and
// admit the module again on the next one while running is still set, reporting busy (a
// failure) after a run that returned in time. The checker reports it as busy_outstanding.
// FuzzEngine hit it twice under load (cycle/testdata/fuzz/FuzzEngine/busy_after_deadline_race*,
// which pass on replay: the window is two adjacent atomic stores).
func TestStressDeadlineCommit(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("CYCLED_STRESS"))
	if n <= 0 {
		t.Skip("set CYCLED_STRESS=<ticks> to run")
	}
	stop := make(chan struct{})
	defer close(stop)
	for range runtime.GOMAXPROCS(0) { // contention outside the bubble
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
	}
	synctest.Test(t, func(t *testing.T) {
		m := behave(func(ctx context.Context, _ *tiers.Input) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		ts := []tiers.Tier{{Name: "safety", Budget: 10 * time.Millisecond, Breaker: breaker.Settings{FailureThreshold: 1 << 30}}}
		h := newHarness(t, cycle.Config{Tiers: ts, History: 16}, []cycle.Registration{reg("edge", "safety", m)})
		counts := map[faultsummary.Status]int{}
		for range n {
			s := h.tick()
			st := h.status(s, "edge")
			counts[st]++
			h.ss = h.ss[:0]
			if st != faultsummary.StatusFailed {
				// Let an abandoned run return; after a run that returned in time (failed),
				// tick again at once.
				time.Sleep(time.Millisecond)
			}
		}
		t.Logf("statuses over %d ticks: %v", n, counts)
		_ = h.e.Close()
		_ = h.e.WaitWorkers(context.Background())
	})
}
