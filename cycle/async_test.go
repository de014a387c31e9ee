package cycle

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

func asyncSpec(timeout time.Duration) func(*tiers.ModuleSpec) {
	return func(s *tiers.ModuleSpec) { s.Async, s.Timeout = true, timeout }
}

// An asynchronous module starts after the tick, outside the tiers: its value is on the
// board at the next tick boundary, readable by that tick's tiers, tagged with the tick it
// came from; it has no line and no breaker, and its end is in the next tick's summary.
func TestAsyncValueAtNextBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []any
		reader := &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
			seen = append(seen, in.Value("bg.result"))
			return 1, nil
		}}
		bg := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
			select { // longer than the tiers' budgets would allow
			case <-time.After(30 * time.Millisecond):
				return in.TickID() * 10, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
		e := newEngine(t, Config{}, []Registration{
			reg("s", "safety", ok(0)),
			reg("bg", "knowledge", bg, asyncSpec(time.Second)),
			reg("k", "planning", reader),
		})
		s := tick(t, e)
		if _, ok := s.Module("bg"); ok || s.NumModules() != 2 || len(s.Async) != 0 {
			t.Fatalf("tick 1: an async module has no line (lines %d, async %+v)", s.NumModules(), s.Async)
		}
		time.Sleep(40 * time.Millisecond) // bg runs after tick 1
		s = tick(t, e)
		if len(s.Async) != 1 || s.Async[0].Name != "bg" || s.Async[0].OriginTick != 1 || s.Async[0].Status != faultsummary.StatusOK {
			t.Fatalf("tick 2 async = %+v", s.Async)
		}
		if seen[0] != nil || seen[1] != uint64(10) {
			t.Fatalf("k read %v, want nothing in tick 1 and bg's value of tick 1 in tick 2", seen)
		}
		ent, _ := e.board.Get("bg.result")
		if ent.Source != blackboard.Live || ent.TickID != 1 || ent.Module != "bg" {
			t.Fatalf("board entry = %+v, want live from bg tagged tick 1", ent)
		}
		if _, ok := e.breakers.Get("bg"); ok {
			t.Fatal("an async module has no breaker")
		}
	})
}

// An async module that ignores its context is reported timed out once, never started
// twice at once, fails no tick, and logs (an event) once per change of state.
func TestAsyncHungModuleNoPileUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var running, maxRunning atomic.Int32
		var hang atomic.Bool
		hang.Store(true)
		bg := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
			n := running.Add(1)
			defer running.Add(-1)
			if n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			if hang.Load() {
				<-release // ignores its context
			}
			return 1, nil
		}}
		var events []AsyncEvent
		e := newEngine(t, Config{}, []Registration{
			reg("s", "safety", ok(0)),
			reg("bg", "knowledge", bg, asyncSpec(50*time.Millisecond)),
		}, WithHooks(Hooks{OnAsync: func(ev AsyncEvent) { events = append(events, ev) }}))
		tick(t, e)
		time.Sleep(60 * time.Millisecond) // past its timeout
		s := tick(t, e)
		if len(s.Async) != 1 || s.Async[0].Status != faultsummary.StatusTimedOut || s.Async[0].Failures != 1 ||
			s.Finish != faultsummary.Completed || s.OverallSeverity != faultsummary.OK {
			t.Fatalf("tick 2: async %+v finish %s severity %s", s.Async, s.Finish, s.OverallSeverity)
		}
		for range 5 {
			time.Sleep(60 * time.Millisecond)
			if s = tick(t, e); len(s.Async) != 0 {
				t.Fatalf("tick %d: a run still in flight was started again: %+v", s.TickID, s.Async)
			}
		}
		if len(events) != 1 || !events[0].Failing {
			t.Fatalf("events = %+v, want one: failing", events)
		}
		hang.Store(false)
		close(release) // the hung run returns; its late result is discarded
		synctest.Wait()
		tick(t, e) // starts a new run
		synctest.Wait()
		s = tick(t, e)
		if len(s.Async) != 1 || s.Async[0].Status != faultsummary.StatusOK || len(events) != 2 || events[1].Failing {
			t.Fatalf("recovered: async %+v events %+v", s.Async, events)
		}
		if maxRunning.Load() != 1 {
			t.Fatalf("%d runs at once, want 1", maxRunning.Load())
		}
	})
}

func TestAsyncValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(*tiers.ModuleSpec)
		path string
	}{
		{"negative timeout", func(s *tiers.ModuleSpec) { s.Async, s.Timeout = true, -1 }, "modules[1].timeout"},
		{"a breaker", func(s *tiers.ModuleSpec) { s.Async, s.Breaker = true, "b" }, "modules[1].breaker"},
		{"safety tier", func(s *tiers.ModuleSpec) { s.Async, s.Tier = true, "safety" }, "modules[1].tier"},
		{"timeout without async", func(s *tiers.ModuleSpec) { s.Timeout = time.Second }, "modules[1].timeout"},
	} {
		_, ps := Validate(Config{Tiers: testTiers()}, []Registration{reg("s", "safety", ok(0)), reg("m", "knowledge", ok(1), c.mut)})
		found := false
		for _, p := range ps.Errors() {
			found = found || p.Path == c.path
		}
		if !found {
			t.Errorf("%s: problems %v, want one at %s", c.name, ps, c.path)
		}
	}
}

// A registration while an asynchronous run is in flight keeps its runtime (the run still
// counts: no second run) and the run's late end is still reported.
func TestAsyncRunSurvivesRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		bg := &script{fn: func(ctx context.Context, in *tiers.Input) (any, error) {
			select {
			case <-release:
				return in.TickID(), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
		e := newEngine(t, Config{}, []Registration{reg("s", "safety", ok(0)), reg("bg", "knowledge", bg, asyncSpec(time.Second))})
		tick(t, e)      // bg starts after tick 1
		synctest.Wait() // its goroutine has run into the module, which waits for release
		if err := e.Register(reg("x", "planning", ok(1))); err != nil {
			t.Fatal(err)
		}
		if s := tick(t, e); len(s.Async) != 0 || bg.runs.Load() != 1 {
			t.Fatalf("tick 2: async %+v, %d runs", s.Async, bg.runs.Load())
		}
		close(release)
		synctest.Wait()
		if s := tick(t, e); len(s.Async) != 1 || s.Async[0].OriginTick != 1 || s.Async[0].Status != faultsummary.StatusOK {
			t.Fatalf("tick 3: async %+v", s.Async)
		}
	})
}
