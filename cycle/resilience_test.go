package cycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/bulkhead"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/faultsummary/check"
	"github.com/cycled/cycled/retrybudget"
	"github.com/cycled/cycled/tiers"
)

// checked runs n ticks of e and checks every summary with a checker made from cfg and
// regs; it returns the summaries.
func checked(t *testing.T, e *Engine, chk *check.Checker, n int) []*faultsummary.Summary {
	t.Helper()
	out := make([]*faultsummary.Summary, 0, n)
	for range n {
		s := tick(t, e)
		if vs := chk.Check(s); len(vs) > 0 {
			t.Fatalf("tick %d: invariant violations: %v", s.TickID, vs)
		}
		out = append(out, s)
	}
	return out
}

func newChecker(t *testing.T, cfg Config, regs []Registration) *check.Checker {
	t.Helper()
	if cfg.Tiers == nil {
		cfg.Tiers = testTiers()
	}
	chk, err := NewChecker(cfg, regs)
	if err != nil {
		t.Fatal(err)
	}
	return chk
}

// TestRateBreakerOnEngine: a downstream failing every other tick never fails two ticks in
// a row, so a consecutive breaker of threshold 2 stays closed, while a rate breaker at
// 0.5 over 4 ticks opens on the tick that makes it 2 of the last 4, and the module is
// refused (open) after it.
func TestRateBreakerOnEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alternate := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID()%2 == 1 {
				return nil, fault.Downstream(errBoom)
			}
			return "ok", nil
		}}
		cfg := Config{Breakers: map[string]breaker.Settings{
			"rate": {Kind: breaker.Rate, Window: 4, MinTicks: 4, FailureRate: 0.5, Cooldown: time.Hour},
			"cons": {FailureThreshold: 2, Cooldown: time.Hour},
		}}
		regs := []Registration{
			reg("viaRate", "planning", alternate, func(s *tiers.ModuleSpec) { s.Breaker = "rate" }),
			reg("viaCons", "planning", alternate, func(s *tiers.ModuleSpec) { s.Breaker = "cons" }),
		}
		e := newEngine(t, cfg, regs)
		ss := checked(t, e, newChecker(t, cfg, regs), 6)
		for i, s := range ss[:4] {
			if got := mod(t, s, "viaRate").CircuitState; got != "closed" {
				t.Fatalf("tick %d: rate breaker %s before 2 of 4 failed", i+1, got)
			}
		}
		if got := mod(t, ss[4], "viaRate").CircuitState; got != "open" {
			t.Fatalf("tick 5: rate breaker %s, want open (ticks 2-5: ok, fail, ok, fail)", got)
		}
		if got := mod(t, ss[5], "viaRate").Status; got != faultsummary.StatusOpen {
			t.Fatalf("tick 6: status %s, want open", got)
		}
		for _, s := range ss {
			if got := mod(t, s, "viaCons").CircuitState; got != "closed" {
				t.Fatalf("tick %d: consecutive breaker %s without two failures in a row", s.TickID, got)
			}
		}
	})
}

// breakerConfigLog collects the engine's breaker configuration events.
type breakerConfigLog struct {
	mu  sync.Mutex
	evs []BreakerConfigEvent
}

func (l *breakerConfigLog) hooks() Hooks {
	return Hooks{OnBreakerConfig: func(ev BreakerConfigEvent) {
		l.mu.Lock()
		l.evs = append(l.evs, ev)
		l.mu.Unlock()
	}}
}

func (l *breakerConfigLog) take() []BreakerConfigEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.evs
	l.evs = nil
	return out
}

