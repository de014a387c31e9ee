package clock

import (
	"time"

	"github.com/cycled/cycled/clock/tsc"
)

// A Stamp is a time read from a clock, for timing what follows it (see Elapsed). On the
// real clock, where the processor's time-stamp counter keeps the kernel's time (Linux on
// amd64 with the clock source tsc), it also holds the counter, and Elapsed reads that
// instead of the clock, which is cheaper than a clock read (clock/tsc; BENCHMARKS.md,
// BenchmarkElapsed).
// Inside a testing/synctest bubble, where the real clock is virtual (time.Now carries no
// monotonic reading), and on any other clock, Elapsed reads the clock.
//
// The counter's rate is calibrated against the monotonic clock, the first time 100 ms
// after the process first stamps the real clock; until then Elapsed reads the clock. A
// chain of stamps (each the end of the interval before) drifts from the clock by the
// rate's error, at most NTP's slewing of the monotonic clock (500 ppm): callers take a
// fresh Stamp now and then.
type Stamp struct {
	t time.Time
	c uint64 // the counter read with t; 0: Elapsed reads the clock
}

// The processor's counter as clock/tsc reads and converts it; tests put a counter of
// their own in its place, so that they need not wait for a real one's calibration.
var (
	counterSample = tsc.Sample
	counterSince  = tsc.Since
)

// NewStamp returns a Stamp of the time on c now, with the counter where it is used.
func NewStamp(c Clock) Stamp {
	t := c.Now()
	if RealTime(c, t) {
		return Stamp{t: t, c: counterSample(t)}
	}
	return Stamp{t: t}
}

// StampAt returns a Stamp of t; Elapsed then reads the clock.
func StampAt(t time.Time) Stamp { return Stamp{t: t} }

// Time returns the time of s.
func (s Stamp) Time() time.Time { return s.t }

// IsZero reports whether s is the zero Stamp.
func (s Stamp) IsZero() bool { return s.t.IsZero() }

// Elapsed returns the time elapsed on c since s, and the Stamp of its end (s's time plus
// that, and the counter read for it). c must be the clock s was read from.
func Elapsed(c Clock, s Stamp) (time.Duration, Stamp) {
	if s.c != 0 {
		d, n := counterSince(s.c)
		return d, Stamp{t: s.t.Add(d), c: n}
	}
	d := Since(c, s.t)
	return d, Stamp{t: s.t.Add(d)}
}
