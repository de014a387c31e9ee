// Package modules holds the module kinds that cycled builds from configuration.
//
// The builtin kind (Builtin) is a demo and fault-injection module: it returns a configured
// value after a fixed or random latency, and fails on demand by probability (fail_rate), by
// tick window (fail_ticks), on the first attempts of every tick (fail_attempts), by hanging
// while ignoring its context (hang) or by panicking (panic). Its faults can be switched at
// runtime, safely while the engine runs it, through SetFaults, PatchFaults or
// ApplyFaultsJSON (the body of POST /modules/{name}/faults).
//
// Every wait of a Builtin uses an injected clock.Clock, so a Builtin behaves the same on
// the wall clock, inside a testing/synctest bubble and on a clock.Fake.
//
// The http kind (HTTP) is a remote module: every attempt POSTs the tick's identity, the
// attempt's deadline and the module's inputs (the keys it reads, with their provenance and
// quality flags) as JSON to a URL, and classifies the answer into a value or a fault kind
// (see HTTP for the protocol). HTTP modules share one keep-alive client (SharedClient,
// made by NewClient) unless WithClient gives another.
package modules
