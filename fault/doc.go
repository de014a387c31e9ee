// Package fault is cycled's fault taxonomy and the one place where errors are classified.
//
// Every error a module returns is mapped by Classify to one Kind. The kind decides whether
// the retry budget retries it and whether a circuit breaker counts it. Modules mark their
// errors with the constructors (Transient, Permanent, Validation, …); anything unmarked is
// classified by what it wraps (context.DeadlineExceeded is transient, context.Canceled is
// canceled, a recovered panic is internal) and otherwise as internal: an unknown error is
// treated as a bug, never as something safe to retry.
package fault
