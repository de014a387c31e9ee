package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/metrics"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a step-mode engine with a safety module that fails on demand, a healthy module,
// a module that succeeds on tick 1 and fails with a transient fault after, and one that
// does the same with a TTL so short that its last-good value is always expired.
type rig struct {
	e          *cycle.Engine
	reg        *prometheus.Registry
	c          *metrics.Collectors
	failSafety atomic.Bool
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{reg: prometheus.NewRegistry()}
	r.c = metrics.New(r.reg)
	failAfterFirst := module(func(_ context.Context, in *tiers.Input) (any, error) {
		if in.TickID() >= 2 {
			return nil, fault.Transient(errors.New("downstream flapping"))
		}
		return 1, nil
	})
	cfg := cycle.Config{
		Tiers: []tiers.Tier{
			{Name: "safety", Budget: time.Second, MaxAttempts: 1,
				Breaker: breaker.Settings{FailureThreshold: 5, Cooldown: time.Hour}},
			{Name: "work", Budget: time.Second, MaxAttempts: 1,
				Breaker: breaker.Settings{FailureThreshold: 2, Cooldown: time.Hour}},
		},
	}
	mods := []cycle.Registration{
		{Spec: tiers.ModuleSpec{Name: "guard", Tier: "safety"}, Module: module(func(context.Context, *tiers.Input) (any, error) {
			if r.failSafety.Load() {
				return nil, fault.Transient(errors.New("sensor offline"))
			}
			return "clear", nil
		})},
		{Spec: tiers.ModuleSpec{Name: "good", Tier: "work"}, Module: module(func(context.Context, *tiers.Input) (any, error) {
			return "fine", nil
		})},
		{Spec: tiers.ModuleSpec{Name: "flaky", Tier: "work"}, Module: failAfterFirst},
		{Spec: tiers.ModuleSpec{Name: "brief", Tier: "work", TTL: lastgood.TTL{Fixed: time.Nanosecond}}, Module: failAfterFirst},
	}
	e, err := cycle.New(cfg, mods, cycle.WithHooks(r.c.Hooks()))
	if err != nil {
		t.Fatalf("cycle.New: %v", err)
	}
	r.e = e
	t.Cleanup(func() {
		_ = e.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.WaitWorkers(ctx); err != nil {
			t.Errorf("WaitWorkers: %v", err)
		}
	})
	return r
}

// module wraps f in a pointer: the engine compares module implementations with ==, which
// panics on a bare tiers.ModuleFunc (func values are not comparable).
func module(f tiers.ModuleFunc) tiers.Module { return &funcModule{f} }

type funcModule struct{ f tiers.ModuleFunc }

func (m *funcModule) Run(ctx context.Context, in *tiers.Input) (any, error) { return m.f(ctx, in) }

func (r *rig) tick(t *testing.T) {
	t.Helper()
	if _, err := r.e.Tick(context.Background()); err != nil {
		t.Fatalf("Tick: %v", err)
	}
}

