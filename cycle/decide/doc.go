// Package decide holds the decisions of one tick as plain functions: whether a module is
// admitted (Admit), what a module's outcome means (Judge: its status, its breaker event,
// what is served for its key, and what it does to its tier), what a tier's verdicts make of
// the tier (TierResult) and of the rest of the tick (TierResult.Stop), the emergency state
// machine (Emergency.Next) and the scheduler's next grid point (Overrun.Next).
//
// Nothing here starts a goroutine, takes a lock, touches an atomic or reads a clock: time
// and state are passed in, and the engine (package cycle) applies what comes out. The
// engine's execution mechanism (runners, timers, abandonment at the deadline) reports
// facts (Outcome); only this package turns them into statuses, so a module's status is
// decided in one function (StatusOf) and a new status is added here.
package decide
