// Package bulkhead is a bulkhead: a cap on the calls in flight to one named downstream,
// shared by every caller that names it.
//
// A caller takes a permit before its call and gives it back when the call has returned,
// whenever that is (a call that outlives its caller's deadline keeps its permit until it
// returns: the downstream is still busy with it). A full bulkhead refuses at once, or
// after waiting up to Wait for a permit to come free. The limits can change in place
// (Update): permits held keep counting.
package bulkhead

import (
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/clock"
)

// Settings configures a bulkhead.
type Settings struct {
	// Name identifies the bulkhead (a named downstream).
	Name string
	// MaxInFlight is the number of permits: calls in flight at once. At least 1.
	MaxInFlight int
	// Wait is how long a caller may wait for a permit when none is free; zero refuses at
	// once.
	Wait time.Duration
}

// Snapshot is a bulkhead's observable state.
type Snapshot struct {
	// Name is the bulkhead's name.
	Name string
	// MaxInFlight and Wait are its settings.
	MaxInFlight int
	Wait        time.Duration
	// InFlight is the number of permits held now.
	InFlight int
	// Waiting is the number of callers waiting for a permit now.
	Waiting int
	// Admitted and Rejections are the lifetime numbers of permits given and of refusals.
	Admitted, Rejections uint64
}

// Bulkhead is one bulkhead. It is safe for concurrent use; the zero value is not usable
// (call New).
type Bulkhead struct {
	name       string
	limit      atomic.Int64 // MaxInFlight
	wait       atomic.Int64 // Wait, in nanoseconds
	inFlight   atomic.Int64
	waiting    atomic.Int32
	admitted   atomic.Uint64
	rejections atomic.Uint64
	freed      chan struct{} // a waiter's wake-up: a permit came free (capacity 1)
}

// New returns a bulkhead with settings s (MaxInFlight below 1 counts as 1).
func New(s Settings) *Bulkhead {
	b := &Bulkhead{name: s.Name, freed: make(chan struct{}, 1)}
	b.Update(s)
	return b
}

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.name }

// Wait returns how long a caller may wait for a permit.
func (b *Bulkhead) Wait() time.Duration { return time.Duration(b.wait.Load()) }

// Update changes the limits in place: the permits held keep counting against the new
// MaxInFlight (a lower one refuses until enough have been given back).
func (b *Bulkhead) Update(s Settings) {
	b.limit.Store(int64(max(s.MaxInFlight, 1)))
	b.wait.Store(int64(max(s.Wait, 0)))
	b.signal() // a raised limit may free waiters
}

// TryAcquire takes a permit if one is free, without waiting, and reports whether it did.
// It counts a refusal only when reject is set (a caller that goes on to wait counts the
// outcome of its wait instead).
func (b *Bulkhead) TryAcquire(reject bool) bool {
	for {
		n := b.inFlight.Load()
		if n >= b.limit.Load() {
			if reject {
				b.rejections.Add(1)
			}
			return false
		}
		if b.inFlight.CompareAndSwap(n, n+1) {
			b.admitted.Add(1)
			return true
		}
	}
}

// AcquireWithin takes a permit, waiting up to d on clock c for one to come free, or until
// done is closed, and reports whether it did; a refusal is counted.
func (b *Bulkhead) AcquireWithin(c clock.Clock, d time.Duration, done <-chan struct{}) bool {
	if b.TryAcquire(d <= 0) {
		return true
	}
	if d <= 0 {
		return false
	}
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	t := clock.Or(c).NewTimer(d)
	defer t.Stop()
	for {
		if b.TryAcquire(false) {
			if b.inFlight.Load() < b.limit.Load() {
				b.signal() // more came free than this waiter took: pass the wake-up on
			}
			return true
		}
		select {
		case <-b.freed:
		case <-t.C():
			return b.TryAcquire(true)
		case <-done:
			b.rejections.Add(1)
			return false
		}
	}
}

// Release gives back a permit taken by TryAcquire or AcquireWithin.
func (b *Bulkhead) Release() {
	b.inFlight.Add(-1)
	if b.waiting.Load() > 0 {
		b.signal()
	}
}

// Refund gives back a permit that went unused, and counts the call as rejected (a
// caller whose wait ended with a permit too late to use it).
func (b *Bulkhead) Refund() {
	b.admitted.Add(^uint64(0))
	b.rejections.Add(1)
	b.Release()
}

// signal wakes one waiter, if none has a wake-up pending already.
func (b *Bulkhead) signal() {
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// Snapshot returns the bulkhead's observable state.
func (b *Bulkhead) Snapshot() Snapshot {
	return Snapshot{Name: b.name, MaxInFlight: int(b.limit.Load()), Wait: b.Wait(), InFlight: int(b.inFlight.Load()),
		Waiting: int(b.waiting.Load()), Admitted: b.admitted.Load(), Rejections: b.rejections.Load()}
}