// value returns the value of the series of family name whose labels include want, and
// whether such a series exists. Counters, gauges and untyped values are read; for a
// histogram the sample count is returned.
func value(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			case m.Untyped != nil:
				return m.Untyped.GetValue(), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func expect(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := value(t, reg, name, labels)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func TestCollectorsFollowTheEngine(t *testing.T) {
	r := newRig(t)

	// Before Attach the scrape-time breaker gauge is absent.
	if _, ok := value(t, r.reg, "cycled_breaker_state", nil); ok {
		t.Error("cycled_breaker_state exported before Attach")
	}
	r.c.Attach(r.e)

	r.tick(t) // 1: everything ok
	r.tick(t) // 2: flaky and brief fail once (last-good served / expired)
	r.tick(t) // 3: flaky and brief fail again: their breakers open (threshold 2)
	expect(t, r.reg, "cycled_breaker_state", map[string]string{"breaker": "flaky"}, 1)
	expect(t, r.reg, "cycled_breaker_state", map[string]string{"breaker": "good"}, 0)
	expect(t, r.reg, "cycled_emergency_active", nil, 0)

	r.tick(t) // 4: flaky is refused by its open breaker
	r.failSafety.Store(true)
	r.tick(t) // 5: the safety module fails: emergency, the work tier is skipped

	ticks := map[string]string{"finish": "completed"}
	expect(t, r.reg, "cycled_ticks_total", ticks, 5)
	expect(t, r.reg, "cycled_tick_duration_seconds", nil, 5)
	expect(t, r.reg, "cycled_tick_start_lag_seconds", nil, 5)

	run := func(module, tier, status string) map[string]string {
		return map[string]string{"module": module, "tier": tier, "status": status}
	}
	expect(t, r.reg, "cycled_module_runs_total", run("good", "work", "ok"), 4)
	expect(t, r.reg, "cycled_module_runs_total", run("good", "work", "skipped"), 1)
	expect(t, r.reg, "cycled_module_runs_total", run("flaky", "work", "ok"), 1)
	expect(t, r.reg, "cycled_module_runs_total", run("flaky", "work", "failed"), 2)
	expect(t, r.reg, "cycled_module_runs_total", run("flaky", "work", "open"), 1)
	expect(t, r.reg, "cycled_module_runs_total", run("guard", "safety", "ok"), 4)
	expect(t, r.reg, "cycled_module_runs_total", run("guard", "safety", "failed"), 1)
	expect(t, r.reg, "cycled_module_attempts_total", map[string]string{"module": "flaky"}, 3)

	expect(t, r.reg, "cycled_breaker_state", map[string]string{"breaker": "flaky"}, 1)
	expect(t, r.reg, "cycled_breaker_state", map[string]string{"breaker": "guard"}, 0)
	expect(t, r.reg, "cycled_breaker_transitions_total", map[string]string{"breaker": "flaky", "from": "closed", "to": "open"}, 1)

	expect(t, r.reg, "cycled_emergency_active", nil, 1)
	expect(t, r.reg, "cycled_emergency_entries_total", nil, 1)

	// flaky: served stale on ticks 2, 3, 4 (open) and 5 (skipped); brief: always expired.
	expect(t, r.reg, "cycled_last_good_served_total", map[string]string{"key": "flaky.result"}, 4)
	expect(t, r.reg, "cycled_last_good_expired_total", map[string]string{"key": "brief.result"}, 4)
	if _, ok := value(t, r.reg, "cycled_last_good_served_total", map[string]string{"key": "brief.result"}); ok {
		t.Error("brief.result counted as served although it always expired")
	}

	// The work tier ran on ticks 1–4 only; the safety tier on all five.
	expect(t, r.reg, "cycled_tier_duration_seconds", map[string]string{"tier": "work"}, 4)
	expect(t, r.reg, "cycled_tier_duration_seconds", map[string]string{"tier": "safety"}, 5)
	expect(t, r.reg, "cycled_stream_subscribers", nil, 0)
	if v, ok := value(t, r.reg, "cycled_last_tick_timestamp_seconds", nil); !ok || v <= 0 {
		t.Errorf("cycled_last_tick_timestamp_seconds = %v (present %v), want > 0", v, ok)
	}
}

func TestEmergencyRecoveryAndOperatorReset(t *testing.T) {
	r := newRig(t)
	r.c.Attach(r.e)
	r.failSafety.Store(true)
	r.tick(t)
	expect(t, r.reg, "cycled_emergency_active", nil, 1)
	r.failSafety.Store(false)
	for range 3 { // recover_after defaults to 3 healthy safety ticks
		r.tick(t)
	}
	expect(t, r.reg, "cycled_emergency_active", nil, 0)
	expect(t, r.reg, "cycled_emergency_entries_total", nil, 1)

	// The work tier ran again on the recovering tick 4; ticks 4 and 5 open flaky's breaker.
	r.tick(t)
	expect(t, r.reg, "cycled_breaker_state", map[string]string{"breaker": "flaky"}, 1)
	if err := r.e.ResetBreaker("flaky"); err != nil {
		t.Fatalf("ResetBreaker: %v", err)
	}
	expect(t, r.reg, "cycled_breaker_state", map[string]string{"breaker": "flaky"}, 0)
	expect(t, r.reg, "cycled_breaker_transitions_total", map[string]string{"breaker": "flaky", "from": "open", "to": "closed"}, 1)
}

func TestFamilyNamesAndLint(t *testing.T) {
	r := newRig(t)
	r.c.Attach(r.e)
	r.tick(t)
	r.tick(t)
	problems, err := testutil.GatherAndLint(r.reg)
	if err != nil {
		t.Fatalf("GatherAndLint: %v", err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "cycled_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	fixed := []string{"cycled_ticks_total", "cycled_tick_duration_seconds", "cycled_tick_start_lag_seconds",
		"cycled_breaker_state", "cycled_emergency_active", "cycled_module_runs_total",
		"go_goroutines", "process_start_time_seconds"}
	for _, name := range fixed {
		if n, err := testutil.GatherAndCount(r.reg, name); err != nil || n == 0 {
			t.Errorf("family %s: %d series, err %v", name, n, err)
		}
	}
}

func TestNewOnARegistryWithGoCollectorAlready(t *testing.T) {
	reg := prometheus.NewRegistry()
	//lint:ignore SA1019 the deprecated constructor is what older wiring used
	reg.MustRegister(prometheus.NewGoCollector())
	c := metrics.New(reg)
	if c.Registry() != reg {
		t.Fatal("Registry() is not the registry passed to New")
	}
	if metrics.New(nil).Registry() == nil {
		t.Fatal("New(nil) has no registry")
	}
}

// BenchmarkOnTick feeds one published summary of N modules to the collectors.
func BenchmarkOnTick(b *testing.B) {
	for _, n := range []int{10, 500, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			c := metrics.New(prometheus.NewRegistry())
			e := newFlatEngine(b, n)
			s, err := e.Tick(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			h := c.Hooks()
			b.ReportAllocs()
			for b.Loop() {
				h.OnTick(s)
			}
		})
	}
}

// BenchmarkTickObserved is a whole tick of N trivial modules with the collectors' hooks
// attached as the daemon attaches them: the tick's cost with its metrics, to compare
// across builds (the per-module duration histograms' share of the tick).
func BenchmarkTickObserved(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			c := metrics.New(prometheus.NewRegistry())
			e := newFlatEngine(b, n, cycle.WithHooks(c.Hooks()))
			ctx := context.Background()
			for range 20 {
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := e.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the process's CPU time (user and system), which other processes'
// load does not inflate as it does wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// newFlatEngine is a step-mode engine of n trivial modules in one tier.
func newFlatEngine(tb testing.TB, n int, opts ...cycle.Option) *cycle.Engine {
	tb.Helper()
	mods := make([]cycle.Registration, n)
	for i := range mods {
		mods[i] = cycle.Registration{Spec: tiers.ModuleSpec{Name: fmt.Sprintf("m%d", i), Tier: "work"},
			Module: module(func(context.Context, *tiers.Input) (any, error) { return 1, nil })}
	}
	e, err := cycle.New(cycle.Config{Tiers: []tiers.Tier{{Name: "work", Budget: time.Second, MaxAttempts: 1}}}, mods, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = e.Close(); _ = e.WaitWorkers(context.Background()) })
	return e
}

// TestObserveTickAllocatesPerTickNotPerModule checks that the collectors read a tick's
// module lines without building each one on the heap: the engine keeps its lines compact,
// and observing a tick of 500 modules must cost no more allocations than one of 10.
func TestObserveTickAllocatesPerTickNotPerModule(t *testing.T) {
	allocs := func(n int) float64 {
		c := metrics.New(prometheus.NewRegistry())
		s, err := newFlatEngine(t, n).Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		observe := c.Hooks().OnTick
		observe(s) // the first observation makes the label children
		return testing.AllocsPerRun(20, func() { observe(s) })
	}
	small, large := allocs(10), allocs(500)
	if large > small+8 {
		t.Fatalf("observing a tick: %v allocs with 10 modules, %v with 500: the lines are built per module", small, large)
	}
}

// TestModuleCountersFollowTheirModule checks that each line is counted for its own module,
// tier, status and key when the summaries' lines change order, length, tiers and statuses
// from one tick to the next (a reload), the collectors remembering counters by position:
// with whole lines, and with a producer's lines whose identity says when the modules are
// the same as the tick before (then plain successes are counted without being read).
func TestModuleCountersFollowTheirModule(t *testing.T) {
	stale := func(key string) faultsummary.Served {
		return faultsummary.Served{Key: key, Source: blackboard.LastGood, Stale: true}
	}
	line := func(name, tier string, st faultsummary.Status, attempts int, served faultsummary.Served) faultsummary.Module {
		if served.Key == "" {
			served = faultsummary.Served{Key: name + ".result", Source: blackboard.Live}
		}
		return faultsummary.Module{Name: name, Tier: tier, Status: st, Attempts: attempts, CircuitState: "closed", Served: served}
	}
	ticks := []struct {
		id    int // the lines' identity: the same for the same modules in the same order
		lines []faultsummary.Module
	}{
		{1, []faultsummary.Module{line("a", "work", faultsummary.StatusOK, 1, faultsummary.Served{}), line("b", "work", faultsummary.StatusFailed, 1, stale("b.result"))}},
		{2, []faultsummary.Module{line("b", "work", faultsummary.StatusOK, 1, faultsummary.Served{}), line("a", "work", faultsummary.StatusFailed, 1, stale("a.result"))}},
		{3, []faultsummary.Module{line("b", "work", faultsummary.StatusOK, 1, faultsummary.Served{}), line("a", "plan", faultsummary.StatusRetried, 2, faultsummary.Served{})}},
		{4, []faultsummary.Module{line("a", "plan", faultsummary.StatusOK, 1, faultsummary.Served{}), line("b", "work", faultsummary.StatusFailed, 1, stale("b.result")),
			line("c", "work", faultsummary.StatusOpen, 0, faultsummary.Served{Key: "c.result", Expired: true})}},
		{5, []faultsummary.Module{line("a", "plan", faultsummary.StatusOK, 1, faultsummary.Served{}), line("b", "work", faultsummary.StatusFailed, 1, stale("b.v2")),
			line("c", "work", faultsummary.StatusOpen, 0, faultsummary.Served{Key: "c.result", Expired: true})}},
		{5, []faultsummary.Module{line("a", "plan", faultsummary.StatusOK, 1, faultsummary.Served{}), line("b", "work", faultsummary.StatusOK, 1, faultsummary.Served{Key: "b.v2"}),
			line("c", "work", faultsummary.StatusOK, 1, faultsummary.Served{})}},
	}
	for _, producer := range []bool{false, true} {
		t.Run(fmt.Sprintf("producer=%v", producer), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c := metrics.New(reg)
			ids := map[int]*int{}
			for _, tk := range ticks {
				s := &faultsummary.Summary{}
				if producer {
					if ids[tk.id] == nil {
						ids[tk.id] = new(int)
					}
					s.SetLines(testLines{ms: tk.lines, id: ids[tk.id]})
				} else {
					s.SetModules(tk.lines)
				}
				c.Hooks().OnTick(s)
			}
			run := func(module, tier, status string) map[string]string {
				return map[string]string{"module": module, "tier": tier, "status": status}
			}
			for _, want := range []struct {
				labels map[string]string
				n      float64
			}{
				{run("a", "work", "ok"), 1}, {run("a", "work", "failed"), 1}, {run("a", "plan", "retried"), 1}, {run("a", "plan", "ok"), 3},
				{run("b", "work", "failed"), 3}, {run("b", "work", "ok"), 3}, {run("c", "work", "open"), 2}, {run("c", "work", "ok"), 1},
			} {
				expect(t, reg, "cycled_module_runs_total", want.labels, want.n)
			}
			expect(t, reg, "cycled_module_attempts_total", map[string]string{"module": "a"}, 7)
			expect(t, reg, "cycled_module_attempts_total", map[string]string{"module": "b"}, 6)
			expect(t, reg, "cycled_module_attempts_total", map[string]string{"module": "c"}, 1)
			expect(t, reg, "cycled_last_good_served_total", map[string]string{"key": "a.result"}, 1)
			expect(t, reg, "cycled_last_good_served_total", map[string]string{"key": "b.result"}, 2)
			expect(t, reg, "cycled_last_good_served_total", map[string]string{"key": "b.v2"}, 1) // the key changed in a reload
			expect(t, reg, "cycled_last_good_expired_total", map[string]string{"key": "c.result"}, 2)
		})
	}
}

// testLines are module lines kept by a producer, with the identity the test gives them.
type testLines struct {
	ms []faultsummary.Module
	id *int
}

func (l testLines) Len() int                           { return len(l.ms) }
func (l testLines) Line(i int, m *faultsummary.Module) { *m = l.ms[i] }
func (l testLines) Status(i int) faultsummary.Status   { return l.ms[i].Status }
func (l testLines) Identity() any                      { return l.id }
func (l testLines) Plain(i int) bool {
	m := &l.ms[i]
	return m.Status == faultsummary.StatusOK && m.Attempts == 1 && m.Served.Source == blackboard.Live && !m.Served.Stale
}
