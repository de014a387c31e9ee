// Package cycle is the tick engine: it runs the tiers of modules in order through the three
// layers of cycled (retry budget, circuit breaker, last-known-good) and publishes a
// CycleFaultSummary per tick, with emergency mode and a fixed-grid scheduler.
//
// The engine takes plain Go structs and an injected clock; it never imports HTTP, viper or
// Prometheus. Observers (Hooks) receive every tick, module result, breaker transition and
// emergency change.
//
// Each module has one persistent worker goroutine. Dispatching a tick to it costs a channel
// send instead of a goroutine start, and it makes "at most one outstanding run per module"
// structural: a worker stuck in a module that ignores its context is simply busy, and the
// module is not started again until it returns. Configuration changes (Reload, Register,
// Deregister) are validated at once and applied at the next tick boundary.
package cycle
