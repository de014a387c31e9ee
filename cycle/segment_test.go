package cycle

import (
	"context"
	"errors"
	"github.com/cycled/cycled/cycle/decide"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// threeTiers are three tiers of the given names with budgets of 200, 50 and 100 ms and
// one attempt each.
func threeTiers(a, b, c string) []tiers.Tier {
	return []tiers.Tier{
		{Name: a, Budget: 200 * time.Millisecond, MaxAttempts: 1},
		{Name: b, Budget: 50 * time.Millisecond, MaxAttempts: 1},
		{Name: c, Budget: 100 * time.Millisecond, MaxAttempts: 1},
	}
}

// ignoresCtx is a module that blocks for d ignoring its context (virtual time in a bubble).
func ignoresCtx(d time.Duration) *script {
	return &script{fn: func(context.Context, *tiers.Input) (any, error) {
		time.Sleep(d)
		return 1, nil
	}}
}

// segmentEngine is an engine with tiers a (200 ms), b (50 ms) and c (100 ms) of one
// module each (mb fails fast when it fails), and a segment of one tick over them
// (nothing runs: the tests drive it).
func segmentEngine(t *testing.T, emergency bool) (*Engine, *segment) {
	t.Helper()
	e := newEngine(t, Config{Tiers: threeTiers("a", "b", "c")},
		[]Registration{reg("ma", "a", ok(1)), reg("mb", "b", ok(2)), reg("mc", "c", ok(3))})
	return e, newSegment(e.activeView.Load(), 1, emergency)
}

// newSegment is a segment of tick id under st, starting now, with its summary and lines.
func newSegment(st *state, id uint64, emergency bool) *segment {
	s := &faultsummary.Summary{Tiers: make([]faultsummary.Tier, len(st.cfg.Tiers))}
	start := time.Now()
	tl := newTickLines(st, id, start, newLineBuf(len(st.lines)), 0, 0)
	s.SetLines(tl)
	return &segment{st: st, ctx: context.Background(), s: s, tl: tl, tick: id, tickStart: start,
		emergency: emergency, done: make(chan struct{})}
}

// How a tier whose last module finished is closed. Whoever finished it settles it (its
// exceptions and its line). A runner then starts the next tier when the tick can go on
// without the engine; a tier that failed, the safety tier failing (emergency mode is the
// engine's), the last tier, a tier in emergency mode and a tier finished by the engine or
// a module's own goroutine go back to the engine, settled; one the engine took at its
// deadline is left to it.
func TestTierEnd(t *testing.T) {
	errT := fault.Transient(errors.New("flaky"))
	for _, c := range []struct {
		name      string
		tier      int
		chain     bool // finished by a pool runner
		emergency bool
		status    decide.Status // the module's outcome (decide.OK: a plain success, no exception)
		failFast  bool
		exhausted bool
		taken     bool
		want      string // "next", "engine" (handed back) or "none"
		tierWant  faultsummary.TierStatus
	}{
		{name: "clean, by a runner", tier: 0, chain: true, want: "next", tierWant: faultsummary.TierOK},
		{name: "clean, by the engine or a module's goroutine", tier: 0, want: "engine", tierWant: faultsummary.TierOK},
		{name: "last tier", tier: 2, chain: true, want: "engine", tierWant: faultsummary.TierOK},
		{name: "a retried success", tier: 1, chain: true, status: decide.Retried, want: "next", tierWant: faultsummary.TierOK},
		{name: "a failure", tier: 1, chain: true, status: decide.Failed, want: "next", tierWant: faultsummary.TierDegraded},
		{name: "a failure failing the tier", tier: 1, chain: true, status: decide.Failed, failFast: true, want: "engine", tierWant: faultsummary.TierFailed},
		{name: "the safety tier failing", tier: 0, chain: true, status: decide.Failed, want: "engine", tierWant: faultsummary.TierFailed},
		{name: "a failure, by a module's goroutine", tier: 1, status: decide.Failed, want: "engine", tierWant: faultsummary.TierDegraded},
		{name: "budget exhausted", tier: 1, chain: true, exhausted: true, want: "next", tierWant: faultsummary.TierOK},
		{name: "emergency mode", tier: 0, chain: true, emergency: true, want: "engine", tierWant: faultsummary.TierOK},
		{name: "taken by the engine at the deadline", tier: 0, chain: true, taken: true, want: "none"},
	} {
		// In a bubble: the next tier a runner starts arms the stall check (1 ms), which on
		// the wall clock could run that tier on, and the ones after it, before the test
		// looks at what finish returned (seen on a loaded machine).
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, seg := segmentEngine(t, c.emergency)
				tr := e.newTierRun(seg, c.tier, time.Now())
				tr.pending.Store(1)
				rt := tr.mods[0]
				if c.failFast {
					rt.planned.Policy, rt.policy.Policy = tiers.FailFast, tiers.FailFast
				}
				ln := seg.tl.init(rt)
				ln.attempts = 1
				switch c.status {
				case decide.OK:
					ln.status = decide.OK
				case decide.Retried:
					ln.attempts = 2
					tr.exception(0)
				case decide.Failed:
					rt.w.permit = rt.br.Acquire()
					ln.kind, ln.flags = fault.KindTransient, lineFailed
					rt.w.res.res.Err = errT
					tr.exception(0)
				}
				tr.budgetExhausted.Store(c.exhausted)
				if c.taken {
					tr.owner.Store(tierTaken)
				}
				next := tr.finish(1, c.chain)
				closed := false
				select {
				case <-seg.done:
					closed = true
				default:
				}
				got := "none"
				switch {
				case next != nil && !closed:
					got = "next"
				case next == nil && closed && seg.end == tr:
					got = "engine"
				case next != nil || closed:
					t.Fatalf("next %v and handed back %v at once", next != nil, closed)
				}
				if got != c.want {
					t.Fatalf("tier end: %s, want %s", got, c.want)
				}
				ts := seg.s.Tiers[c.tier]
				switch got {
				case "next":
					if next.tier != c.tier+1 || seg.cur.Load() != next || !tr.closed.Load() {
						t.Fatalf("next tier %d, current %v, closed %v", next.tier, seg.cur.Load() == next, tr.closed.Load())
					}
					if next.deadline.Sub(next.start) != seg.st.cfg.Tiers[c.tier+1].Budget {
						t.Fatal("the next tier's deadline is not its start plus its budget")
					}
				case "none":
					if ts.Status != "" {
						t.Fatal("a tier the engine took must be left to it")
					}
					return
				}
				// Settled by whoever ended it: the tier's line and the summary's lists are filled.
				if ts.Status != c.tierWant {
					t.Fatalf("tier status %q, want %q", ts.Status, c.tierWant)
				}
				if ts.BudgetExhausted != c.exhausted || slices.Contains(seg.s.BudgetViolations, seg.st.cfg.Tiers[c.tier].Name) != c.exhausted {
					t.Fatalf("budget exhausted %v, violations %v; want %v", ts.BudgetExhausted, seg.s.BudgetViolations, c.exhausted)
				}
				if got := seg.s.RetryCounts[rt.name]; got != map[bool]int{true: 1}[c.status == decide.Retried] {
					t.Fatalf("retry count %d", got)
				}
				failed := c.status == decide.Failed
				if degraded := slices.Contains(seg.s.DegradedKeys, rt.key+" (none)"); degraded != failed {
					t.Fatalf("degraded keys %v (module failed: %v)", seg.s.DegradedKeys, failed)
				}
				m := seg.s.ModuleAt(int(rt.idx))
				if failed && (m.Error != errT.Error() || m.FaultKind != fault.KindTransient.String() || m.Served.Source != blackboard.None) {
					t.Fatalf("failed module's line: %+v", m)
				}
				// The first tier's modules fail fast by default.
				if want := failed && (c.failFast || c.tier == 0); got == "engine" && seg.out.Failed != want {
					t.Fatalf("outcome failed %v, want %v", seg.out.Failed, want)
				}
				if got == "engine" && seg.out.SafetyFailed != (c.tier == 0 && failed) {
					t.Fatalf("safety failed %v", seg.out.SafetyFailed)
				}
			})
		})
	}
}

