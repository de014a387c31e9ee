package cycle

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

func TestRingLen(t *testing.T) {
	if raceEnabled {
		for _, n := range []int{1, 500, 5000} {
			if got := ringLen(n, 16); got != 0 {
				t.Errorf("ringLen(%d, 16) = %d under the race detector, want 0", n, got)
			}
		}
		return
	}
	for _, c := range []struct{ n, whole, want int }{
		{0, 16, 0},
		{1, 16, 16 + 2 + maxReuseSlack},
		{500, 64, 64 + 2 + maxReuseSlack},               // 20 kB a tick: the most slack
		{5000, 20, 20 + 2 + reuseBytes/(5000*recBytes)}, // 200 kB a tick: 10 ticks' worth
		{reuseBytes / (minReuseSlack * recBytes), 1, 1 + 2 + minReuseSlack},
		{reuseBytes/(minReuseSlack*recBytes) + 100, 1, 0}, // too large to be worth it
		{100_000, 1, 0},
	} {
		if got := ringLen(c.n, c.whole); got != c.want {
			t.Errorf("ringLen(%d, %d) = %d, want %d", c.n, c.whole, got, c.want)
		}
	}
}

// flipFlop fails transiently on even ticks and returns the tick's id on odd ones (so that
// every failure has the last tick's value to fall back on).
func flipFlop() *script {
	return &script{fn: func(_ context.Context, in *tiers.Input) (any, error) {
		if in.TickID()%2 == 0 {
			return nil, errBench
		}
		return in.TickID(), nil
	}}
}

// reuseModules is a safety module s, then n-1 modules over the other bench tiers, every
// fourth of them (f…) a flipFlop and the rest (m…) trivial.
func reuseModules(n int) []Registration {
	ts := benchTiers()
	regs := []Registration{reg("s", ts[0].Name, trivial{})}
	for i := 1; i < n; i++ {
		name, m := fmt.Sprintf("m%d", i), tiers.Module(trivial{})
		if i%4 == 0 {
			name, m = fmt.Sprintf("f%d", i), flipFlop()
		}
		regs = append(regs, reg(name, ts[1+i%4].Name, m))
	}
	return regs
}

// checkLines checks every module line of s (of reuseModules) against what its tick did:
// a line read from reused records shows nothing of the tick that used them before.
func checkLines(t *testing.T, s *faultsummary.Summary) {
	t.Helper()
	for _, m := range s.Modules() {
		id := s.TickID
		switch {
		case m.Name[0] == 'f' && id%2 == 0:
			if m.Status != faultsummary.StatusFailed || m.FaultKind != "transient" || m.Error == "" || m.Attempts != 1 ||
				!m.UsingFallback || m.Served.Source != blackboard.LastGood || !m.Served.Stale || m.Served.WrittenTick != id-1 {
				t.Fatalf("tick %d: failing line %+v", id, m)
			}
		default:
			if m.Status != faultsummary.StatusOK || m.FaultKind != "" || m.Error != "" || m.Attempts != 1 ||
				m.UsingFallback || m.Served.Source != blackboard.Live || m.Served.WrittenTick != id || m.Served.Written.IsZero() {
				t.Fatalf("tick %d: line %+v", id, m)
			}
			if m.Name[0] == 'f' && m.Served.Value != id {
				t.Fatalf("tick %d: %s served %v", id, m.Name, m.Served.Value)
			}
		}
	}
}

// The records of a tick are reused only once nothing refers to its lines: the summaries a
// caller holds keep theirs, every line read from reused records is right, and the
// records of the summaries nobody held are reused after a collection.
func TestLineRecordsReusedOnlyUnreferenced(t *testing.T) {
	const n = 20
	e := newEngine(t, Config{Tiers: benchTiers(), History: 4}, reuseModules(n))
	k := ringLen(n, e.history.Whole(n))
	if k == 0 && !raceEnabled {
		t.Fatalf("no reuse for %d modules", n)
	}
	type heldTick struct {
		s    *faultsummary.Summary
		l    *tickLines
		recs []lineRec
	}
	var held []heldTick
	usedBy := map[*lineRec]uint64{} // the first record of a tick's records → the tick
	reused := 0
	for range 3*k + 10 {
		s := tick(t, e)
		checkLines(t, s)
		if r := &e.lines.ring; len(r.ents) > 0 {
			newest := r.ents[(r.next+len(r.ents)-1)%len(r.ents)]
			if _, ok := usedBy[&newest.recs[0]]; ok {
				reused++
			}
			usedBy[&newest.recs[0]] = s.TickID
			if s.TickID%3 == 0 {
				held = append(held, heldTick{s, newest.owner.Value(), slices.Clone(newest.recs)})
			}
		}
		if s.TickID%5 == 0 {
			runtime.GC()
		}
	}
	runtime.GC()
	for _, h := range held {
		if !slices.Equal(h.l.recs, h.recs) {
			t.Fatalf("tick %d's records changed while its summary was held", h.s.TickID)
		}
	}
	if raceEnabled {
		return // no reuse under the race detector
	}
	// Ticks from k+1 on find the oldest entry's lines unheld two times in three, and a
	// collection at most five ticks old.
	if reused < k {
		t.Fatalf("records reused on %d of %d ticks, want at least %d", reused, 3*k+10, k)
	}
}

// After a collection, the next ticks allocate no records: they reuse those of ticks no
// summary refers to any more.
func TestLineRecordsNotAllocatedAfterCollection(t *testing.T) {
	if raceEnabled {
		t.Skip("no reuse under the race detector")
	}
	const n, ticks = 2000, 8
	e := newEngine(t, Config{Tiers: benchTiers(), History: 4}, benchModules(n, false))
	k := ringLen(n, e.history.Whole(n))
	if k-e.history.Whole(n)-2 < ticks {
		t.Fatalf("a ring of %d for %d modules: too short for the test", k, n)
	}
	for range k {
		tick(t, e)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range ticks {
		tick(t, e)
	}
	runtime.ReadMemStats(&after)
	perTick := int(after.TotalAlloc-before.TotalAlloc) / ticks
	if records := n * recBytes; perTick >= records {
		t.Fatalf("a tick allocated %d bytes after a collection; its records alone are %d", perTick, records)
	}
	t.Logf("%d bytes a tick (records: %d)", perTick, n*recBytes)
}