// TestNamedBreakerRegistration: a runtime registration with other settings keeps the
// first and is published as a conflict; the same settings again are a no-op; a reload
// that changes a named breaker's settings replaces it (closed again) and says so.
func TestNamedBreakerRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log breakerConfigLog
		cfg := Config{Breakers: map[string]breaker.Settings{"ds": {FailureThreshold: 1, Cooldown: time.Hour}}}
		regs := []Registration{reg("m", "planning", failing(fault.Transient(errBoom)), func(s *tiers.ModuleSpec) { s.Breaker = "ds" })}
		e := newEngine(t, cfg, regs, WithHooks(log.hooks()))
		if got := mod(t, tick(t, e), "m").CircuitState; got != "open" {
			t.Fatalf("breaker %s after one failure at threshold 1", got)
		}
		err := e.RegisterBreaker(breaker.Settings{Name: "ds", FailureThreshold: 9, Cooldown: time.Hour})
		if !errors.Is(err, breaker.ErrConflict) || !strings.Contains(err.Error(), "failure_threshold: registered 1, requested 9") {
			t.Fatalf("conflicting registration: %v", err)
		}
		if evs := log.take(); len(evs) != 1 || !evs[0].Conflict || evs[0].Name != "ds" {
			t.Fatalf("events %+v, want one conflict on ds", evs)
		}
		if err := e.RegisterBreaker(breaker.Settings{Name: "ds", FailureThreshold: 1, Cooldown: time.Hour}); err != nil {
			t.Fatalf("the same settings again: %v", err)
		}
		if got := mod(t, tick(t, e), "m").Status; got != faultsummary.StatusOpen {
			t.Fatalf("the first registration did not stay in force: %s", got)
		}
		// A runtime registration of a new name is usable and survives a reload that does
		// not declare it.
		if err := e.RegisterBreaker(breaker.Settings{Name: "extra", Kind: breaker.Rate}); err != nil {
			t.Fatal(err)
		}
		cfg2 := Config{Breakers: map[string]breaker.Settings{"ds": {FailureThreshold: 3, Cooldown: time.Hour}}}
		if err := e.Reload(cfg2, regs); err != nil {
			t.Fatal(err)
		}
		if evs := log.take(); len(evs) != 0 {
			t.Fatalf("events before the boundary: %+v", evs)
		}
		s := tick(t, e)
		evs := log.take()
		if len(evs) != 1 || !evs[0].Replaced || evs[0].Name != "ds" || !strings.Contains(evs[0].Diff, "failure_threshold: registered 1, requested 3") {
			t.Fatalf("events %+v, want ds replaced", evs)
		}
		if m := mod(t, s, "m"); m.Status != faultsummary.StatusFailed || m.CircuitState != "closed" {
			t.Fatalf("after the replacement: %s %s, want a failure on a closed breaker", m.Status, m.CircuitState)
		}
		names := map[string]bool{}
		for _, b := range e.Breakers() {
			names[b.Name] = true
		}
		if !names["extra"] || !names["ds"] {
			t.Fatalf("breakers %v, want ds and extra", names)
		}
	})
}

// gate is a module that blocks until its channel is closed, ignoring its context.
func gate(ch chan struct{}) *script {
	return &script{fn: func(context.Context, *tiers.Input) (any, error) {
		<-ch
		return "done", nil
	}}
}

// TestBulkheadRejects: a module that ignores its context keeps its bulkhead permit while it
// runs past its tier and is busy in the next tick, so the other module naming the
// bulkhead is rejected (not run, no breaker event, last-known-good served under bypass)
// until it returns.
func TestBulkheadRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var hangNow atomic.Bool
		hang := &script{fn: func(context.Context, *tiers.Input) (any, error) {
			if hangNow.Load() {
				<-release
			}
			return "hang", nil
		}}
		other := &script{}
		cfg := Config{Bulkheads: map[string]bulkhead.Settings{"db": {MaxInFlight: 1}}}
		regs := []Registration{
			reg("hang", "planning", hang, func(s *tiers.ModuleSpec) { s.Bulkhead = "db"; s.Priority = 2 }),
			reg("other", "planning", other, func(s *tiers.ModuleSpec) { s.Bulkhead = "db"; s.Priority = 1 }),
		}
		e := newEngine(t, cfg, regs)
		chk := newChecker(t, cfg, regs)
		checked(t, e, chk, 1) // both ran: other has a last-known-good value
		hangNow.Store(true)
		ss := checked(t, e, chk, 2)
		if m := mod(t, ss[0], "hang"); m.Status != faultsummary.StatusTimedOut {
			t.Fatalf("tick 2: hang %s, want timed_out", m.Status)
		}
		if m := mod(t, ss[1], "hang"); m.Status != faultsummary.StatusBusy {
			t.Fatalf("tick 3: hang %s, want busy", m.Status)
		}
		for _, s := range ss {
			m := mod(t, s, "other")
			if m.Status != faultsummary.StatusRejected || m.Attempts != 0 || m.Error != "" || !m.UsingFallback || !m.Served.Stale {
				t.Fatalf("tick %d: other %+v, want rejected, no attempt, last-known-good served stale", s.TickID, m)
			}
		}
		if runs := other.runs.Load(); runs != 1 {
			t.Fatalf("other ran %d times, want once (tick 1)", runs)
		}
		bh := e.Bulkheads()
		if len(bh) != 1 || bh[0].InFlight != 1 || bh[0].Rejections != 2 {
			t.Fatalf("bulkheads %+v, want db with 1 in flight and 2 rejections", bh)
		}
		if b := breakerOf(t, e, "other"); b.TotalFailures != 0 || b.State != breaker.Closed {
			t.Fatalf("a rejection moved other's breaker: %+v", b)
		}
		close(release)
		synctest.Wait()
		s := checked(t, e, chk, 1)[0]
		// hang now runs on its own goroutine (it blocked), concurrently with other: which
		// of the two gets the one permit first is a race; hang is no longer busy.
		if st := mod(t, s, "hang").Status; st != faultsummary.StatusOK && st != faultsummary.StatusRejected {
			t.Fatalf("after the return: hang %s, want ok or rejected", st)
		}
		if bh := e.Bulkheads(); bh[0].InFlight != 0 {
			t.Fatalf("permits left in flight: %+v", bh)
		}
	})
}

