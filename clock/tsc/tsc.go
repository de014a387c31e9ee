package tsc

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Calibration spans: the first rate is taken over firstSpan after the anchor, each later
// one over spanGrowth times the last, until a span reaches lastSpan.
const (
	firstSpan  = 100 * time.Millisecond
	spanGrowth = 10
	lastSpan   = 10 * time.Second
	// maxPairGap is the most counts a pair's two counter reads may lie apart, around the
	// clock read between them: a pair the thread was preempted in is taken again.
	maxPairGap = 20000
	pairTries  = 4
)

// rate is a calibration: the anchor pair, the rate found so far and when to calibrate
// again. It is replaced whole, never written in place.
type rate struct {
	at    time.Time // the anchor's clock reading (with its monotonic reading)
	c     uint64    // the counter at the anchor
	nsPer float64   // nanoseconds per count; 0: not calibrated yet
	next  time.Duration
}

// Calibrator converts counter intervals to durations. The zero value is not usable; the
// package's functions use one made with New over the processor's counter.
type Calibrator struct {
	read func() uint64
	now  func() time.Time
	r    atomic.Pointer[rate]
	off  atomic.Bool // the counter went backwards against the clock: not used any more
}

// New returns a Calibrator over the counter read and the clock now (whose times must carry
// a monotonic reading).
func New(read func() uint64, now func() time.Time) *Calibrator {
	return &Calibrator{read: read, now: now}
}

// Sample reads the counter for a time t just read from the clock. It returns the counter,
// or 0 until the rate is known (callers then time the interval with the clock). It feeds
// the calibration when t is far enough from the anchor, after reading the counter: the
// reading goes with t, and the calibration may take a while (a reading taken after it
// would put every time chained from t that much early).
func (k *Calibrator) Sample(t time.Time) uint64 {
	c := k.read()
	r := k.r.Load()
	if r == nil || (r.next > 0 && t.Sub(r.at) >= r.next) {
		r = k.calibrate(r)
	}
	if r == nil || r.nsPer == 0 || k.off.Load() {
		return 0
	}
	return c
}

// Duration returns the time between counter readings c0 and c1, 0 if c1 is before c0.
func (k *Calibrator) Duration(c0, c1 uint64) time.Duration {
	if c1 <= c0 {
		return 0
	}
	// Through int64: a uint64's conversion to float64 takes a branch for values over 2⁶³.
	return time.Duration(float64(int64(c1-c0)) * k.r.Load().nsPer)
}

// calibrate takes a pair and makes it the anchor (r nil) or measures the rate from r's
// anchor to it. Concurrent callers race to store theirs; any of them will do.
func (k *Calibrator) calibrate(r *rate) *rate {
	t, c, ok := k.pair()
	if !ok {
		return r
	}
	var nr *rate
	switch {
	case r == nil:
		nr = &rate{at: t, c: c, next: firstSpan}
	case c <= r.c:
		k.off.Store(true) // the counter does not move with the clock
		return r
	default:
		span := t.Sub(r.at)
		nr = &rate{at: r.at, c: r.c, nsPer: float64(span) / float64(c-r.c), next: span * spanGrowth}
		if span >= lastSpan || math.IsInf(nr.nsPer, 0) || nr.nsPer <= 0 {
			nr.next = 0
		}
	}
	if !k.r.CompareAndSwap(r, nr) {
		return k.r.Load()
	}
	return nr
}

// pair reads the clock between two counter reads and returns it with the counter's
// midpoint, unless every try was interrupted.
func (k *Calibrator) pair() (time.Time, uint64, bool) {
	for range pairTries {
		c0 := k.read()
		t := k.now()
		c1 := k.read()
		if c1 >= c0 && c1-c0 <= maxPairGap {
			return t, c0 + (c1-c0)/2, true
		}
	}
	return time.Time{}, 0, false
}

// counter is the processor's counter's Calibrator, or nil where it is not used. It is
// set once, by the first Sample (the kernel's clock source is read then, not when the
// package is loaded); Since is only called with a reading Sample returned.
var (
	counter     *Calibrator
	counterOnce sync.Once
)

// Sample is Calibrator.Sample on the processor's counter: 0 where it is not used.
func Sample(t time.Time) uint64 {
	counterOnce.Do(func() {
		if usable() {
			counter = New(rdtsc, time.Now)
		}
	})
	if counter == nil {
		return 0
	}
	return counter.Sample(t)
}

// Since returns the time from counter reading c, which Sample returned (not 0), to now on
// the processor's counter, and the counter now. A counter that reads less than c (another
// CPU's, a hair behind) gives 0. It reads the counter directly, not through the
// Calibrator's function: it is on the path of every module's run.
func Since(c uint64) (time.Duration, uint64) {
	n := rdtsc()
	return counter.Duration(c, n), n
}

// Used reports whether the processor's counter is used here (Linux on amd64, clock
// source tsc); Sample returns 0 wherever it is not.
func Used() bool { return usable() }
