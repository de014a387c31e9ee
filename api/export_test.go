package api

import "time"

// WithPingInterval returns opts with the stream's ping interval set to d (tests only).
func WithPingInterval(opts Options, d time.Duration) Options {
	opts.pingInterval = d
	return opts
}
