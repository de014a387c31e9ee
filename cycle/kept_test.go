package cycle

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/clock"
	"github.com/cycled/cycled/fault"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

// oneAttemptTiers are testTiers with one attempt each: a failure takes no backoff sleep.
func oneAttemptTiers() []tiers.Tier {
	ts := testTiers()
	for i := range ts {
		ts[i].MaxAttempts = 1
	}
	return ts
}

// A module that its breaker refuses tick after tick and that never had a value is settled
// as the tick before (keptLine): the same line, nothing served, the same degraded key;
// once its key is written (a probe that succeeds), the next refusal serves that value,
// stale, and lists the key as such.
func TestRefusedModuleSettledAsTheTickBefore(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	clk := clock.NewFake(time.Unix(1000, 0))
	e := newEngine(t, Config{Tiers: oneAttemptTiers()}, []Registration{
		reg("s", "safety", ok(1)),
		reg("p", "planning", switchable(&fail, fault.Transient(errors.New("down")), 7)),
		reg("q", "planning", ok(2)),
	}, WithClock(clk))
	for range 3 { // the planning breaker opens after 3 failed ticks
		tick(t, e)
	}
	var lines []faultsummary.Module
	for i := range 4 {
		s := tick(t, e)
		m := mod(t, s, "p")
		if m.Status != faultsummary.StatusOpen || m.Served.Source != blackboard.None || m.Error != "" {
			t.Fatalf("refused tick %d: %+v, want open, nothing served, no error", i, m)
		}
		if !slices.Equal(s.DegradedKeys, []string{"p.result (none)"}) {
			t.Fatalf("refused tick %d: degraded keys %q", i, s.DegradedKeys)
		}
		if ts := tierOf(t, s, "planning"); ts.Status != faultsummary.TierDegraded {
			t.Fatalf("refused tick %d: planning %s, want degraded", i, ts.Status)
		}
		lines = append(lines, m)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i] != lines[0] {
			t.Fatalf("the line of a module refused tick after tick changed:\n%+v\n%+v", lines[0], lines[i])
		}
	}
	if k := e.active.kept; k == nil || k[1] == nil {
		t.Fatal("a module refused tick after tick has nothing kept")
	}

	// The cooldown passes, the probe succeeds and writes the key; failing again reopens
	// the breaker, and the refusals serve the value written.
	fail.Store(false)
	clk.Advance(2 * time.Second)
	if m := mod(t, tick(t, e), "p"); m.Status != faultsummary.StatusProbeOK {
		t.Fatalf("after the cooldown: %s, want probe_ok", m.Status)
	}
	fail.Store(true)
	for range 3 {
		tick(t, e)
	}
	for i := range 2 {
		s := tick(t, e)
		m := mod(t, s, "p")
		if m.Status != faultsummary.StatusOpen || m.Served.Source != blackboard.LastGood || !m.Served.Stale || m.Served.Value != 7 {
			t.Fatalf("refused again, tick %d: %s served %+v, want the last value (7), stale", i, m.Status, m.Served)
		}
		if !slices.Equal(s.DegradedKeys, []string{"p.result"}) {
			t.Fatalf("refused again, tick %d: degraded keys %q, want [p.result]", i, s.DegradedKeys)
		}
	}
}

// In steady state a tick with a tenth of its modules refused by open breakers allocates
// no more than a tick in which every module runs.
func TestOpenBreakersAllocateNoMoreThanClean(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	allocs := func(open bool) float64 {
		var regs []Registration
		for i := range 50 {
			var m tiers.Module = ok(i)
			if open && i%10 == 3 {
				m = failing(fault.Transient(errors.New("down")))
			}
			regs = append(regs, reg(fmt.Sprintf("m%d", i), []string{"safety", "knowledge", "planning"}[1+i%2], m))
		}
		e := newEngine(t, Config{Tiers: oneAttemptTiers(), History: 16}, regs)
		for range 40 { // breakers open, the history fills and compacts
			tick(t, e)
		}
		return testing.AllocsPerRun(200, func() { tick(t, e) })
	}
	clean, open := allocs(false), allocs(true)
	if open > clean {
		t.Fatalf("allocations per tick: %.1f with open breakers, %.1f clean", open, clean)
	}
}

