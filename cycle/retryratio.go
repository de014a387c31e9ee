package cycle

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/cycle/decide"
	"github.com/cycled/cycled/retrybudget"
)

// ratioBudget is a retry-amplification budget shared by the modules that count against
// it. Begin opens each tick (serially, from one goroutine); First and TryRetry are safe
// for concurrent use during the tick, and lock-free.
type ratioBudget struct {
	s retrybudget.RatioSettings // immutable after newRatioBudget

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

// newRatioBudget returns a budget with settings s.
func newRatioBudget(s retrybudget.RatioSettings) *ratioBudget { return &ratioBudget{s: s} }

// Settings returns the budget's settings.
func (b *ratioBudget) Settings() retrybudget.RatioSettings { return b.s }

// Begin ends the tick in progress, if any, and opens one that started at now: the ticks
// that leave the window are dropped from its sums.
func (b *ratioBudget) Begin(now time.Time) {
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
	if n := b.s.WindowTicks(); n > 0 {
		drop = max(len(b.ring)-(n-1), 0)
	} else {
		for drop < len(b.ring) && now.Sub(b.ring[drop].at) >= b.s.WindowTime {
			drop++
		}
	}
	drop = max(drop, len(b.ring)-retrybudget.MaxWindowTicks)
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
func (b *ratioBudget) First() { b.firsts.Add(1) }

// TryRetry asks for one retry and counts it if decide.RetryAllowed allows it; it reports whether it did.
// A refusal is counted for Exhausted.
func (b *ratioBudget) TryRetry() bool {
	for {
		r := b.retries.Load()
		w := decide.RatioWindow{Firsts: b.prevFirsts.Load() + b.firsts.Load(), Retries: b.prevRetry.Load() + r, TickRetries: r}
		if !decide.RetryAllowed(b.s, w) {
			b.refused.Add(1)
			return false
		}
		if b.retries.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// Exhausted reports whether a retry was refused in the tick in progress.
func (b *ratioBudget) Exhausted() bool { return b.refused.Load() > 0 }

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
func (b *ratioBudget) Snapshot() RatioSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, r, x := b.firsts.Load(), b.retries.Load(), b.refused.Load()
	return RatioSnapshot{WindowFirsts: b.prevFirsts.Load() + f, WindowRetries: b.prevRetry.Load() + r,
		Firsts: b.total.firsts + f, Retries: b.total.retries + r, Refused: b.total.refused + x}
}
