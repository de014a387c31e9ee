package cycle

import (
	"sync"
	"sync/atomic"

	"github.com/cycled/cycled/faultsummary"
)

// linePrep allocates the module lines of the next tick's summary on its own goroutine,
// between ticks. The lines are one large allocation per tick (240 bytes per module), and
// a large allocation made while the garbage collector is marking pays for it in mark
// work (a GC assist) and in sweeping: measured at 1 kHz with 500 modules, up to 0.9 ms at
// the start of a tick, which made the tick overrun its period. Allocated here, the cost
// falls on this goroutine, on another core, while the scheduler waits for the next grid
// point. A tick that finds no lines ready (the first one, a configuration change that
// changed the number of modules, a tick right after the previous one) allocates its own.
//
// Lines are prepared only while the scheduler runs (in step mode the next tick may come
// at once, and there is no wait to hide the allocation in) and for at most
// maxPreparedLines modules: the prepared lines are one more summary's worth of heap, and
// in a cycle that large a tick takes long enough for the allocation not to matter.
type linePrep struct {
	wg    *sync.WaitGroup
	mu    sync.Mutex
	req   chan int // guarded by mu (created on first use, closed by stop)
	done  bool     // guarded by mu
	ready atomic.Pointer[[]faultsummary.Module]
}

// maxPreparedLines is the largest cycle whose lines are prepared (4 MB of lines).
const maxPreparedLines = 1 << 14

// take returns n fresh lines: the prepared ones if they are ready and of that size.
func (p *linePrep) take(n int) []faultsummary.Module {
	if sp := p.ready.Swap(nil); sp != nil && len(*sp) == n {
		return *sp
	}
	return make([]faultsummary.Module, n)
}

// request asks for n lines to be ready for the next take. It never blocks.
func (p *linePrep) request(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sp := p.ready.Load(); p.done || n == 0 || n > maxPreparedLines || sp != nil && len(*sp) == n {
		return // nothing to do, or lines of that size are waiting already
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
		if sp := p.ready.Load(); sp != nil && len(*sp) == n {
			continue // a tick that came first allocated its own; these are still unused
		}
		lines := make([]faultsummary.Module, n)
		p.ready.Store(&lines)
	}
}

// stop ends the goroutine; later requests are ignored.
func (p *linePrep) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done && p.req != nil {
		close(p.req)
	}
	p.done = true
	p.ready.Store(nil)
}