// Refused modules settled as the tick before read back from the history, compacted or
// not, as their tick published them: also when a breaker that one of them shares moves
// between ticks while it stays refused, so that its line changes with nothing else
// (here an emergency-only module outside emergency mode, whose named breaker a test
// trips and resets between ticks). Many modules, two of every ten refused, spread over
// the runners.
func TestKeptLinesReadBackFromHistory(t *testing.T) {
	const n, history = 200, faultsummary.KeepWhole + 40
	clk := clock.NewFake(time.Unix(1000, 0))
	var lateFail atomic.Bool // from tick 40 on, one module more fails: it had values
	regs := []Registration{reg("s", "safety", ok(0)),
		reg("eo", "knowledge", ok(0), func(s *tiers.ModuleSpec) { s.Emergency, s.Breaker = true, "shared" })}
	for i := range n {
		var m tiers.Module = ok(i)
		switch {
		case i%10 == 3 || i%10 == 7:
			m = failing(fault.Transient(errors.New("down")))
		case i == 101:
			m = switchable(&lateFail, fault.Transient(errors.New("down")), i)
		}
		regs = append(regs, reg(fmt.Sprintf("m%03d", i), []string{"knowledge", "planning"}[i%2], m))
	}
	e := newEngine(t, Config{Tiers: oneAttemptTiers(), History: history,
		Breakers: map[string]breaker.Settings{"shared": {FailureThreshold: 1, Cooldown: time.Hour}}}, regs, WithClock(clk))
	shared, _ := e.breakers.Get("shared")
	var published []*faultsummary.Summary
	for i := range history {
		switch i {
		case 20: // between ticks: the shared breaker opens, then closes
			shared.Failure(shared.Acquire(), fault.KindTransient)
		case 30:
			if err := e.ResetBreaker("shared"); err != nil {
				t.Fatal(err)
			}
		}
		lateFail.Store(i >= 40)
		s := tick(t, e)
		published = append(published, s)
		// degraded_keys lists, in line order, the key of every degraded module serving
		// nothing (" (none)") or its last value.
		var keys []string
		for j := range s.NumModules() {
			switch m := s.ModuleAt(j); {
			case m.Status.Nominal():
			case m.Served.Source == blackboard.None:
				keys = append(keys, m.Served.Key+" (none)")
			case m.Served.Source == blackboard.LastGood:
				keys = append(keys, m.Served.Key)
			}
		}
		if !slices.Equal(s.DegradedKeys, keys) {
			t.Fatalf("tick %d: degraded keys\n%q\nwant\n%q", s.TickID, s.DegradedKeys, keys)
		}
		want := map[int]string{20: "open", 30: "closed"}
		if c, ok := want[i]; ok && mod(t, s, "eo").CircuitState != c {
			t.Fatalf("tick %d: eo's circuit %s, want %s", s.TickID, mod(t, s, "eo").CircuitState, c)
		}
	}
	for _, p := range published {
		got, ok := e.History().Get(p.TickID)
		if !ok {
			t.Fatalf("tick %d left the history", p.TickID)
		}
		if !slices.Equal(got.DegradedKeys, p.DegradedKeys) {
			t.Fatalf("tick %d: degraded keys %q read back, %q published", p.TickID, got.DegradedKeys, p.DegradedKeys)
		}
		for i := range p.NumModules() {
			if want := p.ModuleAt(i); want.Status != faultsummary.StatusOK { // compaction rebuilds plain lines without latency
				if m := got.ModuleAt(i); m != want {
					t.Fatalf("tick %d (compacted %v): line %d read back\n%+v\npublished\n%+v", p.TickID, got.Compacted, i, m, want)
				}
			}
		}
	}
	if got, _ := e.History().Get(published[0].TickID); !got.Compacted {
		t.Fatal("the oldest tick was not compacted: the test compares nothing it means to")
	}
}

// A tick of emergency mode serves the last values of every module of the tiers it skips,
// as the tick before did: their served entries take one allocation, not a slice grown
// entry by entry (about twice their size, all of it scanned by the collector), so that
// the tick allocates at most 200 bytes more per skipped module than a tick that runs them.
func TestSkippedTiersAllocateTheirFallbacksOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const n = 400
	var fail atomic.Bool
	regs := []Registration{reg("guard", "safety", switchable(&fail, errors.New("down"), 0))}
	for i := range n {
		regs = append(regs, reg(fmt.Sprintf("m%03d", i), []string{"knowledge", "planning"}[i%2], ok(i)))
	}
	e := newEngine(t, Config{Tiers: oneAttemptTiers(), History: 16}, regs)
	bytesPerTick := func() float64 {
		for range 20 {
			tick(t, e)
		}
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		const ticks = 50
		for range ticks {
			tick(t, e)
		}
		runtime.ReadMemStats(&b)
		return float64(b.TotalAlloc-a.TotalAlloc) / ticks
	}
	clean := bytesPerTick()
	fail.Store(true)
	emergency := bytesPerTick()
	if !e.Emergency().Active {
		t.Fatal("the safety tier failing did not put the cycle in emergency mode")
	}
	if extra := (emergency - clean) / n; extra > 200 {
		t.Fatalf("emergency mode allocates %.0f B a tick against %.0f running: %.0f B more per skipped module", emergency, clean, extra)
	}
}