// The engine waits for the tier in flight, and a runner may go on to a tier whose
// deadline comes before the one the engine sleeps towards: the engine must still take it
// at its own deadline.
func TestWaitFollowsTheSegment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, seg := segmentEngine(t, false)
		start := time.Now()
		a := e.newTierRun(seg, 0, start)
		a.admitted.Store(int64(len(a.mods))) // no stall check: nothing runs here
		go func() {
			time.Sleep(10 * time.Millisecond)
			a.owner.Store(tierEnded)
			e.newTierRun(seg, 1, time.Now()) // b: due 60 ms after the start, a at 200 ms
		}()
		tr, timedOut := e.wait(seg, a)
		if tr.tier != 1 || !timedOut {
			t.Fatalf("wait returned tier %d, timed out %v; want tier 1 taken at its deadline", tr.tier, timedOut)
		}
		if got := time.Since(start); got != 60*time.Millisecond {
			t.Fatalf("tier b taken %v after the start, want 60ms (its deadline)", got)
		}
		if tr.owner.Load() != tierTaken {
			t.Fatal("the engine did not take the tier")
		}
	})
}

// A module that ignores its context, in a tier the runners reached on their own: the
// engine takes that tier at its own deadline (not at the earlier tier's later one), the
// module is timed out, and the next tier runs after it.
func TestChainedTierTakenAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Tiers: threeTiers("a", "b", "c")}, []Registration{reg("ma", "a", ok(1)),
			reg("hang", "b", ignoresCtx(300*time.Millisecond)), reg("mb", "b", ok(2)), reg("mc", "c", ok(3))})
		start := time.Now()
		s := tick(t, e)
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Errorf("tick took %v, want 50ms (tier b's budget)", got)
		}
		for name, want := range map[string]faultsummary.Status{"ma": faultsummary.StatusOK, "hang": faultsummary.StatusTimedOut,
			"mb": faultsummary.StatusOK, "mc": faultsummary.StatusOK} {
			if m := mod(t, s, name); m.Status != want {
				t.Errorf("%s: %s, want %s", name, m.Status, want)
			}
		}
		if b := tierOf(t, s, "b"); b.Status != faultsummary.TierDegraded || !b.BudgetExhausted || b.ElapsedMs != 50 {
			t.Errorf("tier b: %+v", b)
		}
		if a, c := tierOf(t, s, "a"), tierOf(t, s, "c"); a.Status != faultsummary.TierOK || c.Status != faultsummary.TierOK {
			t.Errorf("tiers a %+v, c %+v", a, c)
		}
		time.Sleep(time.Second) // virtual: the hung module returns
		synctest.Wait()
	})
}

