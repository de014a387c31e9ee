// Package cycle is the tick engine: it runs the tiers of modules in order through the three
// layers of cycled (retry budget, circuit breaker, last-known-good) and publishes a
// CycleFaultSummary per tick, with emergency mode and a fixed-grid scheduler.
//
// The engine is two parts. The decisions of a tick (admission, a module's verdict, a
// tier's result, the emergency state machine, the scheduler's next grid point) are plain
// functions in package cycle/decide. The execution mechanism here (runner pool, dedicated
// goroutines, stall check, timers, abandonment at the deadline) records the facts of each
// module's outcome on its summary line and asks decide what they mean; it applies the
// verdict (breaker, last-known-good, blackboard) without policies of its own.
// docs/architecture.md describes the flow of one tick and the invariants.
//
// The engine takes plain Go structs and an injected clock; it never imports HTTP, viper or
// Prometheus. Every event (tick, module outcome, breaker transition, emergency change) is
// published once to its subscribers: the stream hub (Events) and the observers (Hooks).
//
// A small pool of runner goroutines runs the modules of a tier: fast modules inline, slow
// or blocking ones each on a dedicated goroutine of its own (at most one per module, so
// "at most one outstanding run per module" is structural: a module that ignores its
// context is simply busy, and it is not started again until it returns). The runner that
// finishes a tier settles it and starts the next one itself; the engine decides what
// follows a tier that fails (and emergency mode) and takes a tier still running at its
// deadline (worker.go, "How a tier runs"). Configuration changes (Reload, Register,
// Deregister) are validated at once and applied at the next tick boundary.
package cycle
