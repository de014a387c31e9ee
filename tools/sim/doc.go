// Package sim runs a configuration on virtual time: the real engine (package cycle, the
// same code as the daemon, its scheduler included) on a clock.Fake, with the
// configuration's builtin modules and, for http modules, stand-ins whose latency and
// failures a Scenario gives. Nothing sleeps: the simulator moves the clock to the next
// timer whenever every goroutine is blocked (quiesce.go), so ten minutes of a 10 Hz cycle
// take a second or so.
//
// A run is deterministic: the same configuration, scenario, seed and start give the same
// summaries byte for byte. Every module draws its latencies and failures from its own
// random stream (seed and module name), so the order in which goroutines run at one
// virtual instant changes nothing.
//
// A Scenario is a timeline of events at ticks or virtual times: a module's latency
// distribution (fixed, uniform, normal, log-normal, empirical), its failure rate and
// kind, a hang, a panic, the outage of a named downstream, a reload, an operator reset, a
// period change. Run returns a Report: per tier the budget use, retries and exhaustions;
// per module its statuses; breaker openings and time open; emergency episodes; overruns;
// keys served stale or expired. docs/sim.md is the user's page.
package sim
