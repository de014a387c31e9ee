package sim

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// The simulator advances virtual time only when every goroutine of the engine and of the
// modules is blocked: then nothing can read the clock before the next timer falls due, so
// jumping to it changes no outcome. Go offers no portable way to ask "is everything
// blocked" outside testing/synctest, so a run holds the process to one P
// (runtime.GOMAXPROCS(1)): while the driver's goroutine runs, no other goroutine runs, and
// the scheduler's count of runnable goroutines is exact. After yielding, the driver finds
// that count at zero only once every goroutine it woke has run until it blocked again.
//
// One P also makes the engine's own scheduling deterministic enough for byte-identical
// output: goroutines woken at the same virtual instant run in the order they were woken.

// runMu serialises simulations in one process: each holds the process at one P.
var runMu sync.Mutex

// onePSession holds the process at one P until its end function is called.
func onePSession() (end func()) {
	runMu.Lock()
	prev := runtime.GOMAXPROCS(1)
	return func() {
		runtime.GOMAXPROCS(prev)
		runMu.Unlock()
	}
}

// quiescence reads the scheduler's count of runnable goroutines.
type quiescence struct{ sample []metrics.Sample }

func newQuiescence() *quiescence {
	return &quiescence{sample: []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}}
}

// settle yields until no other goroutine is runnable: every goroutine has run until it
// blocked (on the fake clock, a channel or a lock held by a blocked goroutine).
func (q *quiescence) settle() {
	for {
		runtime.Gosched()
		metrics.Read(q.sample)
		if q.sample[0].Value.Kind() != metrics.KindUint64 || q.sample[0].Value.Uint64() == 0 {
			return
		}
	}
}