// A tier's exception list is made at its first exception (most tiers have none) and
// records every exception exactly once when runners report them concurrently.
func TestTierExceptions(t *testing.T) {
	tr := &tierRun{mods: make([]*modRT, 64), seg: &segment{st: &state{exc: make([]atomic.Pointer[excList], 1)}}}
	if got := tr.exceptions([]int32{7}); !slices.Equal(got, []int32{7}) || tr.exc.Load() != nil {
		t.Fatalf("a tier without exceptions: %v, list made %v", got, tr.exc.Load() != nil)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for j := g * 8; j < g*8+8; j++ {
				tr.exception(j)
			}
		})
	}
	wg.Wait()
	got := tr.exceptions(nil)
	slices.Sort(got)
	for j, x := range got {
		if int(x) != j {
			t.Fatalf("exceptions %v, want 0…63 once each", got)
		}
	}
	if len(got) != 64 {
		t.Fatalf("%d exceptions, want 64", len(got))
	}
}

// The busy bit of a module's phase word: set for a run from admission to return, across
// ticks when the engine abandons the run, kept by every admission that finds it set (the
// module is busy), and cleared only by the run's own return. Each row drives module ma
// (tier a) through ticks 1, 2, … and checks its line and the bit after every step.
func TestPhaseBusyBit(t *testing.T) {
	type step struct {
		// run: a new tick, admitted by a runner; start: a new tick, handed to its own
		// goroutine, still running; deadline: that tick taken at its deadline; missed: a new
		// tick taken at its deadline before the module was reached; return: the run started
		// returns.
		do       string
		status   decide.Status // the line's status after the step (for run and deadline; see observed)
		busy     bool          // the bit after the step
		newState uint64        // the phase state after the step (0: not checked)
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{name: "a run that returns in time", steps: []step{
			{do: "run", status: decide.OK, busy: false, newState: phDone},
			{do: "run", status: decide.OK, busy: false, newState: phDone},
		}},
		{name: "an abandoned run is busy until it returns", steps: []step{
			{do: "start", busy: true, newState: phRunning},
			{do: "deadline", status: decide.TimedOut, busy: true, newState: phAbandoned},
			{do: "run", status: decide.Busy, busy: true, newState: phDone},
			{do: "missed", status: decide.Busy, busy: true, newState: phUnstarted},
			{do: "return", busy: false, newState: phUnstarted},
			{do: "run", status: decide.OK, busy: false, newState: phDone},
		}},
		{name: "it returns before the next tick", steps: []step{
			{do: "start", busy: true, newState: phRunning},
			{do: "deadline", status: decide.TimedOut, busy: true, newState: phAbandoned},
			{do: "return", busy: false, newState: phAbandoned},
			{do: "run", status: decide.OK, busy: false, newState: phDone},
		}},
		{name: "a module never started is not busy", steps: []step{
			{do: "missed", status: unstarted, busy: false, newState: phUnstarted},
			{do: "run", status: decide.OK, busy: false, newState: phDone},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, seg := segmentEngine(t, false)
			rt := seg.st.tierMods[0][0]
			w := rt.w
			var first *tierRun // the tier of the run started at tick 1
			tick := uint64(0)
			for k, s := range c.steps {
				if s.do == "run" || s.do == "start" || s.do == "missed" {
					tick++
					seg.tick = tick
					seg.tl = newTickLines(seg.st, tick, time.Now(), newLineBuf(len(seg.st.lines)), 0, 0)
				}
				tr := e.newTierRun(seg, 0, time.Now())
				switch s.do {
				case "run":
					if _, did := tr.process(0, clock.StampAt(time.Now())); did != finished {
						t.Fatalf("step %d: process did %d", k, did)
					}
				case "start": // admitted and handed to its own goroutine, which has not returned
					if !w.phase.CompareAndSwap(w.phase.Load(), phase(tick, phAdmitting)) {
						t.Fatal("admission")
					}
					w.permit = rt.br.Acquire()
					w.phase.Store(phase(tick, phRunning) | busyBit)
					first = tr
				case "deadline", "missed":
					tr.settleAtDeadline()
				case "return":
					w.execute(first, clock.Stamp{})
				}
				if s.do == "run" || s.do == "deadline" || s.do == "missed" {
					if got := observed(&tr.l.recs[rt.idx]); got != s.status {
						t.Fatalf("step %d (%s): status %d, want %d", k, s.do, got, s.status)
					}
				}
				v := w.phase.Load()
				if w.busy() != s.busy || phaseState(v) != s.newState {
					t.Fatalf("step %d (%s): busy %v state %d, want busy %v state %d", k, s.do, w.busy(), phaseState(v), s.busy, s.newState)
				}
			}
		})
	}
}

