package sim

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The simulator advances virtual time only when every goroutine of the engine and of the
// modules is blocked: then nothing can read the clock before the next timer falls due, so
// jumping to it changes no outcome. Go offers no portable way to ask "is everything
// blocked" outside testing/synctest, so a run holds the process to one P
// (runtime.GOMAXPROCS(1)): while the driver's goroutine runs, no other goroutine runs, and
// the scheduler's count of runnable goroutines is exact. After yielding, the driver finds
// it at zero only once every goroutine it woke has run until it blocked again.
//
// Two things could stop a goroutine of the simulation in a way that count does not show.
// A system call: so the engine's goroutines make none (the Summaries callback buffers in
// memory; the driver writes out in Options.Idle). The count of goroutines in system calls
// cannot stand in for that rule, because other goroutines of the process (one waiting for
// a child process, say) may sit in one for ever. And a garbage collection assist (the
// goroutine waits for a mark worker, which the scheduler runs outside the run queues): so
// a run turns the collector's pacing off and collects itself, at points where everything
// is blocked, every gcEvery bytes allocated.
//
// One P also makes the engine's own scheduling deterministic enough for byte-identical
// output: goroutines woken at the same virtual instant run in the order they were woken.

// runMu serialises simulations in one process: each holds the process at one P.
var runMu sync.Mutex

// gcEvery is how much a run allocates between two of its collections.
const gcEvery = 256 << 20

// onePSession holds the process at one P, with the collector's pacing off, until its end
// function is called.
func onePSession() (end func()) {
	runMu.Lock()
	prev := runtime.GOMAXPROCS(1)
	gc := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(gc)
		runtime.GOMAXPROCS(prev)
		runMu.Unlock()
	}
}

// quiescence reads the scheduler's count of runnable goroutines and the bytes allocated.
type quiescence struct {
	sample  []metrics.Sample
	lastGC  uint64 // bytes allocated at the last collection
	checked int
}

func newQuiescence() *quiescence {
	return &quiescence{sample: []metrics.Sample{
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/gc/heap/allocs:bytes"},
	}}
}

// settle yields until no other goroutine is runnable: every goroutine has run until it
// blocked (on the fake clock, a channel, or a lock held by a blocked goroutine). Every so
// often it then collects garbage (see above).
func (q *quiescence) settle() {
	for {
		runtime.Gosched()
		metrics.Read(q.sample)
		if q.sample[0].Value.Uint64() == 0 {
			break
		}
	}
	if q.checked++; q.checked%64 != 0 {
		return
	}
	if a := q.sample[1].Value.Uint64(); a-q.lastGC >= gcEvery {
		runtime.GC()
		q.lastGC = a
	}
}
