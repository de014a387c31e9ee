package cycle

import (
	"runtime"
	"sync"
	"unsafe"
)

// recPool keeps the records of earlier ticks' summary lines that nobody refers to any more,
// so that a tick can reuse them instead of allocating: the records are most of the bytes a
// tick allocates, and the collections they would cause add to a tick's cost and its tail
// (BENCHMARKS.md, BenchmarkTick).
//
// A tick registers a cleanup on its lines (runtime.AddCleanup). Once the collector has
// found them unreachable (no summary, reader or late runner refers to them any more, and
// none can again), the runtime's cleanup goroutine zeroes their records and puts them in
// the pool, if it has room; a later tick takes them from there without waiting. A record holds no pointer,
// so a reused one keeps nothing alive; the values the modules produced (tickLines.vals)
// are pointers and are never reused, for the same reason. Records held for reuse cost
// memory: at most reuseBytes of them, and none for a cycle so large that fewer than
// minReuseSlack ticks' records fit in that.
//
// Not weak pointers that the tick checks (weak.Pointer.Value): turning a weak pointer into
// a strong one waits, while the collector finishes a cycle's marking, for its mark
// termination, and the scheduler's goroutine would wait for it at the start of a tick and
// overrun its period during collections (BENCHMARKS.md, "Period keeping"). The price of the pool: a cleanup runs
// once the collector has swept its object, later than a weak pointer's check (which sweeps
// it), so a step-mode loop that keeps both cores busy reuses less; maxReuseSlack makes up
// for part of it.
//
// The race detector cannot see that the collector proved the records unreferenced, and
// would report a reader of an old summary and the tick that reuses its records as a race:
// under it, nothing is reused. TestHeldSummariesNeverChange, run without the race
// detector (make test), is what checks the reuse instead: readers holding summaries
// across many ticks and collections read the same lines as when they were published.
type recPool struct {
	n     int       // the number of modules the pool is for
	shelf *recShelf // records of n modules nobody refers to; nil: no reuse for this size
}

// recShelf is where the cleanups put records back. It is guarded by a mutex rather than
// being a channel: the cleanup goroutine is the runtime's, outside any testing/synctest
// bubble an engine under test lives in, and a bubble's channels are its own.
type recShelf struct {
	mu   sync.Mutex
	recs [][]lineRec // guarded by mu; at most max
	max  int
}

const (
	// reuseBytes bounds the records the pool holds.
	reuseBytes = 2 << 20
	// maxReuseSlack is the most ticks' records the pool holds.
	maxReuseSlack = 128
	// minReuseSlack is the fewest worth holding: below it, reuse is off.
	minReuseSlack = 8
	// recBytes is the memory of one module's record.
	recBytes = int(unsafe.Sizeof(lineRec{}))
)

// poolCap returns how many ticks' records of n modules the pool holds: 0 when reuse is not
// worth it.
func poolCap(n int) int {
	if raceEnabled || n == 0 {
		return 0
	}
	k := min(maxReuseSlack, reuseBytes/(n*recBytes))
	if k < minReuseSlack {
		return 0
	}
	return k
}

// take returns n records, zeroed, that an earlier tick used and nobody refers to any more,
// or nil if the pool has none. A change of n resizes the pool and drops what it held (the
// records of the old size that cleanups still return go to the old shelf, and with it to
// the collector). It never waits for the collector.
func (p *recPool) take(n int) []lineRec {
	if n != p.n {
		p.n, p.shelf = n, nil
		if k := poolCap(n); k > 0 {
			p.shelf = &recShelf{recs: make([][]lineRec, 0, k), max: k}
		}
		return nil
	}
	if p.shelf == nil {
		return nil
	}
	return p.shelf.pop()
}

// keep offers the records of l, the lines of the tick in progress, to the pool, for reuse
// once nothing refers to l any more.
func (p *recPool) keep(l *tickLines) {
	if p.shelf == nil || len(l.recs) != p.n {
		return
	}
	runtime.AddCleanup(l, recycle, recycled{shelf: p.shelf, recs: l.recs})
}

// recycled is what the cleanup of a tick's lines returns to the pool: not the lines.
type recycled struct {
	shelf *recShelf
	recs  []lineRec
}

// recycle runs on the runtime's cleanup goroutine: it zeroes the records and puts them on
// their shelf (off the tick, which takes them as they are), or leaves them to the
// collector if the shelf is full.
func recycle(r recycled) {
	s := r.shelf
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recs) < s.max {
		clear(r.recs)
		s.recs = append(s.recs, r.recs)
	}
}

// pop takes the records put back last (the most likely to be in the cache), or nil.
func (s *recShelf) pop() []lineRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := len(s.recs)
	if k == 0 {
		return nil
	}
	recs := s.recs[k-1]
	s.recs[k-1] = nil
	s.recs = s.recs[:k-1]
	return recs
}

// len returns how many ticks' records the shelf holds.
func (s *recShelf) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}