// A late run's return races with the next tick's admission of its module: whichever comes
// first, the bit ends clear (the run is over) and the admission found the module either
// busy or free to run, never both.
func TestPhaseBusyBitRace(t *testing.T) {
	e, seg := segmentEngine(t, false)
	rt := seg.st.tierMods[0][0]
	w := rt.w
	for i := range 200 {
		tick := uint64(2*i + 1)
		seg.tick = tick
		first := e.newTierRun(seg, 0, time.Now())
		w.phase.Store(phase(tick, phAbandoned) | busyBit) // abandoned at tick's deadline, still running
		seg.tick = tick + 1
		seg.tl = newTickLines(seg.st, tick+1, time.Now(), newLineBuf(len(seg.st.lines)), 0, 0)
		next := e.newTierRun(seg, 0, time.Now())
		var wg sync.WaitGroup
		var did int
		wg.Go(func() { w.execute(first, clock.Stamp{}) })
		wg.Go(func() { _, did = next.process(0, clock.StampAt(time.Now())) })
		wg.Wait()
		if did == dispatched {
			// A slow run (a loaded machine) moved the module to its own goroutine: the
			// admitted run is still in flight there. Wait for it, not for a stray bit.
			for s := phaseState(w.phase.Load()); s == phRunning || s == phCommitting; s = phaseState(w.phase.Load()) {
				runtime.Gosched()
			}
		}
		if w.busy() || phaseState(w.phase.Load()) != phDone {
			t.Fatalf("round %d: busy %v, state %d after the run returned", i, w.busy(), phaseState(w.phase.Load()))
		}
		if st := observed(&next.l.recs[rt.idx]); st != decide.Busy && st != decide.OK {
			t.Fatalf("round %d: status %d", i, st)
		}
	}
}

