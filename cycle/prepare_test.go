package cycle

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/lastgood"
	"github.com/cycled/cycled/tiers"
)

// applyMallocs applies the pending state at a tick boundary, as a tick does, and returns
// the heap allocations it made.
func applyMallocs(e *Engine) uint64 {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	e.applyPending()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// A reload is built and prepared on the caller's goroutine: applying it at the tick
// boundary builds nothing (no runtime, breaker, map or list, whatever the number of
// modules) and still carries over what it must: the workers and open breakers of unchanged
// modules, a breaker whose settings changed replaced, a removed module's key forgotten.
func TestApplyAtBoundaryBuildsNothing(t *testing.T) {
	for _, n := range []int{50, 500} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			regs := benchModules(n, false)
			regs[1].Module = trivial{fail: true} // tier knowledge: its breaker opens below
			ts := benchTiers()
			ts[1].Breaker.FailureThreshold = 1
			e := newEngine(t, Config{Tiers: ts}, regs)
			tick(t, e)
			w0 := workerOf(t, e, "m0")
			if st := rtOf(t, e, "m1").br.State(); st.String() != "open" {
				t.Fatalf("m1's breaker is %v, want open", st)
			}
			next := slices.Clone(regs[:n-1]) // m<n-1> removed
			next[0].Spec.MaxAttempts = 2
			ts2 := benchTiers()
			ts2[1].Breaker.FailureThreshold = 1
			ts2[2].Breaker.FailureThreshold = 7 // replaces the perception tier's breakers
			if err := e.Reload(Config{Tiers: ts2}, next); err != nil {
				t.Fatal(err)
			}
			if got := applyMallocs(e); got > 2 {
				t.Errorf("applying the reload at the boundary made %d allocations; want none that grow with the modules", got)
			}
			if e.rebuilt != 0 {
				t.Errorf("the boundary prepared %d states itself", e.rebuilt)
			}
			s := tick(t, e)
			checkApplied(t, e, s, n, w0)
		})
	}
}

// checkApplied checks the state TestApplyAtBoundaryBuildsNothing's reload leads to.
func checkApplied(t *testing.T, e *Engine, s *faultsummary.Summary, n int, w0 *worker) {
	t.Helper()
	if s.NumModules() != n-1 {
		t.Errorf("%d modules after the reload, want %d", s.NumModules(), n-1)
	}
	if workerOf(t, e, "m0") != w0 {
		t.Error("the unchanged module m0 got a new worker")
	}
	m0 := rtOf(t, e, "m0")
	if got := m0.planned.Attempts; got != 2 || m0.w.mod.Load() != m0 {
		t.Errorf("m0 runs with %d attempts (worker on its runtime: %v), want 2", got, m0.w.mod.Load() == m0)
	}
	if st := rtOf(t, e, "m1").br.State(); st.String() != "open" {
		t.Errorf("m1's open breaker is %v after the reload", st)
	}
	if b, ok := e.breakers.Get("m2"); !ok || b.Settings().FailureThreshold != 7 || b != rtOf(t, e, "m2").br {
		t.Error("m2's breaker was not replaced by one with the new settings")
	}
	removed := fmt.Sprintf("m%d", n-1)
	if _, ok := e.breakers.Get(removed); ok {
		t.Errorf("breaker %s of the removed module is still registered", removed)
	}
	if e.lg.Get(removed+".result", time.Now()).Quality != lastgood.Missing {
		t.Errorf("the removed module's key %s.result is still served", removed)
	}
}

// rtOf returns the runtime of module name in the state in force.
func rtOf(t *testing.T, e *Engine, name string) *modRT {
	t.Helper()
	for _, rt := range e.active.lines {
		if rt.name == name {
			return rt
		}
	}
	t.Fatalf("module %q not in force", name)
	return nil
}

// A state prepared against a state that is no longer in force (a reload that raced with a
// boundary installing the one before it) is prepared again by the boundary, as a copy: the
// result is the same as if it had been prepared in time.
func TestBoundaryPreparesAStaleState(t *testing.T) {
	m, extra := ok("m"), ok("x")
	cfg := Config{}
	e := newEngine(t, cfg, []Registration{reg("m", "knowledge", m)})
	w := workerOf(t, e, "m")
	if err := e.Reload(cfg, []Registration{reg("m", "knowledge", m), reg("x", "planning", extra)}); err != nil {
		t.Fatal(err)
	}
	p1 := e.pending.Load()
	if err := e.Reload(cfg, []Registration{reg("m", "knowledge", m, func(s *tiers.ModuleSpec) { s.MaxAttempts = 1 })}); err != nil {
		t.Fatal(err)
	}
	p2 := e.pending.Load()
	e.pending.Store(p1) // as if the boundary had taken p1 before p2 was published
	if s := tick(t, e); s.NumModules() != 2 || e.rebuilt != 0 {
		t.Fatalf("p1: %d modules, %d rebuilt", s.NumModules(), e.rebuilt)
	}
	e.pending.Store(p2) // prepared against the state p1 replaced
	s := tick(t, e)
	if e.rebuilt != 1 || s.NumModules() != 1 || s.Generation != p2.version {
		t.Fatalf("p2: %d rebuilt, %d modules, generation %d (want 1, 1, %d)", e.rebuilt, s.NumModules(), s.Generation, p2.version)
	}
	if e.active.lines[0].planned.Attempts != 1 || workerOf(t, e, "m") != w {
		t.Fatal("p2 not applied as prepared: attempts or worker differ")
	}
	if e.lg.Get("x.result", time.Now()).Quality != lastgood.Missing {
		t.Fatal("x's key survived its removal")
	}
	if tick(t, e); e.rebuilt != 1 {
		t.Fatal("the copy of p2 in force was applied again")
	}
}

// Reloads racing with ticks (under -race): every tick runs a whole configuration, the
// generation never goes back, and the last reload is the one in force at the end.
func TestReloadsRacingTicks(t *testing.T) {
	m := ok("m")
	base := []Registration{reg("m", "knowledge", m)}
	e := newEngine(t, Config{}, base)
	const reloads = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range reloads {
			regs := slices.Clone(base)
			if i%2 == 0 {
				regs = append(regs, reg(fmt.Sprintf("x%d", i), "planning", ok(i)))
			}
			if err := e.Reload(Config{}, regs); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var gen uint64
	for range reloads {
		s, err := e.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if s.Generation < gen || s.NumModules() < 1 || s.NumModules() > 2 {
			t.Fatalf("tick %d: generation %d after %d, %d modules", s.TickID, s.Generation, gen, s.NumModules())
		}
		gen = s.Generation
	}
	wg.Wait()
	s := tick(t, e)
	if s.NumModules() != 1 || s.Generation != e.pending.Load().version {
		t.Fatalf("after the last reload: %d modules, generation %d", s.NumModules(), s.Generation)
	}
	if r, _ := e.breakers.Get("m"); r == nil || r != e.active.lines[0].br {
		t.Fatal("m's breaker in force is not the registered one")
	}
}
