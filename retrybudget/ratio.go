package retrybudget

import (
	"sync"
	"sync/atomic"
	"time"
)

// RatioSettings configures a retry-amplification budget: over a sliding window, retries
// may be at most Ratio times the first attempts, and MinPerTick retries per tick are
// always allowed. The window is Window ticks, or WindowTime when that is set.
type RatioSettings struct {
	// Ratio is the most retries per first attempt over the window (0.2: one retry for
	// five first attempts).
	Ratio float64
	// Window is the window's length in ticks (the tick in progress and the Window-1
	// before it). Zero means 10 unless WindowTime is set.
	Window int
	// WindowTime is the window's length in time: the ticks that started less than
	// WindowTime before the tick in progress, and that one. It replaces Window.
	WindowTime time.Duration
	// MinPerTick is the number of retries per tick allowed whatever the ratio.
	MinPerTick int
}

// DefaultWindow is the window in ticks of settings that give neither Window nor WindowTime.
const DefaultWindow = 10

// MaxWindowTicks bounds the ticks a window keeps (a time window at a high tick rate
// drops its oldest ticks beyond it).
const MaxWindowTicks = 100_000

// window returns the window in ticks (0: a time window).
func (s RatioSettings) window() int {
	switch {
	case s.WindowTime > 0:
		return 0
	case s.Window <= 0:
		return DefaultWindow
	}
	return s.Window
}

// RatioWindow is what a retry budget knows when a retry is asked for: the first attempts
// and retries in the window (the tick in progress included), and the retries of the tick
// in progress. RatioAllows decides on it.
type RatioWindow struct {
	Firsts, Retries, TickRetries int64
}

// RatioAllows reports whether one more retry is allowed: while the tick has made fewer
// than MinPerTick retries, or when the window's retries with this one are at most Ratio
// times its first attempts. It is the budget's whole rule, a pure function.
func RatioAllows(s RatioSettings, w RatioWindow) bool {
	if w.TickRetries < int64(s.MinPerTick) {
		return true
	}
	return float64(w.Retries+1) <= s.Ratio*float64(w.Firsts)
}

// RatioBudget is a retry-amplification budget shared by the modules that count against
// it. Begin opens each tick (serially, from one goroutine); First and TryRetry are safe
// for concurrent use during the tick, and lock-free.
type RatioBudget struct {
	s RatioSettings // immutable after NewRatioBudget

	// The tick in progress and the window's sums over the ticks before it.
	firsts, retries       atomic.Int64
	prevFirsts, prevRetry atomic.Int64
	refused               atomic.Int64 // retries refused in the tick in progress

	mu      sync.Mutex
	ring    []ratioTick // guarded by mu; the ticks before the one in progress, oldest first
	total   ratioTotals // guarded by mu; lifetime counts of ended ticks
	started bool        // guarded by mu; a tick is in progress
	cur     ratioTick   // guarded by mu; the tick in progress (its counts live in the atomics)
}

// ratioTick is one ended tick of a window.
type ratioTick struct {
	at              time.Time
	firsts, retries int64
}

// ratioTotals are a budget's lifetime counts.
type ratioTotals struct{ firsts, retries, refused int64 }

// NewRatioBudget returns a budget with settings s.
func NewRatioBudget(s RatioSettings) *RatioBudget { return &RatioBudget{s: s} }

// Settings returns the budget's settings.
func (b *RatioBudget) Settings() RatioSettings { return b.s }

// Begin ends the tick in progress, if any, and opens one that started at now: the ticks
// that leave the window are dropped from its sums.
func (b *RatioBudget) Begin(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		b.cur.firsts, b.cur.retries = b.firsts.Swap(0), b.retries.Swap(0)
		b.total.firsts += b.cur.firsts
		b.total.retries += b.cur.retries
		b.total.refused += b.refused.Swap(0)
		b.ring = append(b.ring, b.cur)
	}
	b.started, b.cur = true, ratioTick{at: now}
	drop := 0
	if n := b.s.window(); n > 0 {
		drop = max(len(b.ring)-(n-1), 0)
	} else {
		for drop < len(b.ring) && now.Sub(b.ring[drop].at) >= b.s.WindowTime {
			drop++
		}
	}
	drop = max(drop, len(b.ring)-MaxWindowTicks)
	if drop > 0 {
		b.ring = append(b.ring[:0], b.ring[drop:]...)
	}
	var f, r int64
	for _, t := range b.ring {
		f, r = f+t.firsts, r+t.retries
	}
	b.prevFirsts.Store(f)
	b.prevRetry.Store(r)
}

// First counts a first attempt.
func (b *RatioBudget) First() { b.firsts.Add(1) }

// TryRetry asks for one retry and counts it if RatioAllows it; it reports whether it did.
// A refusal is counted for Exhausted.
func (b *RatioBudget) TryRetry() bool {
	for {
		r := b.retries.Load()
		w := RatioWindow{Firsts: b.prevFirsts.Load() + b.firsts.Load(), Retries: b.prevRetry.Load() + r, TickRetries: r}
		if !RatioAllows(b.s, w) {
			b.refused.Add(1)
			return false
		}
		if b.retries.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// Exhausted reports whether a retry was refused in the tick in progress.
func (b *RatioBudget) Exhausted() bool { return b.refused.Load() > 0 }

// RatioSnapshot is a budget's observable state.
type RatioSnapshot struct {
	// WindowFirsts and WindowRetries are the first attempts and retries in the window,
	// the tick in progress included.
	WindowFirsts, WindowRetries int64
	// Firsts, Retries and Refused are lifetime counts (of ended ticks and the one in
	// progress).
	Firsts, Retries, Refused int64
}

// Snapshot returns the budget's counts.
func (b *RatioBudget) Snapshot() RatioSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, r, x := b.firsts.Load(), b.retries.Load(), b.refused.Load()
	return RatioSnapshot{WindowFirsts: b.prevFirsts.Load() + f, WindowRetries: b.prevRetry.Load() + r,
		Firsts: b.total.firsts + f, Retries: b.total.retries + r, Refused: b.total.refused + x}
}
