package decide

import "github.com/cycled/cycled/fault"

// AsyncEnd is how one run of an asynchronous module ended: facts, no policy.
type AsyncEnd struct {
	TimedOut bool       // it was still running at its timeout (its late result is discarded)
	Failed   bool       // it returned an error
	Kind     fault.Kind // the error's kind, when Failed
}

// AsyncState is an asynchronous module's record across runs. The zero value is a module
// that has not failed.
type AsyncState struct {
	Failures int  // consecutive failed runs
	Failing  bool // the latest run failed
}

// AsyncChange says whether a run changed the module's state: the one thing that is
// logged, so that a module failing every run logs once.
type AsyncChange uint8

// The changes.
const (
	AsyncSame       AsyncChange = iota
	AsyncNowFailing             // the first failure after a success (or of the first run)
	AsyncRecovered              // the first success after failures
)

// AsyncVerdict is what a run's end means: the status shown in the summary and whether its
// value is written to the blackboard at the next tick boundary.
type AsyncVerdict struct {
	Status Status // one of the statuses whose row says Async
	Write  bool
}

// JudgeAsync returns the verdict on run end e. A cancelled run (the engine closing) is
// a failure like any other: it wrote nothing. Nothing here touches a breaker: an
// asynchronous module has none, so it never trips the breaker of a module in the tiers.
func JudgeAsync(e AsyncEnd) AsyncVerdict {
	switch {
	case e.TimedOut:
		return AsyncVerdict{Status: TimedOut}
	case e.Failed && e.Kind != fault.KindControl:
		return AsyncVerdict{Status: Failed}
	case e.Failed: // an expected short-circuit: nothing to write, not a failure
		return AsyncVerdict{Status: OK}
	}
	return AsyncVerdict{Status: OK, Write: true}
}

// Next returns the state after a run judged v, and whether it changed.
func (s AsyncState) Next(v AsyncVerdict) (AsyncState, AsyncChange) {
	if v.Status == OK {
		if s.Failing {
			return AsyncState{Failures: s.Failures}, AsyncRecovered // the count says how many it recovered from
		}
		return AsyncState{}, AsyncSame
	}
	if s.Failing {
		s.Failures++
		return s, AsyncSame
	}
	return AsyncState{Failures: 1, Failing: true}, AsyncNowFailing
}

// StartAsync reports whether an asynchronous module is started after a tick: only when
// its previous run has returned (inFlight false), so that a module that ignores its
// context never has two runs at once.
func StartAsync(inFlight bool) bool { return !inFlight }
