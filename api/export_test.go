package api

import "time"

// WithPingInterval returns opts with the stream's ping interval set to d (tests only).
func WithPingInterval(opts Options, d time.Duration) Options {
	opts.pingInterval = d
	return opts
}

// WithClock returns opts with the admin guard's clock set to now (tests only).
func WithClock(opts Options, now func() time.Time) Options {
	opts.now = now
	return opts
}
