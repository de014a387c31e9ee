package cycle

import "github.com/cycled/cycled/fault"

// AsyncEvent is a change of state of an asynchronous module's runs: its first failure
// after a success (or after it started), or its first success after failures.
type AsyncEvent struct {
	// Module is the module's name.
	Module string
	// TickID is the tick whose summary reports the run's end.
	TickID uint64
	// Failing is true when the runs started failing, false when they recovered.
	Failing bool
	// Failures counts the consecutive failed runs (for a recovery, those before it).
	Failures int
	// Kind and Err describe the failure that started the failing state.
	Kind fault.Kind
	Err  string
}