func breakerOf(t *testing.T, e *Engine, name string) breaker.Snapshot {
	t.Helper()
	for _, b := range e.Breakers() {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no breaker %q", name)
	return breaker.Snapshot{}
}

// TestBulkheadOnRejectFail: on_reject fail makes the rejection the module's failure under
// its error policy (fail_fast here: the tier fails), with the bulkhead's error.
func TestBulkheadOnRejectFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		cfg := Config{Bulkheads: map[string]bulkhead.Settings{"db": {MaxInFlight: 1}}}
		regs := []Registration{
			reg("hang", "planning", gate(release), func(s *tiers.ModuleSpec) { s.Bulkhead = "db"; s.Priority = 2 }),
			reg("strict", "planning", ok(1), func(s *tiers.ModuleSpec) {
				s.Bulkhead, s.OnReject, s.Policy, s.Priority = "db", tiers.Fail, tiers.FailFast, 1
			}),
		}
		e := newEngine(t, cfg, regs)
		s := checked(t, e, newChecker(t, cfg, regs), 1)[0]
		m := mod(t, s, "strict")
		if m.Status != faultsummary.StatusRejected || m.Error != "bulkhead is full (on_reject: fail)" || m.FaultKind != "control" {
			t.Fatalf("strict %+v", m)
		}
		if tierOf(t, s, "planning").Status != faultsummary.TierFailed || s.Finish != faultsummary.Failed {
			t.Fatalf("tier %s finish %s, want failed", tierOf(t, s, "planning").Status, s.Finish)
		}
	})
}

// TestBulkheadWait: with a wait, a module finding the bulkhead full waits for the permit
// (out of its tier's budget) and runs once the holder returns; a wait longer than the
// time left ends at the deadline, rejected.
func TestBulkheadWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		holdFor := 5 * time.Millisecond
		slow := &script{fn: func(ctx context.Context, _ *tiers.Input) (any, error) {
			select {
			case <-time.After(holdFor):
				return "slow", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
		cfg := Config{Bulkheads: map[string]bulkhead.Settings{"db": {MaxInFlight: 1, Wait: time.Second}}}
		regs := []Registration{
			reg("slow", "planning", slow, func(s *tiers.ModuleSpec) { s.Bulkhead = "db"; s.Priority = 2 }),
			reg("waiter", "planning", ok(2), func(s *tiers.ModuleSpec) { s.Bulkhead = "db"; s.Priority = 1 }),
		}
		e := newEngine(t, cfg, regs)
		chk := newChecker(t, cfg, regs)
		s := checked(t, e, chk, 1)[0]
		if st := mod(t, s, "waiter").Status; st != faultsummary.StatusOK {
			t.Fatalf("waiter %s, want ok after waiting", st)
		}
		if el := tierOf(t, s, "planning").ElapsedMs; el < 5 {
			t.Fatalf("tier took %vms, want at least the 5ms the waiter waited", el)
		}
		holdFor = time.Hour // the holder honours its context: it ends at the 100ms deadline
		s = checked(t, e, chk, 1)[0]
		if m := mod(t, s, "waiter"); m.Status != faultsummary.StatusRejected {
			t.Fatalf("waiter %s, want rejected at the deadline", m.Status)
		}
	})
}

// TestRetryBudgetWindow: a tier's retry budget (ratio 0.5 over 2 ticks) lets a failing
// module retry while the window's retries stay within half its first attempts, refuses
// the next retry (the run ends with its last fault) and says so in the summary; on the
// next tick the window still holds the earlier retries.
func TestRetryBudgetWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failFrom2 := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			if in.TickID() >= 2 {
				return nil, fault.Transient(errBoom)
			}
			return 1, nil
		}}
		cfg := Config{RetryBudgets: RetryBudgets{Tiers: map[string]retrybudget.RatioSettings{"knowledge": {Ratio: 0.5, Window: 2}}}}
		regs := []Registration{reg("f", "knowledge", failFrom2, func(s *tiers.ModuleSpec) { s.MaxAttempts, s.Priority = 10, 9 })}
		for _, n := range []string{"a", "b", "c", "d"} {
			regs = append(regs, reg(n, "knowledge", ok(n)))
		}
		e := newEngine(t, cfg, regs)
		ss := checked(t, e, newChecker(t, cfg, regs), 3)
		// Tick 2: f, first in its tier, fails: window firsts 5 (tick 1) + 1 = 6, its first
		// retry fits; while it backs off, the other four run (another runner takes them),
		// and 10 first attempts let 5 retries in, the 6th is refused. Tick 3: the window
		// (ticks 2 and 3) holds 5 retries for 6, then 10, first attempts: none fits.
		for i, want := range []int{1, 6, 1} {
			m := mod(t, ss[i], "f")
			if m.Attempts != want {
				t.Fatalf("tick %d: f made %d attempts, want %d", i+1, m.Attempts, want)
			}
			if exh := ss[i].RetryBudgetExhausted; (i > 0) != (len(exh) == 1 && exh[0] == "knowledge") {
				t.Fatalf("tick %d: retry_budget_exhausted %v", i+1, exh)
			}
		}
		if m := mod(t, ss[1], "f"); m.Status != faultsummary.StatusFailed || m.FaultKind != "transient" {
			t.Fatalf("tick 2: f %s %s, want failed transient (its last fault)", m.Status, m.FaultKind)
		}
		v := e.RetryBudgetStates()
		if len(v) != 1 || v[0].Name != "knowledge" || !v[0].Tier || v[0].Retries != 5 || v[0].Refused != 2 {
			t.Fatalf("budgets %+v", v)
		}
	})
}