// A module is run only while its tier has time left: a runner that reaches it at or after
// the tier's deadline, or after the engine expired the tier, reports it unstarted without
// calling it (the runner makes the first attempt itself, so it makes the runner's checks).
func TestModuleReachedLate(t *testing.T) {
	for _, c := range []struct {
		name    string
		at      time.Duration // when the runner reaches the module, from the tier's start
		expired bool          // the engine took the tier
		want    decide.Status
	}{
		{name: "in time", at: 10 * time.Millisecond, want: decide.OK},
		{name: "at the deadline", at: 200 * time.Millisecond, want: unstarted},
		{name: "after the deadline", at: 250 * time.Millisecond, want: unstarted},
		{name: "in time, but the tier expired", at: 10 * time.Millisecond, expired: true, want: unstarted},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, seg := segmentEngine(t, false)
			start := time.Now()
			tr := e.newTierRun(seg, 0, start) // tier a: 200 ms
			if c.expired {
				tr.ctx.expire()
			}
			rt := tr.mods[0]
			tr.process(0, clock.StampAt(start.Add(c.at)))
			if got := observed(&tr.l.recs[rt.idx]); got != c.want {
				t.Fatalf("status %d, want %d", got, c.want)
			}
			if runs := rt.mod.(*script).runs.Load(); (runs == 1) != (c.want == decide.OK) {
				t.Fatalf("module ran %d times", runs)
			}
		})
	}
}

// A first tier without modules closes at once and starts the next tier in the same
// segment (no segment, hand-off and engine wait of its own); the tier after it is still
// taken at its deadline when a module hangs.
func TestEmptyFirstTierChains(t *testing.T) {
	for _, hangs := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "a module hangs"}[hangs], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := ok(1)
				if hangs {
					m = ignoresCtx(300 * time.Millisecond)
				}
				e := newEngine(t, Config{Tiers: threeTiers("s", "a", "b")}, []Registration{reg("ma", "a", m), reg("mb", "b", ok(2))})
				st := e.activeView.Load()
				s := &faultsummary.Summary{Tiers: make([]faultsummary.Tier, len(st.cfg.Tiers))}
				start := time.Now()
				tl := newTickLines(st, 1, start, newLineBuf(len(st.lines)), 0, 0)
				s.SetLines(tl)
				_, last := e.runTier(context.Background(), st, 0, 1, start, s, tl)
				wantLast, wantTook := 2, time.Duration(0) // chained through to the last tier
				if hangs {
					wantLast, wantTook = 1, 50*time.Millisecond // tier a taken at its deadline
				}
				if last != wantLast || time.Since(start) != wantTook {
					t.Fatalf("segment ended at tier %d after %v, want tier %d after %v", last, time.Since(start), wantLast, wantTook)
				}
				if s.Tiers[0].Status != faultsummary.TierOK {
					t.Fatalf("empty tier: %+v", s.Tiers[0])
				}
				if got := tl.recs[mod0(st, "ma")].status; got != map[bool]decide.Status{false: decide.OK, true: decide.TimedOut}[hangs] {
					t.Fatalf("ma: status %d", got)
				}
				time.Sleep(time.Second) // virtual: the hung module returns
				synctest.Wait()
			})
		})
	}
}

// mod0 returns the line index of module name in st.
func mod0(st *state, name string) int {
	for _, rt := range st.lines {
		if rt.name == name {
			return int(rt.idx)
		}
	}
	return -1
}

// A module that is not admitted (here emergency-only outside emergency mode) is recorded as
// an exception before its phase word says Done: the engine, taking the tier at its
// deadline, reads the exceptions once every module is past admission, and a module
// recorded after Done was missed — its line kept no served entry (the soak saw a safety
// module serve nothing, neither stale nor expired). Under -race the old order is also a
// data race on the exception list.
func TestExceptionRecordedBeforeDone(t *testing.T) {
	e := newEngine(t, Config{Tiers: threeTiers("a", "b", "c")},
		[]Registration{reg("estop", "a", ok(1), func(s *tiers.ModuleSpec) { s.Emergency = true })})
	st := e.activeView.Load()
	w := st.tierMods[0][0].w
	for tick := uint64(1); tick <= 300; tick++ {
		seg := newSegment(st, tick, false)
		tr := e.newTierRun(seg, 0, seg.tickStart)
		go tr.process(0, clock.StampAt(seg.tickStart))
		for v := w.phase.Load(); phaseTick(v) != tick || phaseState(v) != phDone; v = w.phase.Load() {
			runtime.Gosched()
		}
		if got := tr.exceptions(nil); !slices.Equal(got, []int32{0}) {
			t.Fatalf("tick %d: exceptions %v once the module is Done, want [0]", tick, got)
		}
		tr.ctx.stop()
	}
}
