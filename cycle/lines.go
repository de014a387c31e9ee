package cycle

import (
	"sync"
	"unsafe"
)

// linePrep gives each tick the memory of its summary's module lines. The lines are two
// large allocations per tick (lineBytes per module), and a large allocation made while the
// garbage collector is marking pays for it in mark work (a GC assist) and in sweeping, at
// the start of the tick, which can make a fast tick overrun its period (BENCHMARKS.md,
// "Period keeping"). Two things keep that allocation off the tick:
//
//   - The records of a tick whose summary nobody holds any more are reused (recPool). The
//     collector is what proves that nobody holds them, so reuse follows a collection; in
//     between, and always for the values (they are pointers to what modules produced,
//     which a reused buffer would keep alive), fresh memory is needed.
//   - While the scheduler runs, fresh records and values for the next ticks are allocated on
//     linePrep's own goroutine, between ticks: the cost falls on another core while the
//     scheduler waits for the next grid point. Several ticks' worth is kept ready
//     (linesAhead), so that allocations slowed down by the collector do not leave the next
//     ticks without. A tick that finds none ready (the first one, one right after a
//     configuration change that changed the number of modules, any tick in step mode,
//     where the next tick may come at once) allocates its own.
//
// Lines are prepared for at most maxPreparedLines modules: prepared lines are heap held
// ahead of time, and in a cycle that large a tick takes long enough for the allocation not
// to matter.
type linePrep struct {
	wg   *sync.WaitGroup
	mu   sync.Mutex
	req  chan int       // guarded by mu (created on first use, closed by stop)
	done bool           // guarded by mu
	recs chan []lineRec // at most maxAhead; filled only by loop
	vals chan []any     // likewise
	pool recPool        // used by take and keep only, which the tick calls (under tickMu)
}

// newLinePrep returns a linePrep whose goroutine, once started, is counted in wg.
func newLinePrep(wg *sync.WaitGroup) *linePrep {
	return &linePrep{wg: wg, recs: make(chan []lineRec, maxAhead), vals: make(chan []any, maxAhead)}
}

const (
	// maxPreparedLines is the largest cycle whose lines are prepared.
	maxPreparedLines = 1 << 14
	// maxAhead is the most ticks' lines kept ready; aheadBytes is about how much heap they
	// may take: at least 2 ticks' worth is kept, more for small cycles, so that the lines
	// of the ticks during a whole GC cycle's marking (during which every allocation pays
	// an assist) can be ready before it.
	maxAhead   = 8
	aheadBytes = 1 << 20
)

// linesAhead returns how many ticks' lines of n modules are kept ready.
func linesAhead(n int) int {
	k := maxAhead
	if n > 0 {
		k = aheadBytes / (n * lineBytes)
	}
	return min(max(k, 2), maxAhead)
}

// lineBytes is the memory of one module's line.
const lineBytes = int(unsafe.Sizeof(lineRec{}) + unsafe.Sizeof(any(nil)))

// take returns the lines of a tick of n modules, zeroed: records reused from an earlier
// tick if the collector has proved them unreferenced, else prepared ones if some are ready
// and of that size (lines of another size, prepared before a configuration change, are
// dropped), else fresh ones.
func (p *linePrep) take(n int) lineBuf {
	recs := p.pool.take(n)
	if recs == nil {
		recs = takeReady(p.recs, n)
	}
	return lineBuf{recs: recs, vals: takeReady(p.vals, n)}
}

// keep offers the records of the tick in progress to the pool, for reuse once nothing refers
// to them any more.
func (p *linePrep) keep(l *tickLines) { p.pool.keep(l) }

// takeReady returns a slice of n prepared in ch, or a fresh one.
func takeReady[T any](ch chan []T, n int) []T {
	for {
		select {
		case b := <-ch:
			if len(b) == n {
				return b
			}
			continue
		default:
		}
		return make([]T, n)
	}
}

// request asks for lines of n modules to be kept ready. It never blocks.
func (p *linePrep) request(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := linesAhead(n); p.done || n == 0 || n > maxPreparedLines || len(p.recs) >= k && len(p.vals) >= k {
		return // nothing to do, or enough lines are waiting already
	}
	if p.req == nil {
		p.req = make(chan int, 1)
		p.wg.Add(1)
		go p.loop(p.req)
	}
	select {
	case p.req <- n:
	default: // the previous request is still being served
	}
}

func (p *linePrep) loop(req <-chan int) {
	defer p.wg.Done()
	for n := range req {
		// The only sender: ticks only take, so there is room for every line set sent here.
		// Records taken from the pool leave the prepared ones waiting: only what was used is
		// replaced.
		for k := linesAhead(n); len(p.recs) < k; {
			p.recs <- make([]lineRec, n)
		}
		for k := linesAhead(n); len(p.vals) < k; {
			p.vals <- make([]any, n)
		}
	}
}

// stop ends the goroutine and drops the prepared lines; later requests are ignored.
func (p *linePrep) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done && p.req != nil {
		close(p.req)
	}
	p.done = true
	drain(p.recs)
	drain(p.vals)
}

// drain empties ch.
func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