// TestRetryBudgetMinPerTick: ratio 0 allows only min_per_tick retries per tick, shared by
// the modules naming the downstream's budget; a module of the same tier not naming it
// retries as before.
func TestRetryBudgetMinPerTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{RetryBudgets: RetryBudgets{Downstreams: map[string]retrybudget.RatioSettings{"llm": {MinPerTick: 1}}}}
		named := func(s *tiers.ModuleSpec) { s.RetryBudget = "llm" }
		regs := []Registration{
			reg("x", "knowledge", failing(fault.Transient(errBoom)), named),
			reg("y", "knowledge", failing(fault.Transient(errBoom)), named),
			reg("free", "knowledge", failing(fault.Transient(errBoom))),
		}
		e := newEngine(t, cfg, regs)
		s := checked(t, e, newChecker(t, cfg, regs), 1)[0]
		if got := mod(t, s, "x").Attempts + mod(t, s, "y").Attempts; got != 3 {
			t.Fatalf("x and y made %d attempts, want 3 (two firsts, one retry)", got)
		}
		if got := mod(t, s, "free").Attempts; got != 3 {
			t.Fatalf("free made %d attempts, want its tier's 3", got)
		}
		if exh := s.RetryBudgetExhausted; len(exh) != 1 || exh[0] != "llm" {
			t.Fatalf("retry_budget_exhausted %v, want [llm]", exh)
		}
	})
}

// TestCheckConfigBesideAsync: an asynchronous module has no summary line, so the checker's
// modules skip it; each module still gets its own bulkhead, retry budget and priority, so
// that a module retrying every tick after an asynchronous one is not counted against the
// budget of the module before it (docs/decisions.md).
func TestCheckConfigBesideAsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{
			Bulkheads:    map[string]bulkhead.Settings{"gpu": {MaxInFlight: 4}},
			RetryBudgets: RetryBudgets{Downstreams: map[string]retrybudget.RatioSettings{"llm": {MinPerTick: 1}}},
		}
		regs := []Registration{
			reg("bg", "knowledge", ok("bg"), func(s *tiers.ModuleSpec) { s.Async = true }),
			reg("x", "knowledge", ok("x"), func(s *tiers.ModuleSpec) { s.RetryBudget, s.Bulkhead = "llm", "gpu" }),
			reg("y", "knowledge", failing(fault.Transient(errBoom))), // two retries every tick, no budget
			reg("z", "planning", ok("z"), func(s *tiers.ModuleSpec) { s.Priority = 3 }),
		}
		plan, ps := Validate(cfg, regs)
		if err := ps.Err(); err != nil {
			t.Fatal(err)
		}
		want := map[string]check.Module{"x": {RetryBudget: "llm", Bulkhead: "gpu"}, "y": {}, "z": {Priority: 3}}
		got := CheckConfig(cfg, plan)
		if len(got.Modules) != len(want) || len(got.Async) != 1 || got.Async[0] != "bg" {
			t.Fatalf("modules %+v, async %v: want x, y, z and bg asynchronous", got.Modules, got.Async)
		}
		for _, m := range got.Modules {
			w := want[m.Name]
			if m.RetryBudget != w.RetryBudget || m.Bulkhead != w.Bulkhead || m.Priority != w.Priority {
				t.Errorf("%s: budget %q bulkhead %q priority %d, want %q %q %d", m.Name, m.RetryBudget, m.Bulkhead, m.Priority,
					w.RetryBudget, w.Bulkhead, w.Priority)
			}
		}
		e := newEngine(t, cfg, regs)
		ss := checked(t, e, newChecker(t, cfg, regs), 3)
		if a := mod(t, ss[2], "y").Attempts; a != 3 {
			t.Fatalf("y made %d attempts, want its tier's 3", a)
		}
	})
}
