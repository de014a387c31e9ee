package cycle

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// segmentEngine is an engine with tiers a (200 ms), b (50 ms) and c (100 ms) of one
// module each, and a segment of one tick over them (nothing runs: the tests drive it).
func segmentEngine(t *testing.T, emergency bool) (*Engine, *segment) {
	t.Helper()
	e := newEngine(t, Config{Tiers: []tiers.Tier{
		{Name: "a", Budget: 200 * time.Millisecond, MaxAttempts: 1},
		{Name: "b", Budget: 50 * time.Millisecond, MaxAttempts: 1},
		{Name: "c", Budget: 100 * time.Millisecond, MaxAttempts: 1},
	}}, []Registration{reg("ma", "a", ok(1)), reg("mb", "b", ok(2)), reg("mc", "c", ok(3))})
	st := e.activeView.Load()
	s := &faultsummary.Summary{Tiers: make([]faultsummary.Tier, len(st.cfg.Tiers))}
	return e, &segment{st: st, ctx: context.Background(), s: s, tick: 1, emergency: emergency, done: make(chan struct{})}
}

// How a tier whose last module finished is closed: the next tier starts at once when a
// runner finished a clean tier of a segment that can go on; otherwise the tier goes back
// to the engine; a tier the engine took at its deadline is left to it.
func TestTierEnd(t *testing.T) {
	for _, c := range []struct {
		name      string
		tier      int
		chain     bool // finished by a pool runner
		emergency bool
		exception bool
		exhausted bool
		taken     bool
		want      string // "next", "engine" or "none"
	}{
		{name: "clean, by a runner", tier: 0, chain: true, want: "next"},
		{name: "clean, by the engine or a module's goroutine", tier: 0, want: "engine"},
		{name: "last tier", tier: 2, chain: true, want: "engine"},
		{name: "an exception", tier: 0, chain: true, exception: true, want: "engine"},
		{name: "budget exhausted", tier: 1, chain: true, exhausted: true, want: "engine"},
		{name: "emergency mode", tier: 0, chain: true, emergency: true, want: "engine"},
		{name: "taken by the engine at the deadline", tier: 0, chain: true, taken: true, want: "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, seg := segmentEngine(t, c.emergency)
			tr := e.newTierRun(seg, c.tier, time.Now())
			tr.pending.Store(1)
			if c.exception {
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
			switch got {
			case "next":
				if next.tier != c.tier+1 || seg.cur.Load() != next || !tr.closed.Load() {
					t.Fatalf("next tier %d, current %v, closed %v", next.tier, seg.cur.Load() == next, tr.closed.Load())
				}
				if ts := seg.s.Tiers[c.tier]; ts.Status != faultsummary.TierOK {
					t.Fatalf("the chained tier's line: %+v", ts)
				}
				if next.deadline.Sub(next.start) != seg.st.cfg.Tiers[c.tier+1].Budget {
					t.Fatal("the next tier's deadline is not its start plus its budget")
				}
			case "engine":
				if seg.s.Tiers[c.tier].Status != "" {
					t.Fatal("a tier handed back must be left to the engine")
				}
			}
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
		hang := &script{fn: func(context.Context, *tiers.Input) (any, error) {
			time.Sleep(300 * time.Millisecond) // ignores its context
			return 1, nil
		}}
		e := newEngine(t, Config{Tiers: []tiers.Tier{
			{Name: "a", Budget: 200 * time.Millisecond, MaxAttempts: 1},
			{Name: "b", Budget: 50 * time.Millisecond, MaxAttempts: 1},
			{Name: "c", Budget: 100 * time.Millisecond, MaxAttempts: 1},
		}}, []Registration{reg("ma", "a", ok(1)), reg("hang", "b", hang), reg("mb", "b", ok(2)), reg("mc", "c", ok(3))})
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
