package cycle

import (
	"sync"
	"unsafe"
)

// linePrep allocates the module lines of the next ticks' summaries on its own goroutine,
// between ticks. The lines are two large allocations per tick (56 bytes per module), and
// a large allocation made while the garbage collector is marking pays for it in mark
// work (a GC assist) and in sweeping: measured at 1 kHz with 500 modules, up to 0.9 ms at
// the start of a tick, which made the tick overrun its period. Allocated here, the cost
// falls on this goroutine, on another core, while the scheduler waits for the next grid
// point. Lines for several ticks are kept ready (linesAhead), so that allocations slowed
// down by the collector do not leave the next ticks without. A tick that finds none ready (the
// first one, one right after a configuration change that changed the number of modules)
// allocates its own.
//
// Lines are prepared only while the scheduler runs (in step mode the next tick may come
// at once, and there is no wait to hide the allocation in) and for at most
// maxPreparedLines modules: prepared lines are heap held ahead of time, and in a cycle
// that large a tick takes long enough for the allocation not to matter.
type linePrep struct {
	wg    *sync.WaitGroup
	mu    sync.Mutex
	req   chan int     // guarded by mu (created on first use, closed by stop)
	done  bool         // guarded by mu
	ready chan lineBuf // at most maxAhead; filled only by loop
}

// newLinePrep returns a linePrep whose goroutine, once started, is counted in wg.
func newLinePrep(wg *sync.WaitGroup) *linePrep {
	return &linePrep{wg: wg, ready: make(chan lineBuf, maxAhead)}
}

const (
	// maxPreparedLines is the largest cycle whose lines are prepared (1 MB of lines).
	maxPreparedLines = 1 << 14
	// maxAhead is the most ticks' lines kept ready; aheadBytes is about how much heap they
	// may take: at least 2 ticks' worth is kept, more for small cycles, so that the lines
	// of the ticks during a whole GC cycle's marking (2–3 ms here, during which every
	// allocation pays an assist) can be ready before it.
	maxAhead   = 8
	aheadBytes = 1 << 20
)

// linesAhead returns how many ticks' lines of n modules are kept ready.
func linesAhead(n int) int {
	k := aheadBytes / (n * lineBytes)
	return min(max(k, 2), maxAhead)
}

// lineBytes is the memory of one module's line.
const lineBytes = int(unsafe.Sizeof(lineRec{}) + unsafe.Sizeof(any(nil)))

// take returns n fresh lines: prepared ones if some are ready and of that size (lines of
// another size, prepared before a configuration change, are dropped).
func (p *linePrep) take(n int) lineBuf {
	for {
		select {
		case b := <-p.ready:
			if len(b.recs) == n {
				return b
			}
			continue
		default:
		}
		return newLineBuf(n)
	}
}

// request asks for lines of n modules to be kept ready. It never blocks.
func (p *linePrep) request(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || n == 0 || n > maxPreparedLines || len(p.ready) >= linesAhead(n) {
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
		for len(p.ready) < linesAhead(n) {
			p.ready <- newLineBuf(n)
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
	for {
		select {
		case <-p.ready:
		default:
			return
		}
	}
}
