package cycle

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/cycled/cycled/blackboard"
	"github.com/cycled/cycled/faultsummary"
	"github.com/cycled/cycled/tiers"
)

func TestPoolCap(t *testing.T) {
	if raceEnabled {
		for _, n := range []int{1, 500, 5000} {
			if got := poolCap(n); got != 0 {
				t.Errorf("poolCap(%d) = %d under the race detector, want 0", n, got)
			}
		}
		return
	}
	for _, c := range []struct{ n, want int }{
		{0, 0},
		{1, maxReuseSlack},
		{100, maxReuseSlack},                   // 4 kB a tick: the most ticks
		{500, reuseBytes / (500 * recBytes)},   // 20 kB a tick: 104 ticks' worth
		{5000, reuseBytes / (5000 * recBytes)}, // 200 kB a tick: 10 ticks' worth
		{reuseBytes / (minReuseSlack * recBytes), minReuseSlack},
		{reuseBytes/(minReuseSlack*recBytes) + 100, 0}, // too large to be worth it
		{100_000, 0},
	} {
		if got := poolCap(c.n); got != c.want {
			t.Errorf("poolCap(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// pooled returns how many ticks' records the pool of e holds.
func pooled(e *Engine) int {
	if sh := e.lines.pool.shelf; sh != nil {
		return sh.len()
	}
	return 0
}

// awaitPooled waits until the pool of e holds at least k ticks' records (see awaitShelf).
func awaitPooled(e *Engine, k int) bool { return awaitShelf(e.lines.pool.shelf, k) }

// awaitShelf waits until sh holds at least k ticks' records (the runtime's cleanup
// goroutine returns them after a collection) and reports whether it did; it yields, it
// does not sleep.
func awaitShelf(sh *recShelf, k int) bool {
	for i := 0; sh != nil && i < 1_000_000; i++ {
		if sh.len() >= k {
			return true
		}
		runtime.Gosched()
	}
	return false
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
// caller holds keep theirs (their lines read the same at the end as when published), every
// line read from reused records is right, and the records of the summaries nobody held are
// reused after a collection.
func TestLineRecordsReusedOnlyUnreferenced(t *testing.T) {
	const n = 20
	e := newEngine(t, Config{Tiers: benchTiers(), History: 4}, reuseModules(n))
	k := poolCap(n)
	if k == 0 && !raceEnabled {
		t.Fatalf("no reuse for %d modules", n)
	}
	type heldTick struct {
		s     *faultsummary.Summary
		lines []faultsummary.Module // as published, read line by line from its records
	}
	readLines := func(s *faultsummary.Summary) []faultsummary.Module {
		ms := make([]faultsummary.Module, s.NumModules())
		for i := range ms {
			s.ModuleInto(i, &ms[i]) // from the records each time (Modules would keep a copy)
		}
		return ms
	}
	var held []heldTick
	reused := 0
	for range 3*k + 10 {
		if pooled(e) > 0 {
			reused++ // this tick takes pooled records
		}
		s := tick(t, e)
		checkLines(t, s)
		if s.TickID%3 == 0 {
			held = append(held, heldTick{s, readLines(s)})
		}
		if s.TickID%5 == 0 {
			runtime.GC()
			awaitPooled(e, 1)
		}
	}
	runtime.GC()
	for _, h := range held {
		if got := readLines(h.s); !reflect.DeepEqual(got, h.lines) {
			t.Fatalf("tick %d's lines changed while its summary was held:\n got %+v\nwant %+v", h.s.TickID, got, h.lines)
		}
	}
	if raceEnabled {
		return // no reuse under the race detector
	}
	// After each collection (every fifth tick) the records of the ticks nobody held, all
	// but the history's four, are back in the pool.
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
	if k := poolCap(n); k < ticks {
		t.Fatalf("a pool of %d for %d modules: too short for the test", k, n)
	}
	for range poolCap(n) + 4 {
		tick(t, e)
	}
	runtime.GC()
	if !awaitPooled(e, ticks) {
		t.Fatalf("after a collection the pool holds %d records, want %d", pooled(e), ticks)
	}
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

// TestRecPoolTakesOnlyCollectedRecordsOfItsSize checks the pool on its own: records come
// back zeroed once their lines are collected and not before, a change of size drops what
// the pool held, and records of the old size returned after the change are never handed
// out.
func TestRecPoolTakesOnlyCollectedRecordsOfItsSize(t *testing.T) {
	if raceEnabled {
		t.Skip("no reuse under the race detector")
	}
	var p recPool
	if p.take(10) != nil {
		t.Fatal("a new pool handed out records")
	}
	held := &tickLines{recs: make([]lineRec, 10)}
	p.keep(held)
	func() {
		gone := &tickLines{recs: make([]lineRec, 10)}
		gone.recs[3].attempts = 7
		p.keep(gone)
	}()
	runtime.GC()
	if !awaitShelf(p.shelf, 1) {
		t.Fatal("the records of collected lines did not come back")
	}
	recs := p.take(10)
	if len(recs) != 10 || recs[3] != (lineRec{}) {
		t.Fatalf("took %d records, record 3 = %+v; want 10 zeroed", len(recs), recs[3])
	}
	if &recs[0] == &held.recs[0] || p.take(10) != nil {
		t.Fatal("the records of lines still held were handed out")
	}
	runtime.KeepAlive(held)

	// Resized: lines of 10 modules collected from now on go to the old shelf.
	old := p.shelf
	held = nil
	if p.take(20) != nil || p.shelf == old {
		t.Fatal("a change of size kept the old shelf")
	}
	runtime.GC()
	if !awaitShelf(old, 1) {
		t.Fatal("the held lines' records never came back (to the old shelf)")
	}
	if got := p.take(20); got != nil {
		t.Fatalf("took %d records of the old size", len(got))
	}
}
